-- One row per (definition, workload key): the first record that carried it, in file path,
-- line and position order.
SELECT *
FROM staged_workloads
QUALIFY row_number() OVER (
    PARTITION BY definition, workload_key ORDER BY source_file, source_line, record_index
) = 1
