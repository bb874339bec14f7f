"""A marked copy of an imported rule set: every drop verdict made "mark the packet, accept".

Why: the kernel runs no program after a netfilter drop, so the in-kernel clock cannot time a
class the rule set drops. On the copy, the verdict that would drop a packet sets the packet's
mark to :data:`MARK` and accepts it instead; the clock's leave program right after that chain
(:func:`fwlab.probes.brackets.plan` with ``drop_mark``) stamps the time and returns NF_DROP for
packets carrying the mark. The packet still never leaves the DUT, no later chain on the hook runs
on it, and the bracket times the rule walk up to the verdict, plus the mark statement.

Owns the rewrite, pure (:func:`nft_commands` over ``nft -j list ruleset``,
:func:`iptables_text` over an iptables-save file) and loading the copy (:class:`MarkedCopy`):

- nft (tables of the ip, ip6 and inet families): a rule ending in ``drop`` or ``reject`` is
  replaced in place (same handle, so its rule id and counter stay the class's) by the same rule
  ending in ``meta mark set MARK accept``; an anonymous verdict map's ``drop`` elements become
  ``goto`` a helper chain that does the same; a base chain's ``policy drop`` becomes ``policy
  accept`` with a final rule ``counter meta mark set MARK accept`` (its id stands for the policy's).
  A named verdict map's drops and the bridge, arp and netdev families are left as they are (the
  clock cannot link there): a class dropped there stays "dropped inside ...".
- iptables-save text: ``-j DROP`` and ``-j REJECT ...`` become ``-j FWLAB_DROPMARK`` (a user chain
  per table: ``-j MARK --set-xmark MARK`` then ``-j ACCEPT``); a built-in chain's DROP policy
  becomes ACCEPT with a final ``-j FWLAB_DROPMARK`` rule. iptables-nft and iptables-legacy alike.

What the copy's figure is not: a ``reject``'s ICMP error (or TCP reset) is not sent, so its
figure is the time to the reject verdict without that send; the mark statement's own time is in
the figure (fwlab measures it: :func:`double_mark_commands` is the same copy with the mark set
twice). Conntrack is the same as for the real drop: the packet is dropped on the same hook,
before conntrack confirms the entry, so no entry is confirmed either way. Never times anything.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field, replace

from fwlab.dut.base import DutContext
from fwlab.dut.imported import ImportedFirewall

#: the mark a copy's drop verdicts set ("fwlb"); a rule set that uses it itself gets no copy
MARK = 0x66776C62
HELPER_CHAIN = "fwlab_dropmark"  #: nft: the chain a verdict map's drop elements go to
XT_CHAIN = "FWLAB_DROPMARK"  #: iptables: the user chain every DROP and REJECT jumps to
IP_FAMILIES = ("ip", "ip6", "inet")
LABEL = "time to the drop verdict (timed on a marked copy)"
LABEL_REJECT = "time to the reject verdict (timed on a marked copy; the ICMP error it sends is not included)"


def _mark_stmts(times: int = 1) -> list[dict]:
    return [{"mangle": {"key": {"meta": {"key": "mark"}}, "value": MARK}}] * times + [{"accept": None}]


def _is_drop(stmt) -> bool:
    return isinstance(stmt, dict) and len(stmt) == 1 and ("drop" in stmt or "reject" in stmt)


def _rewrite_vmaps(node, helper: str) -> int:
    """Anonymous verdict maps under ``node``: drop elements -> goto ``helper``, in place; how many."""
    n = 0
    if isinstance(node, dict):
        if "vmap" in node and isinstance(node["vmap"], dict):
            data = node["vmap"].get("data")
            elems = data.get("set") if isinstance(data, dict) else data if isinstance(data, list) else []
            for e in elems or []:
                if isinstance(e, list) and len(e) == 2 and isinstance(e[1], dict) and "drop" in e[1]:
                    e[1] = {"goto": {"target": helper}}
                    n += 1
        for v in node.values():
            n += _rewrite_vmaps(v, helper)
    elif isinstance(node, list):
        for v in node:
            n += _rewrite_vmaps(v, helper)
    return n


@dataclass
class NftRewrite:
    """What the nft rewrite does: the commands (one ``nft -j -f`` document) and what it changed."""

    commands: list[dict] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  #: rule ids whose drop/reject became mark + accept
    rejects: list[str] = field(default_factory=list)  #: those of them that were a reject
    policies: list[str] = field(default_factory=list)  #: chain keys whose policy drop became accept
    vmap_rules: list[str] = field(default_factory=list)  #: rules whose verdict map's drops go to the helper
    left: list[str] = field(default_factory=list)  #: drops not rewritten, with why

    def document(self) -> str:
        return json.dumps({"nftables": [{"metainfo": {"json_schema_version": 1}}, *self.commands]})


def nft_commands(listing: str | dict, *, mark_times: int = 1) -> NftRewrite:
    """The commands that turn the loaded rule set (``nft -j list ruleset``) into its marked copy.

    ``mark_times=2`` sets the mark twice at every verdict (the calibration copy: its figure minus the
    plain copy's is one mark statement's time)."""
    doc = json.loads(listing) if isinstance(listing, str) else listing
    items = doc.get("nftables", [])
    out = NftRewrite()
    vmap_tables: set[tuple[str, str]] = set()
    replaced: list[dict] = []
    for it in items:
        if "map" in it and it["map"].get("map") == "verdict" and "drop" in json.dumps(it["map"].get("elem", [])):
            m = it["map"]
            out.left.append(f"named verdict map {m['family']} {m['table']} @{m['name']}: its drop elements stay drops")
        r = it.get("rule")
        if not r:
            continue
        rid = f"{r['family']} {r['table']} {r['chain']} #{r['handle']}"
        expr = r.get("expr", [])
        if r["family"] not in IP_FAMILIES:
            if expr and _is_drop(expr[-1]):
                out.left.append(f"{rid}: the {r['family']} family (the clock links to IPv4 and IPv6 hooks only)")
            continue
        new = copy.deepcopy(expr)
        changed = False
        if _rewrite_vmaps(new, HELPER_CHAIN):
            vmap_tables.add((r["family"], r["table"]))
            out.vmap_rules.append(rid)
            changed = True
        if new and _is_drop(new[-1]):
            if "reject" in new[-1]:
                out.rejects.append(rid)
            new = new[:-1] + _mark_stmts(mark_times)
            out.rules.append(rid)
            changed = True
        if changed:
            rule = {k: r[k] for k in ("family", "table", "chain", "handle")}
            if r.get("comment"):
                rule["comment"] = r["comment"]
            replaced.append({"replace": {"rule": {**rule, "expr": new}}})
    for fam, table in sorted(vmap_tables):
        out.commands.append({"add": {"chain": {"family": fam, "table": table, "name": HELPER_CHAIN}}})
        out.commands.append({"add": {"rule": {"family": fam, "table": table, "chain": HELPER_CHAIN,
                                              "expr": _mark_stmts(mark_times)}}})
    out.commands += replaced
    for it in items:
        c = it.get("chain")
        if not c or c.get("policy") != "drop" or c["family"] not in IP_FAMILIES:
            continue
        keep = {k: c[k] for k in ("family", "table", "name", "type", "hook", "prio", "dev") if k in c}
        out.commands.append({"add": {"chain": {**keep, "policy": "accept"}}})
        out.commands.append({"add": {"rule": {"family": c["family"], "table": c["table"], "chain": c["name"],
                                              "comment": "fwlab marked copy: policy drop",
                                              "expr": [{"counter": None}, *_mark_stmts(mark_times)]}}})
        out.policies.append(f"{c['family']} {c['table']} {c['name']}")
    return out


_TARGET = re.compile(r"\s-j\s+(DROP|REJECT)\b.*$")
_POLICY = re.compile(r"^:(\S+)\s+DROP(\s+\[\d+:\d+\])?\s*$")


@dataclass
class XtRewrite:
    text: str
    rules: list[str] = field(default_factory=list)  #: rule ids ("<table> <chain> #<n>") rewritten
    rejects: list[str] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)  #: "<table> <chain>" whose DROP policy became ACCEPT
    policy_rules: dict[str, str] = field(default_factory=dict)  #: "policy:<table> <chain>" -> the final rule's id


def iptables_text(text: str, *, mark_times: int = 1) -> XtRewrite:
    """The marked copy of an iptables-save file (see the module's docstring); rule ids as
    :func:`fwlab.rules.iptables_save.parse_iptables_save` numbers them (per table and chain; a
    policy's id ``policy:<chain key>``, the chain key being the chain's name in the filter table,
    ``<table> <chain>`` in the others)."""
    out: list[str] = []
    res = XtRewrite("")
    table, index, policies, used, decl_at = "filter", {}, [], False, 0
    mark_rules = ([f"-A {XT_CHAIN} -j MARK --set-xmark 0x{MARK:x}/0xffffffff"] * mark_times
                  + [f"-A {XT_CHAIN} -j ACCEPT"])
    for line in text.splitlines():
        s = line.strip()
        m_pol = _POLICY.match(s)
        m_rule = re.match(r"^(\[\d+:\d+\]\s+)?-A\s+(\S+)", s)
        if s.startswith("*"):
            table, index, policies, used = s[1:], {}, [], False
            out.append(line)
            decl_at = len(out)
            continue
        if s.startswith(":"):
            if m_pol:
                policies.append(m_pol.group(1))
                line = f":{m_pol.group(1)} ACCEPT" + (m_pol.group(2) or "")
            out.append(line)
            decl_at = len(out)
            continue
        if s == "COMMIT":
            for chain in policies:
                index[chain] = index.get(chain, 0) + 1
                key = chain if table == "filter" else f"{table} {chain}"
                res.policy_rules[f"policy:{key}"] = f"{table} {chain} #{index[chain]}"
                res.policies.append(f"{table} {chain}")
                out.append(f"-A {chain} -j {XT_CHAIN}")
            if used or policies:
                out += mark_rules
                out.insert(decl_at, f":{XT_CHAIN} - [0:0]")
        elif m_rule:
            chain = m_rule.group(2)
            index[chain] = index.get(chain, 0) + 1
            t = _TARGET.search(line)
            if t:
                rid = f"{table} {chain} #{index[chain]}"
                res.rules.append(rid)
                if t.group(1) == "REJECT":
                    res.rejects.append(rid)
                line = line[:t.start()] + f" -j {XT_CHAIN}"
                used = True
        out.append(line)
    res.text = "\n".join(out) + "\n"
    return res


def uses_mark(text: str) -> bool:
    """Whether the rule set names fwlab's drop mark itself (then a copy could not tell them apart)."""
    return bool(re.search(rf"\b(0x0*{MARK:x}|{MARK})\b", text, re.IGNORECASE))


@dataclass
class MarkedCopy:
    """The marked copy of an imported rule set, loaded in place of the original."""

    original: ImportedFirewall
    mark_times: int = 1  #: 2: the calibration copy (the mark set twice)
    changed: dict = field(default_factory=dict)  #: what the last load rewrote (rules, rejects, policies, left)
    policy_rules: dict[str, str] = field(default_factory=dict)  #: "policy:<chain>" -> its final rule's id

    @property
    def mark(self) -> int:
        return MARK

    def load(self, ctx: DutContext) -> None:
        """Load the original, then rewrite it in the kernel (nft: replace rules by handle, so every
        rule id stays the original's) or load the rewritten iptables-save text."""
        if self.original.kind == "nft":
            self.original.load(ctx)
            rw = nft_commands(ctx.host.run(["nft", "-j", "list", "ruleset"], ns=ctx.ns).stdout,
                              mark_times=self.mark_times)
            if rw.commands:
                ctx.host.run(["nft", "-j", "-f", "-"], ns=ctx.ns, input=rw.document())
            self.policy_rules = policy_rule_ids(ctx.host.run(["nft", "-j", "list", "ruleset"], ns=ctx.ns).stdout)
            self.changed = {"rules": rw.rules, "rejects": rw.rejects, "policies": rw.policies,
                            "vmap_rules": rw.vmap_rules, "left": rw.left}
            return
        rw = iptables_text(self.original.text, mark_times=self.mark_times)
        replace(self.original, text=rw.text, source=f"{self.original.source} (marked copy)").load(ctx)
        self.policy_rules = dict(rw.policy_rules)
        self.changed = {"rules": rw.rules, "rejects": rw.rejects, "policies": rw.policies, "vmap_rules": [],
                        "left": []}

    def counter_id(self, rule_id: str) -> str:
        """The rule whose counter counts a class ending at ``rule_id`` on the copy (a policy: its final rule)."""
        return self.policy_rules.get(rule_id, rule_id)

    def flush(self, ctx: DutContext) -> None:
        self.original.flush(ctx)

    def counters(self, ctx: DutContext) -> dict[str, int]:
        return self.original.counters(ctx)


def policy_rule_ids(listing: str) -> dict[str, str]:
    """``policy:<chain key>`` -> the id of the copy's final marking rule in that chain."""
    out = {}
    for it in json.loads(listing).get("nftables", []):
        r = it.get("rule")
        if r and r.get("comment") == "fwlab marked copy: policy drop":
            out[f"policy:{r['family']} {r['table']} {r['chain']}"] = f"{r['family']} {r['table']} {r['chain']} #{r['handle']}"
    return out
