"""Shipping a local program (the fwlab-engine binary) to a remote host, checked by hash.

Owns: the host-side cache directory (``cache_dir`` in the hosts file, default
:data:`DEFAULT_CACHE_DIR`), copying a binary there under its SHA-256, verifying the copy's hash on
the host, checking that it runs there (``version`` probe), and the rule for what stays:

- the binary is stored as ``<cache_dir>/<name>-<sha256>``; a file already there whose hash
  matches is reused (no copy), anything else under that name is replaced;
- a copy is written under a temporary name, its SHA-256 computed *on the host* (``sha256sum``, or
  BSD ``sha256 -q``) and compared with the local one before it is renamed into place;
- when the run ends (the host is closed) the binary is removed unless the hosts file says
  ``keep_engine = true``; the cache directory is removed too when fwlab created it in this run
  and it is empty. With ``keep_engine = true`` the binary stays for the next run (reused by hash).

Never touches anything outside ``cache_dir`` on the host, nor the host's PATH.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from fwlab.errors import HostError
from fwlab.testbed.host import Host

#: where shipped binaries live on a remote host unless its hosts-file entry says ``cache_dir``
DEFAULT_CACHE_DIR = "/var/tmp/fwlab-cache"

#: architecture aliases (``uname -m`` spellings of one ABI)
_ARCH = {"amd64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class Shipped:
    """A binary placed on a host: where, its hash, and whether it was found cached or copied."""

    path: str
    sha256: str
    size_bytes: int
    cached: bool  #: True: a file with this hash (or a build of this source) was already there
    kept: bool  #: True: left on the host after the run (keep_engine = true)
    method: str = "copied"  #: "copied" (the controller's build) or "built" (with cargo on the host)
    why_built: str | None = None  #: why the controller's build was not used there

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "size_bytes": self.size_bytes,
                "cached": self.cached, "kept": self.kept, "method": self.method,
                **({"why_built": self.why_built} if self.why_built else {})}


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def normalise_arch(machine: str) -> str:
    m = machine.strip().lower()
    return _ARCH.get(m, m)


def platform_mismatch(host: Host, what: str) -> str | None:
    """Why this machine's Linux binary cannot run on ``host`` by its ``uname -s``/``-m`` (None:
    same system and architecture). Raises HostError for a host that is not Linux at all."""
    system = host.system()
    arch = normalise_arch(host.run(["uname", "-m"], timeout_s=30).stdout)
    here = normalise_arch(platform.machine())
    if system != "Linux":
        raise HostError(f"{what} runs on Linux only (AF_PACKET, Linux socket options); host {host.name} "
                        f"runs {system} {arch}", fix="use a Linux host for this role")
    if arch != here:
        return f"{what} built here is a Linux {here} binary and host {host.name} runs Linux {arch}"
    return None


def make_cache_dir(host: Host, cache_dir: str) -> bool:
    """Make ``cache_dir`` on ``host`` (mode 700) unless it is there; True when fwlab made it."""
    made = host.run(["sh", "-c", 'if [ -d "$1" ]; then echo old; else mkdir -p -m 700 "$1" && echo new; fi',
                     "mk", cache_dir], check=False, timeout_s=30)
    if made.returncode != 0:
        raise HostError(f"cannot create {cache_dir} on host {host.name}: {made.stderr.strip()[:120]}",
                        fix="set cache_dir in the hosts file to a directory fwlab may write")
    return made.stdout.strip() == "new"


def register_removal(host: Host, target: str, cache_dir: str, created_dir: bool, keep: bool) -> None:
    """At the host's close remove ``target`` (and ``cache_dir`` if fwlab made it and it is
    empty) unless ``keep``."""
    if keep:
        return

    def remove() -> None:
        host.run(["rm", "-f", "--", target], check=False, timeout_s=30)
        if created_dir:
            host.run(["rmdir", "--", cache_dir], check=False, timeout_s=30)
    host.on_close(remove)


REMOTE_SHA = ('if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d" " -f1; '
              'elif command -v sha256 >/dev/null 2>&1; then sha256 -q "$1"; else exit 4; fi')


def remote_sha256(host: Host, path: str) -> str | None:
    """The SHA-256 of ``path`` computed on ``host`` (None: no such file)."""
    cp = host.run(["sh", "-c", f'[ -f "$1" ] || exit 3; {REMOTE_SHA}', "sha", path],
                  check=False, timeout_s=60)
    if cp.returncode == 3:
        return None
    if cp.returncode != 0:
        raise HostError(f"cannot hash {path} on host {host.name}: {cp.stderr.strip()[:120] or 'no sha256sum'}",
                        fix="install coreutils (sha256sum) on that host")
    return cp.stdout.strip().split()[0] if cp.stdout.strip() else None


def ship(host: Host, local_path: str, name: str, *, cache_dir: str = DEFAULT_CACHE_DIR,
         keep: bool = False) -> Shipped:
    """Put the local file ``local_path`` on ``host`` as ``<cache_dir>/<name>-<sha256>`` (executable),
    verified by hash on the host; register its removal at the host's close unless ``keep``."""
    digest = sha256_file(local_path)
    size = os.path.getsize(local_path)
    target = f"{cache_dir.rstrip('/')}/{name}-{digest}"
    created_dir = make_cache_dir(host, cache_dir)
    cached = remote_sha256(host, target) == digest
    if not cached:
        tmp = f"{target}.part{os.getpid()}"
        host.write_file(tmp, Path(local_path).read_bytes(), 0o755)
        got = remote_sha256(host, tmp)
        if got != digest:
            host.run(["rm", "-f", "--", tmp], check=False, timeout_s=30)
            raise HostError(f"the copy of {name} on host {host.name} has SHA-256 {str(got)[:16]}..., "
                            f"not {digest[:16]}... (transfer damaged)", fix="retry; check the host's disk")
        host.run(["mv", "-f", "--", tmp, target], timeout_s=30)
    register_removal(host, target, cache_dir, created_dir, keep)
    return Shipped(path=target, sha256=digest, size_bytes=size, cached=cached, kept=keep)
