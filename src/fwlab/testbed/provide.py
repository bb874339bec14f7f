"""Getting a program the run needs (fwlab-engine) onto a remote host: copy it or build it there.

Owns the choice, made once per host and run, and its switch ``FWLAB_SHIP``:

- ``auto`` (default): a Linux host of the controller's architecture gets the controller's build
  (copied and checked by SHA-256, testbed.ship), which must then pass ``check`` (the engine's
  ``version`` answer). When the architecture differs, or the copy does not run there (another C
  library, say), it is built on the host with cargo (testbed.cargo_build); a host without cargo
  gets one line naming what is missing and the fix;
- ``copy``: never build (a mismatch is that one-line error);
- ``build``: always build on the host, even where a copy would run (to test that path, or for a
  build of the host's own toolchain).

A host that is not Linux is refused whatever the mode: the engine is a Linux program.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fwlab.errors import HostError
from fwlab.testbed.cargo_build import build_on_host
from fwlab.testbed.host import Host
from fwlab.testbed.ship import Shipped, platform_mismatch, ship

SHIP_ENV = "FWLAB_SHIP"
MODES = ("auto", "copy", "build")


def ship_mode() -> str:
    mode = os.environ.get(SHIP_ENV, "").strip() or "auto"
    if mode not in MODES:
        raise HostError(f"{SHIP_ENV}={mode!r} is not one of {', '.join(MODES)}",
                        fix=f"unset {SHIP_ENV} (auto: copy where it runs, else build with cargo on the host)")
    return mode


def provide(host: Host, local_path: str, name: str, *, source_dir: Callable[[], str | Path],
            cache_dir: str, keep: bool, check: Callable[[str], str | None],
            mode: str | None = None) -> Shipped:
    """``name`` ready to run on ``host``: the controller's build ``local_path`` copied there, or
    one built there from ``source_dir()``; ``check(path)`` says why a placed binary is not the
    expected one (None: it is)."""
    mode = mode or ship_mode()
    why = platform_mismatch(host, name)
    if mode == "build":
        why = why or f"{SHIP_ENV}=build asks for a build on the host"
    elif why is not None and mode == "copy":
        raise HostError(why, fix=f"unset {SHIP_ENV} (fwlab then builds it there with cargo), or use a host "
                                 "of the controller's architecture for this role")
    if why is None:
        copied = ship(host, local_path, name, cache_dir=cache_dir, keep=keep)
        bad = check(copied.path)
        if bad is None:
            return copied
        host.run(["rm", "-f", "--", copied.path], check=False, timeout_s=30)
        if mode == "copy":
            raise HostError(f"{name} copied to host {host.name} does not run there ({bad})",
                            fix=f"check the host's C library (the engine is a dynamically linked Linux "
                                f"binary), or unset {SHIP_ENV} so fwlab builds it there with cargo")
        why = f"the copy of {name} does not run there ({bad})"
    built = build_on_host(host, source_dir(), name, cache_dir=cache_dir, keep=keep, why=why)
    bad = check(built.path)
    if bad is not None and built.cached:  # a kept build that no longer runs: build it afresh
        host.run(["rm", "-f", "--", built.path], check=False, timeout_s=30)
        built = build_on_host(host, source_dir(), name, cache_dir=cache_dir, keep=keep, why=why)
        bad = check(built.path)
    if bad is not None:
        raise HostError(f"{name} built on host {host.name} is not the controller's ({bad})",
                        fix="build from the sources of the engine fwlab uses here (FWLAB_ENGINE_SRC, FWLAB_ENGINE)")
    return built
