"""Failed SASL logins in the log: one line per peer host a minute, and a count of the rest.

A client retrying a wrong password in a loop, or a storm of failed logins, must not flood kcoord's
log (nor cost a line of I/O each): the first failure from a host is logged with the peer, the
mechanism and the principal tried; the following ones within the window are only counted, and the
count is logged when the window ends (the sweep asks :meth:`FailedLogins.expired`) or with the
host's next logged failure. Every failure is still counted in the metrics.

Pure: the caller passes the time (seconds on any monotonic clock). Memory is bounded: at most
``max_hosts`` hosts are remembered, the oldest window dropped first (its unlogged count then shows
only in the metrics).
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW_S = 60.0
MAX_HOSTS = 4096


@dataclass(slots=True)
class _Window:
    started: float
    unlogged: int = 0  # failures in this window after the logged one
    last: str = ""  # the last unlogged failure ("PLAIN as User:alice"), for the summary line


@dataclass(frozen=True, slots=True)
class Unlogged:
    """Failures from ``host`` that were counted but not logged one by one."""

    host: str
    count: int
    last: str


class FailedLogins:
    def __init__(self, window_s: float = WINDOW_S, max_hosts: int = MAX_HOSTS) -> None:
        self.window_s = window_s
        self.max_hosts = max_hosts
        # Insertion order is window start order: a new window is re-inserted at the end.
        self._hosts: dict[str, _Window] = {}

    def __len__(self) -> int:
        return len(self._hosts)

    def failed(self, host: str, what: str, now: float) -> Unlogged | None:
        """A failed login from ``host`` (``what``: mechanism and principal tried).

        None: stay quiet, it was counted. Otherwise log it now; the result holds the failures from
        ``host`` left unlogged since its last line (count 0 if none)."""
        window = self._hosts.get(host)
        if window is not None and now - window.started < self.window_s:
            window.unlogged += 1
            window.last = what
            return None
        previous = self._hosts.pop(host, None)
        self._make_room()
        self._hosts[host] = _Window(now)
        if previous is None:
            return Unlogged(host, 0, "")
        return Unlogged(host, previous.unlogged, previous.last)

    def expired(self, now: float) -> list[Unlogged]:
        """Forget the windows that ended; those with unlogged failures are returned, to be logged."""
        ended: list[Unlogged] = []
        hosts = self._hosts
        while hosts:
            host, window = next(iter(hosts.items()))
            if now - window.started < self.window_s:
                break
            del hosts[host]
            if window.unlogged:
                ended.append(Unlogged(host, window.unlogged, window.last))
        return ended

    def _make_room(self) -> None:
        # Full: the oldest window goes. Its unlogged count is lost from the log only (the metrics
        # have it); with thousands of hosts failing at once, the log has other lines to show that.
        while len(self._hosts) >= self.max_hosts:
            del self._hosts[next(iter(self._hosts))]
