-- The baseline solution(s) of each definition, as decided at import (implementations.baseline_rule).
SELECT definition, solution, author, baseline_rule
FROM implementations
WHERE is_baseline
