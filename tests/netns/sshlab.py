"""A stand-in for a remote firewall host, for the SSH tests: a namespace ("the DUT machine")
running its own OpenSSH server, set up by the test the way a user sets up a real DUT.

- namespace ``fwl-<id>-rdut``: forwards between eth1 (198.18.1.254, the client side) and eth2
  (198.19.1.254, the server side), the standard routed address plan; sshd listens on
  198.19.254.2:2222 with host and user keys made in a temporary directory for this test;
- namespace ``fwl-<id>-mgmt``: the management network (198.19.254.1/30) through which this
  machine reaches that sshd: ssh's ProxyCommand relays the connection from inside it, so the
  host's own namespace gets no address and no route;
- the other ends of eth1/eth2 wait, down and unaddressed, in this process's namespace as
  ``fwl-<id>-xc`` / ``fwl-<id>-xs``: the "cables" the hosts file hands to the local client and
  server roles.

Nothing under /root/.ssh, /etc/ssh or the host's sshd is read or changed (sshd needs its
privilege-separation directory /run/sshd, created empty when missing).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from fwlab.testbed.bed import LIVE_NAMESPACES, delete_namespace
from fwlab.testbed.host import LocalHost
from fwlab.testbed.topology import ROUTED_PLAN, new_run_id

SSHD = "/usr/sbin/sshd"
MGMT_DUT, MGMT_LOCAL, SSH_PORT = "198.19.254.2", "198.19.254.1", 2222

RELAY = textwrap.dedent("""
    import os, select, socket, sys
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    s.settimeout(None)
    stdin_open = True
    while True:
        r, _, _ = select.select([0, s] if stdin_open else [s], [], [])
        if 0 in r:
            d = os.read(0, 65536)
            if d:
                s.sendall(d)
            else:
                stdin_open = False
                s.shutdown(socket.SHUT_WR)
        if s in r:
            d = s.recv(65536)
            if not d:
                break
            os.write(1, d)
