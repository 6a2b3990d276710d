"""The budget for large partial frames (``queued.max.request.bytes``) and its decoders.

A decoder reserves a large frame's whole declared size when its length prefix arrives and
releases it when the frame completes or the decoder closes; one that cannot reserve waits, in
arrival order, and is told when its memory is granted. Frames at or below the threshold never
touch the budget.
"""

from __future__ import annotations

import struct

from kcoord.protocol import frames

KiB = 1024


def big(size: int, fill: bytes = b"x") -> bytes:
    return frames.frame(fill * size)


def decoder(
    budget: frames.FrameBudget, woken: list[str] | None = None, name: str = ""
) -> frames.FrameDecoder:
    dec = frames.FrameDecoder(1 << 20, budget=budget, reserve_above=64 * KiB)
    if woken is not None:
        dec.on_ready = lambda: woken.append(name)
    return dec


def test_small_frames_never_touch_the_budget() -> None:
    budget = frames.FrameBudget(100 * KiB)
    dec = decoder(budget)
    data = big(64 * KiB) + big(10)
    assert dec.feed(data[:1000]) == []
    assert (budget.used, dec.reserved, dec.waiting) == (0, 0, 0)
    assert dec.feed(data[1000:]) == [b"x" * 64 * KiB, b"x" * 10]
    assert budget.used == 0


def test_a_large_frame_reserves_its_declared_size_until_it_completes() -> None:
    budget = frames.FrameBudget(300 * KiB)
    dec = decoder(budget)
    data = big(200 * KiB) + big(5)
    assert dec.feed(data[:2]) == []  # no length yet
    assert budget.used == 0
    assert dec.feed(data[2:10]) == []
    assert (budget.used, dec.reserved) == (200 * KiB, 200 * KiB)
    assert dec.feed(data[10 : 100 * KiB]) == []
    assert budget.used == 200 * KiB  # reserved once, not per feed
    assert dec.feed(data[100 * KiB :]) == [b"x" * 200 * KiB, b"x" * 5]
    assert (budget.used, dec.reserved, dec.buffered) == (0, 0, 0)


def test_a_frame_completing_releases_before_the_next_one_reserves() -> None:
    budget = frames.FrameBudget(250 * KiB)
    dec = decoder(budget)
    first, second = big(200 * KiB, b"a"), big(150 * KiB, b"b")
    dec.feed(first[:1000])
    assert budget.used == 200 * KiB
    # The first completes and the second starts in one read: 200 + 150 would not fit at once.
    assert dec.feed(first[1000:] + second[:1000]) == [b"a" * 200 * KiB]
    assert (budget.used, dec.reserved, dec.waiting) == (150 * KiB, 150 * KiB, 0)


def test_decoders_beyond_the_budget_wait_in_order_and_are_woken_when_memory_is_released() -> None:
    budget = frames.FrameBudget(250 * KiB)
    woken: list[str] = []
    a, b, c = decoder(budget, woken, "a"), decoder(budget, woken, "b"), decoder(budget, woken, "c")
    fa, fb, fc = big(200 * KiB, b"a"), big(200 * KiB, b"b"), big(40 * KiB + 70 * KiB, b"c")
    a.feed(fa[:500])
    b.feed(fb[:500])
    c.feed(fc[:500])  # 110 KiB would fit beside a's 200, but b waits before it: no overtaking
    assert (budget.used, a.reserved, b.waiting, c.waiting) == (200 * KiB, 200 * KiB, 200 * KiB, 110 * KiB)
    assert woken == []
    assert a.feed(fa[500:]) == [b"a" * 200 * KiB]
    assert woken == ["b"]  # b's 200 KiB now; c's 110 KiB does not fit beside it
    assert (b.reserved, b.waiting, c.waiting, budget.used) == (200 * KiB, 0, 110 * KiB, 200 * KiB)
    assert b.feed(fb[500:]) == [b"b" * 200 * KiB]
    assert woken == ["b", "c"] and budget.used == 110 * KiB
    assert c.feed(fc[500:]) == [b"c" * 110 * KiB]
    assert budget.used == 0


def test_closing_releases_the_reservation_and_leaves_the_queue() -> None:
    budget = frames.FrameBudget(250 * KiB)
    woken: list[str] = []
    a, b, c = decoder(budget, woken, "a"), decoder(budget, woken, "b"), decoder(budget, woken, "c")
    a.feed(big(200 * KiB)[:500])
    b.feed(big(200 * KiB)[:500])
    c.feed(big(100 * KiB)[:500])
    b.close()  # a waiter leaves: c is now first in line, but 100 + 200 > 250
    assert woken == [] and budget.waiters == 1
    a.close()
    assert woken == ["c"]
    assert (budget.used, a.buffered, a.reserved) == (100 * KiB, 0, 0)
    c.close()
    assert (budget.used, budget.waiters) == (0, 0)
    c.close()  # twice is harmless
    assert budget.used == 0


def test_no_budget_means_no_reservations() -> None:
    dec = frames.FrameDecoder(1 << 20)
    assert dec.feed(big(200 * KiB)[:1000]) == []
    assert (dec.reserved, dec.waiting) == (0, 0)


def test_an_oversized_prefix_is_still_refused_before_any_reservation() -> None:
    budget = frames.FrameBudget(10 << 20)
    dec = decoder(budget)
    try:
        dec.feed(struct.pack(">i", 2 << 20))
    except frames.FrameTooLarge:
        pass
    else:
        raise AssertionError("an oversized frame was accepted")
    assert budget.used == 0
