"""Equivalent rewrites of an nftables rule set (``fwlab optimize``), and their check on the model.

Owns: finding, in the kernel's JSON listing (``nft -j list ruleset``), runs of *consecutive*
rules of one chain that are identical except for the value of one match (``ip saddr X drop``
x N, ``tcp dport P accept`` x N) and end in the same terminal verdict (accept, drop, reject);
merging each run into one rule whose match takes an anonymous set of the run's values (the
union, normalised into disjoint elements, as an interval set needs). Nothing else moves: a run
is broken by any rule in between, rules are never reordered, rules with other statements
(limit, log, nat, set updates, ...) or negated matches are left as they are. Then runs that are
identical but for one match's value *and* the verdict (accept, drop, jump, goto), with values that
do not overlap (port dispatch: ``tcp dport 22 jump ssh; tcp dport 80 jump web``), become one
verdict map (``tcp dport vmap { 22 : jump ssh, 80 : jump web }``). Between the two, runs that
differ in the values of the same *two* matches (``ip saddr A tcp dport P accept`` x N, pairs)
with the same terminal verdict become one rule with a concatenated key (``ip saddr . tcp dport
{ A . P, ... } accept``; each rule's values give the cross product of its two fields; a run ends
before a rule whose pairs would overlap one already in the set). Merging such a run
is equivalent by construction (the first matching rule of the run and the merged rule give the
same verdict to the same packets); :func:`model_differences` still checks it probe by probe on
the model (:func:`fwlab.rules.imported_model.evaluate`), and the caller checks it on the real
data path. Pure Python, no kernel.
"""

from __future__ import annotations

import bisect
import copy
import ipaddress
import json
from dataclasses import asdict, dataclass, field

from fwlab.errors import BackendError
from fwlab.rules.derive import TrafficClass
from fwlab.rules.imported_model import ImportedRuleSet, Interval, evaluate, intersect, norm
from fwlab.rules.nft_json import addr_values, int_values

#: match left sides whose value may become a set: (payload protocol, field)
MERGEABLE = {("ip", "saddr"), ("ip", "daddr"), ("ip6", "saddr"), ("ip6", "daddr"),
             ("tcp", "sport"), ("tcp", "dport"), ("udp", "sport"), ("udp", "dport"),
             ("th", "sport"), ("th", "dport")}
TERMINAL_STMTS = ("accept", "drop", "reject")
#: statements a merged rule may hold (anything else, e.g. limit or quota, keeps per-rule state)
ALLOWED_STMTS = {"match", "counter", *TERMINAL_STMTS}
MIN_RUN = 2  #: rules a run needs to be merged
#: verdicts a verdict map may hold (reject is a statement, not a verdict: not in a map)
VMAP_VERDICTS = ("accept", "drop", "jump", "goto")


@dataclass
class Merge:
    """One run of consecutive rules merged into one rule."""

    chain: str  #: "<family> <table> <chain>"
    handles: list[int]  #: the merged rules' handles, in order
    field: str  #: e.g. "ip saddr"
    verdict: str  #: accept | drop | reject, or vmap
    values: int  #: elements of the set (after merging overlapping values)
    kind: str = "set"  #: set (one field) | concat (a set with a concatenated key) | vmap (a verdict map)

    def describe(self) -> str:
        if self.kind == "concat":
            return (f"{self.chain}: {len(self.handles)} rules (handles {self.handles[0]}..{self.handles[-1]}) "
                    f"'{self.field.replace(' . ', ' A ')} B {self.verdict}' -> one rule '{self.field} "
                    f"{{{self.values} A . B elements}} {self.verdict}' (concatenated key)")
        if self.kind == "vmap":
            return (f"{self.chain}: {len(self.handles)} rules (handles {self.handles[0]}..{self.handles[-1]}) "
                    f"'{self.field} X <verdict>' -> one rule '{self.field} vmap {{{self.values} elements}}'")
        return (f"{self.chain}: {len(self.handles)} rules (handles {self.handles[0]}..{self.handles[-1]}) "
                f"'{self.field} X {self.verdict}' -> one rule '{self.field} {{{self.values} elements}} {self.verdict}'")


