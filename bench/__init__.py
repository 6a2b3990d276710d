"""Benchmarks: codec micro-benchmarks, storage, and the load generator (see README.md)."""
