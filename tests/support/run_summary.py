"""A closing table of the run by part: unit, integration per upstream, containers.

The suite's cost is a budget (CI runs it in a fixed time), and the same test runs once per upstream;
this says, at the end of every run, how many tests of each part passed, failed or skipped and how many
seconds (setup + call + teardown) each part took, so a change that makes one part slow shows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pytest

CONTAINER_MODULES = ("test_containers.py", "test_testcontainers.py")


@dataclass
class PartTally:
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: float = 0.0


class RunSummary:
    """A pytest plugin: registered by tests/conftest.py."""

    def __init__(self) -> None:
        self.part_of: dict[str, str] = {}
        self.parts: dict[str, PartTally] = defaultdict(PartTally)

    @staticmethod
    def part(item: pytest.Item) -> str:
        path = item.path.as_posix()
        if "/tests/unit/" in path:
            return "unit"
        if item.path.name in CONTAINER_MODULES:
            return "containers"
        callspec = getattr(item, "callspec", None)
        upstream = callspec.params.get("upstream") if callspec is not None else None
        if upstream:
            return f"integration [{upstream}]"
        if "kafka" in getattr(item, "fixturenames", ()):
            return "integration [kafka only]"
        return "integration (other)"

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.part_of = {item.nodeid: self.part(item) for item in items}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Under pytest-xdist the workers collect, not this process: part_of is empty here, and the
        # node id still tells a unit test (the only part scripts/test.sh runs on several workers).
        part = self.part_of.get(report.nodeid)
        if part is None:
            part = "unit" if report.nodeid.startswith("tests/unit/") else "integration (other)"
        tally = self.parts[part]
        tally.seconds += report.duration
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            tally.outcomes[report.outcome] += 1
        elif report.when == "teardown" and report.outcome == "failed":
            tally.outcomes["error"] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.parts:
            return
        terminalreporter.write_sep("=", "run by part")
        for name in sorted(self.parts):
            tally = self.parts[name]
            counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(tally.outcomes.items()))
            terminalreporter.write_line(f"{name:28} {counts or 'nothing run'}; {tally.seconds:.0f} s")