@dataclass
class Proposal:
    """The rewritten rule set (an nft JSON document to load with ``nft -j -f``) and what changed."""

    doc: dict
    rules_before: int
    rules_after: int
    merges: list[Merge] = field(default_factory=list)

    def summary(self) -> str:
        if not self.merges:
            return f"{self.rules_before} rules: no run of consecutive rules differing in one value to merge"
        concat = sum(m.kind == "concat" for m in self.merges)
        sets = sum(m.kind == "set" for m in self.merges)
        return (f"{self.rules_before} rules -> {self.rules_after} rules; {sets} run(s) merged into sets, "
                f"{concat} into sets with a concatenated key, {len(self.merges) - sets - concat} into verdict maps")

    def to_dict(self) -> dict:
        return {"rules_before": self.rules_before, "rules_after": self.rules_after,
                "merges": [asdict(m) | {"text": m.describe()} for m in self.merges], "summary": self.summary()}


def _stmt(e) -> str | None:
    return next(iter(e)) if isinstance(e, dict) and e else None


def _canon(e) -> str:
    """A statement as compared between rules (a counter's values do not count)."""
    if _stmt(e) == "counter":
        return "counter"
    return json.dumps(e, sort_keys=True)


def _mergeable_match(e) -> tuple[str, str] | None:
    """(protocol, field) of a match whose value may become a set, else None."""
    if _stmt(e) != "match":
        return None
    m = e["match"]
    left, right = m.get("left"), m.get("right")
    if m.get("op", "==") != "==" or not isinstance(left, dict) or "payload" not in left:
        return None
    key = (left["payload"].get("protocol"), left["payload"].get("field"))
    if key not in MERGEABLE:
        return None
    if isinstance(right, str) and right.startswith("@"):
        return None  # a named set stays named
    return key


def _rule_ok(rule: dict) -> bool:
    expr = rule.get("expr") or []
    kinds = [_stmt(e) for e in expr]
    return (all(k in ALLOWED_STMTS for k in kinds) and sum(k in TERMINAL_STMTS for k in kinds) == 1
            and kinds[-1] in TERMINAL_STMTS)


def _diff(a: dict, b: dict) -> list[int] | None:
    """Indices where two rules' statements differ; None when they cannot be compared."""
    ea, eb = a.get("expr") or [], b.get("expr") or []
    if len(ea) != len(eb):
        return None
    return [i for i, (x, y) in enumerate(zip(ea, eb)) if _canon(x) != _canon(y)]


def _values(proto: str, right) -> tuple[int | None, list[Interval]] | None:
    if proto in ("ip", "ip6"):
        return addr_values(right, {})
    iv = int_values(right, {})
    return None if iv is None else (None, iv)


def _addr_elem(ver: int, lo: int, hi: int):
    cls = ipaddress.IPv4Address if ver == 4 else ipaddress.IPv6Address
    if lo == hi:
        return str(cls(lo))
    nets = list(ipaddress.summarize_address_range(cls(lo), cls(hi)))
    if len(nets) == 1:
        return {"prefix": {"addr": str(nets[0].network_address), "len": nets[0].prefixlen}}
    return {"range": [str(cls(lo)), str(cls(hi))]}


def _right_of(proto: str, ver: int | None, iv: list[Interval]):
    """The match's right side for the union ``iv``: one value, or an anonymous set."""
    if proto in ("ip", "ip6"):
        elems = [_addr_elem(ver or (4 if proto == "ip" else 6), lo, hi) for lo, hi in iv]
    else:
        elems = [lo if lo == hi else {"range": [lo, hi]} for lo, hi in iv]
    return elems[0] if len(elems) == 1 else {"set": elems}


