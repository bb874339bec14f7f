"""Building fwlab's in-kernel clock: the BPF object and its loader, compiled with clang on first use.

Owns: the two compiler command lines; the cache and its rules (an output named after a hash of
its source and flags, written to a temporary name and renamed) are fwlab.dut.xdp_build's, shared
with the XDP firewall. ``python -m fwlab.probes.build`` builds ahead of use. Never loads anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fwlab.dut.xdp_build import BPF_FLAGS, LOADER_FLAGS, LOADER_LIBS, Artifact, compile_cached

SRC_DIR = Path(__file__).resolve().parent / "kclock_c"
BPF_SOURCE = SRC_DIR / "kclock.bpf.c"
LOADER_SOURCE = SRC_DIR / "kclock_loader.c"


def bpf_object() -> Artifact:
    """The compiled clock (programs enter_0..31, leave_0..31; maps slots, stats, hist)."""
    return compile_cached(BPF_SOURCE, "kclock", ".bpf.o",
                          lambda cc, tmp: [cc, *BPF_FLAGS, "-c", str(BPF_SOURCE), "-o", str(tmp)], BPF_FLAGS)


def loader() -> Artifact:
    """The loader binary (fwlab-kclock), linked against the system's libbpf."""
    flags = LOADER_FLAGS + LOADER_LIBS
    return compile_cached(LOADER_SOURCE, "fwlab-kclock", "",
                          lambda cc, tmp: [cc, *LOADER_FLAGS, str(LOADER_SOURCE), *LOADER_LIBS, "-o", str(tmp)],
                          flags)


def main() -> int:
    for art in (bpf_object(), loader()):
        print(f"{'built' if art.built else 'cached'} {art.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
