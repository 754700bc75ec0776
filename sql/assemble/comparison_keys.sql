-- KernelIndex comparison key (identity doc §10.2), one row per distinct component tuple of
-- resolved_runs: sha256 of the RFC 8785 text of
-- {correctness, environment, metric, operation, protocol, v: 1, workload}, members in JCS
-- order. Every member but `v` is a digest (`sha256:` + hex) or `latency:mean:ns` / `none`, so
-- its canonical JSON string is the text between plain quotes. The implementation is absent on
-- purpose: implementations are what a cohort compares. tests/contract/test_identity_golden.py checks this
-- against KernelIndex's own keys (expected.csv) on the golden corpus.
SELECT
    operation_digest,
    workload_digest,
    environment_digest,
    correctness_key,
    has_timing,
    'sha256:' || sha256(
        '{"correctness":"' || correctness_key
        || '","environment":"' || environment_digest
        || '","metric":"' || CASE WHEN has_timing THEN 'latency:mean:ns' ELSE 'none' END
        || '","operation":"' || operation_digest
        || '","protocol":"' || $protocol_digest
        || '","v":1,"workload":"' || workload_digest
        || '"}'
    ) AS comparison_key
FROM (
    SELECT DISTINCT operation_digest, workload_digest, environment_digest, correctness_key, has_timing
    FROM resolved_runs
    WHERE workload_digest IS NOT NULL
      AND environment_digest IS NOT NULL
      AND operation_digest IS NOT NULL
      AND correctness_key IS NOT NULL
)
