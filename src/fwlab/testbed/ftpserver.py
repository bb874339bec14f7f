"""The FTP origin server of transaction trials: vsftpd (Debian's) in the server namespace.

Owns: vsftpd's configuration (rendered into a temporary directory of its own, never /etc/vsftpd.conf;
``listen=YES``: vsftpd runs standalone in the foreground, never the host's service), anonymous
read-only access to the seeded objects (the same files, names and bytes nginx serves:
``testbed.webserver.write_objects``), passive data ports in a fixed range, starting it inside the
server namespace pinned to the server CPU, and stopping it. Never parses client output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fwlab.errors import RunnerError
from fwlab.testbed.host import Spawned, require_tool
from fwlab.testbed.webserver import start_listening, write_objects

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed

FTP_PORT = 21
PASV_PORTS = (30000, 31999)  #: passive data ports (a firewall that permits FTP must permit these)


def render_vsftpd_conf(prefix: Path, root: Path, *, port: int = FTP_PORT,
                       pasv_ports: tuple[int, int] = PASV_PORTS) -> str:
    """vsftpd.conf: standalone, IPv4 and IPv6 (``listen_ipv6`` accepts both), anonymous read-only
    under ``root`` as user ``ftp`` (created by Debian's vsftpd package; its home must exist), any password accepted (the client varies it to get one login per transaction),
    no transfer log, no per-client limits."""
    return f"""# written by fwlab; lives in {prefix} and is removed when the server stops
listen=NO
listen_ipv6=YES
listen_port={port}
background=NO
anonymous_enable=YES
no_anon_password=YES
anon_root={root}
ftp_username=ftp
local_enable=NO
write_enable=NO
anon_upload_enable=NO
anon_mkdir_write_enable=NO
dirlist_enable=NO
pasv_enable=YES
pasv_min_port={pasv_ports[0]}
pasv_max_port={pasv_ports[1]}
port_enable=NO
max_clients=0
max_per_ip=0
xferlog_enable=NO
syslog_enable=NO
vsftpd_log_file={prefix}/vsftpd.log
secure_chroot_dir={prefix}/empty
seccomp_sandbox=NO
isolate=NO
isolate_network=NO
use_sendfile=YES
"""


def vsftpd_version() -> str:
    require_tool("vsftpd")
    # vsftpd -v writes its version to file descriptor 0
    # (so fd 0 is pointed at the captured stdout; stdin= together with input= was a ValueError)
    cp = subprocess.run(["sh", "-c", "exec vsftpd -v 0>&1"], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, check=False)
    out = (cp.stdout or "").strip()
    return out.replace("vsftpd: version ", "vsftpd ") or "vsftpd"


@dataclass
class FtpServer:
    """vsftpd in one test bed's server namespace, serving the objects of ``sizes_bytes``
    (anonymous, read-only) at ``/obj/<size>.bin``."""

    bed: "Testbed"
    seed: int = 1
    sizes_bytes: set[int] = field(default_factory=set)
    proc: Spawned | None = None
    prefix: Path | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.proc.poll() is None

    def ensure(self, sizes_bytes: list[int]) -> None:
        if self.prefix is None:
            require_tool("vsftpd")
            self.prefix = Path(tempfile.mkdtemp(prefix="fwlab-vsftpd-"))
            os.chmod(self.prefix, 0o755)
            (self.prefix / "empty").mkdir(mode=0o555)
            (self.prefix / "ftp").mkdir(mode=0o555)
            os.chmod(self.prefix / "ftp", 0o555)  # vsftpd refuses a writable anonymous root
        write_objects(self.prefix / "ftp", sizes_bytes, self.seed)
        os.chmod(self.prefix / "ftp", 0o555)
        self.sizes_bytes |= set(sizes_bytes)
        if not self.running:
            self._start()

    def _start(self) -> None:
        assert self.prefix is not None
        conf = self.prefix / "vsftpd.conf"
        conf.write_text(render_vsftpd_conf(self.prefix, self.prefix / "ftp"))
        os.chmod(conf, 0o600)  # vsftpd wants its config owned by root
        self.proc, listening = start_listening(self.bed, ["vsftpd", str(conf)], FTP_PORT)
        if listening:
            return
        err = ""
        if self.proc.proc.poll() is not None and self.proc.proc.stderr is not None:
            err = (self.proc.proc.stderr.read() or "")[-300:]
        self.stop()
        raise RunnerError(f"vsftpd did not listen on port {FTP_PORT} in the server namespace: {err.strip()}",
                          fix="check that vsftpd is installed (make system-deps) and port 21 is free there")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.bed.host.forget(self.proc)
            self.proc = None
        if self.prefix is not None:
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None
        self.sizes_bytes.clear()
