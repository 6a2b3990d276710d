"""The asyncio shell: listeners and client connections (transport, dispatch), the gateway to the
upstream brokers and the relay (pass-through, address rewriting), the embedded broker, and the
server that wires it all.

The top layer of the server: it may import every layer below it, and none imports it.
"""
