"""The one place fwlab may change a host-global kernel setting, and only when a suite says so.

Owns: changing an allow-listed sysctl of the host's own (initial) network namespace for the
length of one ``with`` block, recording the old value and restoring it on every exit path
(normal end, error, Ctrl-C, and SIGTERM, which fwlab turns into KeyboardInterrupt). A SIGKILL
cannot be caught: the record then shows the change without a restore, and ``fwlab clean``
cannot know the old value, so the record is where to read it.

Why it exists: on this kernel (6.18) ``net.netfilter.nf_conntrack_max`` and
``nf_conntrack_buckets`` are read-only inside a network namespace; every namespace's
connection table is limited by the initial namespace's value. A capacity test above that
limit must change the host's value. Nothing else in fwlab touches the host.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from fwlab.errors import FwlabError

#: sysctls a suite may change on the host, with the reason
ALLOWED = {
    "net.netfilter.nf_conntrack_max": "connection-table limit of every namespace (read-only in a netns)",
    "net.netfilter.nf_conntrack_buckets": "connection-table hash size (read-only in a netns)",
}


class HostSysctlError(FwlabError):
    """A host-global sysctl could not be changed or restored."""


def _path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read(key: str) -> str | None:
    try:
        return _path(key).read_text().strip()
    except OSError:
        return None


def _write(key: str, value: str) -> None:
    try:
        _path(key).write_text(f"{value}\n")
    except OSError as exc:
        raise HostSysctlError(f"cannot set host sysctl {key}={value}: {exc.strerror}",
                              fix="run as root on a kernel with nf_conntrack; or drop the host_* option") from exc


@contextmanager
def host_sysctl(key: str, value: int | None, log: dict):
    """Set host-global ``key`` to ``value`` inside the block (None: leave it). ``log`` receives
    ``{key: {"old", "new", "restored"}}`` so the caller can record it even if the block raises."""
    if value is None:
        yield
        return
    if key not in ALLOWED:
        raise HostSysctlError(f"fwlab does not change host sysctl {key}",
                              fix=f"only {', '.join(ALLOWED)} may be changed")
    old = read(key)
    if old is None:
        raise HostSysctlError(f"host sysctl {key} does not exist", fix="load nf_conntrack (any ct rule does)")
    entry = {"old": old, "new": str(value), "restored": False}
    log[key] = entry
    if old == str(value):
        entry["restored"] = True
        yield
        return
    _write(key, str(value))
    try:
        yield
    finally:
        _write(key, old)
        entry["restored"] = read(key) == old


__all__ = ["ALLOWED", "HostSysctlError", "host_sysctl", "read"]
