"""Building a Rust program (fwlab-engine) on a remote host with that host's cargo.

Owns: finding cargo on the host (its PATH, else ``~/.cargo/bin/cargo``), packing the local
source tree (``engine/`` without ``target/``) and naming it by a digest of its files, the build
directory fwlab makes on the host (``mktemp -d /var/tmp/fwlab-build.XXXXXX``), the build itself
(``cargo build --release --locked --offline``; when cargo says the offline build needs the
network, once more online; both within one time budget), placing the result in the host's
``cache_dir`` as ``<name>-src-<digest>``, and the rule for what stays:

- the build directory is removed on every exit path (success, failure, time-out, Ctrl-C); a
  close-time removal backs that up should the connection drop mid-build;
- the built binary follows the shipping rule (testbed.ship): removed when the run ends unless
  ``keep_engine = true``; kept, it is found by the source digest next time (no rebuild).

An online build downloads the crates into the host's own cargo cache (``~/.cargo/registry``),
as any cargo build there would; nothing else outside the build directory and ``cache_dir`` is
written. Used by :mod:`fwlab.testbed.provide` when the controller's binary cannot run there.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from pathlib import Path

from fwlab.errors import HostError
from fwlab.testbed.host import CommandTimeout, Host
from fwlab.testbed.ship import Shipped, make_cache_dir, register_removal, remote_sha256

#: seconds a build on the host may take (both attempts together) unless FWLAB_BUILD_TIMEOUT_S says
BUILD_TIMEOUT_S = 900.0
BUILD_TIMEOUT_ENV = "FWLAB_BUILD_TIMEOUT_S"
#: where the build directory is made on the host (persistent storage: a build needs ~100 MB)
BUILD_PARENT = "/var/tmp"
#: parts of the source tree never packed
SKIP_DIRS = {"target", ".git"}

FIND_CARGO = ('if command -v cargo >/dev/null 2>&1; then command -v cargo; '
              'elif [ -x "$HOME/.cargo/bin/cargo" ]; then echo "$HOME/.cargo/bin/cargo"; else exit 3; fi')


def source_files(src_dir: str | Path) -> list[Path]:
    """The files of a cargo source tree that a build needs, sorted (``target/`` left out)."""
    root = Path(src_dir)
    if not (root / "Cargo.toml").is_file():
        raise HostError(f"{root} holds no Cargo.toml: the engine's sources are needed to build it on a host",
                        fix="run fwlab from a checkout of the repository, or set FWLAB_ENGINE_SRC to its engine/ directory")
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        out += [Path(dirpath) / f for f in sorted(filenames)]
    return sorted(out)


def source_digest(src_dir: str | Path) -> str:
    """SHA-256 over the packed files' relative paths and contents: names a build of this source."""
    root = Path(src_dir)
    h = hashlib.sha256()
    for p in source_files(root):
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def source_tarball(src_dir: str | Path) -> bytes:
    """The source tree as a .tar.gz (paths relative to it; owner and times cleared)."""
    root = Path(src_dir)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in source_files(root):
            info = tar.gettarinfo(str(p), arcname=str(p.relative_to(root)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(p, "rb") as f:
                tar.addfile(info, f)
    return buf.getvalue()


def find_cargo(host: Host) -> str | None:
    """cargo's path on ``host`` (its PATH for SSH commands, else ~/.cargo/bin), None if absent."""
    cp = host.run(["sh", "-c", FIND_CARGO], check=False, timeout_s=30)
    path = cp.stdout.strip().splitlines()[-1] if cp.returncode == 0 and cp.stdout.strip() else ""
    return path or None


def build_timeout_s() -> float:
    raw = os.environ.get(BUILD_TIMEOUT_ENV)
    if not raw:
        return BUILD_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise HostError(f"{BUILD_TIMEOUT_ENV}={raw!r} is not a positive number of seconds",
                        fix=f"unset it (default {BUILD_TIMEOUT_S:g} s) or give seconds, e.g. {BUILD_TIMEOUT_ENV}=1200")
    return value


def _needs_network(stderr: str) -> bool:
    """Whether a failed ``--offline`` build failed for want of crates (not a compile error)."""
    s = stderr.lower()
    return "offline" in s or "failed to download" in s or "no matching package" in s


def build_on_host(host: Host, src_dir: str | Path, name: str, *, cache_dir: str, keep: bool,
                  why: str, timeout_s: float | None = None) -> Shipped:
    """Build ``name`` from the cargo tree ``src_dir`` on ``host`` and place it in ``cache_dir``
    (reusing a kept build of the same source); ``why`` says why it is built there (for the
    record and the errors). HostError with one line when cargo is absent or the build fails."""
    digest = source_digest(src_dir)
    target = f"{cache_dir.rstrip('/')}/{name}-src-{digest}"
    created_dir = make_cache_dir(host, cache_dir)
    found = remote_sha256(host, target)
    if found is not None:
        register_removal(host, target, cache_dir, created_dir, keep)
        return Shipped(path=target, sha256=found, size_bytes=_size(host, target), cached=True, kept=keep,
                       method="built", why_built=why)
    cargo = find_cargo(host)
    if cargo is None:
        if created_dir:
            host.run(["rmdir", "--", cache_dir], check=False, timeout_s=30)
        raise HostError(f"cannot put {name} on host {host.name}: {why}, and the host has no cargo to "
                        f"build it there", fix="install Rust's cargo on that host (https://rustup.rs; on the "
                        "PATH of its SSH commands or in ~/.cargo/bin), or use a host of the controller's "
                        "architecture for this role")
    budget = timeout_s if timeout_s is not None else build_timeout_s()
    tar = source_tarball(src_dir)
    made = host.run(["mktemp", "-d", f"{BUILD_PARENT}/fwlab-build.XXXXXX"], check=False, timeout_s=30)
    work = made.stdout.strip()
    if made.returncode != 0 or not work.startswith(f"{BUILD_PARENT}/fwlab-build."):
        raise HostError(f"cannot make a build directory in {BUILD_PARENT} on host {host.name}: "
                        f"{made.stderr.strip()[:120] or 'mktemp failed'}", fix="check that host's /var/tmp")

    def remove_work() -> None:
        host.run(["rm", "-rf", "--", work], check=False, timeout_s=120)
    host.on_close(remove_work)  # backstop: the finally below is the normal path
    try:
        host.write_file(f"{work}/src.tar.gz", tar, 0o600)
        host.run(["mkdir", "--", f"{work}/src"], timeout_s=30)
        host.run(["tar", "-xzf", f"{work}/src.tar.gz", "-C", f"{work}/src"], timeout_s=120)
        env = {"CARGO_TARGET_DIR": f"{work}/target"}
        argv = [cargo, "build", "--release", "--locked", "--manifest-path", f"{work}/src/Cargo.toml"]
        t0 = time.monotonic()
        try:
            cp = host.run([*argv, "--offline"], check=False, timeout_s=budget, env=env)
            if cp.returncode != 0 and _needs_network(cp.stderr):
                left = budget - (time.monotonic() - t0)
                if left <= 1:
                    raise CommandTimeout("no time left for an online build")
                cp = host.run(argv, check=False, timeout_s=left, env=env)
        except CommandTimeout:
            raise HostError(f"building {name} on host {host.name} ({why}) took longer than {budget:g} s",
                            fix=f"set {BUILD_TIMEOUT_ENV} higher, or build it there yourself") from None
        if cp.returncode != 0:
            tail = [ln.strip() for ln in cp.stderr.splitlines() if ln.strip()][-1:] or [f"exit {cp.returncode}"]
            raise HostError(f"building {name} with cargo on host {host.name} ({why}) failed: {tail[0][:160]}",
                            fix="check that host's Rust toolchain (the engine needs a recent stable Rust; "
                                "edition 2024) and its network or cargo cache for the crates")
        built = f"{work}/target/release/{name}"
        part = f"{target}.part{os.getpid()}"
        host.run(["cp", "-f", "--", built, part], timeout_s=60)
        host.run(["chmod", "755", "--", part], timeout_s=30)
        host.run(["mv", "-f", "--", part, target], timeout_s=30)
    except BaseException:
        if created_dir:
            host.run(["rmdir", "--", cache_dir], check=False, timeout_s=30)
        raise
    finally:
        remove_work()
    register_removal(host, target, cache_dir, created_dir, keep)
    sha = remote_sha256(host, target) or ""
    return Shipped(path=target, sha256=sha, size_bytes=_size(host, target), cached=False, kept=keep,
                   method="built", why_built=why)


def _size(host: Host, path: str) -> int:
    cp = host.run(["wc", "-c", path], check=False, timeout_s=30)
    try:
        return int(cp.stdout.split()[0])
    except (IndexError, ValueError):
        return 0
