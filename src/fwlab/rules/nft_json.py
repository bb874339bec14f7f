"""Reading an nftables rule set from the kernel's JSON listing (``nft -j list ruleset``).

Owns: turning the JSON into :mod:`fwlab.rules.imported_model` (forward-hook base chains in
priority order, every regular chain, named sets resolved to their elements). Whatever the model
cannot evaluate (maps, marks set, limits, fields other than addresses, ports, protocol,
interface names, ct state, mark) becomes an ``unsupported`` match or statement naming it, so the
derived class is listed as not covered instead of guessed. A verdict map (``vmap``) keyed by one
field the model reads becomes one model rule per element (keys never overlap, so this is exact);
other verdict maps stay unsupported. A match on a concatenated key (``ip saddr . tcp dport { A .
P, ... }``, anonymous or named set) whose parts the model reads becomes one model rule per
element, each with the parts' matches (every element shares the rule's verdict, so this is exact).
"""

from __future__ import annotations

import json
import re

from fwlab.errors import BackendError
from fwlab.rules.imported_model import (L4_NUMBERS, Chain, ImportedRuleSet, Interval, Match, Rule,
                                        addr_interval)

#: statements that neither match nor decide
_PASSIVE = {"counter", "log", "comment"}
_VERDICTS = {"accept", "drop", "reject", "jump", "goto", "return", "continue"}


def addr_values(right, sets: dict) -> tuple[int | None, list[Interval]] | None:
    """Addresses of a match's right side -> (ip version, intervals); None when not addresses."""
    items = _items(right, sets)
    if items is None:
        return None
    ver, out = None, []
    for it in items:
        if isinstance(it, dict) and "prefix" in it:
            v, iv = addr_interval(f"{it['prefix']['addr']}/{it['prefix']['len']}")
        elif isinstance(it, dict) and "range" in it:
            v, iv = addr_interval(f"{it['range'][0]}-{it['range'][1]}")
        elif isinstance(it, str):
            try:
                v, iv = addr_interval(it)
            except ValueError:
                return None
        else:
            return None
        ver = v
        out.append(iv)
    return ver, out


def _items(right, sets: dict) -> list | None:
    if isinstance(right, str) and right.startswith("@"):
        s = sets.get(right[1:])
        if s is None or s.get("concat"):
            return None
        return s["elem"]
    if isinstance(right, dict) and "set" in right:
        return [e["elem"]["val"] if isinstance(e, dict) and "elem" in e else e for e in right["set"]]
    return [right]


def int_values(right, sets: dict, names: dict | None = None) -> list[Interval] | None:
    items = _items(right, sets)
    if items is None:
        return None
    out = []
    for it in items:
        if isinstance(it, dict) and "elem" in it:
            it = it["elem"]["val"]
        if isinstance(it, dict) and "range" in it:
            lo, hi = it["range"]
            if names:
                lo, hi = names.get(lo, lo), names.get(hi, hi)
            if not isinstance(lo, int) or not isinstance(hi, int):
                return None
            out.append((lo, hi))
        elif isinstance(it, int):
            out.append((it, it))
        elif isinstance(it, str) and names and it in names:
            out.append((names[it], names[it]))
        elif isinstance(it, str) and it.isdigit():
            out.append((int(it), int(it)))
        else:
            return None
    return out


def _names(right, sets: dict) -> list[str] | None:
    if isinstance(right, list):
        return [str(x) for x in right]
    items = _items(right, sets)
    if items is None or not all(isinstance(x, str) for x in items):
        return None
    return list(items)


def _unsupported(text: str) -> Match:
    return Match(field=None, text=text)


def _desc(left) -> str:
    if "payload" in left:
        return f"{left['payload'].get('protocol', '?')} {left['payload'].get('field', '?')}"
    if "meta" in left:
        return f"meta {left['meta'].get('key')}"
    if "ct" in left:
        return f"ct {left['ct'].get('key')}"
    return next(iter(left)) if isinstance(left, dict) else str(left)


