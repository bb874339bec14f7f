"""The transaction runner: HTTP transactions per minute with curl, against nginx in the server
namespace, directly or through the DUT's application proxy.

Why curl (Debian's, in main): one transfer is one transaction on a TCP connection of its own
(``Connection: close``; seed 002's NSTL transaction = connect, request, download, close); curl
reports, for every transfer, its exit code, status, bytes, connect time and time to first byte
with microsecond resolution, so failures and percentiles are computed here from every
transaction rather than taken from a tool's summary; the same client speaks FTP (the protocol
mix) and uses an explicit HTTP proxy (``-x``). wrk is faster per client CPU but reports neither
connect time nor time to first byte and speaks neither FTP nor proxy; h2load hangs on
``Connection: close``; ab rounds connect times to whole milliseconds. The price: one curl
process drives its transfers from one thread, so at high client loads curl's CPU can limit the
rate (the record keeps the client CPU's share of the trial).

A client load of N is N concurrent virtual clients (closed loop: each starts its next
transaction when the previous ends, as NSTL's). Kinds:
- ``http``: every client fetches one object of ``size_bytes`` (default 1000 B) from the server.
- ``ftp``: every client fetches one object of ``size_bytes`` from vsftpd (``testbed.ftpserver``):
  connect, anonymous login, passive RETR, quit. curl keeps FTP control connections for reuse and
  has no command-line switch against it, but reuses one only for the same user and password, so
  every transaction's URL carries its own anonymous password: one login per transaction (the
  record's ``connections_per_transaction`` is then 2: control + data).
- ``mix``: seed 002's request matrix and protocol mix (``runners.txmix``): eight physical clients
  (eight source addresses), six virtual servers (six server addresses), objects of
  ``options.objects_bytes``; HTTP only, or with ``options.ftp = true`` Table 8's protocol mix
  (servers 01/03/05 10 % FTP, 02/04/06 90 % FTP), each FTP request a whole transaction as in kind
  ``ftp``; the record's ``http_tpm`` and ``ftp_tpm`` give each protocol's own TPM.

Owns: the client command lines, the per-transaction parser and the trial's figures (TPM,
failure %, connect time / time to first byte percentiles). Never touches the firewall.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fwlab.errors import RunnerError
from fwlab.runners import txmix
from fwlab.runners.base import Measurement, Runner, TrafficSpec, TrialEnv, register
from fwlab.runners.txmix import nth_address, server_host
from fwlab.testbed.ftpserver import FTP_PORT, FtpServer, vsftpd_version
from fwlab.testbed.webserver import HTTP_PORT, WebServer, nginx_version, object_name
from fwlab.testbed.host import Spawned, require_tool

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

DEFAULT_SIZE = 1000
DEFAULT_OBJECTS = (1000, 16000, 64000)  #: 1, 16 and 64 kB (kB = 1000 B)
WARMUP_S = 0.5  #: transactions that end in the first WARMUP_S are not counted (curl start-up)
PERCENTILES = (50, 90, 99)
#: curl --write-out line per transfer; "T" marks it (curl may print other lines on stderr only)
WRITE_OUT = ("T %{exitcode} %{response_code} %{size_download} %{time_connect} "
             "%{time_starttransfer} %{time_total} %{num_connects} %{url_effective}\\n")
#: reply codes of a complete transfer per protocol. FTP: 226 (transfer complete), or 221 (goodbye):
#: curl reports the last reply its handle read, and a handle that closed an idle cached control
#: connection (QUIT) on its way reports that connection's 221; exit 0 and the whole object decide.
OK_CODES = {"http": (200,), "ftp": (226, 221)}


@dataclass(frozen=True)
class Transaction:
    """One transfer as curl reported it. Times in seconds from the transfer's start."""

    exitcode: int
    code: int
    size_bytes: int
    connect_s: float
    ttfb_s: float
    total_s: float
    connects: int
    url: str
    t_end: float = 0.0  #: when the runner read the line [s since the trial's start]

    @property
    def protocol(self) -> str:
        return self.url.split(":", 1)[0].lower()

    @property
    def server(self) -> str:
        m = re.match(r"^\w+://(?:[^@/]*@)?([^/:]+)", self.url)
        return m.group(1) if m else "?"

    @property
    def expected_size(self) -> int | None:
        m = re.search(r"/(\d+)\.bin", self.url)
        return int(m.group(1)) if m else None

    @property
    def ok(self) -> bool:
        return (self.exitcode == 0 and self.code in OK_CODES.get(self.protocol, (200,))
                and self.size_bytes == self.expected_size)

    @property
    def reason(self) -> str:
        """Why this transaction failed ("" when it did not)."""
        if self.exitcode:
            return f"curl exit {self.exitcode}"
        if self.code not in OK_CODES.get(self.protocol, (200,)):
            return f"{self.protocol} status {self.code}"
        if self.size_bytes != self.expected_size:
            return "short object"
        return ""


