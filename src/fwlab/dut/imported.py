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
import time
from dataclasses import dataclass

from fwlab.dut.base import DutContext, sha256
from fwlab.errors import BackendError
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


def kernel_message(exc: CommandFailed) -> str:
    """The refusal in one line: the tool's own message lines (not nft's echo of the rule, not
    usage hints), the first two, with how many more errors there were."""
    text = (exc.stderr or exc.stdout or "").strip()
    lines = [l.strip() for l in text.splitlines()
             if l.strip() and not l.startswith((" ", "\t")) and not l.startswith("Try ")]
    more = sum("Error" in l for l in lines[2:])
    msg = "; ".join(lines[:2])[:400] or exc.message
    return msg + (f" (+{more} more error{'s' if more > 1 else ''})" if more else "")


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
            raise BackendError(f"{source}: an ipset file goes with an iptables-save file, not with nft syntax",
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
                if self.ipset_text:
                    step = "ipset restore"
                    ctx.host.run(["ipset", "restore"], ns=ctx.ns, input=self.ipset_text)
                step = self.restore_program
                ctx.host.run([self.restore_program], ns=ctx.ns, input=self.text)
        except CommandFailed as exc:
            self.flush(ctx)
            raise BackendError(f"{self.source}: {step} refused the rule set, nothing is loaded: {kernel_message(exc)}",
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
        """Packets per rule id (rules with a counter: every iptables rule, nft rules with ``counter``)."""
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
        index: dict[str, int] = {}
        for line in ctx.host.run([self.save_program, "-c", "-t", "filter"], ns=ctx.ns).stdout.splitlines():
            m = _COUNTED.match(line)
            if m:
                index[m.group(3)] = index.get(m.group(3), 0) + 1
                out[f"filter {m.group(3)} #{index[m.group(3)]}"] = int(m.group(1))
        return out

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
