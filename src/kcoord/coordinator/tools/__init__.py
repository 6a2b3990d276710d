"""Operator tools that speak the Kafka protocol to a running kcoord (``kcoord groups``)."""
