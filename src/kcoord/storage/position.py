"""Where one shard's partition stands for this process: what it loaded, wrote, checked and followed.

The loader sets it after a load, the writer moves it with each acknowledged batch, the ownership
checks read past ``checked``; all offsets are -1 until the shard loads.
"""

from __future__ import annotations


class LogPosition:
    """Offsets of one shard's partition as this process knows them (module docstring)."""

    __slots__ = ("checked", "followed", "log_end", "log_start", "records_read")

    def __init__(self) -> None:
        # Offsets below ``log_end`` hold what this process loaded or wrote; a write acknowledged
        # below it went into a log that lost them (deleted, re-created or truncated topic).
        self.log_end = -1
        # Offsets below ``checked`` are known to be this process's own writes or ones it loaded.
        self.checked = -1
        self.log_start = -1  # the log start offset the last load read from
        # Offsets below ``followed`` were read for transaction markers (by the load or a follow).
        self.followed = -1
        self.records_read = 0  # records the last load fetched (before client-side compaction)

    def forget(self) -> None:
        """Nothing loaded: the next load starts over from the log's start."""
        self.log_end = self.checked = self.log_start = self.followed = -1

    def loaded(self, log_start: int, end: int, records_read: int) -> None:
        """A load read the partition from ``log_start`` to ``end``: later writes are this process's
        own or another owner's, which the tail check reads from there."""
        self.log_start, self.records_read = log_start, records_read
        self.log_end = self.checked = self.followed = end

    def written(self, base_offset: int, count: int) -> None:
        """This process's batch of ``count`` offsets was acknowledged at ``base_offset`` (at or
        above ``log_end``: the writer checks that first)."""
        if self.checked == base_offset:
            self.checked = base_offset + count  # our own batch right after what was checked: nothing to read
        self.log_end = base_offset + count
