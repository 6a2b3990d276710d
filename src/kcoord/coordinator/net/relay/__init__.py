"""The relay: what kcoord passes through to the upstream brokers, and the rewriting on the way back.

Every request kcoord does not answer itself goes, unchanged and not decoded beyond its header, to
its listener's upstream broker over a connection paired with the client's (``passthrough``);
answers come back unchanged unless they name a broker by address, which ``addresses`` rewrites
so every broker address a client learns is kcoord's. ``requests`` reads the two relayed requests
kcoord looks into (Produce's acks, Metadata asking by topic id).
"""

from .passthrough import UpstreamRelay

__all__ = ["UpstreamRelay"]
