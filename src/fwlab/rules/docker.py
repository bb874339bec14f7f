"""Docker rule sets: N published ports, as Docker's bridge driver writes them (iptables, and
since Docker 29 optionally nftables: fwlab.dut.nftables renders that form).

Owns: choosing the N published ports (host port -> container address:port, tcp or udp) and
the bridge's names. The iptables backends render the shape of Docker's classic iptables rules
(libnetwork drivers/bridge, Docker Engine up to 27): nat ``PREROUTING -m addrtype --dst-type
LOCAL -j DOCKER``, ``DOCKER -i docker0 -j RETURN``, then one ``! -i docker0 -p P --dport H -j
DNAT --to-destination C:CP`` per published port; filter ``FORWARD`` (policy DROP) ->
``DOCKER-USER`` (``-j RETURN``), ``DOCKER-ISOLATION-STAGE-1`` (-> ``STAGE-2``), ``-o docker0
--ctstate RELATED,ESTABLISHED -j ACCEPT``, ``-o docker0 -j DOCKER`` (one ``-d C/32 ! -i docker0
-o docker0 -p P --dport CP -j ACCEPT`` per published port), ``-i docker0 ! -o docker0 -j
ACCEPT``, ``-i docker0 -o docker0 -j ACCEPT``; nat ``POSTROUTING -s 172.17.0.0/16 ! -o docker0
-j MASQUERADE``.

Here the DUT's server-side interface plays docker0 and the test server plays the LAST
published port's container: the test traffic is sent to the DUT's own address (the host) at
that host port, is DNATed to the server and accepted by the last rule of chain DOCKER. Other
containers (172.17.0.0/16) are never on the wire. NAT sees only a flow's first packet (later
ones follow its conntrack entry), so measure with new flows (engine option ``new_flows``); the
filter ``DOCKER`` chain is walked until the flow is ESTABLISHED (a reply seen: never, for one-way
UDP). Never touches the kernel.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass

from fwlab.errors import SuiteError
from fwlab.rules.model import RuleSet

BRIDGE_NET = ipaddress.ip_network("172.17.0.0/16")
HOST_PORT0 = 10000
MAX_PORTS = 50_000


@dataclass(frozen=True)
class PublishedPort:
    """``docker run -p host_port:container_port/proto``: the host's ``host_port`` is DNATed to
    ``container``:``container_port``."""

    host_port: int
    proto: str
    container: str
    container_port: int


def generate_docker(count: int, *, host_addr: str, server_addr: str, port: int, bridge_if: str,
                    client_net: str = "198.18.1.0/24", server_net: str = "198.19.1.0/24",
                    seed: int = 1) -> RuleSet:
    """``count`` published ports (host ports 10000 on); the last one (udp) is DNATed to the test
    server ``server_addr``:``port``. ``host_addr``: the DUT's address the test traffic is sent
    to; ``bridge_if``: the DUT interface that plays docker0. IPv4 only."""
    if not 1 <= count <= MAX_PORTS:
        raise SuiteError(f"docker published-port count {count} is out of range",
                         fix=f"use 1..{MAX_PORTS} (the last published port is the test traffic's)")
    rng = random.Random(f"fwlab-docker-{seed}")
    first = int(BRIDGE_NET.network_address) + 2  # .1 is the bridge's own address
    ports = []
    for i in range(count - 1):
        ports.append(PublishedPort(host_port=HOST_PORT0 + i, proto=rng.choice(("tcp", "tcp", "udp")),
                                   container=str(ipaddress.ip_address(first + i % (BRIDGE_NET.num_addresses - 3))),
                                   container_port=rng.choice((80, 443, 3306, 5432, 6379, 8080, 9000))))
    ports.append(PublishedPort(host_port=HOST_PORT0 + count - 1, proto="udp", container=server_addr,
                               container_port=port))
    return RuleSet(ip_version=4, layout="docker", entries=(), client_net=client_net, server_net=server_net,
                   seed=seed, items=tuple(ports), to=(host_addr, ports[-1].host_port),
                   meta={"bridge_if": bridge_if, "bridge_net": str(BRIDGE_NET)})
