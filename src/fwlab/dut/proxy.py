"""The `proxy` backend: an application-proxy firewall (HAProxy) in the DUT namespace that
forwards HTTP from client to server and denies requests whose URL is on a block list.

Why HAProxy (Debian's, in main): it starts in milliseconds with a 100,000-entry list, matches a
list from a file in either of the two ways seed 002's question needs, exposes exact per-request
counters on a stats socket, and runs in one foreground process fwlab can stop. Squid would add
FTP proxying but starts slowly and matches URL lists linearly only; nginx has no URL list
matcher other than a hash map.

How it is set up (one ``load`` = one fresh HAProxy process with the rendered config):
- Explicit forward proxy on the DUT's client-side address, port 3128 (clients use
  ``curl --proxy``, as browsers did with seed 002's proxy firewall). The destination comes from
  the request's Host through a map of the test bed's virtual servers (no DNS); every transaction
  is one client connection and one server connection (``option httpclose``).
- The block list (``rules.urls``, one entry per rule: rule count = list size) is matched against
  ``base`` (Host + path, no query). Layout ``set``: ``-m str``, which HAProxy indexes in a tree
  (lookup cost grows with log N). Layout ``linear``: ``-m end``, which HAProxy keeps as a list
  and walks entry by entry (cost grows with N), as seed 002's flat-file URL blocker did.
  HAProxy's pattern cache, which would hide the walk for repeated URLs, is off
  (``tune.pattern.cache-size 0``).
- IP forwarding in the DUT is turned off while the proxy is loaded: the proxy is the only
  path between client and server (no packet filter is loaded). ``flush`` stops HAProxy and turns
  forwarding back on.
- Counters (``deny``/``permit``) are HTTP requests, not packets: denied and forwarded requests
  from the frontend's stats (``dreq``, ``req_tot``).

Routed mode only (in bridge mode the DUT has no address to listen on). A proxy is stateful by
construction: it checks the list once per request and relays the rest of the connection without
looking at the list again, which is what the packet filters' stateful shortcut does; so the proxy
runs with ``stateful_shortcut = true`` only (its trial ids carry ``-sf`` like the stateful
packet filters they are compared with).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fwlab.dut.base import COUNTER_CLASSES, Backend, DutContext, register
from fwlab.errors import BackendError
from fwlab.rules.model import RuleSet
from fwlab.rules.urls import block_list
from fwlab.testbed.servers import N_SERVERS, nth_address, server_host
from fwlab.testbed.host import LocalHost, Spawned
from fwlab.testbed.topology import ROUTED_PLAN

PROXY_PORT = 3128
DIR = "@DIR@"  #: placeholder for the proxy's temporary directory in the rendered text
LIST_MARK = "# ---- block list"
MATCH = {"linear": "end", "set": "str"}


def render_config(rs: RuleSet) -> str:
    """haproxy.cfg for a rule set (paths under ``@DIR@``)."""
    v = rs.ip_version
    plan = ROUTED_PLAN
    listen = (f"{plan.dut_client_side4}:{PROXY_PORT}" if v == 4
              else f"[{plan.dut_client_side6}]:{PROXY_PORT}")
    return f"""# written by fwlab: application-proxy DUT, {rs.count} blocked URLs, {rs.layout} ({MATCH[rs.layout]} match)
global
    nbthread 1
    maxconn 8000
    stats socket {DIR}/admin.sock mode 600 level admin
    tune.pattern.cache-size 0
defaults
    mode http
    option httpclose
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
frontend fwlab_proxy
    bind {listen}
    acl blocked base -m {MATCH[rs.layout]} -f {DIR}/blocklist.txt
    http-request deny deny_status 403 if blocked
    default_backend origin
backend origin
    http-request set-dst req.hdr(host),lower,map_str_ip({DIR}/hosts.map)
    http-request set-dst-port int(80)
    http-request deny deny_status 502 if !{{ req.hdr(host),lower,map_str({DIR}/hosts.map) -m found }}
    server origin 0.0.0.0:0
"""


def hosts_map(ip_version: int) -> str:
    """The virtual servers' names -> addresses (the request matrix's six servers)."""
    base = ROUTED_PLAN.server(ip_version)
    return "".join(f"{server_host(k)} {nth_address(base, k)}\n" for k in range(N_SERVERS))


def parse_stat_csv(text: str) -> list[dict[str, str]]:
    """HAProxy ``show stat`` CSV -> one dict per row."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or not lines[0].startswith("# "):
        raise BackendError(f"HAProxy stats are unreadable: {text[:80]!r}", fix="check the proxy's log")
    head = lines[0][2:].split(",")
    return [dict(zip(head, ln.split(","))) for ln in lines[1:]]


def counters_from_stats(rows: list[dict[str, str]]) -> dict[str, int]:
    sums = {k: 0 for k in COUNTER_CLASSES}
    for r in rows:
        if r.get("pxname") == "fwlab_proxy" and r.get("svname") == "FRONTEND":
            total = int(r.get("req_tot") or 0)
            denied = int(r.get("dreq") or 0)
            sums["deny"] = denied
            sums["permit"] = total - denied
    return sums


@dataclass
class _Running:
    proc: Spawned
    dir: Path
    config: str