""")


class SshLab:
    def __init__(self, tmp: Path, quiet_shell: bool = True):
        self.tmp = tmp
        #: hide /root/.bashrc from the test sshd's sessions (a private mount namespace, bind-mounted
        #: empty file): bash sources it for every SSH command, and this machine's runs pyenv (~0.4 s)
        self.quiet_shell = quiet_shell
        self.id = new_run_id()
        self.dut_ns = f"fwl-{self.id}-rdut"
        self.mgmt_ns = f"fwl-{self.id}-mgmt"
        self.client_end = f"fwl-{self.id}-xc"
        self.server_end = f"fwl-{self.id}-xs"
        self.host = LocalHost()
        self.sshd: subprocess.Popen | None = None

    # -- set-up ------------------------------------------------------------------------------------
    def up(self) -> "SshLab":
        try:
            self._network()
            self._sshd()
        except BaseException:
            self.down()
            raise
        return self

    def sh(self, ns: str, *argv: str, check: bool = True):
        return self.host.run(list(argv), ns=ns, check=check)

    def _network(self) -> None:
        p = ROUTED_PLAN
        for ns in (self.dut_ns, self.mgmt_ns):
            self.host.run(["ip", "netns", "add", ns])
            LIVE_NAMESPACES.add(ns)
            self.sh(ns, "ip", "link", "set", "lo", "up")
        # the cables: the DUT's ends inside its namespace, the other ends here, down, no address
        self.host.run(["ip", "link", "add", "eth1", "netns", self.dut_ns, "type", "veth", "peer", "name",
                       self.client_end])
        self.host.run(["ip", "link", "add", "eth2", "netns", self.dut_ns, "type", "veth", "peer", "name",
                       self.server_end])
        self.host.run(["ip", "link", "add", "mg0", "netns", self.mgmt_ns, "type", "veth", "peer", "name",
                       "mg1", "netns", self.dut_ns])
        d = self.dut_ns
        for key, val in (("net.ipv4.ip_forward", 1), ("net.ipv6.conf.all.forwarding", 1),
                         ("net.ipv4.conf.all.rp_filter", 0), ("net.ipv4.conf.default.rp_filter", 0),
                         ("net.ipv6.conf.all.accept_dad", 0), ("net.ipv6.conf.default.accept_dad", 0)):
            self.sh(d, "sysctl", "-q", "-w", f"{key}={val}")
        for dev, a4, a6 in (("eth1", f"{p.dut_client_side4}/24", f"{p.dut_client_side6}/64"),
                            ("eth2", f"{p.dut_server_side4}/24", f"{p.dut_server_side6}/64")):
            self.sh(d, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
            self.sh(d, "ip", "addr", "add", a4, "dev", dev)
            self.sh(d, "ip", "addr", "add", a6, "dev", dev, "nodad")
            self.sh(d, "ip", "link", "set", dev, "up")
        self.sh(d, "ip", "addr", "add", f"{MGMT_DUT}/30", "dev", "mg1")
        self.sh(d, "ip", "link", "set", "mg1", "up")
        self.sh(self.mgmt_ns, "ip", "addr", "add", f"{MGMT_LOCAL}/30", "dev", "mg0")
        self.sh(self.mgmt_ns, "ip", "link", "set", "mg0", "up")

    def _sshd(self) -> None:
        t = self.tmp
        self.key = t / "id_ed25519"
        for path in (self.key, t / "host_ed25519"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fwlab-test", "-f", str(path)],
                           check=True, capture_output=True)
        (t / "authorized_keys").write_text((t / "id_ed25519.pub").read_text())
        self.known_hosts = t / "known_hosts"
        self.known_hosts.write_text(f"[{MGMT_DUT}]:{SSH_PORT} {(t / 'host_ed25519.pub').read_text()}")
        (t / "relay.py").write_text(RELAY)
        cfg = t / "sshd_config"
        cfg.write_text(textwrap.dedent(f"""\
            Port {SSH_PORT}
            ListenAddress {MGMT_DUT}
            HostKey {t / 'host_ed25519'}
            PidFile {t / 'sshd.pid'}
            AuthorizedKeysFile {t / 'authorized_keys'}
            PermitRootLogin prohibit-password
            PubkeyAuthentication yes
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            StrictModes no
            MaxSessions 64
            LogLevel ERROR
            """))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        argv = [SSHD, "-D", "-e", "-f", str(cfg)]
        if self.quiet_shell and os.path.exists("/root/.bashrc"):
            (t / "empty_bashrc").write_text("")
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount --bind "$0" /root/.bashrc && exec "$@"', str(t / "empty_bashrc"), *argv]
        self.sshd = subprocess.Popen(["ip", "netns", "exec", self.dut_ns, *argv],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.sshd.poll() is not None:
                raise RuntimeError(f"test sshd exited: {self.sshd.stderr.read().strip()}")
            if self.sh(self.dut_ns, "ss", "-ltnH", f"sport = :{SSH_PORT}", check=False).stdout.strip():
                return
            time.sleep(0.05)
        raise RuntimeError("test sshd did not listen within 5 s")

    # -- what a user writes ------------------------------------------------------------------------
    def dut_entry(self, **over) -> dict:
        proxy = f"ProxyCommand=ip netns exec {self.mgmt_ns} {sys.executable} {self.tmp / 'relay.py'} %h %p"
        e = {"ssh": f"root@{MGMT_DUT}", "port": SSH_PORT, "key": str(self.key),
             "known_hosts": str(self.known_hosts), "ssh_config": "none", "ssh_options": [proxy],
             "connect_timeout_s": 5, "ifaces": ["eth1", "eth2"]}
        e.update(over)
        return e

    def hosts(self) -> dict:
        return {"dut": self.dut_entry(), "client": {"ifaces": [self.client_end]},
                "server": {"ifaces": [self.server_end]}}

    def hosts_toml(self) -> str:
        def val(v):
            if isinstance(v, list):
                return "[" + ", ".join(val(x) for x in v) + "]"
            if isinstance(v, str):
                return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
            return str(v)
        out = []
        for role, e in self.hosts().items():
            out.append(f"[hosts.{role}]")
            out += [f"{k} = {val(v)}" for k, v in e.items()]
            out.append("")
        return "\n".join(out)

    # -- tear-down ---------------------------------------------------------------------------------
    def kill_sshd(self) -> None:
        """Stop every sshd of the lab: the listener and the per-connection ones."""
        if self.sshd is not None and self.sshd.poll() is None:
            self.sshd.terminate()
            self.sshd.wait(timeout=5)
        from fwlab.testbed.host import kill_namespace_pids
        kill_namespace_pids(self.host, self.dut_ns)

    def down(self) -> None:
        if self.sshd is not None and self.sshd.poll() is None:
            self.sshd.terminate()
            try:
                self.sshd.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.sshd.kill()
        for ns in (self.dut_ns, self.mgmt_ns):
            delete_namespace(self.host, ns)
        for dev in (self.client_end, self.server_end):  # gone with their peers; make sure
            self.host.run(["ip", "link", "del", dev], check=False)
