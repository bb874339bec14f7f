"""Where the fwlab-engine binary is: on this machine ($FWLAB_ENGINE, the repository's build,
PATH), its version, and on a remote host of a bed the same binary shipped or built there.

Owns: finding, versioning and placing the binary. Never runs a trial (runners.engine does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import fwlab
from fwlab.errors import RunnerError
from fwlab.testbed.host import Host
from fwlab.testbed.provide import provide

if TYPE_CHECKING:
    from fwlab.testbed.bed import Testbed
    from fwlab.testbed.hosts import HostEntry
    from fwlab.testbed.ship import Shipped

ENV_VAR = "FWLAB_ENGINE"
SRC_ENV_VAR = "FWLAB_ENGINE_SRC"  #: the engine's sources, for building it on a remote host
REPO_BINARY = Path(fwlab.__file__).resolve().parents[2] / "engine" / "target" / "release" / "fwlab-engine"


def find_engine() -> str | None:
    """Path of fwlab-engine: $FWLAB_ENGINE, else the repository's release build, else PATH."""
    env = os.environ.get(ENV_VAR)
    if env:
        return env if os.access(env, os.X_OK) else None
    if os.access(REPO_BINARY, os.X_OK):
        return str(REPO_BINARY)
    return shutil.which("fwlab-engine")


def require_engine() -> str:
    path = find_engine()
    if path is None:
        raise RunnerError(_missing_text(), fix="run 'make engine' (cargo build --release in engine/)")
    return path


def engine_unavailable() -> str | None:
    """Why fwlab-engine cannot run here (not built), or None: every engine-based runner's
    ``unavailable()``."""
    return None if find_engine() else _missing_text()


def _missing_text() -> str:
    env = os.environ.get(ENV_VAR)
    if env:
        return f"${ENV_VAR}={env} is not an executable file"
    return (f"fwlab-engine is not built ({REPO_BINARY} missing, none on PATH): "
            f"'make' builds it (cargo build --release in engine/)")


def engine_on(bed: Testbed, role: str) -> str:
    """The engine's path for ``role``: the local build, or on a remote host the same binary
    shipped there (checked by SHA-256 and by its ``version`` answer; see testbed.ship)."""
    local = require_engine()
    if not bed.is_remote(role):
        return local
    host = bed.host_for(role)
    got = host.__dict__.get("_fwlab_engine")
    if got is not None:
        return got.path
    shipped = place_engine(host, bed.placement.entry(role), local)
    host.__dict__["_fwlab_engine"] = shipped
    return shipped.path


def place_engine(host: Host, entry: HostEntry, local: str) -> Shipped:
    """The engine ready on a remote ``host``: the local build ``local`` copied, or built there
    (testbed.provide); either must answer ``version`` as the local build does."""
    want = engine_version()

    def check(path: str) -> str | None:
        cp = host.run([path, "version"], check=False, timeout_s=30)
        there = _version_text(cp.stdout)
        if cp.returncode == 0 and there == want:
            return None
        return f"{there or cp.stderr.strip()[:120] or f'exit {cp.returncode}'}; here: {want}"
    return provide(host, local, "fwlab-engine", source_dir=lambda: engine_source_dir(local),
                   cache_dir=entry.cache_dir, keep=entry.keep_engine, check=check)


def engine_source_dir(binary: str) -> Path:
    """The engine's cargo tree for a build on another host: $FWLAB_ENGINE_SRC, else the tree
    ``binary`` was built in (``<tree>/target/release/fwlab-engine``), else this checkout's."""
    env = os.environ.get(SRC_ENV_VAR)
    if env:
        return Path(env)
    b = Path(binary).resolve()
    if len(b.parents) > 2 and b.parent.name == "release" and b.parents[1].name == "target" \
            and (b.parents[2] / "Cargo.toml").is_file():
        return b.parents[2]
    return REPO_BINARY.parents[2]


def shipped_engines(bed: Testbed) -> dict[str, dict]:
    """What the engine shipping did per remote role (path, hash, cached, kept)."""
    out = {}
    for r in generator_roles(bed) + ["server", "atk"]:
        if bed.is_remote(r):
            s = bed.host_for(r).__dict__.get("_fwlab_engine")
            if s is not None:
                out[r] = s.to_dict()
    return out


def generator_roles(bed: Testbed) -> list[str]:
    """``client`` and, with a hosts file naming more generator hosts, ``client2`` ..."""
    if bed.placement is None:
        return ["client"]
    return list(bed.placement.generator_roles)


def _version_text(stdout: str) -> str | None:
    try:
        doc = json.loads(stdout)
        return f"fwlab-engine {doc['version']} (schema {doc['schema_version']})"
    except (json.JSONDecodeError, KeyError, TypeError):
        return None


def engine_version() -> str:
    engine = find_engine()
    if engine is None:
        return "fwlab-engine (not built)"
    cp = subprocess.run([engine, "version"], capture_output=True, text=True, timeout=10, check=False)
    return _version_text(cp.stdout) or "fwlab-engine (unknown version)"
