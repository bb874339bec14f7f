"""kube-proxy rule sets: N Services with M endpoints each, as kube-proxy programs them.

Owns: choosing the Services (ClusterIPs, ports, endpoints) of a kube-proxy rule set and the
chain names kube-proxy derives from them. Backends render the shape: iptables mode (nat
PREROUTING -> KUBE-SERVICES, one rule per ClusterIP:port -> KUBE-SVC-* picking an endpoint with
``-m statistic --mode random`` -> KUBE-SEP-* DNAT; pkg/proxy/iptables/proxier.go) and nftables
mode (one ``ip daddr . meta l4proto . th dport vmap @service-ips`` lookup -> per-service chain
with ``numgen random mod M vmap`` -> endpoint chain with ``dnat``; pkg/proxy/nftables/proxier.go).
Left out, because the test traffic never meets them: masquerade marks, NodePorts, the filter
table's no-endpoint REJECTs and firewall chains.

Addresses: ClusterIPs from 198.19.32.0/19 (the service CIDR here; inside the benchmarking range,
off every test subnet; the client's default route is the DUT, so any ClusterIP reaches it); other
services' endpoints ("pods") from 198.19.64.0/18, never on the wire. The LAST service is the test
service (kube-proxy's worst case for the iptables mode's linear walk): its M endpoints are all the
test server's address, so every DNATed packet reaches the server whichever endpoint is picked.
Never touches the kernel.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress

from fwlab.errors import SuiteError
from fwlab.rules.model import RuleSet, Service

SERVICE_CIDR = ipaddress.ip_network("198.19.32.0/19")
POD_CIDR = ipaddress.ip_network("198.19.64.0/18")
MAX_SERVICES = SERVICE_CIDR.num_addresses - 2
MAX_ENDPOINTS = 64
NAMESPACE = "default"


def chain_hash(*parts: str) -> str:
    """kube-proxy's chain-name hash: base32 of sha256 over the parts, first 16 characters."""
    digest = hashlib.sha256("".join(parts).encode()).digest()
    return base64.b32encode(digest).decode()[:16]


def svc_chain(s: Service) -> str:
    return "KUBE-SVC-" + chain_hash(s.port_name, s.proto)


def sep_chain(s: Service, k: int) -> str:
    return "KUBE-SEP-" + chain_hash(s.port_name, s.proto, f"{s.endpoints[k]}:{s.endpoint_port}#{k}")


def nft_service_chain(s: Service) -> str:
    return f"service-{chain_hash(s.port_name, s.proto)[:8]}-{s.namespace}/{s.name}/{s.proto}/p{s.port}"


def nft_endpoint_chain(s: Service, k: int) -> str:
    h = chain_hash(s.port_name, s.proto, f"{s.endpoints[k]}:{s.endpoint_port}#{k}")[:8]
    return f"endpoint-{h}-{s.namespace}/{s.name}/{s.proto}/p{s.port}__{s.endpoints[k]}/{s.endpoint_port}"


def probability(k: int, m: int) -> str:
    """kube-proxy's ``--probability`` for endpoint ``k`` of ``m`` (0-based): 1/(m-k), "%0.10f"."""
    return f"{1.0 / (m - k):0.10f}"


def generate_kube_proxy(services: int, *, endpoints: int = 2, server_addr: str, port: int,
                        proto: str = "udp", client_net: str = "198.18.1.0/24",
                        server_net: str = "198.19.1.0/24", seed: int = 1) -> RuleSet:
    """``services`` Services of ``endpoints`` endpoints each; the last one (ClusterIP -> the test
    server's ``server_addr``:``port``) is the one test traffic is sent to. IPv4 only."""
    if not 0 <= services <= MAX_SERVICES:
        raise SuiteError(f"kube-proxy service count {services} is out of range", fix=f"use 0..{MAX_SERVICES}")
    if not 1 <= endpoints <= MAX_ENDPOINTS:
        raise SuiteError(f"kube-proxy endpoints per service {endpoints} is out of range",
                         fix=f"use 1..{MAX_ENDPOINTS}")
    if ipaddress.ip_address(server_addr).version != 4:
        raise SuiteError("the kube-proxy layout is IPv4 only", fix="use ip_versions = [4]")
    if proto not in ("tcp", "udp"):
        raise SuiteError(f"unknown protocol '{proto}'", fix="use tcp or udp")
    out = []
    pods = POD_CIDR.network_address + 1
    for i in range(services):
        test = i == services - 1
        if test:
            eps, ep_port = tuple([server_addr] * endpoints), port
        else:
            eps = tuple(str(pods + (i * endpoints + k) % (POD_CIDR.num_addresses - 2))
                        for k in range(endpoints))
            ep_port = 8000 + i % 1000
        out.append(Service(namespace=NAMESPACE, name=f"svc-{i}", cluster_ip=str(SERVICE_CIDR.network_address + 1 + i),
                           proto=proto, port=port if test else 80 + i % 8000, endpoints=eps,
                           endpoint_port=ep_port))
    return RuleSet(ip_version=4, layout="kube-proxy", entries=(), client_net=client_net,
                   server_net=server_net, seed=seed, services=tuple(out),
                   meta={"endpoints_per_service": endpoints})
