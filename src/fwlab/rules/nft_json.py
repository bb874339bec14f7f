"""Reading an nftables rule set from the kernel's JSON listing (``nft -j list ruleset``).

Owns: turning the JSON into :mod:`fwlab.rules.imported_model`: every base chain a forwarded
packet crosses (netdev/inet ingress, prerouting, forward, postrouting of the ip, ip6, inet and
netdev families, filter, nat and route types) in the kernel's order, every regular chain, named
sets resolved to their elements (interval and concatenated sets too). Understood: addresses,
ports (``th``, ``tcp``, ``udp``), protocol, interface names, ``ct state``, ``ct status``, ``meta
mark`` (masked too) and ``mark set`` (set/or/and/xor), ``meta nfproto`` / ``meta protocol`` /
``ip version``, ``fib saddr|daddr type``, ``icmp type``, ``icmpv6 type``, ``tcp flags``; the
statements ``dnat``, ``snat``, ``masquerade``, ``redirect``; verdict maps keyed by one field,
a concatenation (``ip daddr . meta l4proto . th dport vmap @service-ips``) or ``numgen`` (one
model rule per element: keys never overlap, so this is exact; numgen's elements are a fork the
derivation explores). Statements that neither decide nor change what later rules see (counter,
log, limit without a verdict, MSS clamping and other ``mangle`` of headers the model does not
read, ``ct mark set``, set updates, ``notrack``, ``flow add``) are passed over. A match the
model cannot compute (``limit``, ``quota``, ``meta time``, ``socket``, ...) becomes a *fact* (a
fork), named, never a wall for the rules after it.
"""

from __future__ import annotations

import json
import re

from fwlab.errors import BackendError
from fwlab.rules.imported_model import (L4_NUMBERS, TCP_FLAGS, Chain, ImportedRuleSet, Interval, Match, Rule,
                                        addr_interval, fact, path_order)

#: statements that neither match nor decide nor change a field the model reads
_PASSIVE = {"counter", "log", "comment", "notrack", "flow", "set", "ct helper", "ct timeout", "ct expectation",
            "synproxy_off", "quota_off", "dup", "fwd_off", "secmark", "meter"}
_VERDICTS = {"accept", "drop", "reject", "jump", "goto", "return", "continue"}
_NAT = ("dnat", "snat", "masquerade", "redirect")
_HOOKS = ("ingress", "prerouting", "forward", "postrouting")
ICMP_TYPES = {"echo-reply": 0, "destination-unreachable": 3, "source-quench": 4, "redirect": 5, "echo-request": 8,
              "router-advertisement": 9, "router-solicitation": 10, "time-exceeded": 11, "parameter-problem": 12,
              "timestamp-request": 13, "timestamp-reply": 14, "info-request": 15, "info-reply": 16,
              "address-mask-request": 17, "address-mask-reply": 18}
ICMPV6_TYPES = {"destination-unreachable": 1, "packet-too-big": 2, "time-exceeded": 3, "parameter-problem": 4,
                "echo-request": 128, "echo-reply": 129, "mld-listener-query": 130, "mld-listener-report": 131,
                "mld-listener-done": 132, "mld-listener-reduction": 132, "nd-router-solicit": 133,
                "nd-router-advert": 134, "nd-neighbor-solicit": 135, "nd-neighbor-advert": 136, "nd-redirect": 137,
                "router-renumbering": 138, "ind-neighbor-solicit": 141, "ind-neighbor-advert": 142,
                "mld2-listener-report": 143}


def addr_values(right, sets: dict) -> tuple[int | None, list[Interval]] | None:
    """Addresses of a match's right side -> (ip version, intervals); None when not addresses."""
    items = _items(right, sets)
    if items is None:
        return None
    ver, out = None, []
    for it in items:
        if isinstance(it, dict) and "elem" in it:
            it = it["elem"]["val"]
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
    if isinstance(right, list):
        return right
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
        elif isinstance(it, bool):
            return None
        elif isinstance(it, int):
            out.append((it, it))
        elif isinstance(it, str) and names and it in names:
            out.append((names[it], names[it]))
        elif isinstance(it, str) and it.isdigit():
            out.append((int(it), int(it)))
        elif isinstance(it, str) and it.startswith("0x"):
            out.append((int(it, 16), int(it, 16)))
        else:
            return None
    return out


