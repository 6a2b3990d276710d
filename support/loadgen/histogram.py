"""A log-linear latency histogram in the spirit of HdrHistogram, in pure Python.

Why not a list of samples: a steady-state run records millions of heartbeats; keeping them all
costs memory and a sort. Why not numpy: recording happens one value at a time on the event loop,
where a Python int bucket index is cheaper than a numpy call, and the project need not depend on it.

Buckets: values (integer microseconds) below ``2 * SUB`` are exact; above, each power-of-two range
is split into ``SUB`` equal buckets, so the relative error of any reported value is < 1/SUB
(0.8 % with SUB = 128). Percentiles report the highest value equivalent to the bucket (as HDR
does), capped at the largest value actually recorded.
"""

from __future__ import annotations

from collections.abc import Iterable

SUB_BITS = 7
SUB = 1 << SUB_BITS  # buckets per power of two
_EXACT = 2 * SUB  # values below this have a bucket each
_MAX_BUCKETS = _EXACT + 48 * SUB  # up to 2**55 µs: far beyond any latency


def bucket_of(value: int) -> int:
    """Bucket index of a non-negative integer value."""
    if value < _EXACT:
        return value if value > 0 else 0
    shift = value.bit_length() - SUB_BITS - 1
    return _EXACT + (shift - 1) * SUB + ((value >> shift) - SUB)


def bucket_bounds(index: int) -> tuple[int, int]:
    """(lowest, highest) value that falls into bucket ``index``."""
    if index < _EXACT:
        return index, index
    shift = (index - _EXACT) // SUB + 1
    top = (index - _EXACT) % SUB + SUB
    low = top << shift
    return low, low + (1 << shift) - 1


class Histogram:
    """Counts of integer microsecond values; cheap to record, merge and query."""

    __slots__ = ("counts", "count", "total", "min", "max")

    def __init__(self) -> None:
        self.counts = [0] * _MAX_BUCKETS
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    def record(self, value_us: int) -> None:
        if value_us < 0:
            value_us = 0
        if value_us < _EXACT:
            self.counts[value_us] += 1
        else:
            shift = value_us.bit_length() - SUB_BITS - 1
            self.counts[_EXACT + (shift - 1) * SUB + ((value_us >> shift) - SUB)] += 1
        if self.count == 0 or value_us < self.min:
            self.min = value_us
        if value_us > self.max:
            self.max = value_us
        self.count += 1
        self.total += value_us

    def record_seconds(self, seconds: float) -> None:
        self.record(int(seconds * 1_000_000))

    def extend(self, values_us: Iterable[int]) -> None:
        for v in values_us:
            self.record(v)

    def merge(self, other: Histogram) -> None:
        if other.count == 0:
            return
        for i, c in enumerate(other.counts):
            if c:
                self.counts[i] += c
        self.min = other.min if self.count == 0 else min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.count += other.count
        self.total += other.total

    def reset(self) -> None:
        self.counts = [0] * _MAX_BUCKETS
        self.count = self.total = self.min = self.max = 0

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, p: float) -> int:
        """Value at percentile ``p`` (0..100) in µs: the highest value of the bucket holding it."""
        if self.count == 0:
            return 0
        rank = max(1, min(self.count, int(p / 100.0 * self.count + 0.999999999)))
        seen = 0
        for i, c in enumerate(self.counts):
            if c:
                seen += c
                if seen >= rank:
                    return min(bucket_bounds(i)[1], self.max)
        return self.max

    def summary_ms(self) -> dict[str, float]:
        """The figures a report shows, in milliseconds."""
        return {
            "count": self.count,
            "mean_ms": round(self.mean / 1000, 3),
            "p50_ms": round(self.percentile(50) / 1000, 3),
            "p99_ms": round(self.percentile(99) / 1000, 3),
            "p999_ms": round(self.percentile(99.9) / 1000, 3),
            "max_ms": round(self.max / 1000, 3),
        }
