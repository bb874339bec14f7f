"""Who owns a bed's namespaces: one owner file per run id, written when the bed is built.

Owns: the owner file ``<OWNER_DIR>/<run id>.json`` (the building process's pid and its start
time in clock ticks since boot, from /proc/<pid>/stat, so that a reused pid is not taken for the
owner), `claim` (before the first namespace is created), `release` (after the last one is
deleted), `owner_state` (alive, gone, or no file) and `run_id_of` (the run id in a namespace
name ``fwl-<run id>-<role>``). ``fwlab clean`` removes a run's namespaces only when its owner is
gone (or it has no owner file: a bed of a crashed older fwlab) unless told ``--force``.
Never touches: namespaces, links, firewalls (the bed does).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from fwlab.testbed.topology import PREFIX

__all__ = ["OWNER_DIR", "OwnerState", "claim", "forget", "owner_path", "owner_state", "release", "run_id_of"]

#: where owner files live (tmpfs, gone after a reboot, as the namespaces are); FWLAB_OWNER_DIR
#: overrides it (tests)
OWNER_DIR = Path(os.environ.get("FWLAB_OWNER_DIR", "/run/fwlab/owners"))

OwnerState = Literal["alive", "gone", "unknown"]


def _dir() -> Path:
    return Path(os.environ.get("FWLAB_OWNER_DIR", str(OWNER_DIR)))


def owner_path(run_id: str) -> Path:
    return _dir() / f"{run_id}.json"


def _start_ticks(pid: int) -> int | None:
    """The process's start time [clock ticks since boot] (field 22 of /proc/<pid>/stat), None
    when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: split after its last ')'
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def claim(run_id: str, pid: int | None = None) -> Path | None:
    """Write the owner file of ``run_id``: this process (or ``pid``) builds and owns its bed.
    None where it cannot be written (not root: then no namespace can be built either)."""
    pid = os.getpid() if pid is None else pid
    path = owner_path(run_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"run_id": run_id, "pid": pid, "start_ticks": _start_ticks(pid)}) + "\n")
        os.replace(tmp, path)
    except OSError:
        return None
    return path


def release(run_id: str) -> None:
    """Remove the owner file of ``run_id`` if this process wrote it (never raises)."""
    path = owner_path(run_id)
    try:
        data = json.loads(path.read_text())
        if data.get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def owner_state(run_id: str) -> OwnerState:
    """``alive``: the process that built the bed still runs; ``gone``: it ended (its pid is free
    or taken by a later process); ``unknown``: no readable owner file."""
    try:
        data = json.loads(owner_path(run_id).read_text())
        pid = int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"
    ticks = _start_ticks(pid)
    if ticks is None:
        return "gone"
    return "alive" if data.get("start_ticks") in (None, ticks) else "gone"


def forget(run_id: str) -> None:
    """Remove the owner file of ``run_id`` whoever wrote it (``fwlab clean``, after removing
    the run's namespaces)."""
    try:
        owner_path(run_id).unlink()
    except OSError:
        pass


def run_id_of(ns: str) -> str | None:
    """``fwl-<run id>-<role>`` -> run id; None for a name not of that form."""
    if not ns.startswith(PREFIX):
        return None
    rest = ns[len(PREFIX):]
    return rest.split("-", 1)[0] or None
