"""Deterministic rule-set generator.

Owns: choosing N distinct deny entries from address space that test traffic never uses.
IPv4 deny sources come from 198.18.128.0/17 and 198.19.128.0/17 (the benchmarking range, far
from the test subnets 198.18.1.0/24 and 198.19.1.0/24); IPv6 from 2001:2:0:ff00::/56.
Up to ``CLASSIC_MAX`` entries the original draw is kept (rule sets of earlier records stay
identical); above it (the ``rule-scaling-large`` sizes, to ``MAX_RULES``) one sample of distinct
(source, protocol, port) keys is drawn and decoded, ~10x faster (1,000,000 entries in seconds).
Never touches the kernel.
"""

from __future__ import annotations

import ipaddress
import random
from functools import partial

from fwlab.errors import SuiteError
from fwlab.rules.model import LAYOUTS, DenyEntry, RuleSet

DENY_POOL4 = (ipaddress.ip_network("198.18.128.0/17"), ipaddress.ip_network("198.19.128.0/17"))
DENY_POOL6 = ipaddress.ip_network("2001:2:0:ff00::/56")
MAX_RULES = 1_000_000
CLASSIC_MAX = 200_000  #: the original draw up to here; the keyed sample above
PORTS = 65536 - 1024  #: destination ports 1024..65535


def deny_sources(n: int, ip_version: int, rng: random.Random) -> list[str]:
    """``n`` source addresses for deny entries, drawn with ``rng`` from the deny pool of ``ip_version``."""
    if ip_version == 4:
        size = sum(p.num_addresses for p in DENY_POOL4)
        picks = rng.sample(range(size), min(n, size))
        # beyond the pool's 65,536 addresses sources repeat (generate keeps entries distinct)
        picks += [rng.randrange(size) for _ in range(n - len(picks))]
        out = []
        first = DENY_POOL4[0].num_addresses
        for k in picks:
            net = DENY_POOL4[0] if k < first else DENY_POOL4[1]
            out.append(str(net.network_address + (k if k < first else k - first)))
        return out
    seen: set[int] = set()
    out = []
    while len(out) < n:
        k = rng.getrandbits(72)
        if k in seen or k == 0:
            continue
        seen.add(k)
        out.append(str(DENY_POOL6.network_address + k))
    return out


def _pool4_strings() -> list[str]:
    out = []
    for net in DENY_POOL4:
        a, b = str(net.network_address).split(".")[:2]
        base = int(str(net.network_address).split(".")[2])
        out += [f"{a}.{b}.{base + (k >> 8)}.{k & 255}" for k in range(net.num_addresses)]
    return out


def _keyed(count: int, ip_version: int, rng: random.Random) -> list[DenyEntry]:
    """``count`` distinct entries from one sample of keys source x protocol x port."""
    if ip_version == 4:
        pool = _pool4_strings()
    else:  # 2^16 random distinct IPv6 sources from the /56 (enough keys for MAX_RULES)
        seen: set[int] = set()
        while len(seen) < 65536:
            k = rng.getrandbits(72)
            if k:
                seen.add(k)
        pool = [str(DENY_POOL6.network_address + k) for k in sorted(seen)]
    per_src = 2 * PORTS
    protos = ("tcp", "udp")
    triples = [(pool[key // per_src], protos[(key % per_src) >= PORTS], 1024 + key % PORTS)
               for key in rng.sample(range(len(pool) * per_src), count)]
    return list(map(partial(tuple.__new__, DenyEntry), triples))


def generate(count: int, layout: str = "linear", *, ip_version: int = 4,
             client_net: str = "198.18.1.0/24", server_net: str = "198.19.1.0/24",
             stateful_shortcut: bool = False, seed: int = 1) -> RuleSet:
    """Build a rule set of ``count`` distinct deny entries (distinct sources up to the pool's size,
    65,536 for IPv4; random ports 1024-65535, tcp or udp), deterministic for a given seed."""
    if layout not in LAYOUTS:
        raise SuiteError(f"unknown rule layout '{layout}'", fix=f"use one of {', '.join(LAYOUTS)}")
    if layout == "kube-proxy":
        raise SuiteError("the kube-proxy layout is a set of Services, not deny entries",
                         fix="build it with fwlab.rules.generate_kube_proxy")
    if layout not in ("linear", "set"):
        raise SuiteError(f"the {layout} layout is a real-world rule set, not deny entries",
                         fix="build it with fwlab.rules.generate_realworld")
    if not 0 <= count <= MAX_RULES:
        raise SuiteError(f"rule count {count} is out of range", fix=f"use 0..{MAX_RULES}")
    if ip_version not in (4, 6):
        raise SuiteError(f"unknown IP version {ip_version}", fix="use 4 or 6")
    rng = random.Random(f"fwlab-rules-{seed}-{ip_version}")
    if count > CLASSIC_MAX:
        return RuleSet(ip_version=ip_version, layout=layout, entries=tuple(_keyed(count, ip_version, rng)),
                       client_net=client_net, server_net=server_net, stateful_shortcut=stateful_shortcut,
                       seed=seed)
    srcs = deny_sources(count, ip_version, rng)
    entries: list[DenyEntry] = []
    seen: set[DenyEntry] = set()
    for s in srcs:
        e = DenyEntry(src=s, proto=rng.choice(("tcp", "udp")), dport=rng.randint(1024, 65535))
        while e in seen:  # only possible past 65,536 IPv4 entries, where sources repeat
            e = DenyEntry(src=s, proto=rng.choice(("tcp", "udp")), dport=rng.randint(1024, 65535))
        seen.add(e)
        entries.append(e)
    return RuleSet(ip_version=ip_version, layout=layout, entries=tuple(entries), client_net=client_net,
                   server_net=server_net, stateful_shortcut=stateful_shortcut, seed=seed)