def parse_match(m: dict, sets: dict, table_family: str) -> Match:
    op, left, right = m.get("op", "=="), m.get("left"), m.get("right")
    text = f"{_desc(left) if isinstance(left, dict) else left} {op} {json.dumps(right)}"
    if op not in ("==", "!=", "in"):
        return _unsupported(f"{text} (operator {op})")
    neg = op == "!="
    if not isinstance(left, dict):
        return _unsupported(text)
    if "payload" in left:
        proto, fld = left["payload"].get("protocol"), left["payload"].get("field")
        if proto in ("ip", "ip6") and fld in ("saddr", "daddr"):
            vals = addr_values(right, sets)
            if vals is None:
                return _unsupported(text)
            ver = 4 if proto == "ip" else 6
            return Match(fld, text, tuple(vals[1]), negate=neg, ipver=ver)
        if (proto, fld) in (("ip", "protocol"), ("ip6", "nexthdr")):
            vals = int_values(right, sets, L4_NUMBERS)
            if vals is None:
                return _unsupported(text)
            return Match("l4proto", text, tuple(vals), negate=neg, ipver=4 if proto == "ip" else 6)
        if proto in ("tcp", "udp", "th") and fld in ("sport", "dport"):
            vals = int_values(right, sets)
            if vals is None:
                return _unsupported(text)
            req = "tcp,udp" if proto == "th" else proto
            return Match(fld, text, tuple(vals), negate=neg, requires=(("l4proto", req),))
        return _unsupported(text)
    if "meta" in left:
        key = left["meta"].get("key")
        if key in ("iifname", "oifname", "iif", "oif"):
            names = _names(right, sets)
            if names is None:
                return _unsupported(text)
            return Match(key[:3], text, names=tuple(names), negate=neg)
        if key == "l4proto":
            vals = int_values(right, sets, L4_NUMBERS)
            return _unsupported(text) if vals is None else Match("l4proto", text, tuple(vals), negate=neg)
        if key == "nfproto":
            names = _names(right, sets)
            if names is None:
                return _unsupported(text)
            fam = tuple("4" if n == "ipv4" else "6" for n in names)
            return Match("family", text, names=fam, negate=neg)
        if key == "mark":
            vals = int_values(right, sets)
            return _unsupported(text) if vals is None else Match("mark", text, tuple(vals), negate=neg)
        return _unsupported(text)
    if "ct" in left and left["ct"].get("key") == "state" and "dir" not in left["ct"]:
        names = _names(right, sets)
        if names is None:
            return _unsupported(text)
        return Match("ct_state", text, names=tuple(names), negate=neg)
    return _unsupported(text)


def _render_rule(expr: list) -> str:
    """A short human text of a rule from its JSON (nft's own text is not in the JSON)."""
    parts = []
    for e in expr:
        k = next(iter(e))
        if k == "match":
            parts.append(parse_match(e["match"], {}, "inet").text)
        elif k == "counter":
            parts.append("counter")
        elif k in ("jump", "goto"):
            parts.append(f"{k} {e[k]['target']}")
        else:
            parts.append(k)
    return " ".join(parts)


def _vmap_elements(vm: dict, sets: dict) -> list | None:
    """A verdict map's elements as [key, verdict] pairs (anonymous or named map), None when unreadable."""
    data = vm.get("data")
    if isinstance(data, dict) and isinstance(data.get("set"), list):
        elems = data["set"]
    elif isinstance(data, str) and data.startswith("@") and data[1:] in sets:
        elems = sets[data[1:]]["elem"]
    else:
        return None
    out = []
    for el in elems:
        if isinstance(el, dict) and "elem" in el:
            el = el["elem"]
        if not (isinstance(el, list) and len(el) == 2 and isinstance(el[1], dict) and len(el[1]) == 1):
            return None
        out.append(el)
    return out


