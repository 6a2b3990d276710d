"""Helpers shared by the test suite (tests/) and the benchmarks (bench/).

Neither of those imports the other: what both need lives here. Real processes and their life
cycle (tansu, Apache Kafka, kcoord, Java peers), free ports, topics and workloads, the load
generator, the in-process request harness, and the scenarios a benchmark runs in full and a test
runs short. Test-only fixtures stay in tests/ (conftest.py, tests/support/), benchmark-only code
in bench/.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository's root: where child processes run and where support/peers and .cache are."""
