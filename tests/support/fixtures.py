"""pytest fixtures for tests with real processes; tests/conftest.py does
``from tests.support.fixtures import *``.

- ``tansu``: one TansuBroker per test session (memory storage, free loopback port). Tests share it,
  so they must use unique topic and group names (tests.support.workload.unique).
- ``java_peers``: the compiled peer classes directory; skips the test when java/javac are missing.
- ``java_peer``: a factory that starts a JavaPeer with its stderr under the test's tmp_path and
  stops every peer it started when the test ends, pass or fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from tests.support.broker import TansuBroker
from tests.support.java import SKIP_REASON, JavaPeer, compile_peers, java_available

__all__ = ["java_peer", "java_peers", "tansu"]


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = TansuBroker(log_dir=tmp_path_factory.mktemp("tansu"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def java_peers() -> Path:
    if not java_available():
        pytest.skip(SKIP_REASON)
    return compile_peers()


PeerFactory = Callable[..., JavaPeer]


@pytest.fixture
def java_peer(java_peers: Path, tmp_path: Path) -> Iterator[PeerFactory]:
    started: list[JavaPeer] = []

    def start(
        main_class: str, args: Iterable[str] = (), *, name: str | None = None, **kwargs: object
    ) -> JavaPeer:
        peer = JavaPeer(main_class, args, log_dir=tmp_path, name=name, **kwargs)  # type: ignore[arg-type]
        started.append(peer)
        return peer

    yield start
    for peer in reversed(started):
        peer.stop()
