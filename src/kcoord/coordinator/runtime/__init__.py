"""Drives the pure shards: one single-writer runtime per shard (log appends, replay, timers, replies
after the log acknowledged) and the router that places each group on its shard.

Imports :mod:`..core`, :mod:`kcoord.storage` and :mod:`kcoord.protocol`; nothing about sockets.
"""
