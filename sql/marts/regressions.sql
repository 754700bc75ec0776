-- Significant slowdowns of a solution on one comparison key: the results latency_verdicts
-- judges `regression` (Conbench's lookback z-score over every result the warehouse has seen,
-- in the order it saw them; the method and its limits are stated there).
SELECT * EXCLUDE (verdict)
FROM latency_verdicts
WHERE verdict = 'regression'
