"""Reading an ``iptables-save`` / ``ip6tables-save`` file (and an ``ipset save`` file).

Owns: turning the filter table's FORWARD chain and the user chains it reaches into
:mod:`fwlab.rules.imported_model`. Understood: ``-s -d -p -i -o`` (with ``!``), ``--sport
--dport`` (tcp/udp), ``-m multiport --sports/--dports/--ports``, ``-m conntrack --ctstate``,
``-m state --state``, ``-m set --match-set NAME src|dst`` (hash:ip / hash:net sets from the
ipset file), ``-m mark --mark``, ``-m comment``; targets ACCEPT, DROP, REJECT, RETURN, LOG
(continues), a user chain (``-j``) and ``-g``. Anything else is an unsupported match, named.
Also checks the file's shape (tables, COMMIT) so a malformed file fails in one line before the
kernel is asked.
"""

from __future__ import annotations

import re
import shlex

from fwlab.errors import BackendError
from fwlab.rules.imported_model import (L4_NUMBERS, Chain, ImportedRuleSet, Interval, Match, Rule,
                                        addr_interval)

BUILTIN_FILTER = ("INPUT", "FORWARD", "OUTPUT")
_COUNTS = re.compile(r"^\[(\d+):(\d+)\]\s+")
_NONTERMINAL_TARGETS = ("LOG", "NFLOG", "ULOG", "MARK", "CONNMARK", "TRACE", "AUDIT")


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
                raise BackendError(f"ipset file line {n}: 'add' to set '{tok[1]}' before its 'create'",
                                   fix="give the output of 'ipset save'")
            ver, ivs, typ = sets[tok[1]]
            if ivs is not None:
                try:
                    ivs.append(addr_interval(tok[2])[1])
                except ValueError as exc:
                    raise BackendError(f"ipset file line {n}: '{tok[2]}' is not an address",
                                       fix="give the output of 'ipset save'") from exc
        else:
            raise BackendError(f"ipset file line {n}: '{tok[0]}' is neither create nor add",
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
                raise BackendError(f"iptables-save file line {n}: table {s} starts before *{table} has COMMIT",
                                   fix="end every table with COMMIT")
            table, seen = s[1:], True
        elif s == "COMMIT":
            if not table:
                raise BackendError(f"iptables-save file line {n}: COMMIT outside a table",
                                   fix="start each table with *filter (or *nat, ...)")
            table = None
        elif not table:
            raise BackendError(f"iptables-save file line {n}: '{s[:40]}' outside a table",
                               fix="give the output of iptables-save")
    if table:
        raise BackendError(f"iptables-save file: table *{table} has no COMMIT", fix="end it with COMMIT")
    if not seen:
        raise BackendError("iptables-save file has no table (*filter ...)", fix="give the output of iptables-save")


def _port_intervals(text: str) -> list[Interval]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition(":")
        lo_i = int(lo) if lo else 0
        hi_i = int(hi) if hi else (65535 if _ else lo_i)
        out.append((lo_i, hi_i))
    return out


def _parse_rule_args(tokens: list[str], ipver: int, ipsets: dict, rule: Rule,
                     chains: frozenset[str] | set[str] = frozenset()) -> None:
    proto: str | None = None
    i = 0
    neg = False
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
            num = L4_NUMBERS.get(proto, int(proto) if proto.isdigit() else None)
            if proto != "all":
                if num is None:
                    rule.matches.append(Match(None, text))
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
            if t == "--ports":
                rule.matches.append(Match(None, f"{text} (either port)"))
            else:
                req = (("l4proto", proto),) if proto in ("tcp", "udp") else (("l4proto", "tcp,udp"),)
                rule.matches.append(Match(fld, text, tuple(_port_intervals(arg)), negate=neg, requires=req))
        elif t in ("--ctstate", "--state"):
            rule.matches.append(Match("ct_state", text, names=tuple(s.lower() for s in arg.split(",")),
                                      negate=neg))
        elif t == "--match-set":
            dirs = tokens[i + 2] if i + 2 < len(tokens) else ""
            step = 3
            text = f"{text} {dirs}"
            info = ipsets.get(arg)
            if info is None or info[1] is None or "," in dirs:
                why = "no such set in the ipset file" if info is None else f"set type {info[2]}"
                rule.matches.append(Match(None, f"{text} ({why})"))
            else:
                fld = "saddr" if dirs == "src" else "daddr"
                rule.matches.append(Match(fld, text, tuple(info[1]), negate=neg, ipver=info[0]))
        elif t == "--mark":
            val, _, mask = arg.partition("/")
            if mask:
                rule.matches.append(Match(None, text))
            else:
                v = int(val, 0)
                rule.matches.append(Match("mark", text, ((v, v),), negate=neg))
        elif t == "--comment":
            rule.text += ""
        elif t in ("-j", "--jump", "-g", "--goto"):
            target = arg
            j = i + 2
            while j < len(tokens) and tokens[j].startswith("--"):  # target options
                j += 2
            step = j - i
            if target in chains and target not in ("ACCEPT", "DROP", "REJECT", "RETURN"):
                # a declared chain, even when its name is upper case (DOCKER, KUBE-SERVICES)
                rule.verdict = "goto" if t in ("-g", "--goto") else "jump"
                rule.target = target
            elif target in ("ACCEPT", "DROP", "REJECT"):
                rule.verdict = target.lower()
            elif target == "RETURN":
                rule.verdict = "return"
            elif target in _NONTERMINAL_TARGETS:
                if target != "LOG" and target != "NFLOG":
                    rule.unsupported_stmt = f"target {target} (changes the packet)"
            elif target.isupper() and target not in ():
                rule.unsupported_stmt = f"target {target}"
            else:
                rule.verdict = "goto" if t in ("-g", "--goto") else "jump"
                rule.target = target
        elif t.startswith("-"):
            # an option the model does not know: keep its arguments with it
            j = i + 1
            while j < len(tokens) and not tokens[j].startswith("-") and tokens[j] != "!":
                j += 1
            rule.matches.append(Match(None, " ".join(tokens[i:j])))
            step = j - i
        else:
            raise BackendError(f"iptables rule: unexpected word '{t}'", fix="give the output of iptables-save")
        neg = False
        i += step


def parse_iptables_save(text: str, ipver: int = 4, ipset_text: str | None = None) -> ImportedRuleSet:
    """The FORWARD chain of the filter table (and the chains it reaches) as the model."""
    check_shape(text)
    ipsets = parse_ipset(ipset_text) if ipset_text else {}
    fam = "ip" if ipver == 4 else "ip6"
    chains: dict[str, Chain] = {}
    notes: list[str] = []
    table = None
    index: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("*"):
            table = s[1:]
            continue
        if s == "COMMIT":
            continue
        if table != "filter":
            if table in ("mangle", "raw", "nat") and " FORWARD " in f" {s} " and s.startswith("-A FORWARD"):
                notes.append(f"table {table} has FORWARD rules, not modelled")
            continue
        if s.startswith(":"):
            name, policy, *_ = s[1:].split() + ["-"]
            chains[name] = Chain(name, policy=policy.lower() if policy != "-" else None, family=fam)
            continue
        s = _COUNTS.sub("", s)
        try:
            tok = shlex.split(s)
        except ValueError as exc:
            raise BackendError(f"iptables-save file line {n}: {exc}", fix="check the quoting") from exc
        if len(tok) < 2 or tok[0] not in ("-A", "--append"):
            raise BackendError(f"iptables-save file line {n}: '{s[:40]}' is not '-A CHAIN ...'",
                               fix="give the output of iptables-save")
        cname = tok[1]
        if cname not in chains:
            raise BackendError(f"iptables-save file line {n}: chain {cname} is not declared",
                               fix=f"add ':{cname} - [0:0]' before the rules")
        index[cname] = index.get(cname, 0) + 1
        rule = Rule(rule_id=f"filter {cname} #{index[cname]}", chain=cname, text=s, has_counter=True,
                    counter_key=("filter", cname, index[cname]))
        try:
            _parse_rule_args(tok[2:], ipver, ipsets, rule, chains.keys())
        except ValueError as exc:
            raise BackendError(f"iptables-save file line {n}: {exc}", fix="check the rule's addresses and ports") from exc
        chains[cname].rules.append(rule)
    base = ["FORWARD"] if "FORWARD" in chains else []
    if not base:
        notes.append("the filter table has no FORWARD chain: every forwarded packet is accepted")
    return ImportedRuleSet(kind="iptables", chains=chains, base=base, notes=notes)
