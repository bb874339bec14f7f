"""The origin servers of transaction trials: nginx (HTTP) in the server namespace.

Owns: the objects served (seeded random bytes, one file per size), nginx's configuration
(rendered into a temporary directory of its own, never /etc/nginx), the extra server addresses
of the request matrix, starting nginx inside the server namespace (pinned to the server CPU),
reading its stub_status counters and stopping it. Never touches the host's own nginx, its
files or its service; never parses client output (``runners.curl`` does).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fwlab.errors import RunnerError
from fwlab.testbed.host import Spawned, require_tool

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

HTTP_PORT = 80
STATUS_PORT = 8081  #: stub_status, bound to 127.0.0.1 of the server namespace only


def object_name(size_bytes: int) -> str:
    """The file name of the object of ``size_bytes`` (same name over HTTP and FTP)."""
    return f"{size_bytes}.bin"


def object_bytes(size_bytes: int, seed: int) -> bytes:
    """The object's content: ``size_bytes`` seeded random bytes (incompressible, reproducible)."""
    return random.Random(f"fwlab-object-{seed}-{size_bytes}").randbytes(size_bytes)


def write_objects(root: Path, sizes_bytes: list[int], seed: int) -> None:
    """Write one object per size into ``root/obj`` (world-readable: nginx workers are nobody)."""
    d = root / "obj"
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o755)
    for s in sorted(set(sizes_bytes)):
        p = d / object_name(s)
        if not p.exists() or p.stat().st_size != s:
            p.write_bytes(object_bytes(s, seed))
            os.chmod(p, 0o644)


def render_nginx_conf(prefix: Path, root: Path, *, port: int = HTTP_PORT, workers: int = 1) -> str:
    """nginx.conf for static objects: every path under ``prefix`` (pid, logs, temp dirs), no
    access log (the client counts transactions; stub_status counts them on the server side),
    ``Connection: close`` from the client ends each transaction's TCP connection."""
    return f"""# written by fwlab; lives in {prefix} and is removed when the server stops
daemon off;
worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{
    worker_connections 16384;
}}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp_body;
    proxy_temp_path {prefix}/tmp_proxy;
    fastcgi_temp_path {prefix}/tmp_fastcgi;
    uwsgi_temp_path {prefix}/tmp_uwsgi;
    scgi_temp_path {prefix}/tmp_scgi;
    sendfile on;
    tcp_nopush on;
    types {{ application/octet-stream bin; }}
    default_type application/octet-stream;
    server {{
        listen {port} reuseport backlog=4096;
        listen [::]:{port} reuseport backlog=4096;
        root {root};
    }}
    server {{
        listen 127.0.0.1:{STATUS_PORT};
        location = /status {{ stub_status; }}
    }}
}}
"""


def parse_stub_status(text: str) -> dict[str, int]:
    """nginx stub_status -> {"active", "accepts", "handled", "requests"} [connections, requests]."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    try:
        active = int(lines[0].split(":")[1])
        accepts, handled, requests = (int(x) for x in lines[2].split())
    except (IndexError, ValueError) as exc:
        raise RunnerError(f"nginx stub_status is unreadable: {text.strip()[:80]!r}",
                          fix="check the nginx error log in the server's temporary directory") from exc
    return {"active": active, "accepts": accepts, "handled": handled, "requests": requests}


def nginx_version() -> str:
    require_tool("nginx")
    cp = subprocess.run(["nginx", "-v"], capture_output=True, text=True)
    return (cp.stderr or cp.stdout).strip().replace("nginx version: ", "")


def start_listening(bed: "Testbed", argv: list[str], port: int, wait_s: float = 5.0) -> tuple[Spawned, bool]:
    """Start a server program in the bed's server namespace, pinned to the server CPU, and wait
    until something listens on TCP ``port`` there (or it exits, or ``wait_s`` passes). Returns the
    process and whether it listens; on False the caller reads its own error log and stops it."""
    cpu = bed.topo.pinning.server_cpu
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu), *argv]
    proc = bed.host.spawn(argv, ns=bed.ns("server"))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.proc.poll() is None:
        if bed.sh("server", "ss", "-ltnH", f"sport = :{port}", check=False).stdout.strip():
            return proc, True
        time.sleep(0.05)
    return proc, False


@dataclass
class WebServer:
    """nginx in one test bed's server namespace, serving the objects of ``sizes_bytes`` on the
    server's own address and ``extra_addresses`` more (the request matrix's virtual servers)."""

    bed: "Testbed"
    seed: int = 1
    sizes_bytes: set[int] = field(default_factory=set)
    addresses: list[tuple[str, int]] = field(default_factory=list)  #: (address, prefix length) added
    proc: Spawned | None = None
    prefix: Path | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.proc.poll() is None

    def ensure(self, sizes_bytes: list[int], addresses: list[tuple[str, int]]) -> None:
        """Serve these sizes on these (address, prefix length) pairs; start nginx if needed."""
        for addr, plen in addresses:
            if (addr, plen) not in self.addresses:
                self.bed.sh("server", "ip", "addr", "replace", f"{addr}/{plen}", "dev",
                            self.bed.topo.server_if, *(["nodad"] if ":" in addr else []))
                self.addresses.append((addr, plen))
        if self.prefix is None:
            require_tool("nginx")
            self.prefix = Path(tempfile.mkdtemp(prefix="fwlab-nginx-"))
            os.chmod(self.prefix, 0o755)
        write_objects(self.prefix / "www", sizes_bytes, self.seed)
        os.chmod(self.prefix / "www", 0o755)
        self.sizes_bytes |= set(sizes_bytes)
        if not self.running:
            self._start()

    def _start(self) -> None:
        assert self.prefix is not None
        conf = self.prefix / "nginx.conf"
        conf.write_text(render_nginx_conf(self.prefix, self.prefix / "www"))
        argv = ["nginx", "-e", str(self.prefix / "error.log"), "-p", str(self.prefix), "-c", str(conf)]
        self.proc, listening = start_listening(self.bed, argv, HTTP_PORT)
        if listening:
            return
        err = (self.prefix / "error.log").read_text(errors="replace")[-300:] if (self.prefix / "error.log").exists() else ""
        self.stop()
        raise RunnerError(f"nginx did not listen on port {HTTP_PORT} in the server namespace: {err.strip()}",
                          fix="run 'fwlab clean'; check that nginx is installed (make system-deps)")

    def status(self) -> dict[str, int]:
        """stub_status counters (connections accepted, requests served) since nginx started."""
        cp = self.bed.sh("server", "curl", "-sS", "--max-time", "2", f"http://127.0.0.1:{STATUS_PORT}/status",
                         check=False)
        if cp.returncode != 0:
            raise RunnerError(f"nginx stub_status did not answer: {cp.stderr.strip()[:100]}",
                              fix="check the nginx error log")
        return parse_stub_status(cp.stdout)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.bed.host.forget(self.proc)
            self.proc = None
        for addr, plen in self.addresses:
            self.bed.sh("server", "ip", "addr", "del", f"{addr}/{plen}", "dev",
                        self.bed.topo.server_if, check=False)
        self.addresses.clear()
        if self.prefix is not None:
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None
        self.sizes_bytes.clear()
