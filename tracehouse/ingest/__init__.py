"""Ingest: files to staging parts, every line through one per-line path (worker.FileIngester)."""
