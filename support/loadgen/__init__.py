"""kcoord's load generator: many Kafka group members over a few connections, on our own codec.

Why it exists: to show how kcoord behaves as its work grows, *side by side* with another
coordinator on the same machine. So the generator speaks plain Kafka protocol (FindCoordinator,
JoinGroup v9, SyncGroup v5, Heartbeat v4, OffsetCommit v9, LeaveGroup v5) to any endpoint and
measures the same things on both: throughput and p50/p99/p999 latency per API.

Layout (small modules, each testable on its own):
- :mod:`.histogram` — HDR-like log-linear latency histogram (pure Python, <1% error);
- :mod:`.assignor` — Kafka's range assignor, so the leader sends real assignments;
- :mod:`.conn` — one pipelined TCP connection: correlation ids, batched writes, per-API timing;
- :mod:`.member` — one group member: join/sync state machine, heartbeat and commit handling;
- :mod:`.runtime` — shared connections and join lanes, the heartbeat wheel, commit loops, rejoins;
- :mod:`.admin` — ApiVersions check, FindCoordinator, topic creation;
- :mod:`.ownership` — which partitions are owned over time (rolling-bounce "unowned" time);
- :mod:`.procstat` — CPU of a process from /proc (the coordinator's cost per 1k heartbeats/s);
- :mod:`.scenarios` — steady, join-storm, rolling-bounce, commit-storm;
- :mod:`.consumer_member`, :mod:`.consumer_runtime`, :mod:`.consumer_scenarios` — KIP-848 members
  (ConsumerGroupHeartbeat v1, OffsetCommit v10): consumer-steady, consumer-commit;
- :mod:`.report` — table and JSON output;
- :mod:`.plan`, :mod:`.targets` — the runs bench/run_all.py makes and kcoord's targets checked against them.

The command line is bench/loadgen.py (``python -m bench.loadgen``).
"""
