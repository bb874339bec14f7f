"""A proposed equivalent rewrite of an iptables-save rule set: runs of address rules -> ipset matches.

Owns the rewrite only (pure text in, text out, no kernel): in the filter table, a run of two or
more *consecutive* rules of one chain that are identical except for one address (``-s`` or
``-d``, one value, not negated, not ``/0``), with the same terminal target (ACCEPT, DROP,
REJECT with its options), becomes one rule matching ``-m set --match-set NAME src|dst``, and
the addresses become the ipset ``NAME`` (``hash:ip`` when every value is one address, else
``hash:net``). A rule's ``-m comment`` does not take part in the comparison and is dropped from
the merged rule. Runs with a stateful match (limit, recent, quota, ...) or a non-terminal target
are left alone. Nothing is reordered: the merged rule stands where the run stood, and within a
run every rule has the same verdict, so which address matched first never decides anything.

The output is a whole iptables-save file (every other line kept verbatim) plus the ``ipset
save``-style file of the new sets (loaded first, as ``fwlab run --ipset`` does). The caller
proves the equivalence on derived probes (model and data path).
"""

from __future__ import annotations

import ipaddress
import shlex
from dataclasses import dataclass, field

from fwlab.rules.iptables_save import parse_ipset
from fwlab.rules.optimize import Merge

TERMINAL_TARGETS = ("ACCEPT", "DROP", "REJECT")
#: matches that keep per-rule state: a rule holding one is never merged
STATEFUL_MATCHES = {"limit", "hashlimit", "recent", "quota", "statistic", "connlimit", "nth", "time"}
MIN_RUN = 2
SET_PREFIX = "fwlab"


@dataclass
class _Rule:
    line: str  #: the original line, kept verbatim when not merged
    chain: str
    addr: dict[str, str | None]  #: "s" | "d" -> the single value (None: absent or not mergeable)
    addr_tokens: dict[str, list[str]]  #: "s" | "d" -> the tokens as written ([] when absent)
    rest: list[str]  #: every other token (comment dropped), in order, target last
    ok: bool  #: may take part in a merge at all


@dataclass
class IpsetMerge(Merge):
    """One run of iptables rules merged into one ipset match."""

    set_name: str = ""
    set_type: str = ""
    target: str = ""

    def describe(self) -> str:
        d = "src" if self.field == "-s" else "dst"
        return (f"{self.chain}: {len(self.handles)} rules (numbers {self.handles[0]}..{self.handles[-1]}) "
                f"'{self.field} X -j {self.target}' -> one rule '-m set --match-set {self.set_name} {d} "
                f"-j {self.target}' ({self.set_type}, {self.values} elements)")


@dataclass
class IptablesProposal:
    """The rewritten iptables-save text, the ipset file of its new sets, and what changed."""

    text: str
    ipset_text: str
    rules_before: int
    rules_after: int
    merges: list[Merge] = field(default_factory=list)

    def summary(self) -> str:
        if not self.merges:
            return f"{self.rules_before} rules: no run of consecutive rules differing in one address to merge"
        return (f"{self.rules_before} rules -> {self.rules_after} rules; {len(self.merges)} run(s) merged into "
                f"ipset matches")

    def to_dict(self) -> dict:
        return {"rules_before": self.rules_before, "rules_after": self.rules_after,
                "merges": [m.__dict__ | {"text": m.describe()} for m in self.merges], "summary": self.summary()}


def _single(value: str, ipver: int) -> str | None:
    """A normalised single network for one -s/-d value, None when it cannot go into a set."""
    if "," in value:
        return None
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None
    if net.version != ipver or net.prefixlen == 0:
        return None
    return str(net)


def _parse(line: str, ipver: int) -> _Rule | None:
    try:
        tok = shlex.split(line)
    except ValueError:
        return None
    if len(tok) < 2 or tok[0] != "-A":
        return None
    chain, args = tok[1], tok[2:]
    addr: dict[str, str | None] = {"s": None, "d": None}
    addr_tokens: dict[str, list[str]] = {"s": [], "d": []}
    rest: list[str] = []
    ok = True
    i = 0
    while i < len(args):
        t = args[i]
        neg = t == "!"
        j = i + 1 if neg else i
        opt = args[j] if j < len(args) else ""
        if opt in ("-s", "--source", "-d", "--destination") and j + 1 < len(args):
            f = "s" if opt in ("-s", "--source") else "d"
            addr_tokens[f] = args[i:j + 2]
            addr[f] = None if neg else _single(args[j + 1], ipver)
            i = j + 2
            continue
        if t in ("-m", "--match") and i + 1 < len(args) and args[i + 1] == "comment":
            i += 2
            while i < len(args) and args[i] == "--comment":
                i += 2
            continue
        if t in ("-m", "--match") and i + 1 < len(args) and args[i + 1] in STATEFUL_MATCHES:
            ok = False
        rest.append(t)
        i += 1
    tgt = next((rest[k + 1] for k in range(len(rest) - 1) if rest[k] in ("-j", "--jump")), None)
    if tgt not in TERMINAL_TARGETS or "-g" in rest or "--goto" in rest:
        ok = False
    return _Rule(line=line, chain=chain, addr=addr, addr_tokens=addr_tokens, rest=rest, ok=ok)


