"""The DUT firewall for a user's own rule set, loaded verbatim (``fwlab run --ruleset FILE``).

Owns: telling nft syntax from iptables-save syntax, loading the file unchanged in the DUT
namespace with one ``nft -f`` or one ``iptables-restore``/``ip6tables-restore`` (after one
``ipset restore`` of an optional ipset file), turning a refusal into one line with the kernel's
own message (and leaving nothing loaded), reading the rule set back from the kernel as the model
(:mod:`fwlab.rules.nft_json`, :mod:`fwlab.rules.iptables_save`), reading per-rule packet
counters, and flushing. Not in the backend registry: it loads a file, not a generated
:class:`~fwlab.rules.model.RuleSet`.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass

from fwlab.dut.base import DutContext, sha256
from fwlab.errors import BackendError, RulesetRefused
from fwlab.rules.imported_model import ImportedRuleSet
from fwlab.rules.iptables_save import check_shape, parse_iptables_save
from fwlab.rules.nft_json import parse_nft_json
from fwlab.testbed.host import CommandFailed

_IPT_LINE = re.compile(r"^\s*(\*\w+|:\S+\s|-A\s|COMMIT\b|\[\d+:\d+\]\s+-A\s)")
_COUNTED = re.compile(r"^\[(\d+):(\d+)\]\s+-A\s+(\S+)")


def detect_kind(text: str) -> str:
    """'iptables' for iptables-save output, 'nft' otherwise."""
    lines = [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    if lines and sum(bool(_IPT_LINE.match(l)) for l in lines) == len(lines):
        return "iptables"
    return "nft"


def detect_ip_version(text: str) -> int:
    """6 for ip6tables-save output (its header, or an IPv6 address in -s/-d), else 4."""
    if "ip6tables-save" in text:
        return 6
    return 6 if re.search(r"\s-[sd]\s+[0-9a-fA-F]*:[0-9a-fA-F:]*", text) else 4


#: (pattern on the refused line, what the kernel lacks): the features a refusal most often means
_FEATURES = (
    (re.compile(r'\bct\s+helper\s+\S+\s*\{[^}]*type\s+"?([\w-]+)"?'),
     lambda m: f'no conntrack helper "{m.group(1)}" in this kernel (module nf_conntrack_{m.group(1)})'),
    (re.compile(r'\bct\s+helper\s+set\s+"?([\w-]+)"?'),
     lambda m: f'no ct helper object "{m.group(1)}" in this table (declare it with ct helper {m.group(1)} '
               f'{{ type "..." protocol ... }}), or its helper module is missing'),
    (re.compile(r"\bflowtable\b|\bflow\s+(add|offload)\b"),
     lambda m: "no flowtable support in this kernel (NF_FLOW_TABLE / nft_flow_offload)"),
    (re.compile(r"\bqueue\b(\s+(num|to|flags|bypass|fanout)|\s*$)"),
     lambda m: "no nft queue support in this kernel (NFT_QUEUE / nfnetlink_queue)"),
    (re.compile(r"-j\s+NFQUEUE\b"), lambda m: "no NFQUEUE target in this kernel (nfnetlink_queue)"),
    (re.compile(r"-j\s+CT\b.*--helper\s+(\S+)"),
     lambda m: f"no conntrack helper {m.group(1)} in this kernel (module nf_conntrack_{m.group(1)})"),
    (re.compile(r"--match-set\s+(\S+)"), lambda m: f"ipset {m.group(1)} does not exist (give --ipset FILE)"),
    (re.compile(r"\bosf\b"), lambda m: "no nft osf (NFT_OSF) in this kernel"),
    (re.compile(r"\btproxy\b"), lambda m: "no tproxy (NFT_TPROXY) in this kernel"),
)
_NFT_AT = re.compile(r"^(?:/dev/stdin|-|[^:\s]*):(\d+):(\d+)(?:-\d+)?:\s*")
_IPT_AT = re.compile(r"^line (\d+):\s*|Error occurred at line:\s*(\d+)")


def missing_feature(line: str) -> str | None:
    """What a refused line most likely needs that the kernel lacks (None: nothing known)."""
    for pat, say in _FEATURES:
        m = pat.search(line)
        if m:
            return say(m)
    return None


def refusal_lines(stderr: str, text: str, source: str) -> list[str]:
    """The refusal as lines ``FILE:LINE: message: the line — what is missing``: nft's and
    iptables-restore's ``/dev/stdin:4:33-38: Error: ...`` / ``line 3: ...`` turned into the user's
    file and line, the line's text, and the kernel feature it needs where one is known."""
    src = text.splitlines()
    out: list[str] = []
    for raw in stderr.splitlines():
        if not raw.strip() or raw.startswith((" ", "\t")) or raw.startswith("Try ") or set(raw.strip()) <= {"^", "~"}:
            continue
        m, n = _NFT_AT.match(raw), None
        if m:
            n, msg = int(m.group(1)), raw[m.end():].replace("Error: ", "", 1)
        else:
            mi = _IPT_AT.search(raw)
            if mi:
                n = int(mi.group(1) or mi.group(2))
            msg = (raw[mi.end():] if mi and mi.start() == 0 else raw).strip()
            if re.fullmatch(r"\S*(iptables|ip6tables)\S* v[\d.]+.*:\s*", raw.strip()):
                continue  # the tool's version banner
        if n is None:
            out.append(msg.replace("/dev/stdin", source))
            continue
        line = src[n - 1].strip() if 0 < n <= len(src) else ""
        feat = missing_feature(line) if line else None
        out.append(f"{source}:{n}: {msg}" + (f": '{line[:120]}'" if line else "") + (f" — {feat}" if feat else ""))
    return list(dict.fromkeys(out))


