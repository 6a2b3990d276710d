"""Modules written by ``python -m kcoord.protocol.codegen`` from ``protocol/schemas``: do not edit.

Each is served by a hand-written module of the same name one level up
(``kcoord.protocol.messages`` serves ``generated/messages.py``); import from there.
"""