def _names(right, sets: dict) -> list[str] | None:
    items = _items(right, sets)
    if items is None:
        return None
    items = [x["elem"]["val"] if isinstance(x, dict) and "elem" in x else x for x in items]
    if not all(isinstance(x, str) for x in items):
        return None
    return list(items)


def _unsupported(text: str, requires: tuple = ()) -> Match:
    """A match the model cannot compute: a fork (holds / does not hold) named by its text."""
    return fact(text, requires=requires)


def _desc(left) -> str:
    if not isinstance(left, dict):
        return str(left)
    if "payload" in left:
        return f"{left['payload'].get('protocol', '?')} {left['payload'].get('field', '?')}"
    if "meta" in left:
        return f"meta {left['meta'].get('key')}"
    if "ct" in left:
        return f"ct {left['ct'].get('key')}"
    if "fib" in left:
        return f"fib {' . '.join(left['fib'].get('flags', []))} {left['fib'].get('result')}"
    if "&" in left:
        return f"{_desc(left['&'][0])} & {json.dumps(left['&'][1])}"
    if "concat" in left:
        return " . ".join(_desc(x) for x in left["concat"])
    return next(iter(left))


def _flag_bits(v) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return TCP_FLAGS.get(v)
    if isinstance(v, list):
        bits = [_flag_bits(x) for x in v]
        return None if None in bits else sum(bits)
    if isinstance(v, dict) and "|" in v:
        return _flag_bits(v["|"])
    return None


def _known_int(text: str, vals: list[Interval] | None, value: int, neg: bool, mask: int | None = None) -> Match:
    """A match on a field whose value the probe is known to have (``value``): a fact with that known."""
    if vals is None:
        return _unsupported(text)
    v = value & mask if mask is not None else value
    return fact(text, known="true" if any(lo <= v <= hi for lo, hi in vals) else "false", negate=neg)


def parse_match(m: dict, sets: dict, table_family: str) -> Match:
    try:
        return _parse_match(m, sets, table_family)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return _unsupported(f"{_desc(m.get('left'))} {m.get('op', '==')} {json.dumps(m.get('right'))}")


