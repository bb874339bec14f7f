"""Firewall backends for the device under test, one module per firewall, chosen by name.

``get_backend(name)`` returns a registered :class:`~fwlab.dut.base.Backend`.
"""

from fwlab.dut import command, flowtable, iptables, nftables, none, xdp  # noqa: F401  (registration)
from fwlab.dut.base import COUNTER_CLASSES, Backend, DutContext, LoadResult, backend_names, get_backend

__all__ = ["COUNTER_CLASSES", "Backend", "DutContext", "LoadResult", "backend_names", "get_backend"]
