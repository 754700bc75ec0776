-- The KernelIndex workload cache (identity doc §2.4 step 4): the first accepted trace line of
-- the import with a workload key fixes its case (workload digest, operation digest,
-- correctness key), even for lines of another definition. "First" is file path, line, then
-- position in the line; "accepted" is a complete identity, a known solution and a file that
-- KernelIndex's strict parser reads. Read from the run keys the workers wrote beside their
-- runs (tracehouse/tables/staging.py), with the line's own case.
SELECT
    s.workload_key,
    arg_min(
        {'wd': s.workload_digest, 'op': s.operation_digest, 'ck': s.correctness_key},
        {'f': s.source_file, 'l': s.source_line, 'i': s.record_index}
    ) AS first
FROM staged_run_keys AS s
JOIN known_solutions AS k USING (solution)
WHERE s.identity_complete
  AND s.source_file NOT IN (SELECT source_file FROM kernelindex_unreadable_files)
GROUP BY s.workload_key