def _parse_match(m: dict, sets: dict, table_family: str) -> Match:
    op, left, right = m.get("op", "=="), m.get("left"), m.get("right")
    text = f"{_desc(left)} {op} {json.dumps(right)}"
    if not isinstance(left, dict):
        return _unsupported(text)
    mask = None
    if "&" in left and isinstance(left["&"], list) and len(left["&"]) == 2:
        inner, mval = left["&"]
        if isinstance(inner, dict) and "payload" in inner and inner["payload"].get("field") == "flags":
            mask = _flag_bits(mval)
        elif isinstance(inner, dict) and "ct" in inner and inner["ct"].get("key") == "status":
            left = inner  # ct status & dnat == dnat: the bit test
        elif isinstance(mval, int):
            mask = mval
        if mask is None and left is not inner:
            return _unsupported(text)
        left = inner
    if op not in ("==", "!=", "in"):
        return _unsupported(f"{text} (operator {op})")
    neg = op == "!="
    if "payload" in left:
        proto, fld = left["payload"].get("protocol"), left["payload"].get("field")
        if mask is not None and not (proto == "tcp" and fld == "flags"):
            return _unsupported(text)
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
        if proto == "ip" and fld == "version":
            vals = int_values(right, sets)
            if vals is None:
                return _unsupported(text)
            return Match("family", text, names=tuple(str(lo) for lo, hi in vals if lo == hi), negate=neg)
        if proto in ("tcp", "udp", "th", "sctp", "udplite") and fld in ("sport", "dport"):
            vals = int_values(right, sets)
            if vals is None:
                return _unsupported(text)
            req = "tcp,udp" if proto == "th" else proto
            return Match(fld, text, tuple(vals), negate=neg, requires=(("l4proto", req),))
        if proto in ("icmp", "icmpv6") and fld == "type":
            vals = int_values(right, sets, ICMP_TYPES if proto == "icmp" else ICMPV6_TYPES)
            if vals is None:
                return _unsupported(text)
            return Match("icmp_type", text, tuple(vals), negate=neg, requires=(("l4proto", proto),))
        if proto == "tcp" and fld == "flags":
            req = (("l4proto", "tcp"),)
            if op == "in" and mask is None:  # tcp flags syn: any of the bits
                bits = _flag_bits(right)
                if bits is None:
                    return _unsupported(text, req)
                vals = [(v, v) for v in range(256) if v & bits]
            else:
                vals = int_values(right, sets, TCP_FLAGS) if not isinstance(right, list) else None
                if vals is None:
                    b = _flag_bits(right)
                    if b is None:
                        return _unsupported(text, req)
                    vals = [(b, b)]
            return Match("tcp_flags", text, tuple(vals), negate=neg, requires=req, mask=mask)
        if proto in ("ip", "ip6") and fld in ("dscp", "ecn", "frag-off"):
            return _known_int(text, int_values(right, sets, {"cs0": 0}), 0, neg)
        return _unsupported(text)
    if "meta" in left:
        key = left["meta"].get("key")
        if key in ("iifname", "oifname", "iif", "oif"):
            names = _names(right, sets)
            if names is None or mask is not None:
                return _unsupported(text)
            return Match(key[:3], text, names=tuple(names), negate=neg)
        if key == "l4proto":
            vals = int_values(right, sets, L4_NUMBERS)
            return _unsupported(text) if vals is None else Match("l4proto", text, tuple(vals), negate=neg)
        if key in ("nfproto", "protocol"):
            names = _names(right, sets)
            if names is None:
                return _unsupported(text)
            fam = tuple("4" if n in ("ipv4", "ip") else "6" for n in names if n in ("ipv4", "ip", "ipv6", "ip6"))
            return Match("family", text, names=fam, negate=neg)
        if key == "mark":
            vals = int_values(right, sets)
            return _unsupported(text) if vals is None else Match("mark", text, tuple(vals), negate=neg, mask=mask)
        if key == "pkttype":
            names = _names(right, sets)
            if names is None:
                return _unsupported(text)
            return fact(text, known="true" if any(n in ("host", "unicast") for n in names) else "false", negate=neg)
        return _unsupported(text)
    if "ct" in left and "dir" not in left["ct"]:
        key = left["ct"].get("key")
        if key == "state":
            names = _names(right, sets)
            if names is None:
                return _unsupported(text)
            return Match("ct_state", text, names=tuple(names), negate=neg)
        if key == "status":
            names = _names(right, sets)
            if names is None:
                return _unsupported(text)
            return Match("ct_status", text, names=tuple(names), negate=neg)
        if key == "mark":
            return _known_int(text, int_values(right, sets), 0, neg, mask)
        if key == "direction":
            names = _names(right, sets)
            return _unsupported(text) if names is None else Match("ct_direction", text, names=tuple(names),
                                                                  negate=neg)
        return _unsupported(text)
    if "fib" in left:
        fib = left["fib"]
        flags = [f for f in fib.get("flags", []) if f in ("saddr", "daddr")]
        if fib.get("result") == "type" and len(flags) == 1:
            names = _names(right, sets)
            if names is None:
                return _unsupported(text)
            return Match("fib_type", text, names=tuple(names), negate=neg, key=flags[0])
        if fib.get("result") in ("oif", "oifname") and right in (0, "0", False, "missing", ""):
            return fact(text, known="false", negate=neg)  # a probe's source is routable back (rp filter passes)
        if fib.get("result") in ("oif", "oifname") and right in (True, "exists"):
            return fact(text, known="true", negate=neg)
        return _unsupported(text)
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
        elif k in _NAT and isinstance(e[k], dict):
            parts.append(f"{k} to {e[k].get('addr', '')}{':' + str(e[k]['port']) if 'port' in e[k] else ''}".rstrip())
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
        k = el[0]
        if isinstance(k, dict) and "elem" in k:  # an element with a comment or timeout
            k = k["elem"]["val"]
        out.append([k, el[1]])
    return out


def _key_matches(key, value, sets: dict, family: str, rule_id: str) -> list[Match] | None:
    """The matches a packet must satisfy for map key ``key`` to equal element ``value``."""
    if isinstance(key, dict) and "concat" in key:
        parts = value.get("concat") if isinstance(value, dict) else None
        if not isinstance(parts, list) or len(parts) != len(key["concat"]):
            return None
        out = []
        for lf, v in zip(key["concat"], parts):
            sub = _key_matches(lf, v, sets, family, rule_id)
            if sub is None:
                return None
            out += sub
        return out
    if isinstance(key, dict) and ("numgen" in key or "jhash" in key or "symhash" in key):
        kind = next(iter(key))
        g = key[kind] or {}
        mod, off = int(g.get("mod", 1)), int(g.get("offset", 0))
        name = f"{kind} {g.get('mode', '')} mod {mod} ({rule_id})".replace("  ", " ")
        vals = int_values(value, {})
        if vals is None:
            return None
        hits = tuple(str(v) for lo, hi in vals for v in range(lo, hi + 1))
        return [fact(f"{name} == {','.join(hits)}", key=name, names=hits,
                     domain=tuple(str(v) for v in range(off, off + mod)))]
    m = parse_match({"op": "==", "left": key, "right": value}, sets, family)
    return [m]


