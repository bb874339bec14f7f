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

from fwlab.testbed.namespaces import LIVE_NAMESPACES, delete_namespace
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


# -- a lab of separate "machines": every role behind its own sshd ----------------------------------
class HostsLab:
    """Client host(s), a DUT host and server host(s), each a namespace with its own sshd, wired
    like separate machines by cables fwlab does not create:

        cli1 eth0 --(switch ns, bridge, when clients > 1)-- eth1 dut eth2 --(switch ns, when servers > 1)-- eth0 srv

    With ``attacker``, one more host ``atk`` (198.18.2.1/24, 2001:2:0:3::1) is cabled to the
    DUT's eth3 (198.18.2.254, 2001:2:0:3::fe), the routed plan's attacker network.

    The client hosts are 198.18.1.<i>/24 (2001:2:0:1::<i>), the server hosts 198.19.1.<k>/24
    (2001:2:0:2::<k>; the first is ``srv``, then ``srv2`` ...), the DUT forwards between
    198.18.1.254 and 198.19.1.254: the standard routed plan, set up here as a
    user sets up real machines. Management: every host's sshd listens on 198.19.254.<10+i>:2222 on a
    management bridge in ``fwl-<id>-mgmt``, reached through ssh's ProxyCommand (this machine's own
    namespace gets no address). The hosts share this machine's file system, so each one's
    hosts-file entry names its own ``cache_dir`` (as separate machines would have their own).
    """

    def __init__(self, tmp: Path, clients: int = 1, quiet_shell: bool = True, servers: int = 1,
                 attacker: bool = False):
        self.tmp, self.clients, self.servers, self.quiet_shell = tmp, clients, servers, quiet_shell
        self.attacker = attacker
        self.id = new_run_id()
        self.server_names = ["srv"] + [f"srv{k}" for k in range(2, servers + 1)]
        self.names = ([f"cli{i}" for i in range(1, clients + 1)] + ["dut", *self.server_names]
                      + (["atk"] if attacker else []))
        self.ns = {n: f"fwl-{self.id}-h{n}" for n in self.names}
        self.mgmt_ns = f"fwl-{self.id}-mgmt"
        self.switch_ns = f"fwl-{self.id}-sw"
        self.server_switch_ns = f"fwl-{self.id}-sws"
        self.addr = {n: f"198.19.254.{10 + i}" for i, n in enumerate(self.names)}
        self.host = LocalHost()
        self.sshd: dict[str, subprocess.Popen] = {}

    def all_ns(self) -> list[str]:
        return ([*self.ns.values(), self.mgmt_ns] + ([self.switch_ns] if self.clients > 1 else [])
                + ([self.server_switch_ns] if self.servers > 1 else []))

    def up(self) -> "HostsLab":
        try:
            self._network()
            self._keys()
            for n in self.names:
                self._sshd(n)
            self._settle()
        except BaseException:
            self.down()
            raise
        return self

    def sh(self, name: str, *argv: str, check: bool = True):
        return self.host.run(list(argv), ns=self.ns.get(name, name), check=check)

    def _veth(self, a: str, a_ns: str, b: str, b_ns: str) -> None:
        self.host.run(["ip", "link", "add", a, "netns", a_ns, "type", "veth", "peer", "name", b, "netns", b_ns])

    def _network(self) -> None:
        p = ROUTED_PLAN
        for ns in self.all_ns():
            self.host.run(["ip", "netns", "add", ns])
            LIVE_NAMESPACES.add(ns)
            self.host.run(["ip", "link", "set", "lo", "up"], ns=ns)
        m = self.mgmt_ns
        self.sh(m, "ip", "link", "add", "mbr", "type", "bridge")
        self.sh(m, "ip", "addr", "add", "198.19.254.1/24", "dev", "mbr")
        self.sh(m, "ip", "link", "set", "mbr", "up")
        for i, n in enumerate(self.names):
            self._veth("mg1", self.ns[n], f"m{i}", m)
            self.sh(m, "ip", "link", "set", f"m{i}", "master", "mbr")
            self.sh(m, "ip", "link", "set", f"m{i}", "up")
            self.sh(n, "ip", "addr", "add", f"{self.addr[n]}/24", "dev", "mg1")
            self.sh(n, "ip", "link", "set", "mg1", "up")
            for key in ("net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter",
                        "net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"):
                self.sh(n, "sysctl", "-q", "-w", f"{key}=0")
        # data cables: a host alone on its side is cabled to the DUT, several through a switch
        self._cable("eth1", [f"cli{i}" for i in range(1, self.clients + 1)], self.switch_ns)
        self._cable("eth2", self.server_names, self.server_switch_ns)
        for key in ("net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"):
            self.sh("dut", "sysctl", "-q", "-w", f"{key}=1")
        for dev, a4, a6 in (("eth1", f"{p.dut_client_side4}/24", f"{p.dut_client_side6}/64"),
                            ("eth2", f"{p.dut_server_side4}/24", f"{p.dut_server_side6}/64")):
            self.sh("dut", "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
            self.sh("dut", "ip", "addr", "add", a4, "dev", dev)
            self.sh("dut", "ip", "addr", "add", a6, "dev", dev, "nodad")
            self.sh("dut", "ip", "link", "set", dev, "up")
        ends = [(f"cli{i}", f"198.18.1.{i}/24", f"2001:2:0:1::{i}/64", p.dut_client_side4, p.dut_client_side6)
                for i in range(1, self.clients + 1)]
        ends += [(n, f"198.19.1.{k}/24", f"2001:2:0:2::{k}/64", p.dut_server_side4, p.dut_server_side6)
                 for k, n in enumerate(self.server_names, 1)]
        if self.attacker:
            self._veth("eth0", self.ns["atk"], "eth3", self.ns["dut"])
            self.sh("dut", "ethtool", "-K", "eth3", "tso", "off", "gso", "off", "gro", "off")
            self.sh("dut", "ip", "addr", "add", f"{p.dut_attacker_side4}/24", "dev", "eth3")
            self.sh("dut", "ip", "addr", "add", f"{p.dut_attacker_side6}/64", "dev", "eth3", "nodad")
            self.sh("dut", "ip", "link", "set", "eth3", "up")
            ends.append(("atk", f"{p.attacker4}/24", f"{p.attacker6}/64", p.dut_attacker_side4, p.dut_attacker_side6))
        for n, a4, a6, gw4, gw6 in ends:
            self.sh(n, "ethtool", "-K", "eth0", "tso", "off", "gso", "off", "gro", "off")
            self.sh(n, "ip", "addr", "add", a4, "dev", "eth0")
            self.sh(n, "ip", "addr", "add", a6, "dev", "eth0", "nodad")
            self.sh(n, "ip", "link", "set", "eth0", "up")
            self.sh(n, "ip", "route", "add", "default", "via", gw4)
            self.sh(n, "ip", "-6", "route", "add", "default", "via", gw6)

    def _cable(self, dut_if: str, names: list[str], switch_ns: str) -> None:
        """The DUT's ``dut_if`` cabled to the one host ``names`` (its eth0), or to a switch (a
        bridge in ``switch_ns``) with a port per host."""
        if len(names) == 1:
            self._veth("eth0", self.ns[names[0]], dut_if, self.ns["dut"])
            return
        s = switch_ns
        self.sh(s, "ip", "link", "add", "br0", "type", "bridge")
        self._veth(dut_if, self.ns["dut"], "pd", s)
        for i, n in enumerate(names, 1):
            self._veth("eth0", self.ns[n], f"p{i}", s)
        for dev in ["pd", *[f"p{i}" for i in range(1, len(names) + 1)]]:
            self.sh(s, "ip", "link", "set", dev, "master", "br0")
            self.sh(s, "ip", "link", "set", dev, "up")
        self.sh(s, "ip", "link", "set", "br0", "up")

    def _settle(self, timeout_s: float = 5.0) -> None:
        """Wait until every client reaches every server over IPv4 and IPv6 (links up, link-local
        addresses in place, neighbours known), so "before" snapshots are of a settled lab."""
        deadline = time.monotonic() + timeout_s
        for i in range(1, self.clients + 1):
            for v, addr in [(v, f"198.19.1.{k}" if v == 4 else f"2001:2:0:2::{k}")
                            for k in range(1, self.servers + 1) for v in (4, 6)]:
                while self.sh(f"cli{i}", "ping", f"-{v}", "-c", "1", "-W", "1", addr, check=False).returncode:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"lab client cli{i} cannot reach the server {addr} over IPv{v}")
                    time.sleep(0.1)

    def _keys(self) -> None:
        t = self.tmp
        self.key = t / "id_ed25519"
        for path in (self.key, t / "host_ed25519"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fwlab-test", "-f", str(path)],
                           check=True, capture_output=True)
        (t / "authorized_keys").write_text((t / "id_ed25519.pub").read_text())
        self.known_hosts = t / "known_hosts"
        hostkey = (t / "host_ed25519.pub").read_text()
        self.known_hosts.write_text("".join(f"[{a}]:{SSH_PORT} {hostkey}" for a in self.addr.values()))
        (t / "relay.py").write_text(RELAY)
        (t / "empty_bashrc").write_text("")

    def _sshd(self, n: str) -> None:
        t = self.tmp
        cfg = t / f"sshd_config_{n}"
        cfg.write_text(textwrap.dedent(f"""\
            Port {SSH_PORT}
            ListenAddress {self.addr[n]}
            HostKey {t / 'host_ed25519'}
            PidFile {t / f'sshd_{n}.pid'}
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
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        argv = [SSHD, "-D", "-e", "-f", str(cfg)]
        if self.quiet_shell and os.path.exists("/root/.bashrc"):
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount --bind "$0" /root/.bashrc && exec "$@"', str(t / "empty_bashrc"), *argv]
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns[n], *argv],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.sshd[n] = proc
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"test sshd of {n} exited: {proc.stderr.read().strip()}")
            if self.sh(n, "ss", "-ltnH", f"sport = :{SSH_PORT}", check=False).stdout.strip():
                return
            time.sleep(0.05)
        raise RuntimeError(f"test sshd of {n} did not listen within 5 s")

    # -- what a user writes ------------------------------------------------------------------------
    def entry(self, n: str, **over) -> dict:
        proxy = f"ProxyCommand=ip netns exec {self.mgmt_ns} {sys.executable} {self.tmp / 'relay.py'} %h %p"
        e = {"ssh": f"root@{self.addr[n]}", "port": SSH_PORT, "key": str(self.key),
             "known_hosts": str(self.known_hosts), "ssh_config": "none", "ssh_options": [proxy],
             "connect_timeout_s": 5,
             "ifaces": (["eth1", "eth2"] + (["eth3"] if self.attacker else [])) if n == "dut" else ["eth0"],
             "cache_dir": str(self.tmp / f"cache-{n}")}
        if n.startswith("cli") and n != "cli1":
            i = int(n[3:])
            e["addresses"] = {"client4": f"198.18.1.{i}", "client6": f"2001:2:0:1::{i}"}
        if n.startswith("srv") and n != "srv":
            k = int(n[3:])
            e["addresses"] = {"server4": f"198.19.1.{k}", "server6": f"2001:2:0:2::{k}"}
        e.update(over)
        return e

    def hosts(self, **over) -> dict:
        out = {"client": self.entry("cli1", **over), "dut": self.entry("dut", **over),
               "server": self.entry("srv", **over)}
        for i in range(2, self.clients + 1):
            out[f"client{i}"] = self.entry(f"cli{i}", **over)
        for k in range(2, self.servers + 1):
            out[f"server{k}"] = self.entry(f"srv{k}", **over)
        if self.attacker:
            out["attacker"] = self.entry("atk", **over)
        return out

    def hosts_toml(self, **over) -> str:
        return to_toml(self.hosts(**over))

    # -- what fwlab must leave as it found it --------------------------------------------------------
    def state(self, n: str) -> dict:
        """A host's network set-up and fwlab-visible files, to compare before/after a run."""
        def out(*argv):  # IPv6 link-local addresses and routes are the kernel's, not set-up
            text = self.sh(n, *argv, check=False).stdout
            return "\n".join(" ".join(w for w in ln.split() if not w.startswith("fe80:"))
                             for ln in text.splitlines() if not ln.startswith("fe80:"))
        devs = (["eth1", "eth2"] + (["eth3"] if self.attacker else [])) if n == "dut" else ["eth0"]
        cache = self.tmp / f"cache-{n}"
        # the operational state column of 'ip -br' lags a link's coming up (linkwatch), and so does
        # the NO-CARRIER flag (it is IFF_RUNNING's absence): the admin flag UP and the carrier flag
        # LOWER_UP of 'ip -o link' say what was set
        addr = "\n".join(" ".join(ln.split()[:1] + ln.split()[2:]) for ln in out("ip", "-br", "addr").splitlines())
        flags = sorted(ln.split(": ")[1] + " " + ",".join(f for f in ln.split()[2].strip("<>").split(",")
                                                          if f != "NO-CARRIER")
                       for ln in out("ip", "-o", "link").splitlines())
        return {"addr": addr, "links": flags, "route4": out("ip", "route"), "route6": out("ip", "-6", "route"),
                "nft": out("nft", "list", "ruleset"),
                "sysctl": out("sysctl", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding",
                              "net.ipv4.conf.all.rp_filter", "net.ipv4.ip_local_port_range", "net.core.somaxconn",
                              "net.ipv4.tcp_max_syn_backlog"),
                "offloads": {d: out("ethtool", "-k", d) for d in devs},
                "cache": sorted(os.listdir(cache)) if cache.exists() else None}

    def processes(self, n: str) -> list[str]:
        """Command names of the processes in a host's namespace other than its sshd."""
        pids = self.host.run(["ip", "netns", "pids", self.ns[n]], check=False).stdout.split()
        names = []
        for pid in pids:
            try:
                names.append(Path(f"/proc/{pid}/comm").read_text().strip())
            except OSError:
                pass
        return [c for c in names if c not in ("sshd", "unshare")]

    def wait_idle(self, timeout_s: float = 5.0) -> dict[str, list[str]]:
        """Wait until no host runs anything but its sshd (SSH sessions end shortly after the
        client closes them); return what still runs per host."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = {n: self.processes(n) for n in self.names}
            if not any(left.values()) or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def down(self) -> None:
        for proc in self.sshd.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for ns in self.all_ns():
            delete_namespace(self.host, ns)


def record_local(monkeypatch) -> list[list[str]]:
    """Every command fwlab runs or spawns on this machine from now on (``["ns", NS, argv...]``),
    to check that nothing of a lab's data path ran here."""
    local: list[list[str]] = []
    run, spawn = LocalHost.run, LocalHost.spawn

    def rec_run(self, argv, ns=None, **kw):
        local.append([*(["ns", ns] if ns else []), *argv])
        return run(self, argv, ns, **kw)

    def rec_spawn(self, argv, ns=None):
        local.append([*(["ns", ns] if ns else []), *argv])
        return spawn(self, argv, ns)

    monkeypatch.setattr(LocalHost, "run", rec_run)
    monkeypatch.setattr(LocalHost, "spawn", rec_spawn)
    return local


def changed(before: dict, after: dict) -> list:
    """(host, item, before, after) of every snapshot item (``HostsLab.state``) that differs."""
    return [(n, k, before[n][k], after[n][k]) for n in before for k in before[n] if before[n][k] != after[n][k]]


def to_toml(hosts: dict) -> str:
    """``{role: entry}`` as a hosts file (``[hosts.<role>]`` tables)."""
    def val(v):
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + " }"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return str(v)
    out = []
    for role, e in hosts.items():
        out.append(f"[hosts.{role}]")
        out += [f"{k} = {val(v)}" for k, v in e.items()]
        out.append("")
    return "\n".join(out)
