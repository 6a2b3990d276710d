"""The garbage collector's pauses, measured: a histogram per generation and a log line for a long one.

CPython's cyclic collector stops the event loop while it walks a generation. With tens of thousands
of consumer-group members in memory a full (generation 2) collection walks every one of them, and
every request that arrives meanwhile waits; kcoord's latency tail is then the collector's, not its
own. This makes that visible, as a JVM's GC log does for a Kafka broker:
``kcoord_gc_pause_seconds{generation}``, and a WARNING line for a pause of ``warn_after_s`` or more.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

log = logging.getLogger("kcoord.gc")


class GcPauseWatch:
    def __init__(self, registry: CollectorRegistry, warn_after_s: float = 0.1) -> None:
        self.warn_after_s = warn_after_s
        histogram = Histogram(
            "kcoord_gc_pause_seconds", "Pauses of the cyclic garbage collector, by generation", ["generation"],
            registry=registry, buckets=(0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )  # fmt: skip
        self._by_generation = [histogram.labels(str(g)) for g in range(3)]
        self._started = 0.0
        self.installed = False

    def install(self) -> None:
        if not self.installed:
            gc.callbacks.append(self._callback)
            self.installed = True

    def uninstall(self) -> None:
        if self.installed:
            gc.callbacks.remove(self._callback)
            self.installed = False

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = info.get("generation", 0)
        self._by_generation[min(max(generation, 0), 2)].observe(pause)
        if pause >= self.warn_after_s:
            log.warning(
                "a generation %d garbage collection paused kcoord for %.0f ms (%d objects collected)",
                generation, pause * 1000, info.get("collected", 0),
            )  # fmt: skip
