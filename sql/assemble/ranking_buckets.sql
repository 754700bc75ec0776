-- One row per ranking bucket (sql/ranking_inputs.sql) with a fingerprint of every input row
-- in it: a bucket whose fingerprint is unchanged keeps its ranked part. Row hashes are summed
-- and xor-ed (128 bits in all, with the row count) rather than concatenated: run_ids are
-- unique, so no two rows cancel, and it costs one hash per row.
SELECT
    i.ranking_bucket,
    concat_ws(
        ':',
        count(*),
        sum(hash(i)::HUGEINT),
        bit_xor(hash(i, i.run_id))
    ) AS inputs_digest
FROM all_ranking_inputs AS i
GROUP BY i.ranking_bucket
ORDER BY i.ranking_bucket