def _key(r: _Rule, f: str) -> tuple:
    other = "d" if f == "s" else "s"
    return (r.chain, tuple(r.addr_tokens[other]), tuple(r.rest))


def _quote(t: str) -> str:
    if t and all(c.isalnum() or c in "-_./:,!=+@%" for c in t):
        return t
    return '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _set_name(chain: str, n: int, taken: set[str]) -> str:
    base = f"{SET_PREFIX}{n}_{chain}"[:31]
    name, k = base, 1
    while name in taken:
        name = f"{base[:27]}_{k}"
        k += 1
    taken.add(name)
    return name


def propose_iptables(save_text: str, ipver: int = 4, ipset_text: str | None = None) -> IptablesProposal:
    """The rewrite of an iptables-save file (the kernel's listing of the loaded rule set)."""
    lines = save_text.splitlines()
    out: list[str] = []
    sets: list[str] = []
    merges: list[Merge] = []
    taken = set(parse_ipset(ipset_text)) if ipset_text else set()  # the user's own set names
    table = None
    before = after = 0
    num: dict[str, int] = {}  #: rules seen per chain (the merged rules' numbers in the original)
    fam = "inet" if ipver == 4 else "inet6"
    i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith("*"):
            table = s[1:]
        if table != "filter" or not s.startswith("-A "):
            if s.startswith("-A "):
                before += 1
                after += 1
            out.append(lines[i])
            i += 1
            continue
        r = _parse(s, ipver)
        before += 1
        run: list[_Rule] = []
        field_used = None
        if r is not None and r.ok:
            for f in ("s", "d"):
                if r.addr[f] is None:
                    continue
                cand = [r]
                j = i + 1
                while j < len(lines) and lines[j].strip().startswith("-A "):
                    n = _parse(lines[j].strip(), ipver)
                    if n is None or not n.ok or n.addr[f] is None or _key(n, f) != _key(r, f):
                        break
                    cand.append(n)
                    j += 1
                if len(cand) >= MIN_RUN:
                    run, field_used = cand, f
                    break
        if not run:
            if r is not None:
                num[r.chain] = num.get(r.chain, 0) + 1
            out.append(lines[i])
            after += 1
            i += 1
            continue
        before += len(run) - 1
        after += 1
        f = field_used
        nets = list(dict.fromkeys(x.addr[f] for x in run))
        hosts = all(ipaddress.ip_network(n).num_addresses == 1 for n in nets)
        name = _set_name(r.chain, len(merges) + 1, taken)
        typ = "hash:ip" if hosts else "hash:net"
        sets.append(f"create {name} {typ} family {fam} hashsize 1024 maxelem {max(65536, len(nets))}")
        sets += [f"add {name} {n.split('/')[0] if hosts else n}" for n in nets]
        other = "d" if f == "s" else "s"
        toks = ["-A", r.chain, *r.addr_tokens[other], "-m", "set", "--match-set", name,
                "src" if f == "s" else "dst", *r.rest]
        out.append(" ".join(_quote(t) for t in toks))
        tgt = next(r.rest[k + 1] for k in range(len(r.rest) - 1) if r.rest[k] in ("-j", "--jump"))
        first = num.get(r.chain, 0) + 1
        merges.append(IpsetMerge(chain=f"filter {r.chain}", handles=list(range(first, first + len(run))),
                                 field="-s" if f == "s" else "-d", verdict=tgt.lower(), values=len(nets),
                                 set_name=name, set_type=typ, target=tgt))
        num[r.chain] = first - 1 + len(run)
        i += len(run)
    text = "\n".join(out) + "\n"
    ipset = "\n".join(sets) + ("\n" if sets else "")
    return IptablesProposal(text=text, ipset_text=ipset, rules_before=before, rules_after=after, merges=merges)

