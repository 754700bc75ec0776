-- One row per (definition, workload key): the first record that carried it, workload files
-- (workloads/**) first, then in file path, line and position order. A workload file's record is
-- the one FlashInfer-Bench lists among a dataset's workloads, so `tracehouse export
-- --flashinfer-trace` writes it back as it was; traces/ would sort first by path alone.
SELECT *
FROM staged_workloads
QUALIFY row_number() OVER (
    PARTITION BY definition, workload_key
    ORDER BY NOT starts_with(source_file, 'workloads/'), source_file, source_line, record_index
) = 1