def _merge_run(run: list[dict], idx: int, chain: str) -> tuple[dict, Merge] | None:
    proto, fld = _mergeable_match(run[0]["expr"][idx])
    union: list[Interval] = []
    ver = None
    for r in run:
        vals = _values(proto, r["expr"][idx]["match"]["right"])
        if vals is None:
            return None
        ver = vals[0] or ver
        union += vals[1]
    union = norm(union)
    merged = copy.deepcopy(run[0])
    merged.pop("comment", None)
    merged["expr"][idx]["match"]["right"] = _right_of(proto, ver, union)
    for e in merged["expr"]:
        if _stmt(e) == "counter":
            e["counter"] = {"packets": 0, "bytes": 0}
    verdict = _stmt(merged["expr"][-1])
    return merged, Merge(chain=chain, handles=[r.get("handle") for r in run], field=f"{proto} {fld}",
                         verdict=verdict, values=len(union))


def _same_left(a, b) -> bool:
    ma, mb = a["match"], b["match"]
    return ma.get("op", "==") == mb.get("op", "==") and json.dumps(ma.get("left"), sort_keys=True) == \
        json.dumps(mb.get("left"), sort_keys=True)


def _runs(rules: list[dict]) -> list[tuple[list[dict], int | None]]:
    """Split one chain's rules (in order) into runs: (rules, index of the differing match)."""
    out: list[tuple[list[dict], int | None]] = []
    run: list[dict] = []
    idx: int | None = None
    for r in rules:
        if run and _rule_ok(r) and _rule_ok(run[0]):
            d = _diff(run[0], r)
            if d is not None:
                if idx is None and len(d) == 1 and _mergeable_match(run[0]["expr"][d[0]]) \
                        and _mergeable_match(r["expr"][d[0]]) and _same_left(run[0]["expr"][d[0]], r["expr"][d[0]]):
                    run.append(r)
                    idx = d[0]
                    continue
                if idx is not None and set(d) <= {idx} and _mergeable_match(r["expr"][idx]) \
                        and _same_left(run[0]["expr"][idx], r["expr"][idx]):
                    run.append(r)
                    continue
        if run:
            out.append((run, idx))
        run, idx = [r], None
    if run:
        out.append((run, idx))
    return out


MAX_PAIRS = 4096  #: elements one rule may contribute to a concatenated set (its two fields' cross product)


def _pairs(run0: dict, r: dict, idx: tuple[int, int]) -> list[tuple[tuple, tuple]] | None:
    """The (field 1 interval, field 2 interval) pairs rule ``r`` matches, None when not readable."""
    out = []
    per = []
    for i in idx:
        proto = _mergeable_match(r["expr"][i])[0]
        vals = _values(proto, r["expr"][i]["match"]["right"])
        if vals is None:
            return None
        per.append(norm(vals[1]))
    if len(per[0]) * len(per[1]) > MAX_PAIRS:
        return None
    for a in per[0]:
        for b in per[1]:
            out.append((a, b))
    return out


class _Intervals:
    """Intervals sorted by their low end, for "which of them overlap this one": a bisect to
    ``lo - widest`` then a scan up to ``hi`` (every overlapping interval starts in that window).
    Near-linear for points and like-sized intervals; degrades to a scan only with a very wide one."""

    def __init__(self) -> None:
        self._los: list[int] = []
        self._items: list[tuple[int, int, object]] = []
        self._widest = 0

    def add(self, iv: Interval, item: object) -> None:
        i = bisect.bisect_right(self._los, iv[0])
        self._los.insert(i, iv[0])
        self._items.insert(i, (iv[0], iv[1], item))
        self._widest = max(self._widest, iv[1] - iv[0])

    def overlapping(self, iv: Interval):
        """The items whose interval overlaps ``iv`` (inclusive ends)."""
        i = bisect.bisect_left(self._los, iv[0] - self._widest)
        for lo, hi, item in self._items[i:bisect.bisect_right(self._los, iv[1])]:
            if hi >= iv[0]:
                yield item


