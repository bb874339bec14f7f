"""Rule sets: the firewall-neutral model (``model``) and the generator (``generate``)."""

from fwlab.rules.generate import generate
from fwlab.rules.model import LAYOUTS, DenyEntry, RuleSet

__all__ = ["generate", "LAYOUTS", "DenyEntry", "RuleSet"]