def kernel_message(exc: CommandFailed, text: str = "", source: str = "the rule set") -> str:
    """The refusal in one line: the tool's own message lines (not nft's echo of the rule, not
    usage hints) as :func:`refusal_lines`, the first two, with how many more errors there were."""
    lines = refusal_lines((exc.stderr or exc.stdout or "").strip(), text, source)
    more = len(lines) - 2
    msg = "; ".join(lines[:2])[:600] or exc.message
    return msg + (f" (+{more} more error{'s' if more > 1 else ''})" if more > 0 else "")


_NFACCT = re.compile(r"--nfacct-name\s+(\S+)")
#: nfnetlink_acct: create one named accounting object in the namespace the script runs in
_NFACCT_ADD = """
import os, socket, struct, sys
for name in sys.argv[1:]:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    nm = name.encode() + b"\\0"
    attr = struct.pack("HH", 4 + len(nm), 1) + nm  # NFACCT_NAME
    attr += b"\\0" * (-len(attr) % 4)
    body = struct.pack("BBH", 0, 0, 0) + attr  # nfgenmsg: AF_UNSPEC, NFNETLINK_V0
    # NFNL_SUBSYS_ACCT << 8 | NFNL_MSG_ACCT_NEW; NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE
    s.send(struct.pack("IHHII", 16 + len(body), 7 << 8, 0x1 | 0x4 | 0x200 | 0x400, 1, 0) + body)
    data = s.recv(4096)
    err = -struct.unpack("i", data[16:20])[0] if struct.unpack("H", data[4:6])[0] == 2 else 0
    if err and err != 17:  # EEXIST: already there
        sys.exit(f"nfacct {name}: {os.strerror(err)}")
"""


def nfacct_names(text: str) -> list[str]:
    """The nfacct objects an iptables-save file's ``-m nfacct --nfacct-name X`` matches need."""
    return list(dict.fromkeys(n.strip('"') for n in _NFACCT.findall(text)))


def counted_rules(save_c: str) -> dict[str, int]:
    """``iptables-save -c`` output (every table) -> packets per rule id ``"<table> <chain> #<n>"``, the
    ids :func:`fwlab.rules.iptables_save.parse_iptables_save` gives (n counts per table and chain)."""
    out: dict[str, int] = {}
    index: dict[tuple[str, str], int] = {}
    table = "filter"
    for line in save_c.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
            continue
        m = _COUNTED.match(line)
        if m:
            key = (table, m.group(3))
            index[key] = index.get(key, 0) + 1
            out[f"{table} {m.group(3)} #{index[key]}"] = int(m.group(1))
    return out


