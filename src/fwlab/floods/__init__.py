"""Background floods from the attacker namespace while a trial measures legitimate traffic.

``model`` holds what a suite's ``[[background]]`` item may say; ``flood`` runs one flood
(fwlab-engine's AF_PACKET backend, spoofed sources, duration-bounded) and counts it on the
attacker's link, at the DUT (link and rule counters) and at the server's ingress.

The package exports the model only: the suite schema reads it, and importing the runner side
here would pull fwlab.runners into every suite import (a cycle through fwlab.testbed). Import
``Flood`` and ``run_with_background`` from ``fwlab.floods.flood``.
"""

from fwlab.floods.model import BackgroundItem, FloodSpec

__all__ = ["BackgroundItem", "FloodSpec"]
