"""A rolling upgrade of a live consumer group from the classic protocol to KIP-848's and back, with
stock clients and a producer running, against any coordinator (Kafka itself or kcoord): the
benchmark ``bench.migration_roll`` runs it in full, ``tests/integration/test_migration_roll.py`` short.

- ``driver.py``: the roll (members replaced one at a time, settling, the coordinator's kill -9);
- ``members.py``: the Java consumer and confluent-kafka behind one interface;
- ``producer.py``: sequence-numbered records, straight to the cluster;
- ``coordinators.py``: Kafka 4.0 or kcoord as the coordinator;
- ``audit.py``: the counts (pure).
"""
