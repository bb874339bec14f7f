"""Applying a tuning profile (``suites.tuning``) inside the test bed's own namespaces.

Owns: writing a profile's per-namespace sysctls into each namespace fwlab created (never the
host's: a remote role's namespace and anything host-global is left alone) and the record of what
was applied, where, and what was not with the reason. The commands go through the bed's ``sh``
(``ip netns exec``), so unit tests drive it with a fake.
"""

from __future__ import annotations

from typing import Callable

from fwlab.suites.tuning import Profile


def apply_profile(prof: Profile, roles: list[str], run: Callable[..., object]) -> dict:
    """Write ``prof``'s per-namespace settings in each of ``roles`` (namespaces this process
    created) with ``run(role, *argv, check=...)``. A key the namespace lacks is skipped (reading
    it first), not written. Returns ``{"profile", "source", "applied": {role: {key: value}},
    "not_applied": {key: reason}}``."""
    applied: dict[str, dict[str, str]] = {r: {} for r in roles}
    not_applied: dict[str, str] = {}
    for s in prof.settings:
        why = s.not_applied()
        if why:
            not_applied[s.key] = why
            continue
        for role in roles:
            cp = run(role, "sysctl", "-n", s.key, check=False)
            if getattr(cp, "returncode", 1) != 0:
                not_applied[s.key] = "not on this kernel"
                continue
            run(role, "sysctl", "-q", "-w", f"{s.key}={s.value}")
            applied[role][s.key] = s.value
    return {"profile": prof.name, "source": prof.source, "applied": applied, "not_applied": not_applied}
