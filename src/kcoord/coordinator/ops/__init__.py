"""Operating kcoord: settings and their sources (flags, environment, TOML), logging, Prometheus
metrics and the shard-event observer that feeds them, the /metrics and /healthz endpoint.

Imports :mod:`..core` and :mod:`..runtime`; never the network layer above it.
"""
