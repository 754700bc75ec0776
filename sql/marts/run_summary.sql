-- One row per run with everything a person asks first: what, who, where, how fast, its rank.
SELECT
    r.definition,
    d.op_type,
    r.solution,
    coalesce(r.author, i.author) AS author,
    coalesce(i.is_baseline AND i.definition = r.definition, false) AS is_baseline,
    r.workload_uuid,
    r.workload_key,
    r.status,
    r.ki_status,
    r.evaluated,
    r.latency_ns,
    r.latency_ms,
    r.latency_special,
    r.reference_latency_ms,
    r.speedup_factor,
    r.observed_at,
    r.timestamp_raw,
    r.hardware,
    e.hardware_raw,
    r.comparison_key,
    k.eligible,
    k.ineligible_reasons,
    k.cohort_size,
    k.rank,
    c.max_absolute_error,
    c.max_relative_error,
    r.evidence_level,
    r.external_id,
    r.run_id,
    r.run_digest,
    r.operation_digest,
    r.workload_digest,
    r.environment_digest,
    r.protocol_digest,
    r.correctness_key,
    r.implementation_digest,
    r.identity_error,
    r.snapshot_id,
    r.source_file,
    r.source_line,
    r.source
FROM runs AS r
LEFT JOIN definitions AS d ON d.definition = r.definition AND d.source = r.source
LEFT JOIN implementations AS i ON i.solution = r.solution AND i.source = r.source
LEFT JOIN environments AS e ON e.environment_id = r.environment_id AND e.source = r.source
LEFT JOIN correctness AS c ON c.run_id = r.run_id
LEFT JOIN run_rankings AS k ON k.run_id = r.run_id
