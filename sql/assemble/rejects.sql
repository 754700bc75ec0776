-- Every record or file not imported: those the ingest refused, and those refused before it
-- (discovery, fetch, definitions and solutions).
SELECT * FROM staged_rejects
UNION ALL
SELECT * FROM extra_rejects
