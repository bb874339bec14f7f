"""fwlab's namespaces on this host: which ``fwl-`` namespaces exist, deleting one (its processes
first), and cleaning up those a run left behind.

Owns: the namespaces as host objects, by name. Never builds one (testbed.bed does) and never
touches a namespace whose name lacks the ``fwl-`` prefix.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from fwlab.errors import NotRoot
from fwlab.testbed import owner
from fwlab.testbed.host import LocalHost, kill_namespace_pids
from fwlab.testbed.topology import PREFIX

#: every namespace this process created and has not deleted yet (tests check it is empty)
LIVE_NAMESPACES: set[str] = set()


def require_root() -> None:
    if os.geteuid() != 0:
        raise NotRoot("building the test bed needs root (network namespaces, nftables)",
                      fix="run as root, e.g. 'sudo fwlab ...'")


def list_fwl_namespaces(host: LocalHost) -> list[str]:
    cp = host.run(["ip", "-j", "netns", "list"], check=False)
    try:
        entries = json.loads(cp.stdout or "[]")
    except json.JSONDecodeError:
        entries = [{"name": line.split()[0]} for line in cp.stdout.splitlines() if line.strip()]
    return sorted(e["name"] for e in entries if e.get("name", "").startswith(PREFIX))


def delete_namespace(host: LocalHost, ns: str) -> None:
    """Stop the processes inside ``ns``, then delete it. Never raises for a missing namespace."""
    kill_namespace_pids(host, ns)
    host.run(["ip", "netns", "del", ns], check=False)
    LIVE_NAMESPACES.discard(ns)


@dataclass(frozen=True)
class Cleaned:
    """What ``clean_leftovers`` did: namespaces removed, and those left alone with the state of
    their run's owner (``alive``: the process that built them still runs)."""

    removed: list[str]
    kept: dict[str, str]  #: namespace -> owner state


def clean_leftovers(host: LocalHost | None = None, run_id: str | None = None, *, force: bool = False) -> Cleaned:
    """Remove ``fwl-`` namespaces (of one run, or all) whose run's owner process is gone
    (fwlab.testbed.owner; a namespace without an owner file counts as left behind); with
    ``force`` those of live runs too. Each removed run's owner file goes with its namespaces."""
    host = host or LocalHost()
    prefix = f"{PREFIX}{run_id}-" if run_id else PREFIX
    removed, kept, runs = [], {}, set()
    for ns in list_fwl_namespaces(host):
        if not ns.startswith(prefix):
            continue
        rid = owner.run_id_of(ns)
        state = owner.owner_state(rid) if rid else "unknown"
        if state == "alive" and not force:
            kept[ns] = state
            continue
        delete_namespace(host, ns)
        removed.append(ns)
        if rid:
            runs.add(rid)
    for rid in runs:
        owner.forget(rid)
    return Cleaned(removed=removed, kept=kept)