def _expand_vmap(rule: Rule, vmap: tuple, sets: dict, r: dict) -> list[Rule] | None:
    """A rule ending in a verdict map, as one model rule per element (ids "<rule id>/<n>"), in the
    map's order: the kernel's map keys never overlap, so the first matching element is the only one."""
    key, elems = vmap
    out = []
    for n, (k, verdict) in enumerate(elems, 1):
        name = next(iter(verdict))
        ms = _key_matches(key, k, sets, r["family"], rule.rule_id)
        if ms is None:
            return None
        x = Rule(rule_id=f"{rule.rule_id}/{n}", chain=rule.chain,
                 text=f"{rule.text} [element {n}: {' . '.join(m.text for m in ms)} : {name}]",
                 matches=rule.matches + ms, has_counter=False, actions=list(rule.actions))
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
    each with the parts' matches."""
    lefts, elems = concat
    out = []
    for n, values in enumerate(elems, 1):
        parts = [parse_match({"op": "==", "left": lf, "right": v}, sets, r["family"]) for lf, v in zip(lefts, values)]
        x = Rule(rule_id=f"{rule.rule_id}/{n}", chain=rule.chain,
                 text=f"{rule.text} [element {n}: {' . '.join(p.text for p in parts)}]",
                 matches=rule.matches + parts, has_counter=False, verdict=rule.verdict, target=rule.target,
                 unsupported_stmt=rule.unsupported_stmt, actions=list(rule.actions), nat=rule.nat)
        out.append(x)
    return out


def _mark_action(value) -> tuple | None:
    """``mark set X`` / ``mark set mark or|and|xor X`` -> ("mark", op, X)."""
    if isinstance(value, int):
        return ("mark", "set", value)
    if isinstance(value, dict) and len(value) == 1:
        op = next(iter(value))
        args = value[op]
        names = {"|": "or", "&": "and", "^": "xor"}
        if op in names and isinstance(args, list) and len(args) == 2 and isinstance(args[0], dict) \
                and args[0].get("meta", {}).get("key") == "mark" and isinstance(args[1], int):
            return ("mark", names[op], args[1])
    return None


def _nat_action(kind: str, arg) -> tuple | None:
    arg = arg or {}
    if kind == "masquerade":
        return ("masquerade",)
    if kind == "redirect":
        return ("redirect", arg.get("port"))
    addr, port = arg.get("addr"), arg.get("port")
    if isinstance(addr, dict) and "range" in addr:
        addr = addr["range"][0]
    if isinstance(port, dict) and "range" in port:
        port = port["range"][0]
    if addr is not None and not isinstance(addr, str):
        return None  # a map lookup or an expression
    if port is not None and not isinstance(port, int):
        return None
    return (kind, addr, port)


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


