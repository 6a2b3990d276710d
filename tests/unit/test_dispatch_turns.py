"""Costly requests take turns: one dispatch per loop iteration across connections, in arrival order,
and a waiter that no longer wants its turn passes it on in the same iteration (net/dispatch_turns.py)."""

from __future__ import annotations

import asyncio

from kcoord.coordinator.net.dispatch_turns import DispatchTurns


def test_one_turn_per_loop_iteration_in_arrival_order() -> None:
    turns = DispatchTurns()
    log: list[tuple[int, str]] = []

    async def run() -> None:
        iteration = 0

        def waiter(name: str, wants: bool = True):  # type: ignore[no-untyped-def]
            def on_turn() -> bool:
                if wants:
                    log.append((iteration, name))
                return wants

            return on_turn

        assert turns.take(waiter("first"))  # nobody had this iteration's turn
        assert not turns.take(waiter("a"))
        assert not turns.take(waiter("closed", wants=False))
        assert not turns.take(waiter("b"))
        assert not turns.take(waiter("c"))
        assert len(turns) == 4
        while len(log) < 3:
            iteration += 1
            await asyncio.sleep(0)

    asyncio.run(run())
    names = [name for _, name in log]
    assert names == ["a", "b", "c"]
    iterations = [i for i, _ in log]
    assert len(set(iterations)) == len(iterations)  # never two in one iteration
    assert iterations[1] - iterations[0] == 1  # "closed" passed its turn on at once
    assert len(turns) == 0


def test_the_turn_is_free_again_in_a_later_iteration() -> None:
    turns = DispatchTurns()

    async def run() -> None:
        assert turns.take(lambda: True)
        assert not turns.take(lambda: True)  # this iteration's turn is taken
        for _ in range(3):
            await asyncio.sleep(0)
        assert turns.take(lambda: True)

    asyncio.run(run())
