"""Reading an ``iptables-save`` / ``ip6tables-save`` file (and an ``ipset save`` file).

Owns: turning every chain a forwarded packet crosses -- raw, mangle and nat PREROUTING, mangle,
filter and security FORWARD, mangle and nat POSTROUTING, in the kernel's order -- and the user
chains they reach into :mod:`fwlab.rules.imported_model` (filter chains keep their bare names,
others are "<table> <chain>"). Understood: ``-s -d -p -i -o`` (with ``!``), ``--sport --dport``
(tcp/udp), ``-m multiport --sports/--dports/--ports``, ``-m conntrack --ctstate/--ctstatus``,
``-m state --state``, ``-m set --match-set NAME src|dst`` (hash:ip / hash:net sets from the
ipset file), ``-m mark --mark V[/M]``, ``-m addrtype --src-type/--dst-type``, ``--tcp-flags``,
``--syn``, ``--icmp-type``, ``-m comment``, ``-m nfacct`` (counts, always matches); targets
ACCEPT, DROP, REJECT, RETURN, DNAT, SNAT, MASQUERADE, REDIRECT, MARK (set/xset/or/and/xor), LOG,
NFLOG, TCPMSS, CONNMARK, CT/NOTRACK and other non-deciding targets (continue), a user chain
(``-j``) and ``-g``. Anything else (``-m limit``, ``-m statistic``, ``-m time``, ...) is a fork,
named.
Also checks the file's shape (tables, COMMIT) so a malformed file fails in one line before the
kernel is asked.
"""

from __future__ import annotations

import re
import shlex

from fwlab.errors import RulesetRefused
from fwlab.rules.imported_model import (L4_NUMBERS, TCP_FLAGS, Chain, ImportedRuleSet, Interval, Match, Rule,
                                        addr_interval, fact, path_order)

BUILTIN_FILTER = ("INPUT", "FORWARD", "OUTPUT")
_COUNTS = re.compile(r"^\[(\d+):(\d+)\]\s+")
#: targets that neither decide nor change a field the model reads (MARK is modelled)
_NONTERMINAL_TARGETS = ("LOG", "NFLOG", "ULOG", "CONNMARK", "TRACE", "AUDIT", "TCPMSS", "CT", "NOTRACK",
                        "CHECKSUM", "DSCP", "TOS", "TTL", "HL", "CLASSIFY", "SECMARK", "CONNSECMARK", "IDLETIMER",
                        "LED", "TEE")
#: built-in chains a forwarded packet crosses: (table, chain) -> (hook, priority, type)
BUILTIN_PATH = {("raw", "PREROUTING"): ("prerouting", -300, "filter"),
                ("mangle", "PREROUTING"): ("prerouting", -150, "route"),
                ("nat", "PREROUTING"): ("prerouting", -100, "nat"),
                ("mangle", "FORWARD"): ("forward", -150, "route"),
                ("filter", "FORWARD"): ("forward", 0, "filter"),
                ("security", "FORWARD"): ("forward", 50, "filter"),
                ("mangle", "POSTROUTING"): ("postrouting", -150, "route"),
                ("nat", "POSTROUTING"): ("postrouting", 100, "nat")}


