"""Running commands on a host, optionally inside one of its network namespaces.

Owns: the single interface through which fwlab runs programs (:class:`Host`: ``run``, ``spawn``,
``put_file``, ``stop_all``, ``close``), its local implementation (:class:`LocalHost`) and the
bookkeeping of the processes it started so that teardown can stop them.
Never touches: which namespaces exist or what they contain (that is ``testbed.bed``).

A remote host (``testbed.ssh.SshHost``) implements the same interface; callers pass a namespace
name (or None), never build ``ip netns exec`` or ``ssh`` command lines themselves.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from fwlab.errors import FwlabError, MeasurementFailed, ToolMissing

#: Debian package that provides each external program fwlab calls.
PACKAGE_OF = {
    "ip": "iproute2",
    "nft": "nftables",
    "iptables-legacy": "iptables",
    "iptables-legacy-restore": "iptables",
    "iptables-nft": "iptables",
    "iptables-nft-restore": "iptables",
    "ip6tables-legacy-restore": "iptables",
    "ip6tables-nft-restore": "iptables",
    "ip6tables-legacy": "iptables",
    "ip6tables-nft": "iptables",
    "ipset": "ipset",
    "iperf3": "iperf3",
    "ethtool": "ethtool",
    "netperf": "netperf (Debian non-free; see README)",
    "trafgen": "netsniff-ng",
    "conntrack": "conntrack",
}


def require_tool(name: str) -> str:
    """Return the path of program ``name`` or raise ToolMissing naming the package to install."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if path is None:
        pkg = PACKAGE_OF.get(name, name)
        raise ToolMissing(f"required program '{name}' is not installed",
                          fix=f"apt-get install {pkg.split(' ')[0]} (or run 'make demo', which installs it)")
    return path


class CommandFailed(MeasurementFailed):
    """A command run by fwlab exited non-zero."""

    def __init__(self, argv: list[str], returncode: int, stdout: str, stderr: str, ns: str | None,
                 host: str | None = None):
        where = (f" in namespace {ns}" if ns else "") + (f" on host {host}" if host else "")
        first = (stderr.strip() or stdout.strip()).splitlines()
        detail = first[0] if first else "no output"
        super().__init__(f"'{' '.join(argv[:4])}{' ...' if len(argv) > 4 else ''}'{where} failed "
                         f"(exit {returncode}): {detail}")
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.ns = ns
        self.host = host


class CommandTimeout(MeasurementFailed):
    """A command run by fwlab did not finish in time and was killed."""