def parse_line(line: str, t_end: float = 0.0) -> Transaction | None:
    """One --write-out line -> Transaction (None for anything else)."""
    parts = line.strip().split(" ", 8)
    if len(parts) != 9 or parts[0] != "T":
        return None
    try:
        return Transaction(exitcode=int(parts[1]), code=int(parts[2]), size_bytes=int(parts[3]),
                           connect_s=float(parts[4]), ttfb_s=float(parts[5]), total_s=float(parts[6]),
                           connects=int(parts[7]), url=parts[8], t_end=t_end)
    except ValueError:
        return None


def parse_output(text: str) -> list[Transaction]:
    """Every transfer of a curl run's --write-out output (no timestamps)."""
    return [t for t in (parse_line(ln) for ln in text.splitlines()) if t is not None]


def _pct(values: list[float], scale: float = 1e3) -> dict[str, float | None]:
    if not values:
        return {**{f"p{p}": None for p in PERCENTILES}, "mean": None, "max": None}
    arr = np.asarray(values) * scale
    out: dict[str, float | None] = {f"p{p}": float(np.percentile(arr, p)) for p in PERCENTILES}
    out["mean"] = float(arr.mean())
    out["max"] = float(arr.max())
    return out


def summarize(txs: list[Transaction], window_s: float) -> tuple[dict, dict]:
    """The trial's figures from its transactions (those that ended inside the window).

    TPM counts complete transactions (exit 0, the protocol's success code, the whole object);
    failure % = failed / (complete + failed) x 100. Percentiles [ms] are over complete ones:
    connect = TCP handshake done, ttfb = first byte of the reply, both from the transfer's start
    (through a proxy: the handshake with the proxy, the first byte relayed by it).
    Returns (metrics, extra)."""
    ok = [t for t in txs if t.ok]
    bad = [t for t in txs if not t.ok]
    n = len(ok) + len(bad)
    m: dict[str, Any] = {
        "duration_s": window_s,
        "transactions": len(ok), "failures": len(bad),
        "tpm": len(ok) / window_s * 60 if window_s > 0 else None,
        "transactions_per_s": len(ok) / window_s if window_s > 0 else None,
        "failure_pct": 100.0 * len(bad) / n if n else None,
        "throughput_bps": sum(t.size_bytes for t in ok) * 8 / window_s if window_s > 0 else None,
        "loss_ratio": None,
        "connections_per_transaction": (sum(t.connects for t in txs) / n) if n else None,
    }
    for name, vals in (("connect_ms", [t.connect_s for t in ok]), ("ttfb_ms", [t.ttfb_s for t in ok]),
                       ("total_ms", [t.total_s for t in ok])):
        for k, v in _pct(vals).items():
            m[f"{name}_{k}"] = v
    reasons: dict[str, int] = {}
    for t in bad:
        reasons[t.reason] = reasons.get(t.reason, 0) + 1
    per_proto: dict[str, dict] = {}
    per_server: dict[str, dict] = {}
    for t in txs:
        for key, table in ((t.protocol, per_proto), (t.server, per_server)):
            row = table.setdefault(key, {"transactions": 0, "failures": 0})
            row["transactions" if t.ok else "failures"] += 1
    for proto, row in per_proto.items():
        tot = row["transactions"] + row["failures"]
        m[f"{proto}_tpm"] = row["transactions"] / window_s * 60 if window_s > 0 else None
        m[f"{proto}_failure_pct"] = 100.0 * row["failures"] / tot if tot else None
    return m, {"failures_by_reason": reasons, "by_protocol": per_proto, "by_server": per_server}


