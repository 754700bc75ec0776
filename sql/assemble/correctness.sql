-- One row per run with a correctness block, as staged.
SELECT * FROM staged_correctness
