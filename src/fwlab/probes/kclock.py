"""Running the in-kernel clock around a trial: ``with CostProbe(...) as p: <traffic>; p.result()``.

Owns: starting the loader (``fwlab-kclock``) inside the DUT namespace with the planned brackets,
waiting until its programs are linked, stopping it (SIGTERM; it also stops by itself after
``max_s``), and parsing what it printed into a :class:`ProbeResult`. Discovering the brackets
from the DUT's nft listing (:meth:`CostProbe.for_dut`). A probe that cannot run here (no clang or
libbpf, a kernel without BPF netfilter links, a refused load) gives a result whose ``missing``
names the reason; a bracket the kernel refused carries its own ``missing``; nothing is guessed.

Works on the host's own namespace or a DUT namespace; on a remote host (SSH) the object and the
loader are copied there (the loader needs libbpf 1.x on that host).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from fwlab.errors import FwlabError
from fwlab.probes import histogram as hist
from fwlab.probes.brackets import (XT_TABLES, BaseChain, Bracket, Plan, Unbracketed, nft_base_chains, plan,
                                   xtables_base_chains)
from fwlab.probes.build import bpf_object, loader
from fwlab.probes.reference import TABLE as REF_TABLE
from fwlab.probes.reference import ReferenceChain, XtablesReference
from fwlab.testbed.host import Host, LocalHost

READY_TIMEOUT_S = 10.0
#: the loader's own bound beyond the caller's hold, so it always ends by itself
GRACE_S = 30.0


@dataclass(frozen=True)
class BracketResult:
    """What one bracket saw while the probe was linked."""

    bracket: Bracket
    missing: str | None = None  #: why this bracket timed nothing (the kernel refused it), else None
    entered: int = 0  #: packets through the enter program
    timed: int = 0  #: packets through both programs: each one gap in the histogram
    unfinished: int = 0  #: packets that entered and never left (dropped or stolen inside)
    unmatched: int = 0  #: packets at the leave program without a matching enter (should be 0)
    sum_ns: int = 0  #: sum of the gaps [ns]
    max_ns: int = 0  #: largest gap [ns]
    counts: dict[int, int] = field(default_factory=dict)  #: histogram bucket -> gaps
    per_cpu: tuple[tuple[int, int], ...] = ()  #: (timed packets, their sum [ns]) on each CPU
    #: with a partner bracket: packets timed by both, and partner gap / own gap per packet
    #: (histogram buckets of the ratio x 2^ratio_shift)
    paired: int = 0
    ratio_sum: int = 0
    ratio_shift: int = 16
    ratio_counts: dict[int, int] = field(default_factory=dict)
    dropped: int = 0  #: packets the leave program dropped for carrying the bracket's drop mark

    def packet_ratio(self, q: float = 50) -> float | None:
        """The q-th percentile of the per-packet ratio partner gap / own gap."""
        v = hist.percentile(self.ratio_counts, q)
        return None if v is None else v / (1 << self.ratio_shift)

    @property
    def packet_ratio_mean(self) -> float | None:
        return self.ratio_sum / self.paired / (1 << self.ratio_shift) if self.paired else None

    @property
    def mean_ns(self) -> float | None:
        return self.sum_ns / self.timed if self.timed else None

    def percentile_ns(self, q: float) -> float | None:
        return hist.percentile(self.counts, q)

    @property
    def p50_ns(self) -> float | None:
        return self.percentile_ns(50)

    def to_dict(self) -> dict[str, Any]:
        b = self.bracket
        d: dict[str, Any] = {"id": b.id, "family": b.family, "hook": b.hook, "prio_enter": b.prio_enter,
                             "prio_leave": b.prio_leave, "role": b.role, "chains": list(b.chains)}
        if self.missing:
            return {**d, "missing": self.missing}
        return {**d, "entered": self.entered, "timed": self.timed, "unfinished": self.unfinished,
                "unmatched": self.unmatched, "sum_ns": self.sum_ns, "max_ns": self.max_ns,
                "per_cpu": [list(x) for x in self.per_cpu], "partner": self.bracket.partner,
                "paired": self.paired, "drop_mark": b.drop_mark, "dropped": self.dropped,
                "packet_ratio_p50": self.packet_ratio(50),
                "packet_ratio_mean": self.packet_ratio_mean,
                "mean_ns": self.mean_ns, "p50_ns": self.p50_ns, "p90_ns": self.percentile_ns(90),
                "p99_ns": self.percentile_ns(99), "hdr_b64": hist.to_hdr(self.counts), "hdr_unit": "ns"}


@dataclass(frozen=True)
class ProbeResult:
    """One hold of the probe: every bracket, the chains it could not time, and why not."""

    brackets: tuple[BracketResult, ...] = ()
    unbracketed: tuple[Unbracketed, ...] = ()
    missing: str | None = None  #: why the probe timed nothing at all, else None
    hold_s: float | None = None  #: how long the programs were linked [s]
    stopped_by: str | None = None  #: signal | time | stdin

    def of_role(self, role: str, family: str | None = None) -> list[BracketResult]:
        return [b for b in self.brackets if b.bracket.role == role and (family is None or b.bracket.family == family)]

    def floor(self, family: str = "ipv4") -> BracketResult | None:
        got = self.of_role("floor", family)
        return got[0] if got else None

    def reference(self, family: str = "ipv4") -> BracketResult | None:
        got = self.of_role("reference", family)
        return got[0] if got else None

    def to_dict(self) -> dict[str, Any]:
        return {"missing": self.missing, "hold_s": self.hold_s, "stopped_by": self.stopped_by,
                "brackets": [b.to_dict() for b in self.brackets],
                "unbracketed": [{"chain": u.chain.name, "family": u.chain.family, "hook": u.chain.hook,
                                 "priority": u.chain.priority, "missing": u.reason} for u in self.unbracketed]}


def parse_output(stdout: str, p: Plan) -> ProbeResult:
    """The loader's JSON line -> a result (the last line that is a JSON object)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return ProbeResult(unbracketed=p.missing,
                           missing="the probe's loader printed no result")
    doc = json.loads(lines[-1])
    if "error" in doc:
        return ProbeResult(unbracketed=p.missing, missing=f"the kernel refused the probe ({doc['error']})")
    by_id = {b.id: b for b in p.brackets}
    out = []
    for b in doc["brackets"]:
        br = by_id[b["id"]]
        if "error" in b:
            out.append(BracketResult(br, missing=f"the kernel refused this bracket ({b['error']})"))
            continue
        out.append(BracketResult(br, entered=b["entered"], timed=b["left"], unfinished=b["unfinished"],
                                 unmatched=b["unmatched"], sum_ns=b["sum_ns"], max_ns=b["max_ns"],
                                 counts={int(i): int(n) for i, n in b["hist"]},
                                 per_cpu=tuple((int(n), int(t)) for n, t in b.get("per_cpu", ())),
                                 paired=int(b.get("paired", 0)), ratio_sum=int(b.get("ratio_sum", 0)),
                                 ratio_shift=int(b.get("ratio_shift", 16)),
                                 ratio_counts={int(i): int(n) for i, n in b.get("ratio_hist", ())},
                                 dropped=int(b.get("dropped", 0))))
    return ProbeResult(tuple(out), p.missing, None, doc.get("hold_s"), doc.get("stopped_by"))


