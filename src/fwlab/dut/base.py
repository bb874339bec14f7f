"""The firewall backend interface and its registry.

Owns: what every backend must do — render a RuleSet to native text, load it atomically inside
the DUT namespace, read its counters, flush it, name its version — and the registry that
picks a backend by name. Never touches test traffic or the test bed's links.
"""

from __future__ import annotations

import hashlib
import platform
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field

from fwlab.dut.memory import kernel_kib, meminfo
from fwlab.errors import BackendError, FwlabError
from fwlab.registry import Registry
from fwlab.rules.model import RuleSet
from fwlab.testbed.host import CommandFailed, Host, LocalHost

#: counter classes every backend reports (packets), summed over the rules of that class
COUNTER_CLASSES = ("deny", "permit", "established", "default_drop", "infra")


@dataclass(frozen=True)
class DutContext:
    """Where a backend acts: a host (local, or remote over SSH), the DUT namespace on it (None:
    the host's own namespace, e.g. a remote firewall host) and the test bed mode."""

    host: Host
    ns: str | None
    mode: str  # routed | bridge


@dataclass(frozen=True)
class LoadResult:
    """What loading a rule set did."""

    load_s: float  #: wall time of the one atomic load command [s]
    digest: str  #: sha256 of the canonical listing read back from the kernel (counters stripped)
    family: str  #: the native family or table type used (e.g. "nft inet", "nft bridge")
    bridge_nf_call: bool | None  #: br_netfilter setting the rule set needs in bridge mode
    rendered_lines: int  #: lines of native text loaded
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: host-wide kernel memory (Slab + VmallocUsed + Percpu) after minus before the load
    #: command [bytes]; None when it could not be read (see fwlab.dut.memory)
    kernel_mem_bytes: int | None = None
    #: the family string the digest was computed with (pass it to :meth:`Backend.read_state`)
    digest_family: str = ""
    #: the counters read back with the digest, right after the load (None: not read)
    state: "RuleState | None" = None
    #: time.monotonic() when the load command returned (the rule set in force from then on)
    applied_monotonic: float | None = None


def command_timeout_s(rs: RuleSet) -> float:
    """Time a load or listing command of ``rs`` may take [s]: 120 s plus 1 s per 2,000 entries
    (a 1,000,000-element set loads in ~10 s here, lists in ~90 s on a busy host)."""
    return 120.0 + rs.count / 2000


@dataclass(frozen=True)
class RuleState:
    """One read of what is loaded: packet counters per class and the digest of the listing,
    both from the same read where the backend can (see :meth:`Backend.read_state`)."""

    counters: dict[str, int]
    digest: str
    #: how it was read: "listing" (counters and digest from one listing), or "netlink" (counters
    #: from the kernel's rule dump; the digest of the last listing, the kernel's rule-set
    #: generation id being unchanged since it)
    how: str = "listing"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def listing_digest(family: str, listing: str) -> str:
    """The rule-set digest: sha256 of the family and the canonical listing (no counter values)."""
    return sha256(f"{family}\n{listing}")


def rule_class(tag: str) -> str:
    """Map a rule tag (comment) like 'deny-17' or 'permit-fwd' to its counter class."""
    head = tag.split("-", 1)[0]
    return head if head in COUNTER_CLASSES else "default_drop" if head == "default" else "infra"


def sum_by_class(tagged: Iterable[tuple[str, int]]) -> dict[str, int]:
    """(rule tag, packets) pairs -> packets per counter class (every class present)."""
    sums = {k: 0 for k in COUNTER_CLASSES}
    for tag, n in tagged:
        sums[rule_class(tag)] += n
    return sums



def dut_sysctl(ctx: "DutContext", key: str, value: str) -> None:
    """Set ``key`` in the DUT's namespace of a bed fwlab built. On a remote DUT host fwlab changes
    nothing the hosts file did not hand it (the safety rule): the value is read, and a different
    one is one line naming the setting and how to set it there."""
    if not ctx.host.remote:
        ctx.host.run(["sysctl", "-q", "-w", f"{key}={value}"], ns=ctx.ns)
        return
    cp = ctx.host.run(["sysctl", "-n", key], ns=ctx.ns, check=False)
    have = cp.stdout.strip() if cp.returncode == 0 else None
    if have != value:
        raise BackendError(f"the DUT host {ctx.host.name} has {key} = {have if have is not None else 'unset'}, "
                           f"this test needs {value}; fwlab does not change a remote host's sysctls",
                           fix=f"set it there yourself (sysctl -w {key}={value}) or leave this mode out")

