"""HeapTrimmer: malloc_trim only after the bytes held for connections fell well below their peak."""

from __future__ import annotations

from kcoord.coordinator.ops.memory_trim import HeapTrimmer


def test_it_trims_once_per_large_drop_from_the_high_water_mark() -> None:
    calls: list[int] = []
    trimmer = HeapTrimmer(freed=100, trim=lambda pad: calls.append(pad) or 1)
    for held in (0, 50, 300, 250, 210):  # rising, then falling less than 100 below the peak
        assert not trimmer.observe(held)
    assert trimmer.observe(150)  # 150 below the peak of 300
    assert calls == [0]
    assert not trimmer.observe(100)  # the mark is now 150: 50 below it is not enough
    assert trimmer.observe(40)
    assert trimmer.trims == 2


def test_it_does_nothing_without_malloc_trim() -> None:
    trimmer = HeapTrimmer(freed=1)
    trimmer._trim = None
    trimmer.observe(10)
    assert not trimmer.observe(0)