class _Boxes:
    """(field 1 interval, field 2 interval) pairs, for "does this pair overlap one of them"
    (both intervals overlap): the distinct field-1 intervals, each with its field-2 intervals,
    both as :class:`_Intervals`. Replaces a pairwise test of every new pair against every pair
    already in a concatenated run (quadratic: 55 s at 10k rules)."""

    def __init__(self, pairs: list[tuple[Interval, Interval]] = ()) -> None:
        self._firsts = _Intervals()
        self._seconds: dict[Interval, _Intervals] = {}
        for p in pairs:
            self.add(p)

    def add(self, p: tuple[Interval, Interval]) -> None:
        a, b = tuple(p[0]), tuple(p[1])
        if a not in self._seconds:
            self._seconds[a] = _Intervals()
            self._firsts.add(a, a)
        self._seconds[a].add(b, None)

    def overlaps(self, p: tuple[Interval, Interval]) -> bool:
        return any(next(self._seconds[a].overlapping(p[1]), False) is not False
                   for a in self._firsts.overlapping(p[0]))


def _concat_pair(rule: dict, d: list[int] | None) -> tuple[int, int] | None:
    """The two match indices a concatenated run starting at ``rule`` would merge: the two that
    differ, or (one differs) the rule's only two mergeable matches."""
    if d is None or not 1 <= len(d) <= 2:
        return None
    if len(d) == 2:
        return (d[0], d[1])
    mergeable = [i for i, e in enumerate(rule.get("expr") or []) if _mergeable_match(e)]
    return (mergeable[0], mergeable[1]) if len(mergeable) == 2 and d[0] in mergeable else None


def _concat_runs(rules: list[dict]) -> list[tuple[list[dict], tuple[int, int] | None]]:
    """Runs of consecutive terminal rules identical but for the values of the same two matches
    (two different fields), whose value pairs do not overlap (a concatenated interval set holds
    no overlapping elements)."""
    out: list[tuple[list[dict], tuple[int, int] | None]] = []
    run: list[dict] = []
    idx: tuple[int, int] | None = None
    boxes = _Boxes()  # the run's pairs so far
    for r in rules:
        if run and _rule_ok(r) and _rule_ok(run[0]):
            d = _diff(run[0], r)
            cand = idx if idx is not None else _concat_pair(run[0], d)
            if cand is not None and d is not None and set(d) <= set(cand) and all(
                    _mergeable_match(run[0]["expr"][i]) and _mergeable_match(r["expr"][i])
                    and _same_left(run[0]["expr"][i], r["expr"][i]) for i in cand) \
                    and _mergeable_match(r["expr"][cand[0]]) != _mergeable_match(r["expr"][cand[1]]):
                first = _pairs(run[0], run[0], cand) if idx is None else None
                new = _pairs(run[0], r, cand)
                if idx is None and first is not None:
                    boxes = _Boxes(first)
                if (idx is not None or first is not None) and new is not None \
                        and not any(boxes.overlaps(p) for p in new):
                    run.append(r)
                    idx = cand
                    for p in new:
                        boxes.add(p)
                    continue
        if run:
            out.append((run, idx))
        run, idx, boxes = [r], None, _Boxes()
    if run:
        out.append((run, idx))
    return out


def _elem(proto: str, ver: int | None, iv: Interval):
    return _right_of(proto, ver, [iv])


def _concat_merge(run: list[dict], idx: tuple[int, int], chain: str) -> tuple[dict, Merge] | None:
    keys = [_mergeable_match(run[0]["expr"][i]) for i in idx]
    vers = [None, None]
    for k, i in enumerate(idx):
        if keys[k][0] in ("ip", "ip6"):
            vers[k] = 4 if keys[k][0] == "ip" else 6
    elems = []
    for r in run:
        for a, b in _pairs(run[0], r, idx):
            elems.append({"concat": [_elem(keys[0][0], vers[0], a), _elem(keys[1][0], vers[1], b)]})
    merged = copy.deepcopy(run[0])
    merged.pop("comment", None)
    lefts = [merged["expr"][i]["match"]["left"] for i in idx]
    merged["expr"][idx[0]] = {"match": {"op": "==", "left": {"concat": lefts}, "right": {"set": elems}}}
    merged["expr"] = [e for i, e in enumerate(merged["expr"]) if i != idx[1]]
    for e in merged["expr"]:
        if _stmt(e) == "counter":
            e["counter"] = {"packets": 0, "bytes": 0}
    return merged, Merge(chain=chain, handles=[r.get("handle") for r in run],
                         field=" . ".join(f"{p} {f}" for p, f in keys), verdict=_stmt(merged["expr"][-1]),
                         values=len(elems), kind="concat")


