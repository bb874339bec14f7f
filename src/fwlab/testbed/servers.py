"""The virtual servers of a test bed: their number, host names and extra addresses.

Owns: how the bed names virtual server ``k`` (srv01.fwlab.test ...) and spaces the extra
addresses of virtual servers and physical clients in their subnet. Both the traffic side (curl's
``--resolve``, the request matrix of ``fwlab.runners.txmix``) and the DUT side (the proxy's host
map) read them here. Pure data and arithmetic: never touches the kernel.
"""

from __future__ import annotations

import ipaddress

HOST_SUFFIX = "fwlab.test"
#: addresses of the virtual servers / clients are spaced this far apart in their subnet
ADDRESS_STRIDE = 16
#: virtual servers of a transaction bed (seed 002: srv01..srv06)
N_SERVERS = 6


def server_host(k: int) -> str:
    """Host name of virtual server ``k`` (0-based): srv01.fwlab.test ... (clients resolve it with
    curl --resolve, the proxy with a map: no DNS, and IPv6 literals never meet URL globbing)."""
    return f"srv{k + 1:02d}.{HOST_SUFFIX}"


def nth_address(base: str, k: int) -> str:
    """The k-th address after ``base`` (k=0 is ``base`` itself), ADDRESS_STRIDE apart: the
    extra addresses of virtual servers (after the server's) and physical clients."""
    return str(ipaddress.ip_address(base) + ADDRESS_STRIDE * k)
