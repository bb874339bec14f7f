"""A remote host reached over SSH: the same :class:`~fwlab.testbed.host.Host` interface as the
local machine, so backends and runners do not know where a role lives.

Owns: the OpenSSH client command lines (one ControlMaster connection per host, every command a
multiplexed session over it), quoting argv for the remote shell, remote time-outs, stopping
remote background processes (also when the connection dies), the remote scratch directory, and
mapping SSH failures to one-line fwlab errors. Never touches: the remote host's network set-up,
its sshd, or the user's ~/.ssh (only files named in the hosts file are read).

Why the OpenSSH client and not asyncssh: no new Python dependency, the user's own ssh_config,
agent, ProxyJump and known_hosts work unchanged, and a spawned remote process is a plain local
``Popen`` of ``ssh`` (its pipes carry the tool's output, its exit is the tool's exit), which fits
fwlab's synchronous runners. With ControlMaster a command costs one session set-up (a few ms),
not a new TCP + key exchange + authentication.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from fwlab.errors import HostError, ToolMissing
from fwlab.testbed.host import PACKAGE_OF, CommandFailed, CommandTimeout, Host, Spawned

#: Remote wrapper of :meth:`SshHost.run`: run argv under ``timeout`` (when the host has it) so a
#: command outlives neither its time-out nor a lost connection by more than a few seconds.
#: ``$1`` is the time-out [s] (0: none); the rest is argv.
RUN_SCRIPT = ('t=$1; shift; if [ "$t" != 0 ] && command -v timeout >/dev/null 2>&1; '
              'then exec timeout -k 2 "$t" "$@"; fi; exec "$@"')

#: Remote wrapper of :meth:`SshHost.spawn`. argv runs in its own session (setsid, so its whole
#: process group can be signalled) with stdin from /dev/null and SIGINT/SIGQUIT back to their
#: defaults where env(1) can (a shell's background job starts with them ignored); a watchdog reads signal names from
#: the SSH channel's stdin and sends them to the group; when stdin ends (fwlab closed it, died,
#: or the connection broke) it sends TERM, then KILL. The wrapper exits with argv's status.
SPAWN_SCRIPT = (
    'exec 3<&0 </dev/null; d=; env --default-signal=INT true 2>/dev/null && d="env --default-signal=INT,QUIT"; '
    'if command -v setsid >/dev/null 2>&1; then setsid $d "$@" 3<&- & c=$!; g=-$c; '
    'else $d "$@" 3<&- & c=$!; g=$c; fi; '
    '(sig() { kill -s "$1" -- "$g" 2>/dev/null || kill -s "$1" "$c" 2>/dev/null; }; '
    'while read -r s; do sig "$s"; done; sleep 1; sig TERM; sleep 2; sig KILL) <&3 >/dev/null 2>&1 & '
    'w=$!; exec 3<&-; wait "$c"; r=$?; kill "$w" 2>/dev/null; exit "$r"')

#: stderr markers of the ssh client itself (exit 255), as opposed to a remote command's output
SSH_ERROR_MARKERS = ("ssh:", "Permission denied", "Host key verification failed", "Connection ",
                     "kex_exchange", "mux_client", "Control socket", "ControlSocket",
                     "no such identity", "Could not resolve", "Connection closed", "port ")


def remote_argv(argv: list[str], ns: str | None, env: dict[str, str] | None = None) -> list[str]:
    """argv as it runs on the remote host: in namespace ``ns`` and with ``env`` when given."""
    out = list(argv)
    if env:
        out = ["env", *(f"{k}={v}" for k, v in sorted(env.items())), *out]
    if ns:
        out = ["ip", "netns", "exec", ns, *out]
    return out


def remote_command(script: str, args: list[str]) -> str:
    """The one string ssh hands to the remote login shell: ``exec sh -c SCRIPT fwlab ARGS...``.

    Every word is single-quoted (:func:`shlex.quote`), so the login shell (sh, bash, zsh, and
    csh for words without newlines) passes argv through unchanged; ``sh`` then runs ``script``
    with ``$1...`` = ``args``. Newlines in an argument are refused: csh cannot quote them.
    """
    for a in args:
        if "\n" in a or "\0" in a:
            raise HostError(f"argument {a[:30]!r} contains a newline or NUL, which cannot be "
                            f"passed to a remote shell safely", fix="pass such data on stdin (input=)")
    return " ".join(["exec", "sh", "-c", shlex.quote(script), "fwlab", *map(shlex.quote, args)])


@dataclass(frozen=True)
class SshTarget:
    """How to reach one host: what a hosts-file entry says about the connection."""

    destination: str  #: [user@]host
    port: int = 22
    key: str | None = None  #: private key file (IdentitiesOnly)
    known_hosts: str | None = None  #: known_hosts file to check the host key against
    host_key_checking: str = "yes"  #: StrictHostKeyChecking: "yes" or "accept-new"
    ssh_config: str | None = None  #: ssh -F FILE; "none" ignores ~/.ssh/config; None = default
    options: tuple[str, ...] = ()  #: extra "Key=Value" ssh options (ProxyJump, ProxyCommand...)
    connect_timeout_s: float = 10.0  #: TCP connect + authentication limit [s]

    @property
    def label(self) -> str:
        return f"{self.destination}:{self.port}"


@dataclass
class SshSpawned(Spawned):
    """A background process on a remote host; ``proc`` is the local ``ssh`` carrying it."""

    host: "SshHost | None" = None

    def _stop_once(self, sig: int, wait_s: float) -> tuple[str, str]:
        """Send ``sig`` to the remote process group (over the session's stdin), wait up to
        ``wait_s``; then close stdin (the remote watchdog TERMs, then KILLs) and, as a last
        resort, kill the local ssh client. Returns (stdout, stderr); ``Spawned.stop`` calls it once."""
        self.send_signal(sig)
        try:
            # waits for the remote process to end; stdin stays open so sig alone gets its chance
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
        try:
            out, err = self.proc.communicate(timeout=wait_s + 4.0)  # closes stdin: TERM, KILL
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                out, err = self.proc.communicate(timeout=2.0)
            except subprocess.TimeoutExpired:
                out, err = "", ""
        return out or "", err or ""

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the remote process group over the session's stdin (its watchdog reads
        signal names there) and return at once."""
        name = signal.Signals(sig).name.removeprefix("SIG")
        if self.proc.poll() is None and self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(name + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass


@dataclass
class SshHost(Host):
    """A host reached with the OpenSSH client over one multiplexed (ControlMaster) connection.

    :meth:`connect` opens the master connection (a one-line HostError when it cannot), every
    :meth:`run` / :meth:`spawn` is a session over it, :meth:`close` stops remote processes,
    removes the remote scratch directory and ends the master. A lost connection makes the next
    command raise HostError; remote processes then stop by themselves (their watchdog sees the
    session end)."""

    name: str
    target: SshTarget
    remote: bool = True
    spawned: list[Spawned] = field(default_factory=list)
    _dir: str | None = field(default=None, repr=False)
    _master: subprocess.Popen | None = field(default=None, repr=False)
    _scratch: str | None = field(default=None, repr=False)

    # -- the connection --------------------------------------------------------------------------
    @property
    def control_path(self) -> str:
        assert self._dir is not None, "SshHost used before connect()"
        return os.path.join(self._dir, "cm")

    def ssh_argv(self, *, master: bool = False) -> list[str]:
        """ssh options shared by the master and every session (without destination/command)."""
        t = self.target
        a = ["ssh"]
        if t.ssh_config:
            a += ["-F", t.ssh_config]
        a += ["-p", str(t.port), "-T",
              "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, round(t.connect_timeout_s))}",
              "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
              "-o", f"StrictHostKeyChecking={t.host_key_checking}", "-o", "LogLevel=ERROR"]
        if t.key:
            a += ["-i", t.key, "-o", "IdentitiesOnly=yes"]
        if t.known_hosts:
            a += ["-o", f"UserKnownHostsFile={t.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null"]
        for o in t.options:
            a += ["-o", o]
        if self._dir is not None:
            a += ["-o", f"ControlPath={self.control_path}",
                  "-o", "ControlMaster=yes" if master else "ControlMaster=no"]
        return a

    def connect(self) -> "SshHost":
        """Open the master connection; wait until it is authenticated. Idempotent."""
        if self.connected():
            return self
        if shutil.which("ssh") is None:
            raise ToolMissing("required program 'ssh' is not installed",
                              fix="apt-get install openssh-client (or run 'make demo')")
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="fwlab-ssh-")  # 0700: only we reach the socket
        try:
            return self._connect()
        except BaseException:
            self.close()  # no master and no socket directory left behind
            raise

    def _connect(self) -> "SshHost":
        self._master = subprocess.Popen(
            [*self.ssh_argv(master=True), "-N", "-o", "ControlPersist=no", self.target.destination],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        deadline = time.monotonic() + self.target.connect_timeout_s + 5.0
        while time.monotonic() < deadline:
            if self._master.poll() is not None:
                err = self._master.stderr.read() if self._master.stderr else ""
                self._master = None
                raise HostError(f"cannot connect to host {self.name} ({self.target.label}) over "
                                f"SSH: {_last_line(err) or 'ssh exited with status 255'}",
                                fix=_connect_fix(err, self.target))
            if os.path.exists(self.control_path) and self._check():
                return self
            time.sleep(0.02)
        self._kill_master()
        raise HostError(f"connecting to host {self.name} ({self.target.label}) over SSH took more "
                        f"than {self.target.connect_timeout_s + 5:g} s",
                        fix="check the address, port and that sshd runs there (ssh -v)")

    def _check(self) -> bool:
        cp = subprocess.run([*self.ssh_argv(), "-O", "check", self.target.destination],
                            capture_output=True, text=True, timeout=10)
        return cp.returncode == 0

    def connected(self) -> bool:
        return self._master is not None and self._master.poll() is None

    def _kill_master(self) -> None:
        if self._master is not None:
            try:
                os.killpg(self._master.pid, signal.SIGTERM)
                self._master.wait(timeout=3)
            except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self._master.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self._master = None

    def close(self) -> None:
        """Stop remote processes, remove the remote scratch directory, end the connection."""
        try:
            self.stop_all()
            if self.connected():
                self._run_at_close()
            if self._scratch and self.connected():
                self.run(["rm", "-rf", "--", self._scratch], check=False, timeout_s=10)
        except (HostError, CommandTimeout):
            pass  # the connection is gone: nothing more can be done remotely
        self._scratch = None
        if self.connected():
            subprocess.run([*self.ssh_argv(), "-O", "exit", self.target.destination],
                           capture_output=True, timeout=10)
        self._kill_master()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _lost(self, what: str, stderr: str) -> HostError:
        return HostError(f"lost the SSH connection to host {self.name} ({self.target.label}) "
                         f"while running '{what}': {_last_line(stderr) or 'no error text'}",
                         fix="check that the host is up and reachable; the run's finished trials are kept")

    def _require_connected(self, what: str) -> None:
        if not self.connected():
            raise self._lost(what, "the master connection is closed")

    # -- commands ---------------------------------------------------------------------------------
    def run(self, argv: list[str], ns: str | None = None, *, input: str | None = None,
            check: bool = True, timeout_s: float | None = 120.0,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        what = " ".join(argv[:3])
        self._require_connected(what)
        cmd = remote_command(RUN_SCRIPT, [f"{timeout_s:g}" if timeout_s else "0",
                                          *remote_argv(argv, ns, env)])
        full = [*self.ssh_argv(), self.target.destination, cmd]
        local_timeout = None if timeout_s is None else timeout_s + self.target.connect_timeout_s + 5
        try:
            cp = subprocess.run(full, input=input, capture_output=True, text=True, timeout=local_timeout,
                                stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise CommandTimeout(f"'{what}' on host {self.name} did not finish within {timeout_s} s "
                                 f"(local ssh killed; the remote side stops it by itself)",
                                 fix="check the remote host; the command or the connection hung") from exc
        if cp.returncode == 255 and (not self._master_alive() or _looks_like_ssh_error(cp.stderr)):
            raise self._lost(what, cp.stderr)
        if cp.returncode == 124 and timeout_s:
            raise CommandTimeout(f"'{what}' on host {self.name} did not finish within {timeout_s} s "
                                 f"and was killed there", fix="check the remote host; the command hung")
        if cp.returncode == 127:
            pkg = PACKAGE_OF.get(argv[0], argv[0]).split(" ")[0]
            raise ToolMissing(f"required program '{argv[0]}' is not installed on host {self.name} "
                              f"({_last_line(cp.stderr)})", fix=f"install {pkg} on {self.target.destination}")
        if check and cp.returncode != 0:
            raise CommandFailed(argv, cp.returncode, cp.stdout, cp.stderr, ns, host=self.name)
        return subprocess.CompletedProcess(argv, cp.returncode, cp.stdout, cp.stderr)

    def _master_alive(self) -> bool:
        return self.connected() and self._check()

    def spawn(self, argv: list[str], ns: str | None = None) -> Spawned:
        self._require_connected(" ".join(argv[:3]))
        cmd = remote_command(SPAWN_SCRIPT, remote_argv(argv, ns))
        proc = subprocess.Popen([*self.ssh_argv(), self.target.destination, cmd],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        sp = SshSpawned(proc, ns, argv, host=self)
        self.spawned.append(sp)
        return sp

    def session(self, argv: list[str], ns: str | None = None) -> subprocess.Popen:
        """An interactive session: ``argv``'s stdin/stdout are the returned local Popen's pipes
        (text, line-buffered). For request/response exchanges such as clock readings; the
        caller closes stdin to end it. Not tracked by :meth:`stop_all`."""
        self._require_connected(" ".join(argv[:3]))
        cmd = remote_command('exec "$@"', remote_argv(argv, ns))
        return subprocess.Popen([*self.ssh_argv(), self.target.destination, cmd], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                                start_new_session=True)

    def scratch_path(self, name: str) -> str:
        if self._scratch is None:
            self._scratch = self.run(["mktemp", "-d", "/tmp/fwlab.XXXXXX"], timeout_s=30).stdout.strip()
        return f"{self._scratch}/{os.path.basename(name)}"

    def put_file(self, data: bytes | str, name: str, mode: int = 0o644) -> str:
        return self.write_file(self.scratch_path(name), data, mode)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> str:
        """Write ``data`` to ``path`` on the host (one session, data on stdin); return ``path``."""
        name = os.path.basename(path)
        self._require_connected("put_file")
        cmd = remote_command('cat > "$1" && chmod "$2" "$1"', [path, f"{mode:o}"])
        payload = data.encode() if isinstance(data, str) else data
        cp = subprocess.run([*self.ssh_argv(), self.target.destination, cmd], input=payload,
                            capture_output=True, timeout=60 + len(payload) / 1e6)
        if cp.returncode != 0:
            err = cp.stderr.decode(errors="replace")
            if cp.returncode == 255:
                raise self._lost(f"put_file {name}", err)
            raise HostError(f"cannot write {path} on host {self.name}: {_last_line(err)}",
                            fix="check free space and /tmp on the remote host")
        return path

    def describe(self) -> dict:
        t = self.target
        return {"name": self.name, "remote": True, "ssh": t.destination, "port": t.port,
                "transport": "openssh-controlmaster"}


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _looks_like_ssh_error(stderr: str) -> bool:
    return any(m in (stderr or "") for m in SSH_ERROR_MARKERS)


def _connect_fix(stderr: str, t: SshTarget) -> str:
    if "Host key verification failed" in stderr or "No ED25519 host key" in stderr or "host key" in stderr:
        where = t.known_hosts or "~/.ssh/known_hosts"
        host = t.destination.split("@")[-1]
        return (f"add the host key to {where} (e.g. ssh-keyscan -p {t.port} {host} >> {where}) "
                f"or set host_key_checking = \"accept-new\"")
    if "Permission denied" in stderr:
        return f"install the public key of {t.key or 'your key'} in the remote authorized_keys"
    if "Connection refused" in stderr:
        return f"start sshd on {t.destination.split('@')[-1]} port {t.port}, or fix the port"
    return "check the address, port and key with 'ssh -v' using the same options"

