-- What sql/rank/run_rankings.sql may read of each run, and the bucket a run is ranked in.
-- A bucket is a slice of operation digests. Every comparison key has a single operation
-- digest (the comparison_key_single_digests invariant, checked before ranking), so no cohort
-- spans two buckets: a build re-ranks only the buckets whose inputs changed, and a changed
-- trace file (one definition) touches one bucket.
SELECT
    run_id,
    comparison_key,
    latency_ns,
    run_digest,
    line_digest,
    ki_status,
    status,
    substr(md5(coalesce(operation_digest, '')), 1, 2) AS ranking_bucket
FROM runs
