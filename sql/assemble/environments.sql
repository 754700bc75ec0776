-- One row per environment id; every staged row of one id is the same row (the id is a digest
-- of the raw environment the row is derived from).
SELECT *
FROM staged_environments
QUALIFY row_number() OVER (PARTITION BY environment_id ORDER BY environment_id) = 1
