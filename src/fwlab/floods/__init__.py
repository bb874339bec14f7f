"""Background floods from the attacker namespace while a trial measures legitimate traffic.

``model`` holds what a suite's ``[[background]]`` item may say; ``flood`` runs one flood
(fwlab-engine's AF_PACKET backend, spoofed sources, duration-bounded) and counts it on the
attacker's link, at the DUT (link and rule counters) and at the server's ingress.
"""

from fwlab.floods.model import BackgroundItem, FloodSpec
from fwlab.floods.flood import Flood, run_with_background

__all__ = ["BackgroundItem", "Flood", "FloodSpec", "run_with_background"]