def _expand_vmap(rule: Rule, vmap: tuple, sets: dict, r: dict) -> list[Rule]:
    """A rule ending in a verdict map, as one model rule per element (ids "<rule id>/<n>"), in the
    map's order: the kernel's map keys never overlap, so the first matching element is the only one."""
    key, elems = vmap
    out = []
    for n, (k, verdict) in enumerate(elems, 1):
        name = next(iter(verdict))
        m = parse_match({"op": "==", "left": key, "right": k}, sets, r["family"])
        x = Rule(rule_id=f"{rule.rule_id}/{n}", chain=rule.chain, text=f"{rule.text} [element {n}: {m.text}]",
                 matches=rule.matches + [m], has_counter=False)
        if name in ("accept", "drop", "return"):
            x.verdict = name
        elif name in ("jump", "goto"):
            x.verdict, x.target = name, f"{r['family']} {r['table']} {verdict[name]['target']}"
        elif name != "continue":
            x.unsupported_stmt = f"verdict map element verdict '{name}'"
        out.append(x)
    return out


def _concat_elements(m: dict, sets: dict) -> list[list] | None:
    """The elements (each a list of part values) of a positive match on a concatenated key."""
    if m.get("op", "==") not in ("==", "in"):
        return None
    right = m.get("right")
    if isinstance(right, str) and right.startswith("@"):
        s = sets.get(right[1:])
        if s is None or not isinstance(s.get("type"), list):
            return None
        items = s["elem"]
    elif isinstance(right, dict) and "set" in right:
        items = right["set"]
    else:
        items = [right]
    out = []
    n = len(m["left"]["concat"])
    for it in items:
        if isinstance(it, dict) and "elem" in it:
            it = it["elem"]["val"]
        if not (isinstance(it, dict) and isinstance(it.get("concat"), list) and len(it["concat"]) == n):
            return None
        out.append(it["concat"])
    return out


def _expand_concat(rule: Rule, concat: tuple, sets: dict, r: dict) -> list[Rule]:
    """A rule matching a concatenated key, as one model rule per element (ids "<rule id>/<n>"),
    each with the parts' matches; one unsupported rule when a part cannot be read."""
    lefts, elems = concat
    out = []
    for n, values in enumerate(elems, 1):
        parts = [parse_match({"op": "==", "left": lf, "right": v}, sets, r["family"]) for lf, v in zip(lefts, values)]
        x = Rule(rule_id=f"{rule.rule_id}/{n}", chain=rule.chain,
                 text=f"{rule.text} [element {n}: {' . '.join(p.text for p in parts)}]",
                 matches=rule.matches + parts, has_counter=False, verdict=rule.verdict, target=rule.target,
                 unsupported_stmt=rule.unsupported_stmt)
        out.append(x)
    return out


_HANDLE = re.compile(r"^(.*?)\s+# handle (\d+)$")


def rule_texts(listing: str) -> dict[str, str]:
    """``nft -a -s list ruleset`` -> rule id ("<family> <table> <chain> #<handle>") -> nft's own text."""
    out: dict[str, str] = {}
    stack: list[tuple[str, str]] = []  # (kind, name) of the open blocks
    for line in listing.splitlines():
        s = line.strip()
        body = _HANDLE.match(s).group(1) if _HANDLE.match(s) else s
        if body.endswith("{"):
            tok = body.split()
            stack.append((tok[0], " ".join(tok[1:-1])))
            continue
        if s.startswith("}"):
            if stack:
                stack.pop()
            continue
        m = _HANDLE.match(s)
        kinds = [k for k, _ in stack]
        if m and kinds[-2:] == ["table", "chain"]:
            out[f"{stack[-2][1]} {stack[-1][1]} #{m.group(2)}"] = m.group(1)
    return out


