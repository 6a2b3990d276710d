"""What each worker runs with, and when a dead one is started again: pure, no processes."""

from __future__ import annotations

from dataclasses import replace

from kcoord.coordinator.ops.settings import WORKER_PORT_OFFSET, Settings

# A worker that ran this long before it died is restarted at once; one that dies sooner is
# restarted after a back-off that doubles with every such quick death, up to MAX_DELAY.
STABLE_RUN = 30.0  # seconds
FIRST_DELAY = 0.5
MAX_DELAY = 30.0


def worker_port(base: Settings, index: int) -> tuple[int, bool]:
    """(port, derived) of worker ``index``'s own coordinator listener: the one ``worker.ports``
    names, else the listen port + WORKER_PORT_OFFSET + index (0 when the listen port is 0: the OS
    picks)."""
    if base.worker_ports:
        return base.worker_ports[index], False
    if base.listen[1] == 0:
        return 0, False
    return base.listen[1] + WORKER_PORT_OFFSET + index, True


def worker_settings(base: Settings, index: int, bootstrap: list[tuple[str, int]], embedded: bool) -> Settings:
    """Worker ``index``'s settings: a cluster node of its own behind the shared listen port.

    ``bootstrap`` is the upstream (the supervisor's embedded broker when ``embedded``): tansu
    mishandles static members (docs/tansu.md), so the workers join it as dynamic members."""
    port, derived = worker_port(base, index)
    latest_from_fetch = base.upstream_latest_offset_from_fetch
    if latest_from_fetch is None:
        latest_from_fetch = embedded  # what one process decides for its own embedded broker
    return replace(
        base,
        workers=1,
        worker_ports=[],
        listen=(base.listen[0], port),
        listen_port_derived=derived,
        shared_listen=base.listen,
        # Clients must reach each worker where the shared port is reached.
        advertised_host=base.advertised_host or base.advertised,
        bootstrap_servers=list(bootstrap),
        coordinator_node_id=base.coordinator_node_id + index,
        cluster_enabled=True,
        cluster_static_membership=base.cluster_static_membership and not embedded,
        upstream_latest_offset_from_fetch=latest_from_fetch,
        # The supervisor serves the one endpoint; each worker's own is loopback, on a port the OS picks.
        metrics=("127.0.0.1", 0) if base.metrics is not None else None,
    )


class RestartBackoff:
    """How long to wait before starting a worker again (one per worker)."""

    def __init__(self) -> None:
        self.quick_deaths = 0  # deaths in a row, each less than STABLE_RUN after its start

    def delay_after(self, ran_for: float) -> float:
        """Seconds to wait after a worker died ``ran_for`` seconds after it was started."""
        if ran_for >= STABLE_RUN:
            self.quick_deaths = 0
            return 0.0
        self.quick_deaths += 1
        delay: float = FIRST_DELAY * 2.0 ** (self.quick_deaths - 1)
        return min(delay, MAX_DELAY)
