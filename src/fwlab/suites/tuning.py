"""Named tuning profiles a suite may apply to its test bed (suite ``tuning = "<name>"``).

Owns: the profiles (sysctls as a study printed them, with their source) and which of their keys
are per network namespace. Only those are ever applied, and only inside the namespaces fwlab
created (``testbed.tuning``); a host-global key (``net.core.*``, ``net.ipv4.tcp_mem``) would
change the host if written from a namespace, so it is never written: the record names it as not
applied, with the reason, as it does a key the running kernel no longer has.
"""

from __future__ import annotations

from dataclasses import dataclass

#: sysctls that each network namespace holds for itself (Linux >= 4.15); anything else is
#: treated as host-global and never written
PER_NAMESPACE = frozenset({
    "net.ipv4.tcp_tw_reuse", "net.ipv4.tcp_max_tw_buckets", "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem", "net.ipv4.tcp_timestamps",
})
#: keys a profile may name that current kernels no longer have, with the reason
REMOVED = {"net.ipv4.tcp_tw_recycle": "removed from Linux in 4.12"}


@dataclass(frozen=True)
class Setting:
    key: str
    value: str

    @property
    def per_namespace(self) -> bool:
        return self.key in PER_NAMESPACE

    def not_applied(self) -> str | None:
        """Why this setting is never applied in a namespace (None: it is)."""
        if self.key in REMOVED:
            return REMOVED[self.key]
        if not self.per_namespace:
            return "host-global (one value for every namespace): fwlab never changes the host's sysctls"
        return None


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    settings: tuple[Setting, ...]

    def to_dict(self) -> dict:
        return {"name": self.name, "source": self.source,
                "settings": {s.key: s.value for s in self.settings}}


def _settings(text: str) -> tuple[Setting, ...]:
    out = []
    for line in text.strip().splitlines():
        k, _, v = line.partition("=")
        out.append(Setting(k.strip(), " ".join(v.split())))
    return tuple(out)


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("seed-000-appendix-i",
            "seed 000 (Seral), Appendix I (EK I): the tuning of every GNU/Linux system of the study",
            _settings("""
                net.core.wmem_max=16777216
                net.core.wmem_default=16777216
                net.core.rmem_max=16777216
                net.core.rmem_default=16777216
                net.ipv4.tcp_tw_recycle=1
                net.ipv4.tcp_tw_reuse=1
                net.ipv4.tcp_max_tw_buckets=65535
                net.ipv4.tcp_fin_timeout=15
                net.ipv4.tcp_max_syn_backlog=65536
                net.core.netdev_max_backlog=200000
                net.ipv4.tcp_mem = 4096 87380 16777216
                net.ipv4.tcp_wmem = 4096 65535 16777216
                net.ipv4.tcp_rmem = 4096 87380 16777216
                net.ipv4.tcp_timestamps = 0
            """)),
)}


def profile(name: str) -> Profile:
    """The profile called ``name`` (ValueError naming the known ones otherwise)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown tuning profile {name!r}: use one of {', '.join(sorted(PROFILES))}") from None
