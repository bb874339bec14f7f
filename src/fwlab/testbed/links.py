"""Borrowing a local interface for a test bed whose neighbour role is on another host.

Owns: checking that an interface named in a hosts file is free (down, no address), moving it
into a role's namespace under the bed's standard name, and giving it back (old name, this
process's namespace) at teardown. Never touches an interface that is up or addressed: that is
the host's own network.
"""

from __future__ import annotations

import json
import os

from fwlab.errors import TestbedError
from fwlab.testbed.host import LocalHost


def check_free(host: LocalHost, dev: str) -> None:
    """Raise TestbedError unless ``dev`` exists here, is down and has no IPv4 or global IPv6 address."""
    cp = host.run(["ip", "-j", "addr", "show", "dev", dev], check=False)
    if cp.returncode != 0 or not cp.stdout.strip():
        raise TestbedError(f"interface {dev} named in the hosts file does not exist on this host",
                           fix="name the local interface cabled to the remote role (ip link)")
    info = json.loads(cp.stdout)[0]
    addrs = [a for a in info.get("addr_info", []) if a.get("family") == "inet"
             or (a.get("family") == "inet6" and a.get("scope") == "global")]
    if dev == "lo" or "UP" in info.get("flags", []) or addrs:
        raise TestbedError(f"interface {dev} is in use on this host (up or addressed); fwlab only "
                           f"borrows a free interface", fix=f"'ip link set {dev} down' and remove its "
                           f"addresses if it is meant for the test bed, or name another interface")


def adopt(host: LocalHost, dev: str, ns: str, new_name: str) -> None:
    """Move free interface ``dev`` into namespace ``ns`` and name it ``new_name`` there."""
    check_free(host, dev)
    host.run(["ip", "link", "set", "dev", dev, "netns", ns])
    if new_name != dev:
        try:
            host.run(["ip", "-n", ns, "link", "set", "dev", dev, "name", new_name])
        except Exception:
            give_back(host, ns, dev, dev)
            raise


def give_back(host: LocalHost, ns: str, cur: str, orig: str) -> None:
    """Return an adopted interface to this process's namespace under its old name (best effort:
    a physical NIC also returns by itself when the namespace is deleted)."""
    host.run(["ip", "-n", ns, "link", "set", "dev", cur, "down"], check=False)
    if cur != orig:
        host.run(["ip", "-n", ns, "link", "set", "dev", cur, "name", orig], check=False)
    host.run(["ip", "-n", ns, "link", "set", "dev", orig, "netns", str(os.getpid())], check=False)
