-- Staged runs with what staging could not know: the solution (author, implementation digest),
-- the workload cache's case for the run's workload key, and why KernelIndex would not carry
-- the run when that is only known globally (file not strict JSON, solution unknown).
SELECT
    s.* REPLACE (
        CASE WHEN s.workload_digest IS NULL THEN NULL
             ELSE coalesce(f.first.wd, s.workload_digest) END AS workload_digest,
        CASE WHEN s.workload_digest IS NULL THEN s.operation_digest
             ELSE coalesce(f.first.op, s.operation_digest) END AS operation_digest,
        CASE WHEN s.workload_digest IS NULL THEN s.correctness_key
             ELSE coalesce(f.first.ck, s.correctness_key) END AS correctness_key,
        coalesce(
            s.identity_error,
            CASE WHEN u.source_file IS NOT NULL THEN 'file_not_strict_json' END,
            CASE WHEN k.solution IS NULL THEN 'unknown_solution' END
        ) AS identity_error
    ),
    k.author,
    k.implementation_digest,
    string_split(s.run_body_template, chr(0)) AS run_body_parts
FROM staged_runs AS s
LEFT JOIN known_solutions AS k USING (solution)
LEFT JOIN first_case AS f USING (workload_key)
LEFT JOIN kernelindex_unreadable_files AS u USING (source_file)