LEGACY_TABLE_NAMES = {"ipv4": "/proc/net/ip_tables_names", "ipv6": "/proc/net/ip6_tables_names"}


def legacy_chains(host: Host, ns: str | None, families=("ipv4", "ipv6")) -> list[BaseChain]:
    """The hooks of the legacy xtables tables instantiated in the namespace (nft does not see
    them): from /proc/net/ip_tables_names and ip6_tables_names, as read inside the namespace."""
    out: list[BaseChain] = []
    for fam in families:
        path = LEGACY_TABLE_NAMES.get(fam)
        if path is None:
            continue
        cp = host.run(["cat", path], ns=ns, check=False, timeout_s=10)
        tables = [t for t in cp.stdout.split() if t in XT_TABLES] if cp.returncode == 0 else []
        what = "iptables-legacy" if fam == "ipv4" else "ip6tables-legacy"
        out += xtables_base_chains(tables, (fam,), what)
    return out


class CostProbe:
    """The clock linked in the DUT namespace for the duration of a ``with`` block.

    ``result()`` is available after the block. ``max_s`` bounds the hold: the loader stops by
    itself after it (plus a grace), whatever happens to this process.
    """

    def __init__(self, host: Host, ns: str | None, p: Plan, *, max_s: float = 60.0,
                 reference: ReferenceChain | XtablesReference | None = None):
        self.host, self.ns, self.plan, self.max_s = host, ns, p, max_s
        self.reference = reference  # installed by for_dut; removed on exit
        self._sp = None
        self._ready = ""
        self._result: ProbeResult | None = None

    @classmethod
    def for_dut(cls, host: Host, ns: str | None, *, families=("ipv4", "ipv6"), hooks=("forward",),
                extra_chains: tuple[BaseChain, ...] = (), reference: ReferenceChain | XtablesReference | None = None,
                floor: bool = True, max_s: float = 60.0, drop_mark: int | None = None) -> "CostProbe":
        """Brackets around every base chain the DUT's nft tables and legacy xtables tables register
        (plus ``extra_chains``) on ``families`` and ``hooks``, a floor, and ``reference``
        (installed now into the DUT namespace, removed when the probe ends); with ``drop_mark``, the
        leave right after each chains bracket drops the packets carrying that mark
        (:func:`fwlab.probes.brackets.plan`: a marked copy's drop verdicts)."""
        if reference is not None:
            reference.install(host, ns)
        try:
            # the chains alone (their hooks and priorities), not every rule: at 10,000 rules the whole
            # ruleset's listing took seconds per probe on the shared host
            cp = host.run(["nft", "-j", "list", "chains"], ns=ns, check=False, timeout_s=120)
            chains = nft_base_chains(cp.stdout) if cp.returncode == 0 and cp.stdout.strip() else []
            chains = [c for c in chains if f" {REF_TABLE}/" not in c.name]  # bracketed as the reference
            skip = reference.table if isinstance(reference, XtablesReference) else None
            chains += [c for c in legacy_chains(host, ns, families) if not c.name.endswith(f" {skip}")]
            p = plan([*chains, *extra_chains], families=families, hooks=hooks, floor=floor,
                     reference=(reference.base_chain(),) if reference else (), drop_mark=drop_mark)
        except BaseException:
            if reference is not None:
                reference.remove(host, ns)
            raise
        return cls(host, ns, p, max_s=max_s, reference=reference)

    def _paths(self) -> tuple[str, str]:
        obj, ld = bpf_object().path, loader().path
        if isinstance(self.host, LocalHost):
            return str(obj), str(ld)
        return (self.host.put_file(obj.read_bytes(), "kclock.bpf.o"),
                self.host.put_file(ld.read_bytes(), "fwlab-kclock", mode=0o755))

    def __enter__(self) -> "CostProbe":
        if not self.plan.brackets:
            self._result = ProbeResult(unbracketed=self.plan.missing, missing="no base chain to time on the timed hooks")
            return self
        try:
            obj, ld = self._paths()
        except FwlabError as exc:
            self._result = ProbeResult(unbracketed=self.plan.missing, missing=f"the probe could not be built ({exc})")
            return self
        ready = self.host.scratch_path(f"kclock-ready-{time.monotonic_ns()}")
        argv = [ld, "--ready-file", ready, obj, f"{self.max_s + GRACE_S:g}", *(b.argv() for b in self.plan.brackets)]
        self._sp, out, err = _spawn_until_ready(self.host, argv, self.ns, ready)
        if self._sp is None:
            res = parse_output(out, self.plan)
            why = res.missing or "the probe's loader did not become ready"
            self._result = ProbeResult(unbracketed=self.plan.missing,
                                       missing=f"{why}: {err.strip().splitlines()[-1] if err.strip() else 'no output'}")
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._sp is not None:
                out, err = self._sp.stop(wait_s=10.0)
                self.host.forget(self._sp)
                self._sp = None
                self._result = parse_output(out, self.plan)
                if self._result.missing and err.strip():
                    self._result = ProbeResult(unbracketed=self.plan.missing,
                                               missing=f"{self._result.missing}: {err.strip().splitlines()[-1]}")
        finally:
            if self.reference is not None:
                self.reference.remove(self.host, self.ns)

    def result(self) -> ProbeResult:
        if self._result is None:
            raise FwlabError("the probe's result is read after its with block", fix="call result() after the block")
        return self._result


