-- One row per (definition, workload key): the first record that carried it, workload files
-- (workloads/**) first, then in file path, line and position order. A workload file's record is
-- the one FlashInfer-Bench lists among a dataset's workloads, so `tracehouse export
-- --flashinfer-trace` writes it back as it was; traces/ would sort first by path alone.
--
-- The first record is found over the narrow columns that order them, and only its row is read
-- whole: a window over every staged row sorted the wide ones (axes and inputs JSON), and a
-- source of 200,000 workloads stages a row for each file that names one (1,200,000 rows: 5.8 s
-- against 1.9 s). A file stages one row per key, so (file, line, position) picks one row; the
-- QUALIFY keeps one per key whatever the staging holds.
WITH firsts AS (
    SELECT definition, workload_key,
           min({
               'traces_last': NOT starts_with(source_file, 'workloads/'),
               'source_file': source_file,
               'source_line': source_line,
               'record_index': record_index
           }) AS first
    FROM staged_workloads
    GROUP BY definition, workload_key
)
SELECT s.*
FROM staged_workloads AS s
JOIN firsts AS f
  ON s.definition = f.definition
 AND s.workload_key = f.workload_key
 AND s.source_file = f.first.source_file
 AND s.source_line = f.first.source_line
 AND s.record_index = f.first.record_index
QUALIFY row_number() OVER (PARTITION BY s.definition, s.workload_key) = 1
