"""The report's "Firewall data paths" table: what each backend actually loaded, per layout.

Owns: one table built from the trial records' ``ruleset_family`` (e.g. "nft ip",
"xdp linear (xdp_linear, generic attach)" — so the report says which XDP attach mode a curve used)
and each test bed's backend version (program hash, JIT state); laid out by
templates/datapaths.html.j2. Reads the stored record only.
"""

from __future__ import annotations

from fwlab.report import templating
from fwlab.results.trial import TrialRecord, as_records


def render(run: dict, trials: list[TrialRecord]) -> str:
    trials = as_records(trials)
    fams: dict[tuple, set[str]] = {}
    for t in trials:
        if t.backend in (None, "none") or not t.ruleset_family:
            continue
        fams.setdefault((t.mode, t.backend, t.layout), set()).add(t.ruleset_family)
    if not fams:
        return ""
    versions: dict[tuple, set[str]] = {}
    for bed in run.get("beds", []):
        key = ((bed.get("topology") or {}).get("mode"), bed.get("backend"))
        versions.setdefault(key, set()).add(str(bed.get("backend_version")))
    rows = [[mode, be, layout, "; ".join(sorted(f)), "; ".join(sorted(versions.get((mode, be), ())))]
            for (mode, be, layout), f in sorted(fams.items(), key=lambda kv: tuple(str(x) for x in kv[0]))]
    return str(templating.render("datapaths.html.j2", rows=rows))