def parse_ipset(text: str) -> dict[str, tuple[int | None, list[Interval] | None, str]]:
    """``ipset save`` -> name -> (ip version, address intervals or None if not an address set, type)."""
    sets: dict[str, tuple[int | None, list[Interval] | None, str]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        tok = line.split()
        if not tok or tok[0].startswith("#"):
            continue
        if tok[0] == "create" and len(tok) >= 3:
            ver = 6 if "inet6" in tok else 4
            addr = tok[2] in ("hash:ip", "hash:net")
            sets[tok[1]] = (ver, [] if addr else None, tok[2])
        elif tok[0] == "add" and len(tok) >= 3:
            if tok[1] not in sets:
                raise RulesetRefused(f"ipset file line {n}: 'add' to set '{tok[1]}' before its 'create'",
                                   fix="give the output of 'ipset save'")
            ver, ivs, typ = sets[tok[1]]
            if ivs is not None:
                try:
                    ivs.append(addr_interval(tok[2])[1])
                except ValueError as exc:
                    raise RulesetRefused(f"ipset file line {n}: '{tok[2]}' is not an address",
                                       fix="give the output of 'ipset save'") from exc
        else:
            raise RulesetRefused(f"ipset file line {n}: '{tok[0]}' is neither create nor add",
                               fix="give the output of 'ipset save'")
    return sets


def check_shape(text: str) -> None:
    """A one-line error for a file that is not iptables-save output."""
    table = None
    seen = False
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("*"):
            if table:
                raise RulesetRefused(f"iptables-save file line {n}: table {s} starts before *{table} has COMMIT",
                                   fix="end every table with COMMIT")
            table, seen = s[1:], True
        elif s == "COMMIT":
            if not table:
                raise RulesetRefused(f"iptables-save file line {n}: COMMIT outside a table",
                                   fix="start each table with *filter (or *nat, ...)")
            table = None
        elif not table:
            raise RulesetRefused(f"iptables-save file line {n}: '{s[:40]}' outside a table",
                               fix="give the output of iptables-save")
    if table:
        raise RulesetRefused(f"iptables-save file: table *{table} has no COMMIT", fix="end it with COMMIT")
    if not seen:
        raise RulesetRefused("iptables-save file has no table (*filter ...)", fix="give the output of iptables-save")


def _port_intervals(text: str) -> list[Interval]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition(":")
        lo_i = int(lo) if lo else 0
        hi_i = int(hi) if hi else (65535 if _ else lo_i)
        out.append((lo_i, hi_i))
    return out


def _flags(text: str) -> int:
    if text.upper() == "ALL":
        return 0x3F
    if text.upper() == "NONE":
        return 0
    return sum(TCP_FLAGS.get(f.lower(), 0) for f in text.split(","))


_ICMP_NAMES = {"echo-reply": 0, "destination-unreachable": 3, "echo-request": 8, "time-exceeded": 11,
               "parameter-problem": 12, "packet-too-big": 2}
_ICMPV6_NAMES = {"destination-unreachable": 1, "packet-too-big": 2, "time-exceeded": 3, "parameter-problem": 4,
                 "echo-request": 128, "echo-reply": 129, "neighbour-solicitation": 135,
                 "neighbor-solicitation": 135, "neighbour-advertisement": 136, "neighbor-advertisement": 136,
                 "router-solicitation": 133, "router-advertisement": 134}


def _target_args(tokens: list[str], j: int) -> tuple[dict[str, str], int]:
    """A target's ``--option value`` pairs (flags without a value map to "") from ``j``."""
    opts: dict[str, str] = {}
    while j < len(tokens) and tokens[j].startswith("--"):
        if j + 1 < len(tokens) and not tokens[j + 1].startswith("--"):
            opts[tokens[j]] = tokens[j + 1]
            j += 2
        else:
            opts[tokens[j]] = ""
            j += 1
    return opts, j


def _nat_target(target: str, opts: dict[str, str]) -> tuple | None:
    if target == "MASQUERADE":
        return ("masquerade",)
    if target == "REDIRECT":
        port = opts.get("--to-ports", "").split("-")[0]
        return ("redirect", int(port) if port.isdigit() else None)
    to = opts.get("--to-destination" if target == "DNAT" else "--to-source")
    if not to:
        return (target.lower(), None, None)
    if to.startswith("["):  # [2001:db8::1]:80
        addr, _, port = to[1:].partition("]")
        port = port.lstrip(":")
    elif to.count(":") == 1:
        addr, port = to.split(":")
    elif ":" in to:
        addr, port = to, ""
    else:
        addr, port = to, ""
    addr = addr.split("-")[0] or None
    port = port.split("-")[0]
    return (target.lower(), addr, int(port) if port.isdigit() else None)


def _mark_target(opts: dict[str, str]) -> tuple | None:
    for opt, op in (("--set-mark", "set"), ("--set-xmark", "xset"), ("--or-mark", "or"), ("--and-mark", "and"),
                    ("--xor-mark", "xor")):
        if opt in opts:
            val, _, mask = opts[opt].partition("/")
            v = int(val, 0)
            if op in ("set", "xset") and mask:
                m = int(mask, 0)
                if op == "xset" and m == 0xFFFFFFFF:
                    return ("mark", "set", v)
                if op == "xset" and v & m == v and (m & ~v) == 0:
                    return ("mark", "or", v)  # --set-xmark 0x4000/0x4000: set those bits
                return None
            return ("mark", "set" if op == "xset" else op, v)
    return None


def _parse_rule_args(tokens: list[str], ipver: int, ipsets: dict, rule: Rule,
                     chains: frozenset[str] | set[str] = frozenset(), table: str = "filter") -> None:
    proto: str | None = None
    i = 0
    neg = False
    key = (lambda c: c) if table == "filter" else (lambda c: f"{table} {c}")
    while i < len(tokens):
        t = tokens[i]
        if t == "!":
            neg = True
            i += 1
            continue
        arg = tokens[i + 1] if i + 1 < len(tokens) else ""
        text = f"{'! ' if neg else ''}{t} {arg}".strip()
        step = 2
        if t in ("-s", "--source", "-d", "--destination"):
            ivs = [addr_interval(a)[1] for a in arg.split(",")]
            fld = "saddr" if t in ("-s", "--source") else "daddr"
            rule.matches.append(Match(fld, text, tuple(ivs), negate=neg, ipver=ipver))
        elif t in ("-p", "--protocol"):
            proto = arg.lower()
            if proto == "ipv6-icmp":
                proto = "icmpv6"
            num = L4_NUMBERS.get(proto, int(proto) if proto.isdigit() else None)
            if proto != "all":
                if num is None:
                    rule.matches.append(fact(text))
                else:
                    rule.matches.append(Match("l4proto", text, ((num, num),), negate=neg))
        elif t in ("-i", "--in-interface", "-o", "--out-interface"):
            fld = "iif" if t in ("-i", "--in-interface") else "oif"
            rule.matches.append(Match(fld, text, names=(arg,), negate=neg))
        elif t == "-m" or t == "--match":
            pass
        elif t in ("--dport", "--destination-port", "--sport", "--source-port", "--dports",
                   "--sports", "--destination-ports", "--source-ports", "--ports"):
            fld = "sport" if "s" == t.lstrip("-")[0] and not t.startswith("--destination") else "dport"
            req = (("l4proto", proto),) if proto in ("tcp", "udp") else (("l4proto", "tcp,udp"),)
            if t == "--ports":
                fld = "anyport"
            rule.matches.append(Match(fld, text, tuple(_port_intervals(arg)), negate=neg, requires=req))
        elif t in ("--ctstate", "--state"):
            rule.matches.append(Match("ct_state", text, names=tuple(s.lower() for s in arg.split(",")),
                                      negate=neg))
        elif t == "--ctstatus":
            names = tuple({"DNAT": "dnat", "SNAT": "snat", "ASSURED": "assured", "CONFIRMED": "confirmed",
                           "SEEN_REPLY": "seen-reply", "EXPECTED": "expected"}.get(x, x.lower()) for x in arg.split(","))
            rule.matches.append(Match("ct_status", text, names=names, negate=neg))
        elif t in ("--src-type", "--dst-type"):
            rule.matches.append(Match("fib_type", text, names=tuple(x.lower() for x in arg.split(",")), negate=neg,
                                      key="saddr" if t == "--src-type" else "daddr"))
        elif t == "--syn":
            rule.matches.append(Match("tcp_flags", text.split()[0] if not neg else "! --syn",
                                      ((TCP_FLAGS["syn"], TCP_FLAGS["syn"]),), negate=neg,
                                      requires=(("l4proto", "tcp"),), mask=0x17))
            step = 1
        elif t == "--tcp-flags":
            comp = tokens[i + 2] if i + 2 < len(tokens) else ""
            step = 3
            rule.matches.append(Match("tcp_flags", f"{text} {comp}", ((_flags(comp), _flags(comp)),), negate=neg,
                                      requires=(("l4proto", "tcp"),), mask=_flags(arg)))
        elif t in ("--icmp-type", "--icmpv6-type"):
            names = _ICMP_NAMES if t == "--icmp-type" else _ICMPV6_NAMES
            base = arg.split("/")[0]
            num = names.get(base, int(base) if base.isdigit() else None)
            req = (("l4proto", "icmp" if t == "--icmp-type" else "icmpv6"),)
            if num is None:
                rule.matches.append(fact(text, requires=req))
            else:
                rule.matches.append(Match("icmp_type", text, ((num, num),), negate=neg, requires=req))
        elif t == "--match-set":
            dirs = tokens[i + 2] if i + 2 < len(tokens) else ""
            step = 3
            text = f"{text} {dirs}"
            info = ipsets.get(arg)
            if info is None or info[1] is None or "," in dirs:
                why = "no such set in the ipset file" if info is None else f"set type {info[2]}"
                rule.matches.append(fact(f"{text} ({why})"))
            else:
                fld = "saddr" if dirs == "src" else "daddr"
                rule.matches.append(Match(fld, text, tuple(info[1]), negate=neg, ipver=info[0]))
        elif t == "--mark":
            val, _, mask = arg.partition("/")
            v = int(val, 0)
            rule.matches.append(Match("mark", text, ((v, v),), negate=neg, mask=int(mask, 0) if mask else None))
        elif t in ("--comment", "--nfacct-name"):
            pass
        elif t in ("-j", "--jump", "-g", "--goto"):
            target = arg
            opts, j = _target_args(tokens, i + 2)
            step = j - i
            if target in chains and target not in ("ACCEPT", "DROP", "REJECT", "RETURN"):
                # a declared chain, even when its name is upper case (DOCKER, KUBE-SERVICES)
                rule.verdict = "goto" if t in ("-g", "--goto") else "jump"
                rule.target = key(target)
            elif target in ("ACCEPT", "DROP", "REJECT"):
                rule.verdict = target.lower()
            elif target == "RETURN":
                rule.verdict = "return"
            elif target in ("DNAT", "SNAT", "MASQUERADE", "REDIRECT"):
                rule.nat = _nat_target(target, opts)
                rule.verdict = "accept"
            elif target == "MARK":
                act = _mark_target(opts)
                if act is None:
                    rule.unsupported_stmt = f"target MARK {' '.join(f'{k} {v}' for k, v in opts.items())}"
                else:
                    rule.actions.append(act)
            elif target in _NONTERMINAL_TARGETS:
                pass  # continues; changes nothing the model reads
            elif target.isupper():
                rule.unsupported_stmt = f"target {target}"
            else:
                rule.verdict = "goto" if t in ("-g", "--goto") else "jump"
                rule.target = key(target)
        elif t.startswith("-"):
            # an option the model does not know (-m limit, -m statistic, -m time ...): a fork
            j = i + 1
            while j < len(tokens) and not tokens[j].startswith("-") and tokens[j] != "!":
                j += 1
            rule.matches.append(fact(" ".join(tokens[i:j]), negate=neg))
            step = j - i
        else:
            raise RulesetRefused(f"iptables rule: unexpected word '{t}'", fix="give the output of iptables-save")
        neg = False
        i += step


def parse_iptables_save(text: str, ipver: int = 4, ipset_text: str | None = None) -> ImportedRuleSet:
    """Every chain of the forward path (raw, mangle, nat, filter, security) and the chains they reach."""
    check_shape(text)
    ipsets = parse_ipset(ipset_text) if ipset_text else {}
    fam = "ip" if ipver == 4 else "ip6"
    chains: dict[str, Chain] = {}
    declared: dict[str, set[str]] = {}
    notes: list[str] = []
    table = "filter"
    index: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("*"):
            table = s[1:]
            declared.setdefault(table, set())
            continue
        if s == "COMMIT":
            continue
        key = (lambda c, tb=table: c if tb == "filter" else f"{tb} {c}")
        if s.startswith(":"):
            name, policy, *_ = s[1:].split() + ["-"]
            ch = Chain(key(name), policy=policy.lower() if policy != "-" else None, family=fam)
            path = BUILTIN_PATH.get((table, name))
            if path:
                ch.hook, ch.priority, ch.ctype = path
            chains[key(name)] = ch
            declared[table].add(name)
            continue
        s = _COUNTS.sub("", s)
        try:
            tok = shlex.split(s)
        except ValueError as exc:
            raise RulesetRefused(f"iptables-save file line {n}: {exc}", fix="check the quoting") from exc
        if len(tok) < 2 or tok[0] not in ("-A", "--append"):
            raise RulesetRefused(f"iptables-save file line {n}: '{s[:40]}' is not '-A CHAIN ...'",
                               fix="give the output of iptables-save")
        cname = key(tok[1])
        if cname not in chains:
            raise RulesetRefused(f"iptables-save file line {n}: chain {tok[1]} is not declared in *{table}",
                               fix=f"add ':{tok[1]} - [0:0]' before the rules")
        index[cname] = index.get(cname, 0) + 1
        rule = Rule(rule_id=f"{table} {tok[1]} #{index[cname]}", chain=cname, text=s, has_counter=True,
                    counter_key=(table, tok[1], index[cname]))
        try:
            _parse_rule_args(tok[2:], ipver, ipsets, rule, declared[table], table)
        except ValueError as exc:
            raise RulesetRefused(f"iptables-save file line {n}: {exc}", fix="check the rule's addresses and ports") from exc
        chains[cname].rules.append(rule)
    if "FORWARD" not in chains:
        notes.append("the filter table has no FORWARD chain: the filter table accepts every forwarded packet")
    base = path_order([c for c in chains.values() if c.hook])
    return ImportedRuleSet(kind="iptables", chains=chains, base=base, notes=notes)