@dataclass
class Spawned:
    """A background process started by fwlab inside a namespace."""

    proc: subprocess.Popen
    ns: str | None
    argv: list[str]
    _stop_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _stopped: tuple[str, str] | None = field(default=None, init=False, repr=False, compare=False)

    def stop(self, sig: int = signal.SIGTERM, wait_s: float = 3.0) -> tuple[str, str]:
        """Signal the process group (tools such as trafgen fork workers that hold the output
        pipes), wait up to ``wait_s``, kill the group if still alive; return (stdout, stderr).
        Safe from several threads and more than once: the first call reads the pipes, later
        ones return what it read (two readers of one pipe would close it under each other)."""
        with self._stop_lock:
            if self._stopped is None:
                self._stopped = self._stop_once(sig, wait_s)
            return self._stopped

    def _stop_once(self, sig: int, wait_s: float) -> tuple[str, str]:
        self._signal_group(sig)
        try:
            out, err = self.proc.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            try:
                out, err = self.proc.communicate(timeout=wait_s)
            except subprocess.TimeoutExpired:  # a child escaped the group and holds the pipe
                out, err = "", ""
        return out or "", err or ""

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the process (its group) and return at once, reading nothing: for a
        caller that reads the output pipes itself and must not race ``stop``'s communicate."""
        self._signal_group(sig)

    def output(self) -> tuple[str, str]:
        """Wait for the process to end by itself, reading stdout and stderr as they come (a
        large output never blocks it), and return them. Unlike ``communicate()`` it leaves a
        stdin pipe open: a remote process's watchdog reads its stop signals there, and stops the
        process when stdin closes."""
        err: list[str] = []
        reader = threading.Thread(target=lambda: err.append(self.proc.stderr.read() if self.proc.stderr else ""),
                                  daemon=True)
        reader.start()
        out = self.proc.stdout.read() if self.proc.stdout else ""
        reader.join()
        self.proc.wait()
        return out or "", (err[0] if err else "") or ""

    def _signal_group(self, sig: int) -> None:
        # Spawned with start_new_session=True: the process leads its own group.
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Host(ABC):
    """Where commands run: this machine (:class:`LocalHost`) or one reached over SSH.

    ``ns`` is a network namespace on that host (None: the host's own namespace, or, on a remote
    host, wherever its sshd runs). Every implementation maps its failures to fwlab errors:
    :class:`CommandFailed`, :class:`CommandTimeout`, ``ToolMissing`` and, for remote hosts,
    ``HostError`` (connection lost), each with a one-line message and a fix.
    """

    name: str
    #: True when commands leave this machine (the test bed does not create namespaces there)
    remote: bool = False
    spawned: list[Spawned]

    @abstractmethod
    def run(self, argv: list[str], ns: str | None = None, *, input: str | None = None,
            check: bool = True, timeout_s: float | None = 120.0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` to completion; raise CommandFailed on a non-zero exit when ``check``."""

    @abstractmethod
    def spawn(self, argv: list[str], ns: str | None = None) -> Spawned:
        """Start ``argv`` in the background; :meth:`stop_all` (teardown) stops it."""

    @abstractmethod
    def put_file(self, data: bytes | str, name: str, mode: int = 0o644) -> str:
        """Store ``data`` as file ``name`` in this host's fwlab scratch directory; return its
        path on that host (removed by :meth:`close`)."""

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> str:
        """Write ``data`` to ``path`` on this host (mode ``mode``); return ``path``."""
        raise NotImplementedError

    def scratch_path(self, name: str) -> str:
        """A path for file ``name`` in this host's fwlab scratch directory (created on first
        use, removed by :meth:`close`); the file itself is not created."""
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists on this host (e.g. a tool's ready file)."""
        return self.run(["test", "-e", path], check=False, timeout_s=30).returncode == 0

    def on_close(self, fn) -> None:
        """Call ``fn()`` when this host is closed, after its processes are stopped and before
        its scratch directory goes (e.g. removing a shipped binary). Last registered, first run."""
        self.__dict__.setdefault("_at_close", []).append(fn)

    def _run_at_close(self) -> None:
        for fn in reversed(self.__dict__.pop("_at_close", [])):
            try:
                fn()
            except FwlabError:
                pass  # best effort: the connection may be gone

    def system(self) -> str:
        """The host's operating system as ``uname -s`` names it (Linux, OpenBSD, FreeBSD, ...):
        what decides which firewalls can run there. Asked once per host."""
        if "_system" not in self.__dict__:
            self.__dict__["_system"] = self.run(["uname", "-s"], timeout_s=30).stdout.strip() or "unknown"
        return self.__dict__["_system"]

    def forget(self, sp: Spawned) -> None:
        if sp in self.spawned:
            self.spawned.remove(sp)

    def stop_all(self) -> None:
        """Stop every process this host spawned (TERM, then KILL)."""
        for sp in list(self.spawned):
            sp.stop(wait_s=2.0)
        self.spawned.clear()

    def close(self) -> None:
        """Stop what was spawned and release connections and scratch files. Idempotent."""
        self.stop_all()

    def describe(self) -> dict:
        return {"name": self.name, "remote": self.remote}


@functools.cache
def default_signals_prefix() -> list[str]:
    """``env --default-signal=INT,QUIT`` where this host's env(1) has it (coreutils >= 8.31), else []."""
    try:
        ok = subprocess.run(["env", "--default-signal=INT,QUIT", "true"], capture_output=True,
                            timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ["env", "--default-signal=INT,QUIT"] if ok else []


@dataclass
class LocalHost(Host):
    """The machine fwlab runs on. Commands run in its namespaces via ``ip netns exec``."""

    name: str = "local"
    spawned: list[Spawned] = field(default_factory=list)
    _scratch: str | None = field(default=None, repr=False)

    def system(self) -> str:
        return platform.system()

    def _argv(self, argv: list[str], ns: str | None) -> list[str]:
        if ns is None:
            return list(argv)
        if argv[:1] == ["ip"] and argv[1:2] not in (["netns"], ["-n"], ["-netns"]):
            # iproute2 enters the namespace itself (ip netns exec also remounts /sys: twice the time)
            return ["ip", "-n", ns, *argv[1:]]
        return ["ip", "netns", "exec", ns, *argv]

    def run(self, argv: list[str], ns: str | None = None, *, input: str | None = None,
            check: bool = True, timeout_s: float | None = 120.0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` (in namespace ``ns``) to completion and return its CompletedProcess."""
        full = self._argv(argv, ns)
        run_env = None
        if env:
            run_env = dict(os.environ)
            run_env.update(env)
        try:
            cp = subprocess.run(full, input=input, capture_output=True, text=True,
                                timeout=timeout_s, env=run_env)
        except FileNotFoundError:
            require_tool(argv[0])
            raise
        except subprocess.TimeoutExpired as exc:  # subprocess.run has killed it
            raise CommandTimeout(f"'{' '.join(argv[:3])}' did not finish within {timeout_s} s "
                                 f"and was killed", fix="check the test bed; the command hung") from exc
        if check and cp.returncode != 0:
            raise CommandFailed(argv, cp.returncode, cp.stdout, cp.stderr, ns)
        return cp

    def spawn(self, argv: list[str], ns: str | None = None) -> Spawned:
        """Start ``argv`` in the background (in namespace ``ns``); it is stopped at teardown.
        SIGINT and SIGQUIT go back to their defaults for it (as the remote spawn wrapper does): a
        process started from a shell's background job inherits them ignored, and the tools fwlab
        stops with SIGINT (curl, ping, the engine) would then wait out their time-outs."""
        full = default_signals_prefix() + self._argv(argv, ns)
        proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        sp = Spawned(proc, ns, argv)
        self.spawned.append(sp)
        return sp

    def put_file(self, data: bytes | str, name: str, mode: int = 0o644) -> str:
        path = self.scratch_path(name)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.chmod(path, mode)
        return path

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> str:
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.chmod(path, mode)
        return path

    def scratch_path(self, name: str) -> str:
        if self._scratch is None:
            self._scratch = tempfile.mkdtemp(prefix="fwlab-")
        return os.path.join(self._scratch, os.path.basename(name))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def close(self) -> None:
        self.stop_all()
        self._run_at_close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def kill_namespace_pids(host: LocalHost, ns: str, grace_s: float = 1.0) -> int:
    """Stop every process running inside namespace ``ns``; return how many were signalled.

    ``ip netns del`` does not stop them. PIDs are re-read before KILL so a reused PID is
    not hit by mistake (only PIDs still listed in the namespace are signalled).
    """
    def pids() -> list[int]:
        cp = host.run(["ip", "netns", "pids", ns], check=False)
        return [int(p) for p in cp.stdout.split() if p.strip().isdigit()]

    first = pids()
    for pid in first:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and pids():
        time.sleep(0.05)
    for pid in pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(first)
