-- The run keys staging parts (one beside each runs staging part) of runs that their worker
-- completed on an assumption the whole source does not bear out (tracehouse/ingest/
-- resolution.py): the solution the run names (known, its author, its implementation digest),
-- whether KernelIndex reads the run's file, or the case of the run's workload key, which the
-- first accepted line of the whole import fixes (first_case). Those runs parts are resolved
-- again; every other one is the runs table's part as its worker wrote it.
SELECT DISTINCT k.filename
FROM staged_run_keys AS k
LEFT JOIN known_solutions AS s ON s.solution = k.solution
LEFT JOIN first_case AS f ON f.workload_key = k.workload_key
WHERE k.solution_known <> (s.solution IS NOT NULL)
   OR k.author IS DISTINCT FROM s.author
   OR k.implementation_digest IS DISTINCT FROM s.implementation_digest
   OR k.file_unreadable
      <> (k.source_file IN (SELECT source_file FROM kernelindex_unreadable_files))
   OR (k.workload_digest IS NOT NULL AND f.workload_key IS NOT NULL AND (
        coalesce(f.first.wd, k.workload_digest) <> k.workload_digest
        OR coalesce(f.first.op, k.operation_digest) IS DISTINCT FROM k.operation_digest
        OR coalesce(f.first.ck, k.correctness_key) IS DISTINCT FROM k.correctness_key))
