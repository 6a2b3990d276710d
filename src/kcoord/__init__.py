"""kcoord: a Kafka-wire-compatible consumer group coordinator in front of a Kafka cluster.

Subpackages, lowest layer first; a module imports only its own layer and those below it
(tests/unit/test_layers.py checks):

    kcoord.protocol      sans-IO Kafka wire codec and the stored record formats
    kcoord.client        the one Kafka client kcoord uses (asyncio)
    kcoord.storage       shard logs on the cluster's compacted topic
    kcoord.coordinator   the server: core (pure group state, just above protocol: it imports only
                         kcoord.protocol), runtime, ops, net, tools, cli
    kcoord.analytics     the PySpark pipeline over the event topic (optional: kcoord[analytics])

Nothing is imported here: ``import kcoord.protocol`` must not pull in the server or PySpark.
"""