# -- XDP: the kernel's own per-program run time ---------------------------------------------------
@dataclass(frozen=True)
class ProgramCost:
    """One BPF program's run time while the statistics were on (kernel.bpf_stats_enabled)."""

    id: int
    name: str | None = None
    runs: int = 0  #: program runs in the hold (one per packet for XDP)
    run_time_ns: int = 0  #: their summed run time [ns]
    devices: tuple[str, ...] = ()  #: interfaces it is attached to
    missing: str | None = None

    @property
    def ns_per_run(self) -> float | None:
        return self.run_time_ns / self.runs if self.runs else None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "runs": self.runs, "run_time_ns": self.run_time_ns,
                "ns_per_run": self.ns_per_run, "devices": list(self.devices), "missing": self.missing}


@dataclass(frozen=True)
class ProgStatsResult:
    programs: tuple[ProgramCost, ...] = ()
    missing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"missing": self.missing, "programs": [p.to_dict() for p in self.programs]}


def xdp_programs(link_json: str) -> dict[int, list[str]]:
    """``ip -j link show`` -> {XDP program id: [interfaces]}."""
    out: dict[int, list[str]] = {}
    for link in json.loads(link_json or "[]"):
        xdp = link.get("xdp") or {}
        progs = [xdp.get("prog")] + [a.get("prog") for a in xdp.get("attached", [])]
        for p in progs:
            if p and "id" in p:
                out.setdefault(int(p["id"]), []).append(link.get("ifname", "?"))
    return out


