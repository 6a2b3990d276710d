"""``kcoord serve --workers N``: a supervisor and N worker processes on one host.

Each worker is a node of a kcoord cluster (docs/cluster.md) with its own coordinator node id
(``coordinator.node.id + i``) and its own coordinator port; the shards are shared among them by
the cluster machinery (runtime/membership.py), not by anything here. Every worker also accepts on
the one listen port and on the broker ports (SO_REUSEPORT), so clients bootstrap to one address,
the kernel spreads their connections, and FindCoordinator names the worker serving each group.

- ``plan.py``: each worker's settings and the restart back-off (pure).
- ``worker.py``: a worker process: its settings in on stdin, its ports and member id out on stdout.
- ``supervisor.py``: starts the embedded broker (if any) and the workers, replaces a dead one.
- ``leave.py``: a dead worker removed from the cluster's group at once (LeaveGroup).
- ``scrape.py`` and ``endpoint.py``: one /metrics, /healthz and /readyz over every worker.
"""
