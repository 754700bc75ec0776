-- FlashInfer-Bench's own reading of every trace line of a group, as staged: it depends on the
-- lines' bytes alone.
SELECT * FROM staged_trace_lines