def series(txs: list[Transaction], t0: float, t1: float, step_s: float = 1.0) -> list[dict]:
    """Complete transactions per step [TPM] and failures, by the time the runner read them."""
    out = []
    nbins = max(1, math.ceil((t1 - t0) / step_s - 1e-9))
    for i in range(nbins):
        a, b = t0 + i * step_s, min(t1, t0 + (i + 1) * step_s)
        sel = [t for t in txs if a <= t.t_end < b]
        ok = sum(1 for t in sel if t.ok)
        width = b - a
        out.append({"t_s": round(b - t0, 3), "tpm": ok / width * 60 if width > 0 else None,
                    "failures": len(sel) - ok})
    return out


# -- the client processes ------------------------------------------------------------------------
@dataclass
class ClientProc:
    """One curl process: ``concurrency`` virtual clients from source address ``source``."""

    name: str
    concurrency: int
    source: str | None
    config: str  #: curl -K text: the URLs in order
    sp: Spawned | None = None
    lines: list[tuple[float, str]] = field(default_factory=list)
    thread: threading.Thread | None = None
    exited_at: float | None = None


def _reader(cp: ClientProc, t0: float) -> None:
    assert cp.sp is not None and cp.sp.proc.stdout is not None
    for line in cp.sp.proc.stdout:
        cp.lines.append((time.monotonic() - t0, line))
    cp.exited_at = time.monotonic() - t0


def url_for(proto: str, server: int, size_bytes: int, n: int | str) -> str:
    """The URL of one request, distinct per ``n``: HTTP gets it as a query; FTP as the anonymous
    password, so curl never reuses a control connection and every request is a whole FTP
    transaction (connect, login, passive RETR, quit), as seed 002's FTP requests were."""
    path = f"/obj/{object_name(size_bytes)}"
    if proto == "ftp":
        return f"ftp://anonymous:{n}@{server_host(server)}{path}"
    return f"{proto}://{server_host(server)}{path}?{n}"


def http_config(size_bytes: int, count: int) -> str:
    """-K text for ``count`` HTTP requests of one object (one globbed URL, nothing to parse)."""
    return f'url = "{url_for("http", 0, size_bytes, f"[1-{count}]")}"\noutput = "/dev/null"\n'


def ftp_config(size_bytes: int, count: int) -> str:
    """-K text for ``count`` FTP retrievals of one object, each logging in anew (:func:`url_for`:
    the anonymous password, globbed 1..count, differs per URL)."""
    return f'url = "{url_for("ftp", 0, size_bytes, f"[1-{count}]")}"\noutput = "/dev/null"\n'


def mix_config(reqs: list[txmix.Request], repeats: int) -> str:
    lines = []
    for r in range(repeats):
        for i, q in enumerate(reqs):
            lines.append(f'url = "{url_for(q.protocol, q.server, q.size_bytes, f"{r}-{i}")}"\noutput = "/dev/null"\n')
    return "".join(lines)


def curl_argv(cp: ClientProc, cfg: Path, *, resolve: list[str], proxy: str | None,
              connect_timeout_s: float, timeout_s: float, cpu: int | None) -> list[str]:
    argv = ["stdbuf", "-oL"]
    if cpu is not None:
        argv += ["taskset", "-c", str(cpu)]
    argv += ["curl", "--silent", "--no-progress-meter", "--parallel", "--parallel-immediate",
             "--parallel-max", str(cp.concurrency), "--header", "Connection: close",
             "--connect-timeout", f"{connect_timeout_s:g}", "--max-time", f"{timeout_s:g}",
             "--ftp-pasv", "--write-out", WRITE_OUT.replace("\\n", "\n")]
    for r in resolve:
        argv += ["--resolve", r]
    if proxy:
        argv += ["--proxy", proxy]
    if cp.source:
        argv += ["--interface", cp.source]
    argv += ["--config", str(cfg)]
    return argv


