"""Host metadata recorded with every run: kernel, CPU, memory, tool versions, fwlab revision.

Owns: reading facts about the machine, and about a remote host through its
:class:`~fwlab.testbed.host.Host` (one shell script over one SSH session). Never changes anything.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import fwlab


def _first_line(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (cp.stdout or cp.stderr).strip()
    return text.splitlines()[0] if text else None


TOOL_VERSION_CMDS = {
    "nft": ["nft", "--version"],
    "iptables-legacy": ["iptables-legacy", "--version"],
    "iptables-nft": ["iptables-nft", "--version"],
    "ipset": ["ipset", "version"],
    "iperf3": ["iperf3", "--version"],
    "ethtool": ["ethtool", "--version"],
    "iproute2": ["ip", "-V"],
    "netperf": ["netperf", "-V"],
    "trafgen": ["trafgen", "--version"],
}


def tool_versions() -> dict[str, str | None]:
    """Each tool's version line (None: not installed); fwlab-engine's from the binary fwlab
    runs (`fwlab.runners.engine_binary.find_engine`: $FWLAB_ENGINE, the repository's build, PATH),
    read from its JSON ``version`` document."""
    from fwlab.runners.engine_binary import engine_version, find_engine

    out = {k: _first_line(v) for k, v in TOOL_VERSION_CMDS.items()}
    out["fwlab-engine"] = engine_version() if find_engine() else None
    return out


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _meminfo_kib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def git_revision() -> str | None:
    here = Path(fwlab.__file__).resolve().parent
    try:
        cp = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True, timeout=5)
        rev = cp.stdout.strip() if cp.returncode == 0 else None
        if rev:
            dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def host_metadata() -> dict:
    u = platform.uname()
    return {
        "hostname": u.node,
        "kernel": u.release,
        "kernel_version": u.version,
        "machine": u.machine,
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_kib": _meminfo_kib(),
        "bpf_jit_enable": _read("/proc/sys/net/core/bpf_jit_enable"),
        "cpufreq_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "python": platform.python_version(),
        "fwlab_version": fwlab.__version__,
        "fwlab_git_revision": git_revision(),
        "tools": tool_versions(),
    }


#: one POSIX-sh script printing ``key=value`` lines: the same facts as :func:`host_metadata`,
#: read on a remote host (first line of each tool's version, empty when it is missing)
REMOTE_SCRIPT = "; ".join([
    'echo "hostname=$(uname -n)"', 'echo "kernel=$(uname -r)"', 'echo "kernel_version=$(uname -v)"',
    'echo "machine=$(uname -m)"', 'echo "os=$(uname -s)"',
    'echo "cpu_model=$(grep -m1 "^model name" /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed "s/^ *//")"',
    'echo "cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null)"',
    'echo "memory_kib=$(awk \'/^MemTotal:/ {print $2}\' /proc/meminfo 2>/dev/null)"',
    'echo "bpf_jit_enable=$(cat /proc/sys/net/core/bpf_jit_enable 2>/dev/null)"',
    'echo "cpufreq_governor=$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null)"',
    *(f'echo "tool:{k}=$(PATH=$PATH:/usr/sbin:/sbin {" ".join(v)} 2>&1 </dev/null | head -n1)"'
      for k, v in TOOL_VERSION_CMDS.items()),
])

_INTS = ("cpus", "memory_kib")


def parse_remote_metadata(text: str) -> dict:
    """``key=value`` lines of :data:`REMOTE_SCRIPT` -> the :func:`host_metadata` layout
    (missing facts and tools are None)."""
    out: dict = {"tools": {}}
    for line in text.splitlines():
        key, eq, val = line.partition("=")
        if not eq:
            continue
        val = val.strip()
        if key.startswith("tool:"):
            name = key[5:]
            bad = not val or "not found" in val or "No such file" in val
            out["tools"][name] = None if bad else val
        elif key in _INTS:
            out[key] = int(val) if val.isdigit() else None
        else:
            out[key] = val or None
    return out


def remote_host_metadata(host) -> dict:
    """:func:`host_metadata` of a host reached through ``host`` (a ``testbed.host.Host``)."""
    cp = host.run(["sh", "-c", REMOTE_SCRIPT], timeout_s=60, check=False)
    meta = parse_remote_metadata(cp.stdout)
    meta["collected_via"] = host.describe()
    return meta