class Backend(ABC):
    """One firewall. Subclasses are registered with :func:`register`."""

    name: str = ""
    #: rule layouts this backend can load
    layouts: tuple[str, ...] = ("linear",)
    #: the program(s) it needs
    tools: tuple[str, ...] = ()
    #: a short description shown by `fwlab list`
    summary: str = ""
    #: False for a reference that loads no rules (like `none`): planned once, at 0 rules
    loads_rules: bool = True
    #: True when tests/netns/test_bed_reset.py proves that fwlab.dut.reset.reset() leaves the
    #: DUT as new after this backend, so the test bed may be reused for the next backend
    clean_reset: bool = False

    #: operating systems (``uname -s``, lower case) it runs on; None: any (a reference)
    platforms: tuple[str, ...] | None = ("linux",)

    def unsupported_here(self, system: str | None = None) -> str | None:
        """Why this backend cannot load anything on the DUT host, or None. ``system`` is that
        host's ``uname -s`` (None: this machine, the DUT is local). Its rule sets can still be
        rendered (`fwlab rules`)."""
        system = system or platform.system()
        if self.platforms is not None and system.lower() not in self.platforms:
            return (f"{self.name} runs on {', '.join(self.platforms)}, not {system}: its rule sets "
                    f"can be rendered ('fwlab rules --backend {self.name}') but not loaded there")
        return None

    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        """Why this combination cannot run on a DUT host running ``system`` (None: this
        machine), or None when it can."""
        here = self.unsupported_here(system)
        if here:
            return here
        if layout not in self.layouts:
            return f"{self.name} has no '{layout}' layout (it has {', '.join(self.layouts)})"
        return None

    def bridge_nf_call(self, mode: str, rs: RuleSet) -> bool | None:
        """br_netfilter setting needed in bridge mode (None: routed, not applicable)."""
        return None if mode != "bridge" else True

    @abstractmethod
    def render(self, rs: RuleSet, mode: str) -> str:
        """The rule set in this firewall's native text."""

    @abstractmethod
    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        """Load ``text`` atomically (one command)."""

    @abstractmethod
    def listing(self, ctx: DutContext) -> str:
        """Canonical listing of what is loaded, without counter values."""

    @abstractmethod
    def counters(self, ctx: DutContext) -> dict[str, int]:
        """Packet counters summed per class of :data:`COUNTER_CLASSES`."""

    @abstractmethod
    def flush(self, ctx: DutContext) -> None:
        """Remove everything this backend loaded."""

    @abstractmethod
    def version(self, host: LocalHost) -> str:
        """Version string of the firewall's user-space tool."""

    def version_at(self, host: LocalHost, ns: str | None) -> str:
        """The version as read for a bed whose DUT is namespace `ns` on `host`: a plug-in's
        command (fwlab.dut.command) runs there; a built-in backend's own tool on `host`."""
        return self.version(host)

    def read_state(self, ctx: DutContext, family: str) -> RuleState:
        """Counters and the digest of the listing (computed as :meth:`load` does, with the
        ``digest_family`` it returned). This default reads both; a backend whose listing carries
        the counters overrides it with a single read of the rule set."""
        return RuleState(self.counters(ctx), listing_digest(family, self.listing(ctx)))

    def family(self, rs: RuleSet, mode: str) -> str:
        return self.name

    def load(self, ctx: DutContext, rs: RuleSet) -> LoadResult:
        why = self.unsupported(rs.layout, ctx.mode, rs.stateful_shortcut,
                               system=ctx.host.system() if ctx.host.remote else None)
        if why:
            raise BackendError(why, fix="remove this combination from the suite")
        text = self.render(rs, ctx.mode)
        bnf = self.bridge_nf_call(ctx.mode, rs)
        if bnf is not None:
            v = "1" if bnf else "0"
            for fam in ("iptables", "ip6tables", "arptables"):
                dut_sysctl(ctx, f"net.bridge.bridge-nf-call-{fam}", v)
        try:
            k0 = kernel_kib(meminfo(ctx.host))
        except (FwlabError, OSError):
            k0 = None
        t0 = time.perf_counter()
        try:
            self._apply(ctx, text, rs)
        except CommandFailed as exc:
            raise BackendError(f"{self.name}: the kernel refused the rule set "
                               f"({rs.count} rules, {rs.layout}): {exc.message}",
                               fix="check the rendered rules with 'fwlab rules' and the kernel's "
                                   "netfilter support") from exc
        load_s = time.perf_counter() - t0
        applied = time.monotonic()
        kmem = None
        if k0 is not None:
            try:
                kmem = (kernel_kib(meminfo(ctx.host)) - k0) * 1024
            except (FwlabError, OSError):
                kmem = None
        family = self.family(rs, ctx.mode)
        state = self.read_state(ctx, family)  # the digest and the counters at load, one read
        return LoadResult(load_s=load_s, digest=state.digest,
                          family=family, bridge_nf_call=bnf,
                          rendered_lines=text.count("\n"), notes=self.load_notes(rs),
                          kernel_mem_bytes=kmem, digest_family=family, state=state,
                          applied_monotonic=applied)

    def load_notes(self, rs: RuleSet) -> tuple[str, ...]:
        """Notes on what the load's read-back of ``rs`` leaves out (default: nothing)."""
        return ()


BACKENDS: Registry[Backend] = Registry("backend", BackendError)


def register(backend: Backend) -> Backend:
    return BACKENDS.add(backend.name, backend)


get_backend = BACKENDS.get
backend_names = BACKENDS.names
