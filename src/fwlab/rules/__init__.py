"""Rule sets: the firewall-neutral model (``model``) and the generators (``generate``: synthetic
deny lists; ``kubeproxy``: kube-proxy's Services)."""

from fwlab.rules.generate import generate
from fwlab.rules.kubeproxy import generate_kube_proxy
from fwlab.rules.model import LAYOUTS, DenyEntry, RuleSet, Service

__all__ = ["generate", "generate_kube_proxy", "LAYOUTS", "DenyEntry", "RuleSet", "Service"]