def parse_nft_json(text: str, listing: str | None = None) -> ImportedRuleSet:
    try:
        doc = json.loads(text)
        items = doc["nftables"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BackendError(f"nft -j list ruleset printed no rule set ({exc})",
                           fix="check the nftables version (JSON needs nft >= 0.9)") from exc
    texts = rule_texts(listing) if listing else {}
    sets: dict[tuple, dict] = {}
    chains: dict[str, Chain] = {}
    base: list[tuple[int, int, str]] = []
    notes: list[str] = []
    order = 0
    for it in items:
        if "set" in it or "map" in it:
            s = it.get("set") or it.get("map")
            key = (s["family"], s["table"])
            concat = isinstance(s.get("type"), list)
            sets.setdefault(key, {})[s["name"]] = {"elem": s.get("elem", []), "concat": concat or "map" in it,
                                                   "type": s.get("type")}
        elif "chain" in it:
            c = it["chain"]
            key = f"{c['family']} {c['table']} {c['name']}"
            chains[key] = Chain(key, policy=c.get("policy"), priority=int(c.get("prio", 0) or 0),
                                family=c["family"])
            if c.get("hook") == "forward" and c["family"] in ("ip", "ip6", "inet"):
                if c.get("type", "filter") != "filter":
                    notes.append(f"forward chain {key} is of type {c.get('type')}: walked as a filter chain")
                base.append((int(c.get("prio", 0) or 0), order, key))
                order += 1
            elif c.get("hook") == "forward":
                notes.append(f"forward chain {key} of family {c['family']} is not modelled "
                             f"(only ip, ip6 and inet tables are)")
            elif c.get("hook") in ("prerouting", "postrouting") and c.get("type") == "nat":
                notes.append(f"nat chain {key} is not modelled: probes are derived from the forward "
                             f"chains' matches as if no address were translated")
    for it in items:
        if "rule" not in it:
            continue
        r = it["rule"]
        ckey = f"{r['family']} {r['table']} {r['chain']}"
        tsets = sets.get((r["family"], r["table"]), {})
        rule = Rule(rule_id=f"{ckey} #{r['handle']}", chain=ckey, text=r.get("comment") or "",
                    counter_key=(r["family"], r["table"], r["chain"], r["handle"]))
        vmap = concat = None
        for e in r.get("expr", []):
            k = next(iter(e)) if isinstance(e, dict) and e else None
            if k == "match" and isinstance(e["match"].get("left"), dict) and "concat" in e["match"]["left"]:
                elems = _concat_elements(e["match"], tsets)
                if elems is None or concat is not None:
                    rule.matches.append(_unsupported(f"concatenation {json.dumps(e['match'])[:80]}"))
                else:
                    concat = (e["match"]["left"]["concat"], elems)
            elif k == "match":
                rule.matches.append(parse_match(e["match"], tsets, r["family"]))
            elif k == "counter":
                rule.has_counter = True
            elif k in _PASSIVE:
                pass
            elif k in _VERDICTS:
                if k == "continue":
                    continue
                rule.verdict = k
                if k in ("jump", "goto"):
                    rule.target = f"{r['family']} {r['table']} {e[k]['target']}"
            elif k == "vmap":
                vm = _vmap_elements(e["vmap"], tsets)
                if vm and parse_match({"op": "==", "left": e["vmap"].get("key"), "right": vm[0][0]}, tsets,
                                      r["family"]).field is None:
                    vm = None  # a key the model cannot read (concatenation, numgen, ...): not expanded
                if vm is None:
                    rule.unsupported_stmt = "verdict map (vmap) the model cannot read"
                else:
                    vmap = (e["vmap"]["key"], vm)
            elif k == "verdict map":
                rule.unsupported_stmt = "verdict map (vmap)"
            elif k == "limit":
                rule.matches.append(_unsupported("limit (rate limit: a packet's fate depends on the rate)"))
            else:
                rule.unsupported_stmt = rule.unsupported_stmt or f"statement '{k}'"
        rule.text = texts.get(rule.rule_id) or _render_rule(r.get("expr", [])) + (
            f'  # {r["comment"]}' if r.get("comment") else "")
        if ckey in chains:
            if concat is not None and vmap is None:
                chains[ckey].rules += _expand_concat(rule, concat, tsets, r)
            elif concat is not None:
                rule.matches.append(_unsupported("concatenation beside a verdict map"))
                chains[ckey].rules.append(rule)
            elif vmap is not None and not rule.unsupported_stmt and rule.verdict is None:
                chains[ckey].rules += _expand_vmap(rule, vmap, tsets, r)
            else:
                chains[ckey].rules.append(rule)
    return ImportedRuleSet(kind="nft", chains=chains, base=[k for _, _, k in sorted(base)], notes=notes)
