"""Building fwlab's XDP firewall: the BPF object and its loader, compiled with clang on first use.

Owns: the compiler command lines and the build cache (``$XDG_CACHE_HOME/fwlab``, else
``~/.cache/fwlab``; ``$FWLAB_CACHE`` overrides). Each output is named after a hash of its source
and compiler flags, so an edited source is rebuilt and an unchanged one never is; outputs are
written to a temporary name and renamed, so a crashed build leaves no half file. Never loads or
attaches anything (``fwlab.dut.xdp`` does). ``python -m fwlab.dut.xdp_build`` builds ahead of use
(``make`` does it).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fwlab.errors import BackendError
from fwlab.testbed.host import require_tool

SRC_DIR = Path(__file__).resolve().parent / "xdp_c"
BPF_SOURCE = SRC_DIR / "xdp_filter.bpf.c"
LOADER_SOURCE = SRC_DIR / "xdp_loader.c"
# Debian's asm/types.h lives under the multiarch include dir, which -target bpf does not search.
BPF_FLAGS = ("-O2", "-g", "-Wall", "-target", "bpf", "-I/usr/include/x86_64-linux-gnu")
LOADER_FLAGS = ("-O2", "-Wall")
LOADER_LIBS = ("-lbpf",)


class BuildError(BackendError):
    """Compiling an XDP program or its loader failed (usually: clang or libbpf-dev missing)."""


@dataclass(frozen=True)
class Artifact:
    """One cached build output."""

    path: Path
    source_sha256: str  #: sha256 of the source and flags it was built from
    built: bool  #: True when this call compiled it, False when it came from the cache


def cache_dir() -> Path:
    if os.environ.get("FWLAB_CACHE"):
        return Path(os.environ["FWLAB_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fwlab"


def _digest(source: Path, flags: tuple[str, ...]) -> str:
    h = hashlib.sha256(source.read_bytes())
    h.update("\0".join(flags).encode())
    return h.hexdigest()


def compile_cached(source: Path, stem: str, suffix: str, argv_of, flags: tuple[str, ...]) -> Artifact:
    """``source`` compiled by ``argv_of(clang, out_path)`` into the cache as ``stem-<hash><suffix>``
    (fwlab.probes builds its BPF clock the same way)."""
    sha = _digest(source, flags)
    out = cache_dir() / f"{stem}-{sha[:16]}{suffix}"
    if out.exists():
        return Artifact(out, sha, built=False)
    clang = require_tool("clang")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    cp = subprocess.run(argv_of(clang, tmp), capture_output=True, text=True, check=False)
    if cp.returncode != 0:
        tmp.unlink(missing_ok=True)
        detail = (cp.stderr or cp.stdout).strip().splitlines()
        raise BuildError(f"compiling {source.name} failed: {detail[0] if detail else 'no output'}",
                         fix="apt-get install clang llvm libbpf-dev (or run 'make deps')")
    os.replace(tmp, out)
    return Artifact(out, sha, built=True)


def bpf_object() -> Artifact:
    """The compiled XDP firewall (programs xdp_linear, xdp_map, xdp_pass)."""
    return compile_cached(BPF_SOURCE, "xdp_filter", ".bpf.o",
                  lambda cc, tmp: [cc, *BPF_FLAGS, "-c", str(BPF_SOURCE), "-o", str(tmp)], BPF_FLAGS)


def loader() -> Artifact:
    """The loader binary (fwlab-xdp), linked against the system's libbpf."""
    flags = LOADER_FLAGS + LOADER_LIBS
    return compile_cached(LOADER_SOURCE, "fwlab-xdp", "",
                  lambda cc, tmp: [cc, *LOADER_FLAGS, str(LOADER_SOURCE), *LOADER_LIBS, "-o", str(tmp)], flags)


def main() -> int:
    for art in (bpf_object(), loader()):
        print(f"{'built' if art.built else 'cached'} {art.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
