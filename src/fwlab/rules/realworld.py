"""The real-world layouts' one entry point: firewalld, docker and classbench-acl by name.

Owns: building a real-world layout's rule set from the test bed's facts (addresses, the DUT's
interface names, the engine's port), so the orchestrator and ``fwlab rules`` build them alike.
Each generator lives in its own module (``firewalld``, ``docker``, ``classbench``). Never
touches the kernel.
"""

from __future__ import annotations

from fwlab.errors import SuiteError
from fwlab.rules.classbench import generate_classbench
from fwlab.rules.docker import generate_docker
from fwlab.rules.firewalld import generate_firewalld
from fwlab.rules.model import REALWORLD_LAYOUTS, RuleSet


def generate_realworld(layout: str, count: int, *, ip_version: int, server_addr: str, port: int,
                       host_addr: str, dut_client_if: str, dut_server_if: str, client_net: str,
                       server_net: str, seed: int = 1) -> RuleSet:
    """``layout`` (one of REALWORLD_LAYOUTS) with ``count`` rules: rich rules, published ports or
    ACL rules. ``host_addr``: the DUT's client-side address (docker's published ports live on it)."""
    if layout not in REALWORLD_LAYOUTS:
        raise SuiteError(f"'{layout}' is not a real-world layout", fix=f"use one of {', '.join(REALWORLD_LAYOUTS)}")
    if ip_version != 4:
        raise SuiteError(f"the {layout} layout is IPv4 only", fix="use ip_versions = [4]")
    if layout == "firewalld":
        return generate_firewalld(count, client_net=client_net, server_net=server_net, port=port,
                                  zone_ifaces=(dut_client_if,), seed=seed)
    if layout == "docker":
        return generate_docker(count, host_addr=host_addr, server_addr=server_addr, port=port,
                               bridge_if=dut_server_if, client_net=client_net, server_net=server_net, seed=seed)
    return generate_classbench(count, server_addr=server_addr, port=port, client_net=client_net,
                               server_net=server_net, seed=seed)
