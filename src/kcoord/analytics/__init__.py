"""``kcoord analytics``: the PySpark pipeline over kcoord's event topic and the offsets topic (docs/analytics.md)."""
