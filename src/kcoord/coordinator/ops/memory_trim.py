"""Give freed heap memory back to the OS after connections let go of a lot of it (glibc's malloc_trim).

Why: the answers and decoded requests of clients that pipeline large requests are allocated by
glibc's malloc (CPython passes objects over 512 bytes to it), and glibc keeps what is freed in its
heap for reuse rather than returning it. Worse, after a large block that was mmap'd is freed, glibc
raises its mmap threshold to that size (up to 32 MiB), so later blocks of up to that size come from
the heap too. Measured: 8 clients pipelining DescribeGroups of 20,000 ids took kcoord's RSS to
3.2 GB, and it stayed there after they left. ``malloc_trim(0)`` returns the free pages of every
arena to the OS; it costs a few milliseconds on a large heap, so it runs only from the App's sweep
and only after the bytes held for connections fell by ``TRIM_AFTER_FREED`` since the high-water
mark (not on every drop: at most once a sweep, once a second). Where there is no glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger("kcoord.memory")

TRIM_AFTER_FREED = 16 * 1024 * 1024


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """Calls malloc_trim once the bytes held for connections dropped well below their high-water mark."""

    def __init__(self, freed: int = TRIM_AFTER_FREED, trim: Callable[[int], int] | None = None) -> None:
        self._freed = freed
        self._trim = trim if trim is not None else _load_malloc_trim()
        self._high = 0
        self.trims = 0

    def observe(self, held: int) -> bool:
        """``held``: the bytes held for connections now. True when it trimmed."""
        if held > self._high:
            self._high = held
            return False
        if self._high - held < self._freed or self._trim is None:
            return False
        self._high = held
        self._trim(0)
        self.trims += 1
        return True
