"""Checks before anything is built: root, programs, runners, memory, and where roles may run.

Owns: failing in one line before a bed is built — not root, a missing program (here or on a
remote DUT host), an unavailable traffic tool, a rule set too large for this host's memory — and
refusing trials whose tool or background flood cannot run where the hosts file puts its roles.
Never builds a bed, connects a host (the caller opens the placement) or runs traffic.
"""

from __future__ import annotations

from fwlab.dut import get_backend
from fwlab.dut.memory import meminfo, need as memory_need
from fwlab.errors import BackendError, RunnerError, SuiteError, ToolMissing
from fwlab.run.plan import Plan, check_suite, expand
from fwlab.runners import get_runner
from fwlab.suites import Suite
from fwlab.testbed import LocalHost, require_root, require_tool
from fwlab.testbed.hosts import Placement


def preflight(suite: Suite, placement: Placement | None = None) -> None:
    """Fail before anything is built: not root, a missing program, an unavailable runner.
    A remote DUT's firewall tools are checked on its host (once connected)."""
    check_suite(suite)  # the items' default tools are filled in here (expand does it again)
    require_root()
    for prog in ("ip", "ethtool", "ping", "ss", "sysctl"):
        require_tool(prog)
    dut_host = placement.hosts.get("dut") if placement else None
    system = dut_host.system() if dut_host is not None else None
    for b in suite.backends:
        be = get_backend(b)
        if be.unsupported_here(system):
            continue  # the plan skips it, with this reason: it needs nothing
        for prog in be.tools:
            if dut_host is None:
                require_tool(prog)
            elif dut_host.run(["sh", "-c", 'command -v "$1" || PATH=$PATH:/usr/sbin:/sbin command -v "$1"',
                               "sh", prog], check=False).returncode != 0:
                raise ToolMissing(f"backend '{b}' needs '{prog}', which is not installed on host "
                                 f"{dut_host.name}", fix=f"install it on {dut_host.name}")
    if dut_host is None and "direct" not in suite.mode:
        # the largest rule set of each backend must fit in this host's memory (checked again
        # before each load, when the other users of the host may have taken some)
        avail_b = meminfo(LocalHost()).get("MemAvailable", 0) * 1024
        largest: dict[tuple[str, str], int] = {}
        for t in expand(suite, system).trials:
            if get_backend(t.backend).loads_rules:
                k = (t.backend, t.layout)
                largest[k] = max(largest.get(k, 0), t.rules)
        for (b, layout), n in sorted(largest.items()):
            why = memory_need(b, layout, n).shortfall(avail_b)
            if why:
                raise BackendError(why, fix="free memory on the DUT host or lower 'rules' in the suite")
    for item in suite.traffic:
        why = get_runner(item.tool).unavailable()
        if why:
            raise RunnerError(f"traffic tool '{item.tool}' is unavailable: {why}",
                              fix="install it (see README) or remove it from the suite")


def checked_plan(suite: Suite, placement: Placement | None = None) -> Plan:
    """The checks before anything is built (:func:`preflight`), then the plan for the DUT's host
    (:func:`fwlab.run.plan.expand`) with the trials refused that cannot run where the hosts file
    puts their roles (:func:`check_remote_roles`). A placement is connected (``with``) first."""
    preflight(suite, placement)
    plan = expand(suite, dut_system(placement))
    check_remote_roles(plan, placement)
    return plan


def check_remote_roles(plan: Plan, placement: Placement | None) -> None:
    """Refuse, in one line, trials whose tool (or background flood) runs only in this machine's
    namespaces while the hosts file puts its roles on remote hosts."""
    if placement is None:
        return
    remote = set(placement.remote_roles)
    ends = sorted(remote & {"client", "server"})
    servers = placement.server_roles[1:]
    for t in plan.trials:
        if ends and not get_runner(t.tool).remote_roles:
            raise SuiteError(f"tool '{t.tool}' runs only on this machine, but the hosts file puts "
                             f"{' and '.join(ends)} on a remote host",
                             fix="run it on the namespace test bed (no --hosts), or use engine, rfc2544, "
                                 "conn, iperf3, netperf, parallel or kernel-cost in a lab (docs/lab.md)")
        if servers and get_runner(t.tool).splits_generators:
            raise SuiteError(f"tool '{t.tool}' splits its trial across the generator hosts towards one server, "
                             f"but the hosts file names server hosts {', '.join(servers)} (client<k> streams to "
                             f"server<k>: iperf3 streams only)",
                             fix="drop the server2 ... entries for this suite, or run iperf3 stream trials "
                                 "(docs/lab.md, \"Several generator hosts\")")
        if t.background and t.mode != "direct":
            check_flood_roles(placement)


def check_flood_placement(suite: Suite, placement: Placement | None) -> None:
    """:func:`check_flood_roles` for a suite with a background flood in a mode with a DUT."""
    if placement is not None and suite.background and any(m != "direct" for m in suite.mode):
        check_flood_roles(placement)


def check_flood_roles(placement: Placement) -> None:
    """A background flood runs from the attacker's namespace here beside a DUT namespace here
    (every role local), or from a remote attacker host cabled to a remote DUT host whose third
    data interface (``hosts.dut.ifaces``) is that cable's end (client and server may then be
    anywhere). Anything else: one line."""
    remote = set(placement.remote_roles)
    if "attacker" not in remote:
        if remote:
            raise SuiteError("a background flood from this machine's attacker namespace needs every role here, "
                             f"but the hosts file puts {' and '.join(sorted(remote))} on a remote host",
                             fix="add a remote [hosts.attacker] (one data interface) cabled to a remote DUT, or "
                                 "run the flood suite on the namespace test bed (no --hosts) (docs/lab.md)")
        return
    dut = placement.entry("dut")
    if dut is None or not dut.remote:
        raise SuiteError("a remote attacker host floods a remote DUT only, but the hosts file has the DUT on "
                         "this machine",
                         fix="add a remote [hosts.dut] with ifaces = [client side, server side, attacker side], "
                             "or drop [hosts.attacker] (docs/lab.md)")
    if len(dut.ifaces) != 3:
        raise SuiteError("a remote attacker host needs the DUT's interface cabled to it, but hosts.dut.ifaces "
                         f"names {len(dut.ifaces)}",
                         fix="give hosts.dut.ifaces a third entry: the DUT's attacker-side interface (docs/lab.md)")


def dut_system(placement: Placement | None) -> str | None:
    """The remote DUT host's ``uname -s`` (None: the DUT is on this machine)."""
    host = placement.hosts.get("dut") if placement is not None else None
    return host.system() if host is not None else None
