"""Benchmarks of the warehouse build against plain readers of the same trace files (issue 9)."""
