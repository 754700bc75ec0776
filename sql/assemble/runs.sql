-- The runs table: resolved runs with their comparison key (comparison_keys.sql) and run digest.
-- The run digest is the SHA-256 of the canonical BenchmarkRun envelope the ingest wrote as a
-- template (kernelindex run_body_template), with the implementation and workload digests that
-- only resolution knows spliced into its two slots. Columns are projected in schema order by
-- the caller (pipelines/schemas.py RUNS); snapshot_id is added by the table's view.
SELECT
    s.*,
    c.comparison_key,
    CASE WHEN s.implementation_digest IS NOT NULL AND s.run_body_template IS NOT NULL
         THEN 'sha256:' || sha256(
             s.run_body_parts[1] || s.implementation_digest
             || s.run_body_parts[2] || s.workload_digest
             || s.run_body_parts[3]
         )
    END AS run_digest
FROM resolved_runs AS s
LEFT JOIN comparison_keys AS c
    USING (operation_digest, workload_digest, environment_digest, correctness_key, has_timing)
