"""The client/server pairs of a test bed: who streams to whom in a trial of several pairs.

Owns: :class:`StreamPair` and :func:`stream_pairs`, the one list every multi-pair trial reads
(iperf3's streams, the orchestrator's ``one-pair`` flag, the bed's reachability check), whether
the pairs are namespaces on this machine (suite key ``pairs``: ``client2``/``server2`` ...
namespaces, ``testbed.topology``) or hosts of a hosts file (``[hosts.client2]`` with
``[hosts.server2]`` ...: ``testbed.hosts``). Pair k is client k -> server k; pair 1 is the
bed's ``client`` -> ``server``.
Never touches: any host; it only reads the bed's description.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fwlab.testbed.hosts import Placement, role_number
from fwlab.testbed.topology import Topology


class PairedBed(Protocol):
    """What :func:`stream_pairs` reads of a bed (a :class:`~fwlab.testbed.bed.Testbed` has it)."""

    topo: Topology
    placement: Placement | None


@dataclass(frozen=True)
class StreamPair:
    """Pair ``k``: its client role streams to its server role."""

    k: int  #: the pair's number (1: the bed's client and server)
    client: str  #: the client role (``client``, ``client2`` ...)
    server: str  #: the server role (``server``, ``server2`` ...)
    client_if: str  #: the client's data interface, as :meth:`Testbed.link_counters` takes it
    server_if: str  #: the server's data interface, likewise
    server4: str | None  #: the server's IPv4 address (None: not given)
    server6: str | None  #: the server's IPv6 address (None: not given)

    def server_addr(self, ip_version: int) -> str | None:
        """The address the client streams to (None: the pair has none of that version)."""
        return self.server4 if ip_version == 4 else self.server6


def stream_pairs(bed: PairedBed) -> list[StreamPair]:
    """The bed's pairs, in order: the namespace pairs of ``topo.pairs``, or with a hosts file
    naming server hosts ``server2`` ..., each remote ``client<k>`` with its ``server<k>``; else
    the one pair client -> server (more generator hosts with one server are the engine's split,
    not pairs)."""
    t = bed.topo
    plan = t.plan
    placement = getattr(bed, "placement", None)
    servers = placement.server_roles if placement is not None else ("server",)
    if t.pairs > 1 or len(servers) == 1:
        return [StreamPair(k, t.pair_role("client", k), t.pair_role("server", k), t.pair_if("client", k),
                           t.pair_if("server", k), plan.pair_server(k, 4), plan.pair_server(k, 6))
                for k in range(1, t.pairs + 1)]
    out = [StreamPair(1, "client", "server", t.client_if, t.server_if, plan.server4, plan.server6)]
    for s in servers[1:]:
        k = role_number(s)
        c, es = f"client{k}", placement.entry(s)
        out.append(StreamPair(k, c, s, placement.entry(c).ifaces[0], es.ifaces[0],
                              es.addresses.get("server4"), es.addresses.get("server6")))
    return out
