"""Interface names of an imported rule set and the bed's two sides: the map, its check, a proposal.

Owns: the user's map (``--interfaces br-lan=client,pppoe-wan=server,wan6=server``, or a suite's
table ``interfaces = { br-lan = "client", ... }``) as an :class:`InterfaceMap` with any number of
names per side (the first named on a side is that side's *primary* name: the bed's own link; every
further name is a link of its own between the DUT and that side's bed host, so traffic can enter
and leave through it); refusing a bad map before anything is built (one line with the fix); the
names a rule set uses (``iifname``/``oifname``/``iif``/``oif``, ``-i``/``-o``, flowtable and
netdev devices, wildcards such as ``eth*`` / ``veth+``); a proposed map from those names; and the
one line saying which used names are unmapped and what that leaves uncovered. An unmapped name a
rule set needs to *load* (a flowtable's or netdev chain's device, an ``iif`` by index) becomes a
veth pair inside the DUT namespace that carries no traffic. Pure Python.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from fwlab.errors import SuiteError

ROLES = ("client", "server")
MAX_IFNAME = 15
#: names the kernel or the bed reserves: never a rule set's interface in the bed
RESERVED = {"lo": "the loopback interface cannot be a side of the bed",
            "all": "'all' is a sysctl directory, not an interface name",
            "default": "'default' is a sysctl directory, not an interface name"}
FIX = "e.g. --interfaces br-lan=client,pppoe-wan=server (NAME=client|server, several names per side allowed)"
#: names that usually face the inside (a LAN, containers, VMs): proposed as the client side
_INSIDE = ("br-lan", "lan", "docker", "br-", "cni", "veth", "virbr", "lxdbr", "vnet", "tap", "tun", "wg",
           "tailscale", "cali", "flannel", "kube", "podman", "eth0")


@dataclass
class InterfaceMap:
    """Names per side of the bed, the primary (the bed's own link) first."""

    client: list[str] = field(default_factory=list)
    server: list[str] = field(default_factory=list)

    def side(self, name: str) -> str | None:
        return "client" if name in self.client else "server" if name in self.server else None

    def names(self) -> list[str]:
        return self.client + self.server

    def primary(self, role: str) -> str:
        return (self.client if role == "client" else self.server)[0]

    def extras(self, role: str) -> list[str]:
        return (self.client if role == "client" else self.server)[1:]

    def as_dict(self) -> dict[str, str]:
        """{name: role}, the form the record and the suite table keep."""
        return {n: "client" for n in self.client} | {n: "server" for n in self.server}

    def pairs(self) -> list[tuple[str, str]]:
        """(client name, server name) for every pair of names a packet can cross the DUT between."""
        return [(c, s) for c in self.client for s in self.server]

    def text(self) -> str:
        return ",".join(f"{n}={r}" for n, r in self.as_dict().items())


def check_name(name: str) -> str | None:
    """Why ``name`` cannot be an interface of the bed (None: it can)."""
    if not name:
        return "an empty name"
    if name in RESERVED:
        return RESERVED[name]
    if len(name) > MAX_IFNAME:
        return f"'{name}' is longer than {MAX_IFNAME} characters (the kernel's limit)"
    if any(ch in name for ch in "/: \t*+?[]\"'") or name in (".", ".."):
        return (f"'{name}' is not a concrete interface name (no '/', ':', spaces or wildcards; map a real "
                f"name that the pattern matches, e.g. 'eth*' -> eth9)")
    if name.startswith("fwl-"):
        return f"'{name}' starts with fwl-, the prefix of fwlab's own interfaces"
    return None


def parse_map(text: str | dict) -> InterfaceMap:
    """'br-lan=client,pppoe-wan=server,wan6=server' (or a suite's table) -> the map, checked: every
    name concrete and allowed, every role client or server, at least one name per side."""
    if isinstance(text, str):
        pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
        if not pairs or any(len(p) != 2 for p in pairs):
            raise SuiteError(f"interfaces '{text}' is not NAME=ROLE,NAME=ROLE", fix=FIX)
        items = [(k.strip(), v.strip().strip('"')) for k, v in pairs]
    elif isinstance(text, dict):
        items = [(str(k).strip(), v.strip() if isinstance(v, str) else v) for k, v in text.items()]
    else:
        raise SuiteError(f"interfaces {text!r} is not a NAME = ROLE table", fix=FIX)
    out = InterfaceMap()
    seen: set[str] = set()
    for name, role in items:
        why = check_name(name)
        if why:
            raise SuiteError(f"interfaces: {why}", fix=FIX)
        if role not in ROLES:
            raise SuiteError(f"interfaces: '{name}={role}': the role must be client or server", fix=FIX)
        if name in seen:
            raise SuiteError(f"interfaces: '{name}' is named twice", fix="name each interface once")
        seen.add(name)
        (out.client if role == "client" else out.server).append(name)
    for role in ROLES:
        if not (out.client if role == "client" else out.server):
            raise SuiteError(f"interfaces {out.text() or text!r} name no interface for the {role} side", fix=FIX)
    return out


# -- the names a rule set uses ------------------------------------------------------------------
_NFT_NAME = r'"?([A-Za-z0-9_.\-*+@]+)"?'
_NFT_IF = re.compile(r"\b(?:iifname|oifname|iif|oif)\s+(?:!=\s*)?(\{[^}]*\}|" + _NFT_NAME + r")")
_NFT_DEVS = re.compile(r"\bdevices\s*=\s*\{([^}]*)\}")
_NFT_DEV = re.compile(r"\bdevice\s+" + _NFT_NAME)
_IPT_IF = re.compile(r"(?:^|\s)(?:!\s+)?(?:-i|-o|--in-interface|--out-interface)\s+(?:!\s+)?(\S+)")
_NFT_IDX = re.compile(r"\b(?:iif|oif)\s+(?:!=\s*)?(\{[^}]*\}|" + _NFT_NAME + r")")
#: a named set or map keyed by interface name (Docker's per-bridge ``filter-forward-in-jumps`` vmaps)
_NFT_IFSET = re.compile(r"\btype\s+ifname\b[^;]*;.*?\belements\s*=\s*\{([^}]*)\}")
_NFT_KEY = re.compile(r'"([^"]+)"\s*(?::|,|$)')
_NOT_NAMES = {"vmap", "map", "set", "type"}  #: words that follow iifname/oifname but are no name


@dataclass
class UsedNames:
    """Interface names (and patterns) a rule set's text mentions."""

    matched: list[str] = field(default_factory=list)  #: names / patterns packets are matched on
    devices: list[str] = field(default_factory=list)  #: devices the rule set binds to (flowtables, netdev
    #: chains, ``iif``/``oif`` by index): they must exist for the rule set to load

    def all(self) -> list[str]:
        return list(dict.fromkeys(self.matched + self.devices))


def _split(group: str) -> list[str]:
    if group.startswith("{"):
        return [x.strip().strip('"') for x in group.strip("{}").split(",") if x.strip()]
    return [group.strip('"')]


def used_names(text: str, kind: str) -> UsedNames:
    """The interface names ``text`` (nft syntax or iptables-save) mentions, in order of appearance."""
    out = UsedNames()
    if kind == "iptables":
        for line in text.splitlines():
            out.matched += _IPT_IF.findall(line)
        out.matched = list(dict.fromkeys(n for n in out.matched if n))
        return out
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        for m in _NFT_IF.finditer(line):
            out.matched += [n for n in _split(m.group(1)) if n not in _NOT_NAMES and not n.startswith("@")]
        for m in _NFT_IFSET.finditer(line):
            out.matched += _NFT_KEY.findall(m.group(1).strip() + ",")
        for m in _NFT_IDX.finditer(line):
            out.devices += [n for n in _split(m.group(1)) if not is_pattern(n)]
        for m in _NFT_DEVS.finditer(line):
            out.devices += _split("{" + m.group(1) + "}")
        for m in _NFT_DEV.finditer(line):
            out.devices.append(m.group(1))
    out.matched = list(dict.fromkeys(n for n in out.matched if n and not n.startswith("$")))
    out.devices = list(dict.fromkeys(n for n in out.devices if n and not n.startswith("$")))
    return out


def is_pattern(name: str) -> bool:
    return name.endswith(("*", "+"))


def covers(pattern: str, name: str) -> bool:
    """Whether interface ``name`` matches the rule set's ``pattern`` (nft ``eth*``, iptables ``eth+``)."""
    if is_pattern(pattern):
        return name.startswith(pattern[:-1])
    return fnmatch.fnmatchcase(name, pattern) if "*" in pattern else name == pattern


def concrete(pattern: str) -> str:
    """A concrete name a wildcard covers (``veth*`` -> ``veth0``), within the kernel's length limit."""
    if not is_pattern(pattern):
        return pattern
    return (pattern[:-1] + "0")[-MAX_IFNAME:] if len(pattern[:-1]) < MAX_IFNAME else pattern[:-1][:MAX_IFNAME]


def _inside(name: str) -> bool:
    return name.startswith(_INSIDE)


def propose(text: str, kind: str) -> InterfaceMap | None:
    """A map from the names the rule set uses: names a rule pairs as in- and out-interface on
    opposite sides, inside-looking names (br-lan, docker0, veth*, tailscale0, ...) on the client
    side, the rest on the server side; wildcards become a name they cover. None without names."""
    used = used_names(text, kind)
    names = [concrete(n) for n in used.matched] + [n for n in used.devices if not is_pattern(n)]
    names = [n for n in dict.fromkeys(names) if check_name(n) is None]
    if not names:
        return None
    side = {n: ("client" if _inside(n) else "server") for n in names}
    # names a single rule uses as in- and out-interface must face opposite sides
    rules = text.splitlines()
    for line in rules:
        ins = [concrete(x) for m in re.finditer(r"\biifname\s+(?:!=\s*)?(\{[^}]*\}|" + _NFT_NAME + ")", line)
               for x in _split(m.group(1))]
        outs = [concrete(x) for m in re.finditer(r"\boifname\s+(?:!=\s*)?(\{[^}]*\}|" + _NFT_NAME + ")", line)
                for x in _split(m.group(1))]
        if kind == "iptables":
            ins = [concrete(x) for x in re.findall(r"(?:^|\s)-i\s+(\S+)", line)]
            outs = [concrete(x) for x in re.findall(r"(?:^|\s)-o\s+(\S+)", line)]
        for a in ins:
            for b in outs:
                if a in side and b in side and a != b and side[a] == side[b]:
                    side[b] = "server" if side[a] == "client" else "client"
    m = InterfaceMap([n for n in names if side[n] == "client"], [n for n in names if side[n] == "server"])
    if not m.client:
        m.client.append("eth0" if "eth0" not in m.server else "lan0")
    if not m.server:
        m.server.append("eth1" if "eth1" not in m.client else "wan0")
    return m


def unmapped(text: str, kind: str, m: InterfaceMap) -> tuple[list[str], list[str]]:
    """(used names or patterns no mapped name covers, devices to create so the rule set loads)."""
    used = used_names(text, kind)
    mapped = m.names()
    loose = [n for n in used.all() if not any(covers(n, x) for x in mapped)]
    make = [n for n in used.devices if not is_pattern(n) and n not in mapped and check_name(n) is None]
    return loose, make


def unmapped_line(text: str, kind: str, m: InterfaceMap) -> str | None:
    """One line naming the used but unmapped names and what that leaves uncovered (None: all mapped)."""
    loose, make = unmapped(text, kind, m)
    if not loose:
        return None
    made = f"; {', '.join(make)} created without traffic so the rule set loads" if make else ""
    return (f"interfaces used by the rule set but not mapped: {', '.join(loose)} — rules that match only "
            f"packets on them get no class (listed as not covered){made}; map them with --interfaces "
            f"{m.text()},{concrete(loose[0])}=client|server")
