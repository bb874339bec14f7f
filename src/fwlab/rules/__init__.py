"""Rule sets: the firewall-neutral model (``model``) and the generators (``generate``: synthetic
deny lists; ``kubeproxy``: kube-proxy's Services; ``realworld``: firewalld, docker and
classbench-acl)."""

from fwlab.rules.generate import generate
from fwlab.rules.kubeproxy import generate_kube_proxy
from fwlab.rules.model import LAYOUTS, REALWORLD_LAYOUTS, DenyEntry, RuleSet, Service
from fwlab.rules.realworld import generate_realworld

__all__ = ["generate", "generate_kube_proxy", "generate_realworld", "LAYOUTS", "REALWORLD_LAYOUTS", "DenyEntry",
           "RuleSet", "Service"]
