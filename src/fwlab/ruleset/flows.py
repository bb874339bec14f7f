"""A new-flow class's cost packets, each on a flow of its own: source ports cycled.

Owns the choice, for one class cost trial, between sending every packet of a new-flow class from
its own source port (fwlab-engine ``--src-port LO-HI``, walked in increment order: one flow per
packet while the range holds at least as many ports as packets) and repeating the class's one flow,
with the reason; and reading the DUT namespace's conntrack entry count (the check that each packet
made its own entry) and flushing the entries after such a trial (a full table drops new flows).

When the ports are cycled: a UDP or TCP class that is not an established (or reply) class, whose
own source port no source-port match of the rule set names, over the widest range of ports from
1024 to 65535 that no such match names (so no cycled port makes another rule match). A source-port
match on a named set (``sport @ports``) or any other form it cannot read keeps one flow. The data
path checks it: the class's rule counter moves by every packet sent and the conntrack entries grow
by as many. Conntrack's own hooks (priority -200, and the confirmation at the last priority) lie
outside the rule set's brackets: a flow's creation costs there are not in the class's figure; what
is, is the rule set's walk over a fresh conntrack entry for every packet.
"""

from __future__ import annotations

import re

from fwlab.rules.derive import TrafficClass

LOW, HIGH = 1024, 65535
#: a source-port match in nft or iptables text and what it names (a number, a range, a list, a set)
_SPORT = re.compile(r"(?:\bsport|--sport|--source-port|--sports|--source-ports)\s+(?:!=\s*|!\s*)?"
                    r"(\{[^}]*\}|@\S+|[\w,:\-]+)")
ONE_FLOW = "repeats one flow: times a lookup of one conntrack entry, not a connection's creation"


def named_source_ports(text: str) -> list[tuple[int, int]] | None:
    """Every source-port value or range the rule set's matches name; None when one names a set or a
    form this does not read (then no range is known to be safe)."""
    out = []
    for m in _SPORT.finditer(text):
        v = m.group(1).strip("{} ")
        if v.startswith("@"):
            return None
        for part in re.split(r"[,\s]+", v):
            if not part:
                continue
            lo, _, hi = part.replace(":", "-").partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                return None
            out.append((int(lo), int(hi or lo)))
    return out


def port_range(text: str, c: TrafficClass, count: int) -> tuple[tuple[int, int] | None, str]:
    """((lo, hi) to cycle the source port over, or None, what the trial's flows are)."""
    p = c.packet.describe()
    if c.packet.ct_state == "established" or getattr(c.packet, "ct_direction", None) == "reply":
        return None, "an established class: its one flow's later packets (a lookup, as meant)"
    if p.get("proto") not in ("udp", "tcp"):
        return None, f"{ONE_FLOW} ({p.get('proto')}: no source port to cycle)"
    named = named_source_ports(text)
    if named is None:
        return None, f"{ONE_FLOW} (the rule set matches source ports in a form fwlab does not read, e.g. a set)"
    sport = int(p.get("sport") or 0)
    if any(lo <= sport <= hi for lo, hi in named):
        return None, f"{ONE_FLOW} (the class's own source port {sport} is one a rule matches)"
    best, start = (0, 0), LOW
    for lo, hi in sorted(named) + [(HIGH + 1, HIGH + 1)]:
        if lo > start and lo - start > best[1] - best[0]:
            best = (start, lo)
        start = max(start, hi + 1)
    if best[1] - best[0] < count:
        return None, f"{ONE_FLOW} (no free range of {count} source ports)"
    lo, hi = best[0], best[1] - 1
    return (lo, hi), f"one flow per packet (source ports {lo}-{hi} in turn, {count} packets)"


def conntrack_count(host, ns: str | None) -> int | None:
    """The namespace's conntrack entries (net.netfilter.nf_conntrack_count), None when unreadable."""
    cp = host.run(["cat", "/proc/sys/net/netfilter/nf_conntrack_count"], ns=ns, check=False, timeout_s=10)
    return int(cp.stdout.strip()) if cp.returncode == 0 and cp.stdout.strip().isdigit() else None


def flush_conntrack(host, ns: str | None) -> None:
    """Remove the namespace's conntrack entries (after a trial that made one per packet)."""
    host.run(["conntrack", "-F"], ns=ns, check=False, timeout_s=30)
