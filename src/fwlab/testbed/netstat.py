"""A namespace's kernel protocol counters: ``/proc/net/snmp`` (``Tcp:``, ``Udp:``, ...) and
``/proc/net/netstat`` (``TcpExt:``, ``IpExt:``), each a header line of names and a line of values.

Owns: parsing one protocol's line pair into counters by name, and reading them in a role's
namespace. Callers take deltas themselves (the runners' TCP segment counts, the recovery
method's TCP abort counters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

SNMP = "/proc/net/snmp"
NETSTAT = "/proc/net/netstat"


def parse_counters(text: str, proto: str) -> dict[str, int]:
    """The counters of protocol ``proto`` (e.g. ``Tcp``, ``TcpExt``) in the text of
    ``/proc/net/snmp`` or ``/proc/net/netstat``, by name ({} when the protocol is absent)."""
    rows = [ln.split() for ln in text.splitlines() if ln.startswith(f"{proto}:")]
    if len(rows) < 2:
        return {}
    return {k: int(v) for k, v in zip(rows[0][1:], rows[1][1:]) if v.lstrip("-").isdigit()}


def read_counters(bed: "Testbed", role: str, path: str, proto: str) -> dict[str, int] | None:
    """``proto``'s counters now in ``role``'s namespace, from ``path`` (`SNMP` or `NETSTAT`);
    None when the file cannot be read."""
    cp = bed.sh(role, "cat", path, check=False)
    if cp.returncode != 0:
        return None
    return parse_counters(cp.stdout or "", proto)
