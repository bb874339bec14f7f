"""What the clients of a transaction trial request: the client/server request matrix and the
protocol mix of seed 002's appendix (NSTL's benchmark), and the plain single-object case.

Owns: how a client load (number of concurrent virtual clients) is spread over physical clients,
which server, protocol and object each client requests, in a deterministic (seeded) order.
Pure data and arithmetic: never touches the kernel, never starts a program.

Seed 002, Table 7 (server hits by client) and Table 8 (protocol per server):

=============  ======  ======  ======  ======  ======  ======
clients        srv01   srv02   srv03   srv04   srv05   srv06
=============  ======  ======  ======  ======  ======  ======
Client01-05    2.4 %   2.4 %   23.8 %  23.8 %  23.8 %  23.8 %
Client06-08    40 %    40 %    5 %     5 %     5 %     5 %
=============  ======  ======  ======  ======  ======  ======

Servers 01, 03, 05: 10 % FTP, 90 % HTTP; servers 02, 04, 06: 90 % FTP, 10 % HTTP.
NSTL spread its virtual clients over eight physical clients; so does fwlab (round robin).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fwlab.testbed.servers import ADDRESS_STRIDE, HOST_SUFFIX, N_SERVERS, nth_address, server_host  # noqa: F401

#: seed 002 Table 7: (physical clients, share of requests per server 01..06)
MATRIX: tuple[tuple[str, int, tuple[float, ...]], ...] = (
    ("client01-05", 5, (0.024, 0.024, 0.238, 0.238, 0.238, 0.238)),
    ("client06-08", 3, (0.40, 0.40, 0.05, 0.05, 0.05, 0.05)),
)
#: seed 002 Table 8: share of FTP requests per server 01..06 (the rest is HTTP)
FTP_SHARE: tuple[float, ...] = (0.10, 0.90, 0.10, 0.90, 0.10, 0.90)
N_CLIENTS = sum(n for _, n, _ in MATRIX)  # 8
#: requests in one client's repeating cycle (shares are exact to 1/CYCLE)
CYCLE = 1000


@dataclass(frozen=True)
class Request:
    """One transaction: ``server`` index (0 = the server's own address), protocol, object size."""

    server: int
    protocol: str  # "http" | "ftp"
    size_bytes: int


def spread(load: int, slots: int) -> list[int]:
    """Virtual clients per physical client: ``load`` spread round robin over ``slots``."""
    return [load // slots + (1 if i < load % slots else 0) for i in range(slots)]


def client_group(client: int) -> tuple[str, tuple[float, ...]]:
    """The matrix row of physical client ``client`` (0-based)."""
    k = client
    for name, n, shares in MATRIX:
        if k < n:
            return name, shares
        k -= n
    raise ValueError(f"client index {client} is outside 0..{N_CLIENTS - 1}")


def _apportion(weights: list[float], total: int) -> list[int]:
    """Integer counts proportional to ``weights`` summing to ``total`` (largest remainder)."""
    s = sum(weights)
    raw = [w * total / s for w in weights]
    out = [int(r) for r in raw]
    rest = sorted(range(len(raw)), key=lambda i: raw[i] - out[i], reverse=True)
    for i in rest[: total - sum(out)]:
        out[i] += 1
    return out


def matrix_cycle(client: int, sizes_bytes: list[int], *, ftp: bool, seed: int,
                 length: int = CYCLE) -> list[Request]:
    """One physical client's repeating request cycle: servers by Table 7, protocols by Table 8
    (HTTP only when ``ftp`` is false: every request goes to HTTP, the server shares stay), object
    sizes equally often; shuffled with a seed so the protocols and servers interleave."""
    _, shares = client_group(client)
    weights: list[float] = []
    kinds: list[tuple[int, str]] = []
    for srv, share in enumerate(shares):
        f = FTP_SHARE[srv] if ftp else 0.0
        for proto, w in (("http", 1.0 - f), ("ftp", f)):
            if w > 0:
                kinds.append((srv, proto))
                weights.append(share * w)
    counts = _apportion(weights, length)
    reqs: list[Request] = []
    for (srv, proto), c in zip(kinds, counts):
        reqs += [Request(srv, proto, sizes_bytes[i % len(sizes_bytes)]) for i in range(c)]
    random.Random(f"fwlab-mix-{seed}-{client}").shuffle(reqs)
    return reqs


def mix_shares(reqs: list[Request]) -> dict[str, float]:
    """Fractions of a request list per server and per protocol (for the record and tests)."""
    n = len(reqs) or 1
    out: dict[str, float] = {}
    for r in reqs:
        out[f"server{r.server + 1:02d}"] = out.get(f"server{r.server + 1:02d}", 0.0) + 1 / n
        out[r.protocol] = out.get(r.protocol, 0.0) + 1 / n
    return out
