"""Ingest: files to staging columns (columnar path) with the exact per-line path as reference."""