class Curl(Runner):
    name = "curl"
    traffics = ("http", "ftp", "mix")
    record_kind = "transactions"
    trial_overhead_s = {"http": 1.8, "ftp": 1.8, "mix": 2.5}
    summary = ("curl against nginx: HTTP transactions per minute, failure %, connect time and time to first "
               "byte percentiles at a client load (streams = concurrent clients); 'mix' = seed 002's "
               "request matrix and protocol mix; 'ftp' = anonymous FTP retrievals from vsftpd (one login each)")

    OPTIONS = {"objects_bytes", "ftp", "connect_timeout_s", "timeout_s"}

    def __init__(self) -> None:
        self._servers: dict[str, WebServer] = {}
        self._ftp: dict[str, FtpServer] = {}

    def unavailable(self) -> str | None:
        for prog, pkg in (("curl", "curl"), ("nginx", "nginx"), ("stdbuf", "coreutils")):
            if not (shutil.which(prog) or shutil.which(prog, path="/usr/sbin:/sbin")):
                return f"{prog} is not installed (apt-get install {pkg}, or make system-deps)"
        return None

    def version(self) -> str:
        require_tool("curl")
        cv = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()
        ftpd = f"; {vsftpd_version()}" if shutil.which("vsftpd", path="/usr/sbin:/sbin:/usr/bin") else ""
        return f"curl {cv[1] if len(cv) > 1 else '?'}; {nginx_version()}{ftpd}"


    def check_options(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        unknown = set(options) - self.OPTIONS
        if unknown:
            raise ValueError(f"tool 'curl' has no option(s) {', '.join(sorted(unknown))} "
                             f"(it has: {', '.join(sorted(self.OPTIONS))})")
        out = dict(options)
        objs = out.get("objects_bytes", list(DEFAULT_OBJECTS))
        if (not isinstance(objs, list) or not objs
                or not all(isinstance(s, int) and 1 <= s <= 64 * 1024 * 1024 for s in objs)):
            raise ValueError("objects_bytes must be a list of object sizes in bytes (1 .. 64 MiB)")
        if kind == "mix":
            out["objects_bytes"] = objs
        elif "objects_bytes" in options:
            raise ValueError("objects_bytes is for kind 'mix' (kind 'http' takes its object size from sizes)")
        if not isinstance(out.get("ftp", False), bool):
            raise ValueError("ftp must be true or false")
        if out.get("ftp") and kind != "mix":
            raise ValueError("ftp is for kind 'mix'")
        for k, dflt in (("connect_timeout_s", 2.0), ("timeout_s", 5.0)):
            v = out.get(k, dflt)
            if not isinstance(v, (int, float)) or not 0.05 <= v <= 120:
                raise ValueError(f"{k} must be a number of seconds in 0.05..120")
            out[k] = float(v)
        return out

    # -- servers -------------------------------------------------------------------------------
    def _web(self, bed: "Testbed") -> WebServer:
        ns = bed.ns("server")
        if ns not in self._servers:
            self._servers[ns] = WebServer(bed)
        return self._servers[ns]

    def stop(self, bed: "Testbed") -> None:
        ws = self._servers.pop(bed.ns("server"), None)
        if ws is not None:
            ws.stop()
        fs = self._ftp.pop(bed.ns("server"), None)
        if fs is not None:
            fs.stop()

    # -- a trial -------------------------------------------------------------------------------
    def _clients(self, bed: "Testbed", spec: TrafficSpec, duration_s: float,
                 ftp: bool) -> tuple[list[ClientProc], list[int], int]:
        """The curl processes of this trial, the object sizes and the number of servers; ``ftp``:
        a mix with Table 8's FTP share per server (else every mix request is HTTP)."""
        plan = bed.topo.plan
        if spec.traffic == "http":
            size = spec.size_bytes or DEFAULT_SIZE
            count = max(10_000, int(200_000 * (duration_s + WARMUP_S)))
            return [ClientProc("client01", spec.streams, None, http_config(size, count))], [size], 1
        if spec.traffic == "ftp":
            size = spec.size_bytes or DEFAULT_SIZE
            count = max(5_000, int(20_000 * (duration_s + WARMUP_S)))
            return [ClientProc("client01", spec.streams, None, ftp_config(size, count))], [size], 1
        sizes = list(spec.options.get("objects_bytes") or DEFAULT_OBJECTS)
        procs = []
        for i, k in enumerate(txmix.spread(spec.streams, txmix.N_CLIENTS)):
            if k == 0:
                continue
            reqs = txmix.matrix_cycle(i, sizes, ftp=ftp, seed=1)
            # enough requests for 5,000 transactions/s per process, at least two cycles
            repeats = max(2, math.ceil(5000 * (duration_s + WARMUP_S) / len(reqs)))
            src = nth_address(plan.client(spec.ip_version), i)
            procs.append(ClientProc(f"client{i + 1:02d}", k, src, mix_config(reqs, repeats)))
        return procs, sizes, txmix.N_SERVERS

    def measure(self, bed: "Testbed", spec: TrafficSpec, env: TrialEnv | None = None) -> Measurement:
        if spec.traffic not in self.traffics:
            raise RunnerError(f"curl cannot generate '{spec.traffic}'", fix=f"use one of {', '.join(self.traffics)}")
        env = env or TrialEnv()
        plan = bed.topo.plan
        v = spec.ip_version
        duration = float(spec.duration_s)
        opts = self.check_options(spec.traffic, dict(spec.options))
        ftp = spec.traffic == "ftp" or (spec.traffic == "mix" and bool(opts.get("ftp")))
        procs, sizes, n_servers = self._clients(bed, spec, duration, ftp)
        plen = int(plan.server_net(v).split("/")[1])
        servers = [nth_address(plan.server(v), k) for k in range(n_servers)]
        ws = self._web(bed)
        ws.ensure(sizes, [(a, plen) for a in servers[1:]])
        if ftp:
            ns = bed.ns("server")
            if ns not in self._ftp:
                self._ftp[ns] = FtpServer(bed)
            self._ftp[ns].ensure(sizes)
        cplen = int(plan.client_net(v).split("/")[1])
        for p in procs:
            if p.source and p.source != plan.client(v):
                bed.sh("client", "ip", "addr", "replace", f"{p.source}/{cplen}", "dev", bed.topo.client_if,
                       *(["nodad"] if v == 6 else []))
        proxy = None
        proxy_of = getattr(env.backend, "proxy_url", None) if env.backend is not None else None
        if callable(proxy_of) and env.dut is not None:
            proxy = proxy_of(env.dut, v)
        resolve = [f"{server_host(k)}:{port}:{a if v == 4 else '[' + a + ']'}"
                   for k, a in enumerate(servers) for port in (HTTP_PORT, FTP_PORT)]
        if ftp and proxy:
            raise RunnerError("the application proxy DUT relays HTTP only: FTP transactions cannot pass it",
                              fix="measure FTP (kind 'ftp', or a mix with ftp = true) with a packet-filter "
                                  "backend (nftables, iptables, ...)")
        tmp = Path(tempfile.mkdtemp(prefix="fwlab-curl-"))
        before = ws.status()
        link0 = bed.link_counters("server", bed.topo.server_if)
        t0 = time.monotonic()
        argvs = []
        try:
            for p in procs:
                cfg = tmp / f"{p.name}.cfg"
                cfg.write_text(p.config)
                argv = curl_argv(p, cfg, resolve=resolve, proxy=proxy,
                                 connect_timeout_s=opts["connect_timeout_s"], timeout_s=opts["timeout_s"],
                                 cpu=bed.topo.pinning.client_cpu)
                argvs.append(argv)
                p.sp = bed.host.spawn(argv, ns=bed.ns("client"))
                p.thread = threading.Thread(target=_reader, args=(p, t0), daemon=True)
                p.thread.start()
            cpu0 = _cpu_times(procs)
            time.sleep(WARMUP_S + duration)
            t_stop = time.monotonic() - t0
            cpu1 = _cpu_times(procs)
            errs = self._stop_clients(bed, procs)
        finally:
            self._stop_clients(bed, procs)
            shutil.rmtree(tmp, ignore_errors=True)
        after = ws.status()
        link1 = bed.link_counters("server", bed.topo.server_if)

        window_end = t_stop
        early = [p for p in procs if p.exited_at is not None and p.exited_at < t_stop - 0.05]
        flags: list[dict] = []
        if early:
            window_end = min(p.exited_at for p in early)  # type: ignore[type-var]
            flags.append({"code": "client-exited", "severity": "warning",
                          "message": f"curl {early[0].name} ended {t_stop - window_end:.2f} s early "
                                     f"({errs.get(early[0].name, '')[:120]}); TPM counts up to then"})
        window = window_end - WARMUP_S
        if window <= 0:
            raise RunnerError(f"curl ended before any transaction was measured: {next(iter(errs.values()), '')[:160]}",
                              fix="check that nginx runs and that the firewall permits HTTP")
        txs_all = [t for p in procs for (ts, ln) in p.lines if (t := parse_line(ln, ts)) is not None]
        txs = [t for t in txs_all if WARMUP_S <= t.t_end < window_end]
        if not txs:
            raise RunnerError(f"no transaction completed in {window:.1f} s "
                              f"({next(iter(errs.values()), 'curl printed nothing')[:160]})",
                              fix="check the firewall's permit rule and the server")
        metrics, extra = summarize(txs, window)
        metrics["clients"] = spec.streams
        metrics["client_processes"] = len(procs)
        metrics["server_requests"] = after["requests"] - before["requests"]
        metrics["server_accepts"] = after["accepts"] - before["accepts"]
        rx = link1["rx_packets"] - link0["rx_packets"]
        metrics["server_if_rx_packets"] = rx
        metrics["rx_pps"] = rx / t_stop if t_stop > 0 else None
        cpu_s = sum(cpu1.values()) - sum(cpu0.values())
        metrics["cpu_client_pct"] = 100.0 * cpu_s / duration if duration > 0 and cpu1 else None
        if metrics["cpu_client_pct"] is not None and metrics["cpu_client_pct"] >= 90:
            flags.append({"code": "client-cpu-bound", "severity": "warning",
                          "message": f"the curl clients used {metrics['cpu_client_pct']:.0f} % of a CPU: "
                                     "this TPM may be the clients' limit, not the DUT's"})
        extra.update({"clients_per_process": {p.name: p.concurrency for p in procs},
                      "proxy": proxy, "servers": servers, "objects_bytes": sizes,
                      "window_s": [WARMUP_S, window_end]})
        if spec.traffic == "mix":
            extra["mix_shares"] = txmix.mix_shares([r for i in range(txmix.N_CLIENTS)
                                                    for r in txmix.matrix_cycle(i, sizes, ftp=ftp, seed=1)])
        head = [ln for p in procs for _, ln in p.lines[:20]]
        raw = {"argv": argvs, "curl_stderr": errs, "write_out_head": head,
               "transactions_read": len(txs_all)}
        return Measurement(metrics=metrics, series=series(txs, WARMUP_S, window_end), raw=raw, flags=flags,
                           kind="transactions", extra=extra)

    def _stop_clients(self, bed: "Testbed", procs: list[ClientProc]) -> dict[str, str]:
        errs: dict[str, str] = {}
        for p in procs:
            if p.sp is None:
                continue
            try:
                os.killpg(p.sp.proc.pid, signal.SIGINT)
            except (ProcessLookupError, PermissionError):
                pass
        for p in procs:
            if p.sp is None:
                continue
            try:
                p.sp.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.sp.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.sp.proc.wait(timeout=3)
            if p.thread is not None:
                p.thread.join(timeout=3)
            err = p.sp.proc.stderr.read() if p.sp.proc.stderr else ""
            errs[p.name] = (err or "").strip()[-400:]
            bed.host.forget(p.sp)
            p.sp = None
        return errs


def _cpu_times(procs: list[ClientProc]) -> dict[int, float]:
    """User + system CPU seconds of each running curl (from /proc; the group leader is curl
    itself after stdbuf and taskset exec it)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for p in procs:
        if p.sp is None:
            continue
        try:
            fields = Path(f"/proc/{p.sp.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[p.sp.proc.pid] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return out


register(Curl())