def _vmap_ok(rule: dict) -> bool:
    kinds = [_stmt(e) for e in rule.get("expr") or []]
    return (bool(kinds) and all(k in ("match", "counter", *VMAP_VERDICTS) for k in kinds)
            and sum(k in VMAP_VERDICTS for k in kinds) == 1 and kinds[-1] in VMAP_VERDICTS)


def _vmap_runs(rules: list[dict]) -> list[tuple[list[dict], int | None]]:
    """Runs of consecutive rules identical but for one match's value and the verdict, whose values
    do not overlap (a map's keys never do, so the first match in the run is the only one)."""
    out: list[tuple[list[dict], int | None]] = []
    run: list[dict] = []
    idx: int | None = None
    union: list[Interval] = []
    for r in rules:
        if run and _vmap_ok(r) and _vmap_ok(run[0]):
            d = _diff(run[0], r)
            if d is not None:
                last = len(r["expr"]) - 1
                dm = [i for i in d if i != last]
                cand = idx if idx is not None else (dm[0] if len(dm) == 1 else None)
                if cand is not None and set(dm) <= {cand} and _mergeable_match(run[0]["expr"][cand]) \
                        and _mergeable_match(r["expr"][cand]) and _same_left(run[0]["expr"][cand], r["expr"][cand]):
                    proto = _mergeable_match(r["expr"][cand])[0]
                    first = _values(proto, run[0]["expr"][cand]["match"]["right"]) if idx is None else (None, union)
                    vals = _values(proto, r["expr"][cand]["match"]["right"])
                    if first is not None and vals is not None and not intersect(norm(first[1]), vals[1]):
                        run.append(r)
                        idx, union = cand, norm(first[1] + vals[1])
                        continue
        if run:
            out.append((run, idx))
        run, idx, union = [r], None, []
    if run:
        out.append((run, idx))
    return out


def _vmap_merge(run: list[dict], idx: int, chain: str) -> tuple[dict, Merge] | None:
    verdicts = {_canon(r["expr"][-1]) for r in run}
    if len(run) < MIN_RUN or len(verdicts) < 2:
        return None
    proto, fld = _mergeable_match(run[0]["expr"][idx])
    elems = []
    for r in run:
        ver, iv = _values(proto, r["expr"][idx]["match"]["right"])
        right = _right_of(proto, ver, norm(iv))
        keys = right["set"] if isinstance(right, dict) and "set" in right else [right]
        elems += [[k, copy.deepcopy(r["expr"][-1])] for k in keys]
    merged = copy.deepcopy(run[0])
    merged.pop("comment", None)
    left = merged["expr"][idx]["match"]["left"]
    merged["expr"] = [e for i, e in enumerate(merged["expr"][:-1]) if i != idx]
    for e in merged["expr"]:
        if _stmt(e) == "counter":
            e["counter"] = {"packets": 0, "bytes": 0}
    merged["expr"].append({"vmap": {"key": left, "data": {"set": elems}}})
    return merged, Merge(chain=chain, handles=[r.get("handle") for r in run], field=f"{proto} {fld}",
                         verdict="vmap", values=len(elems), kind="vmap")


