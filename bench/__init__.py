"""Benchmarks: codec micro-benchmarks, storage, and the load generator (see docs/benchmarks.md)."""