def parse_progstats(stdout: str, devices: dict[int, list[str]]) -> ProgStatsResult:
    """The loader's before and after documents -> each program's run time and count in between."""
    docs = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
    if docs and "error" in docs[0]:
        return ProgStatsResult(missing=f"the kernel refused run-time statistics ({docs[0]['error']})")
    if len(docs) < 2:
        return ProgStatsResult(missing="the statistics loader printed no result")
    before = {p["id"]: p for p in docs[0]["programs"]}
    out = []
    for p in docs[-1]["programs"]:
        b = before.get(p["id"], {})
        if "error" in p or "error" in b:
            out.append(ProgramCost(p["id"], missing=f"cannot read program {p['id']}: {p.get('error') or b.get('error')}"))
            continue
        out.append(ProgramCost(p["id"], p.get("name"), p["run_cnt"] - b.get("run_cnt", 0),
                               p["run_time_ns"] - b.get("run_time_ns", 0), tuple(devices.get(p["id"], ()))))
    return ProgStatsResult(tuple(out))


class ProgStatsProbe:
    """The kernel's run-time statistics of the DUT's XDP programs for a ``with`` block (turned
    on with BPF_ENABLE_STATS while the block runs, off after). Each XDP run is one packet."""

    def __init__(self, host: Host, ns: str | None, *, max_s: float = 60.0):
        self.host, self.ns, self.max_s = host, ns, max_s
        self._sp = None
        self._devices: dict[int, list[str]] = {}
        self._result: ProgStatsResult | None = None

    def __enter__(self) -> "ProgStatsProbe":
        cp = self.host.run(["ip", "-j", "link", "show"], ns=self.ns, check=False, timeout_s=30)
        self._devices = xdp_programs(cp.stdout) if cp.returncode == 0 else {}
        if not self._devices:
            self._result = ProgStatsResult(missing="no XDP program is attached in the DUT namespace")
            return self
        try:
            ld = loader().path
        except FwlabError as exc:
            self._result = ProgStatsResult(missing=f"the probe could not be built ({exc})")
            return self
        ld_path = str(ld) if isinstance(self.host, LocalHost) else self.host.put_file(ld.read_bytes(), "fwlab-kclock", mode=0o755)
        ready = self.host.scratch_path(f"kclock-stats-ready-{time.monotonic_ns()}")
        argv = [ld_path, "--ready-file", ready, "progstats-hold", f"{self.max_s + GRACE_S:g}",
                *map(str, sorted(self._devices))]
        self._sp, out, err = _spawn_until_ready(self.host, argv, self.ns, ready)
        if self._sp is None:
            res = parse_progstats(out, self._devices)
            self._result = res if res.missing else ProgStatsResult(
                missing=f"the statistics loader did not become ready: {err.strip()[:200] or 'no output'}")
        return self

    def __exit__(self, *exc) -> None:
        if self._sp is not None:
            out, _ = self._sp.stop(wait_s=10.0)
            self.host.forget(self._sp)
            self._sp = None
            self._result = parse_progstats(out, self._devices)

    def result(self) -> ProgStatsResult:
        if self._result is None:
            raise FwlabError("the statistics are read after their with block", fix="call result() after the block")
        return self._result


def _spawn_until_ready(host: Host, argv: list[str], ns: str | None, ready: str):
    """Start the loader and wait until it has written ``ready`` (its programs are linked):
    (the running process, "", "") — or (None, stdout, stderr) when it ended or did not become
    ready within READY_TIMEOUT_S (it is stopped then)."""
    sp = host.spawn(argv, ns=ns)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not host.exists(ready):
        if sp.proc.poll() is not None or time.monotonic() > deadline:
            out, err = sp.stop()
            host.forget(sp)
            return None, out, err
        time.sleep(0.005)
    host.run(["rm", "-f", ready], check=False, timeout_s=10)
    return sp, "", ""
