"""A large multi-group request's authorization decisions made a slice per loop iteration.

Checking a DescribeGroups of 20,000 groups against the upstream's ACLs takes ~31 ms when none of
its decisions is cached (Kafka's rules, evaluated per group: net/acls.py) and ~4 ms when all are:
in one loop iteration, every other client would wait that long. A request decoded in steps
(dispatch.py, DECODE_IN_STEPS_ABOVE) therefore asks the principal's decider about each group it
names in steps on the App's loop steps (loop_steps.py) before it is served; the check made then
(group_authz.py) finds every decision in the decider's cache, and is told which groups the
request's own operation was denied on, so that it asks nothing again per group (~4 ms for 20,000
cached decisions) and, when none was, passes the request on whole.
"""

from __future__ import annotations

from collections.abc import Iterable

from .group_authz import GROUP, Allowed


class DecisionWarmup:
    """``allowed(operation, GROUP, group)`` for every group and operation, ``count`` groups a step;
    :attr:`denied`: the groups ``operation`` is denied on (the others are only cached)."""

    __slots__ = ("_allowed", "_operation", "_others", "_groups", "_next", "denied")

    def __init__(self, allowed: Allowed, operation: int, others: Iterable[int], groups: list[str]) -> None:
        self._allowed = allowed
        self._operation = operation
        self._others = tuple(o for o in others if o != operation)
        self._groups = groups
        self._next = 0
        self.denied: set[str] = set()

    @property
    def done(self) -> bool:
        return self._next >= len(self._groups)

    def step(self, count: int) -> None:
        allowed, operation, others, denied = self._allowed, self._operation, self._others, self.denied
        start = self._next
        self._next = end = min(start + count, len(self._groups))
        for group in self._groups[start:end]:
            if not allowed(operation, GROUP, group):
                denied.add(group)
            for other in others:
                allowed(other, GROUP, group)