@dataclass
class ImportedFirewall:
    """One rule-set file and how to load it."""

    text: str
    kind: str  #: nft | iptables
    ip_version: int = 4  #: iptables only: which restore program
    ipset_text: str | None = None
    source: str = ""  #: the file's name, for messages

    @classmethod
    def from_text(cls, text: str, source: str, ipset_text: str | None = None) -> "ImportedFirewall":
        kind = detect_kind(text)
        if kind == "iptables":
            check_shape(text)  # a malformed file fails here, in one line, before the kernel
        elif ipset_text:
            raise RulesetRefused(f"{source}: an ipset file goes with an iptables-save file, not with nft syntax",
                               fix="drop --ipset (nft sets live in the nft file)")
        return cls(text=text, kind=kind, ip_version=detect_ip_version(text) if kind == "iptables" else 4,
                   ipset_text=ipset_text, source=source)

    @property
    def family(self) -> str:
        if self.kind == "nft":
            return "nft (verbatim)"
        prog = "iptables" if self.ip_version == 4 else "ip6tables"
        return f"{prog}-restore (verbatim)" + (" + ipset" if self.ipset_text else "")

    @property
    def restore_program(self) -> str:
        """iptables only: the program that loads the file (iptables-restore or ip6tables-restore)."""
        return "iptables-restore" if self.ip_version == 4 else "ip6tables-restore"

    @property
    def save_program(self) -> str:
        """iptables only: the program that lists the kernel's rules (iptables-save or ip6tables-save)."""
        return "iptables-save" if self.ip_version == 4 else "ip6tables-save"

    def load(self, ctx: DutContext) -> float:
        """Load the file unchanged; returns the load time [s]. On refusal: flush, then one line."""
        t0 = time.perf_counter()
        step = "nft -f"
        try:
            if self.kind == "nft":
                ctx.host.run(["nft", "-f", "-"], ns=ctx.ns, input=self.text)
            else:
                if nfacct_names(self.text):
                    step = "nfacct objects"
                    ctx.host.run([sys.executable, "-c", _NFACCT_ADD, *nfacct_names(self.text)], ns=ctx.ns)
                if self.ipset_text:
                    step = "ipset restore"
                    ctx.host.run(["ipset", "restore"], ns=ctx.ns, input=self.ipset_text)
                step = self.restore_program
                ctx.host.run([self.restore_program], ns=ctx.ns, input=self.text)
        except CommandFailed as exc:
            self.flush(ctx)
            msg = kernel_message(exc, self.text if step != "ipset restore" else self.ipset_text or "",
                                 self.source if step != "ipset restore" else "the ipset file")
            raise RulesetRefused(f"{self.source}: {step} refused the rule set, nothing is loaded: {msg}",
                               fix="correct the rule set (it is loaded unchanged, as 'nft -f' or "
                                   "'iptables-restore' would)") from exc
        return time.perf_counter() - t0

    def listing(self, ctx: DutContext) -> str:
        if self.kind == "nft":
            return ctx.host.run(["nft", "-s", "list", "ruleset"], ns=ctx.ns).stdout
        text = ctx.host.run([self.save_program], ns=ctx.ns).stdout
        return "\n".join(l for l in text.splitlines() if not l.startswith("#"))

    def digest(self, ctx: DutContext) -> str:
        return sha256(f"{self.family}\n{self.listing(ctx)}")

    def readback(self, ctx: DutContext) -> ImportedRuleSet:
        """The rule set as the kernel holds it, as the model."""
        if self.kind == "nft":
            return parse_nft_json(ctx.host.run(["nft", "-j", "list", "ruleset"], ns=ctx.ns).stdout,
                                  ctx.host.run(["nft", "-a", "-s", "list", "ruleset"], ns=ctx.ns).stdout)
        sets = ctx.host.run(["ipset", "save"], ns=ctx.ns).stdout if self.ipset_text else None
        return parse_iptables_save(ctx.host.run([self.save_program], ns=ctx.ns).stdout, self.ip_version, sets)

    def counters(self, ctx: DutContext) -> dict[str, int]:
        """Packets per rule id, over every table and family the rule set has (rules with a counter:
        every iptables rule of every table, raw/mangle/nat/filter/security; nft rules with ``counter``,
        in every table of every family)."""
        out: dict[str, int] = {}
        if self.kind == "nft":
            doc = json.loads(ctx.host.run(["nft", "-j", "list", "ruleset"], ns=ctx.ns).stdout)
            for it in doc.get("nftables", []):
                r = it.get("rule")
                if not r:
                    continue
                pk = [int(e["counter"].get("packets", 0)) for e in r.get("expr", [])
                      if isinstance(e, dict) and "counter" in e]
                if pk:
                    out[f"{r['family']} {r['table']} {r['chain']} #{r['handle']}"] = sum(pk)
            return out
        return counted_rules(ctx.host.run([self.save_program, "-c"], ns=ctx.ns).stdout)

    def flush(self, ctx: DutContext) -> None:
        """Remove everything loaded (the DUT namespace is fwlab's: flush it whole)."""
        ctx.host.run(["nft", "flush", "ruleset"], ns=ctx.ns, check=False)
        if self.kind == "iptables":
            for prog in ("iptables-restore", "ip6tables-restore"):
                empty = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
                ctx.host.run([prog], ns=ctx.ns, input=empty, check=False)
            ctx.host.run(["nft", "flush", "ruleset"], ns=ctx.ns, check=False)
            ctx.host.run(["ipset", "destroy"], ns=ctx.ns, check=False)

    def version(self, ctx: DutContext) -> str:
        if self.kind == "nft":
            return ctx.host.run(["nft", "--version"]).stdout.strip()
        return ctx.host.run([self.restore_program, "--version"], check=False).stdout.strip() or \
            ctx.host.run(["iptables", "--version"]).stdout.strip()