def propose(listing_json: str) -> Proposal:
    """The rewrite of a rule set given as ``nft -j list ruleset`` output."""
    try:
        items = json.loads(listing_json)["nftables"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BackendError(f"nft -j list ruleset printed no rule set ({exc})",
                           fix="check the nftables version (JSON needs nft >= 0.9)") from exc
    by_chain: dict[tuple, list[dict]] = {}
    for it in items:
        if "rule" in it:
            r = it["rule"]
            by_chain.setdefault((r["family"], r["table"], r["chain"]), []).append(r)
    replaced: dict[tuple, list[dict]] = {}
    merges: list[Merge] = []
    before = after = 0
    for key, rules in by_chain.items():
        before += len(rules)
        chain_merges: list[Merge] = []
        for runs, merge in ((_runs, _merge_run), (_concat_runs, _concat_merge), (_vmap_runs, _vmap_merge)):
            new: list[dict] = []
            for run, idx in runs(rules):
                done = merge(run, idx, " ".join(key)) if idx is not None and len(run) >= MIN_RUN else None
                if done:
                    new.append(done[0])
                    chain_merges.append(done[1])
                else:
                    new += run
            rules = new
        merges += chain_merges
        new = [copy.deepcopy(r) for r in rules]
        for r in new:
            r.pop("handle", None)
        after += len(new)
        replaced[key] = new
    out: list[dict] = []
    emitted: set[tuple] = set()
    for it in items:
        if "metainfo" in it:
            continue
        if "rule" in it:
            r = it["rule"]
            key = (r["family"], r["table"], r["chain"])
            if key not in emitted:
                emitted.add(key)
                out += [{"rule": x} for x in replaced[key]]
            continue
        it = copy.deepcopy(it)
        for v in it.values():
            if isinstance(v, dict):
                v.pop("handle", None)
        out.append(it)
    return Proposal(doc={"nftables": out}, rules_before=before, rules_after=after, merges=merges)


def numbered(doc: dict) -> str:
    """A proposal document as a listing the model parser reads (rules given handles 1, 2, ...,
    as the kernel would on loading it); the live check reads the kernel's own listing instead."""
    doc = copy.deepcopy(doc)
    rules = [it["rule"] for it in doc["nftables"] if "rule" in it]
    for i, r in enumerate(rules):
        r.setdefault("handle", i + 1)
    return json.dumps(doc)


# -- equivalence on the model ----------------------------------------------------------------------
@dataclass
class Difference:
    """A probe the two rule sets treat differently (or that one of them cannot decide)."""

    probe: TrafficClass
    original: str  #: verdict (terminal) in the original, "?" when uncertain
    proposal: str

    def one_line(self) -> str:
        p = self.probe.packet.describe()
        return (f"probe {self.probe.class_id} (IPv{p['ip_version']} {p['proto']} {p['src']}:{p['sport']} -> "
                f"{p['dst']}:{p['dport']}, {p['iif']} -> {p['oif']}): original {self.original}, "
                f"proposal {self.proposal}")


def _says(rs: ImportedRuleSet, c: TrafficClass) -> str:
    out = evaluate(rs, c.packet)
    return "?" if out.verdict is None else f"{out.verdict} ({out.terminal})" if out.terminal == "reject" \
        else out.verdict


def union_probes(original: list[TrafficClass], proposal: list[TrafficClass]) -> list[TrafficClass]:
    """The original's classes, then the proposal's whose packet is not already among them; ids
    'a<n>' (from the original) and 'b<n>' (from the proposal)."""
    out, seen = [], set()
    for prefix, classes in (("a", original), ("b", proposal)):
        for c in classes:
            if c.packet in seen:
                continue
            seen.add(c.packet)
            out.append(copy.copy(c))
            out[-1].class_id = f"{prefix}{c.class_id.lstrip('c')}"
    return out


def model_differences(a: ImportedRuleSet, b: ImportedRuleSet, probes: list[TrafficClass]) -> list[Difference]:
    """Every probe whose verdict (accept / drop / reject) differs between the two rule sets, or
    that either cannot decide (a match the model cannot evaluate): empty when equivalent on them."""
    out = []
    for c in probes:
        va, vb = _says(a, c), _says(b, c)
        if va != vb or "?" in (va, vb):
            out.append(Difference(c, va, vb))
    return out