class Proxy(Backend):
    name = "proxy"
    layouts = ("linear", "set")
    tools = ("haproxy",)
    summary = ("application proxy (HAProxy, explicit HTTP proxy) denying a URL block list: linear list "
               "(-m end) or tree (-m str); rules = block-list size")

    def __init__(self) -> None:
        self._running: dict[str, _Running] = {}

    def unsupported(self, layout: str, mode: str, stateful_shortcut: bool,
                    system: str | None = None) -> str | None:
        why = super().unsupported(layout, mode, stateful_shortcut, system)
        if why:
            return why
        if system is not None:  # a remote DUT host
            return ("the proxy backend runs on a DUT this machine hosts (its config, block list and admin "
                    "socket are local files, and it switches the DUT's forwarding off): not on a remote host")
        if mode != "routed":
            return "the proxy needs an address on the DUT: routed mode only"
        if not stateful_shortcut:
            return ("a proxy checks requests, never single packets: it runs with stateful_shortcut = true "
                    "(the list is checked once per request)")
        return None

    def bridge_nf_call(self, mode: str, rs: RuleSet) -> bool | None:
        return None

    def family(self, rs: RuleSet, mode: str) -> str:
        return f"haproxy base -m {MATCH[rs.layout]}"

    def render(self, rs: RuleSet, mode: str) -> str:
        urls = block_list(rs.count, rs.seed)
        return render_config(rs) + f"{LIST_MARK} ({len(urls)} entries)\n" + "".join(u + "\n" for u in urls)

    def proxy_url(self, ctx: DutContext, ip_version: int) -> str:
        """Where clients send their requests (``curl --proxy``)."""
        p = ROUTED_PLAN
        host = p.dut_client_side4 if ip_version == 4 else f"[{p.dut_client_side6}]"
        return f"http://{host}:{PROXY_PORT}"

    def _forwarding(self, ctx: DutContext, on: bool) -> None:
        v = "1" if on else "0"
        for key in ("net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"):
            ctx.host.run(["sysctl", "-q", "-w", f"{key}={v}"], ns=ctx.ns)

    def _apply(self, ctx: DutContext, text: str, rs: RuleSet) -> None:
        self._stop(ctx)
        cfg, _, rest = text.partition(LIST_MARK)
        entries = rest.split("\n", 1)[1] if "\n" in rest else ""
        d = Path(tempfile.mkdtemp(prefix="fwlab-proxy-"))
        (d / "blocklist.txt").write_text(entries)
        (d / "hosts.map").write_text(hosts_map(rs.ip_version))
        config = cfg.replace(DIR, str(d))
        (d / "haproxy.cfg").write_text(config)
        self._forwarding(ctx, False)
        sp = ctx.host.spawn(["haproxy", "-db", "-f", str(d / "haproxy.cfg")], ns=ctx.ns)
        self._running[ctx.ns] = _Running(sp, d, config)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if sp.proc.poll() is not None:
                break
            if (d / "admin.sock").exists():
                try:
                    self._ask(ctx, "show info")
                    return
                except OSError:
                    pass
            time.sleep(0.02)
        err = ""
        if sp.proc.poll() is not None:
            _, err = sp.stop()
        self._stop(ctx)
        raise BackendError(f"HAProxy did not start in the DUT namespace: {err.strip()[:200] or 'timeout'}",
                           fix="check the rendered config with 'fwlab rules --backend proxy'")

    def _ask(self, ctx: DutContext, command: str) -> str:
        run = self._running.get(ctx.ns)
        if run is None:
            raise BackendError("no proxy is loaded in the DUT", fix="load a rule set first")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(str(run.dir / "admin.sock"))
            s.sendall(command.encode() + b"\n")
            chunks = []
            while True:
                b = s.recv(1 << 16)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode(errors="replace")

    def listing(self, ctx: DutContext) -> str:
        """The running config (temporary paths removed) and the block list as HAProxy holds it."""
        run = self._running.get(ctx.ns)
        if run is None:
            return ""
        acls = self._ask(ctx, "show acl")
        entries: list[str] = []
        for line in acls.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            parts = line.split()
            if len(parts) < 2 or not parts[1].endswith("blocklist.txt)"):
                continue  # HAProxy's own anonymous and internal ACLs
            dump = self._ask(ctx, f"show acl #{parts[0]}")
            entries += sorted(ln.split(" ", 1)[1] for ln in dump.splitlines() if " " in ln)
        return run.config.replace(str(run.dir), DIR) + "\n".join(entries) + "\n"

    def counters(self, ctx: DutContext) -> dict[str, int]:
        if ctx.ns not in self._running:
            return {k: 0 for k in COUNTER_CLASSES}
        return counters_from_stats(parse_stat_csv(self._ask(ctx, "show stat")))

    def _stop(self, ctx: DutContext) -> None:
        run = self._running.pop(ctx.ns, None)
        if run is not None:
            run.proc.stop()
            ctx.host.forget(run.proc)
            shutil.rmtree(run.dir, ignore_errors=True)

    def flush(self, ctx: DutContext) -> None:
        self._stop(ctx)
        if ctx.mode == "routed":
            self._forwarding(ctx, True)

    def version(self, host: LocalHost) -> str:
        cp = subprocess.run(["haproxy", "-v"], capture_output=True, text=True)
        return (cp.stdout.splitlines() or ["haproxy ?"])[0].strip()


register(Proxy())
