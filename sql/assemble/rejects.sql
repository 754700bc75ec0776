-- Every record or file of a group the ingest refused, as staged. (Those refused before the
-- ingest, by discovery, fetch or the definitions and solutions, are a part of their own.)
SELECT * FROM staged_rejects
