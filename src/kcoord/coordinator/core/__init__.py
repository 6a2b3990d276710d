"""The pure group coordinator: group state machines, offsets, records, timers, clock, results, events.

No I/O, no asyncio, no wall clock. A shard's state (:mod:`.shard_state`) takes requests and time,
and returns records to write, replies and events (:class:`.result.Result`); every change to durable
state is a record, applied by ``replay`` the same way after a write and when a shard loads.
Imports only :mod:`kcoord.protocol`.
"""