def _prio(v) -> int:
    names = {"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return names.get(v, int(v) if v.lstrip("-").isdigit() else 0)
    return 0


def parse_nft_json(text: str, listing: str | None = None) -> ImportedRuleSet:
    """The model of ``nft -j list ruleset``'s output; BackendError (one line) for a document
    that is not one (not JSON, nested too deeply, or of a shape the model cannot walk)."""
    try:
        doc = json.loads(text)
        items = doc["nftables"]
        if not isinstance(items, list) or not all(isinstance(it, dict) for it in items):
            raise TypeError("'nftables' is not a list of objects")
    except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as exc:
        raise BackendError(f"nft -j list ruleset printed no rule set ({str(exc)[:120] or type(exc).__name__})",
                           fix="check the nftables version (JSON needs nft >= 0.9)") from None
    try:
        return _parse_items(items, listing)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        raise BackendError(f"nft -j list ruleset printed a rule set fwlab cannot read "
                           f"({type(exc).__name__}: {str(exc)[:120]})",
                           fix="report this with the output of 'nft -j list ruleset'") from None


def _parse_items(items: list, listing: str | None) -> ImportedRuleSet:
    texts = rule_texts(listing) if listing else {}
    sets: dict[tuple, dict] = {}
    chains: dict[str, Chain] = {}
    notes: list[str] = []
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
            hook = c.get("hook")
            ch = Chain(key, policy=c.get("policy"), priority=_prio(c.get("prio", 0)), family=c["family"])
            chains[key] = ch
            if hook is None:
                continue
            if c["family"] == "bridge":
                notes.append(f"bridge chain {key} (hook {hook}) is not crossed: the bed routes, it does not bridge")
            elif c["family"] == "arp":
                continue
            elif hook in _HOOKS:
                ch.hook, ch.ctype = hook, c.get("type", "filter")
                dev = c.get("dev") or c.get("devices") or ()
                ch.devices = tuple([dev] if isinstance(dev, str) else dev)
                if ch.ctype not in ("filter", "nat", "route"):
                    notes.append(f"chain {key} is of type {ch.ctype}: walked as a filter chain")
    for it in items:
        if "rule" not in it:
            continue
        r = it["rule"]
        ckey = f"{r['family']} {r['table']} {r['chain']}"
        if ckey not in chains:
            continue
        tsets = sets.get((r["family"], r["table"]), {})
        rule = Rule(rule_id=f"{ckey} #{r['handle']}", chain=ckey, text=r.get("comment") or "",
                    counter_key=(r["family"], r["table"], r["chain"], r["handle"]))
        rule.text = texts.get(rule.rule_id) or _render_rule(r.get("expr", [])) + (
            f'  # {r["comment"]}' if r.get("comment") else "")
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
            elif k in ("limit", "quota"):
                if any(next(iter(x), None) in _VERDICTS | {"vmap"} | set(_NAT) for x in r.get("expr", [])
                       if isinstance(x, dict)):
                    rule.matches.append(_unsupported(f"{k} {json.dumps(e[k])} (depends on the rate: a fork)"))
            elif k == "mangle":
                mk = e["mangle"].get("key", {})
                if isinstance(mk, dict) and mk.get("meta", {}).get("key") == "mark":
                    act = _mark_action(e["mangle"].get("value"))
                    if act is None:
                        rule.unsupported_stmt = "mark set to an expression the model cannot compute"
                    else:
                        rule.actions.append(act)
                # anything else (MSS clamping, ct mark, dscp, ttl): changes no field the model reads
            elif k in _NAT:
                act = _nat_action(k, e[k])
                if act is None:
                    rule.unsupported_stmt = f"{k} to an address the model cannot compute (a map or expression)"
                else:
                    rule.nat = act
                    rule.verdict = "accept"
            elif k in _VERDICTS:
                if k == "continue":
                    continue
                rule.verdict = k
                if k in ("jump", "goto"):
                    rule.target = f"{r['family']} {r['table']} {e[k]['target']}"
            elif k == "vmap":
                vm = _vmap_elements(e["vmap"], tsets)
                if vm is None:
                    rule.unsupported_stmt = "verdict map (vmap) the model cannot read"
                else:
                    vmap = (e["vmap"]["key"], vm)
            elif k == "xt":
                x = e["xt"]
                if x.get("type") == "match" and x.get("name") in ("comment", "nfacct"):
                    pass
                elif x.get("type") == "match":
                    rule.matches.append(_unsupported(f"iptables match -m {x.get('name')} (xt)"))
                else:
                    rule.unsupported_stmt = f"iptables target {x.get('name')} (xt)"
            else:
                rule.unsupported_stmt = rule.unsupported_stmt or f"statement '{k}'"
        if concat is not None and vmap is None:
            chains[ckey].rules += _expand_concat(rule, concat, tsets, r)
        elif concat is not None:
            rule.matches.append(_unsupported("concatenation beside a verdict map"))
            chains[ckey].rules.append(rule)
        elif vmap is not None and not rule.unsupported_stmt and rule.verdict is None:
            expanded = _expand_vmap(rule, vmap, tsets, r)
            if expanded is None:
                rule.unsupported_stmt = "verdict map (vmap) with a key the model cannot read"
                chains[ckey].rules.append(rule)
            else:
                chains[ckey].rules += expanded
        else:
            chains[ckey].rules.append(rule)
    base = path_order([c for c in chains.values() if c.hook])
    return ImportedRuleSet(kind="nft", chains=chains, base=base, notes=notes)
