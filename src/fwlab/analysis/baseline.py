"""Noise baselines: the run-to-run spread of every figure, from N runs of an unchanged suite.

Owns: building a `fwlab.stats.NoiseModel` over the per-run medians of each figure (seed 002: ten
runs of the base system give each figure's spread), the baseline file
``baseline-<suite>-<UTC>.json`` (the model plus the run directories it came from) and reading it
back. `baseline_from_runs` only reads existing records; running the N runs is the orchestrator's
(`fwlab.run.baseline.measure_baseline`). Never touches: the test bed or firewalls
directly, plots, the CLI.

Every metric of every figure is modelled (not only the primary one), so a later comparison can
pick any metric. A figure present in fewer than two of the runs is left out and listed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fwlab.analysis.figures import ALL, medians, run_figures
from fwlab.errors import FwlabError
from fwlab.files import check_output_dir, file_part, loads_json, write_output
from fwlab.results.record import RunRecord, utc_now
from fwlab.stats import NoiseModel

__all__ = ["BASELINE_FORMAT", "Baseline", "baseline_from_runs", "load_noise"]

BASELINE_FORMAT = "fwlab.baseline"
BASELINE_VERSION = 1


@dataclass(frozen=True)
class Baseline:
    """A noise model and where it came from."""

    suite: str
    """Suite name of the runs."""
    runs: tuple[str, ...]
    """Run directories the model was built from."""
    noise: NoiseModel
    """Per-figure spread of the per-run medians (figure key -> FigureNoise) [figure unit]."""
    created_utc: str
    """When the model was built (UTC, ISO 8601)."""
    left_out: tuple[str, ...] = field(default=())
    """Figures present in fewer than two runs, so without a spread."""

    def to_dict(self) -> dict[str, Any]:
        return {"format": BASELINE_FORMAT, "version": BASELINE_VERSION, "suite": self.suite,
                "created_utc": self.created_utc, "runs": list(self.runs),
                "statistic": "median over repetitions per run", "left_out": list(self.left_out),
                "noise": self.noise.to_dict()}

    def file_name(self) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        suite = file_part(self.suite, "suite name", fix="the runs' run.json names their suite; give runs of a "
                                                         "suite with a plain name")
        return f"baseline-{suite}-{stamp}.json"

    def write(self, out_dir: Path | str) -> Path:
        """Write ``baseline-<suite>-<UTC>.json`` into `out_dir` (created if missing, its parent
        not), safely (fwlab.files.write_output)."""
        name = self.file_name()
        out_dir = check_output_dir(out_dir, "baseline directory")
        path = out_dir / name
        k = 1
        while path.exists():
            k += 1
            path = out_dir / f"{name[:-len('.json')]}-{k}.json"
        return write_output(path, json.dumps(self.to_dict(), indent=2) + "\n", "baseline file")


def baseline_from_runs(run_dirs: Sequence[Path | str]) -> Baseline:
    """Noise model from existing run records of one suite (at least two)."""
    if len(run_dirs) < 2:
        raise FwlabError(f"a noise baseline needs at least 2 runs, got {len(run_dirs)}",
                         fix="pass two or more run directories (seed 002 used ten runs)")
    suites = {RunRecord.open(d).run.get("suite", {}).get("name") for d in run_dirs}
    if len(suites) != 1:
        raise FwlabError(f"the runs belong to different suites ({', '.join(sorted(map(str, suites)))})",
                         fix="build a baseline from runs of one unchanged suite")
    per_run: dict[str, list[float]] = {}
    for d in run_dirs:
        for key, value in medians(run_figures(d, ALL)).items():
            per_run.setdefault(key, []).append(value)
    enough = {k: v for k, v in per_run.items() if len(v) >= 2}
    if not enough:
        raise FwlabError("no figure has a value in two or more of the runs",
                         fix="pass runs that finished trials of the same configurations")
    return Baseline(suite=str(suites.pop()), runs=tuple(str(d) for d in run_dirs),
                    noise=NoiseModel.from_runs(enough), created_utc=utc_now(),
                    left_out=tuple(sorted(set(per_run) - set(enough))))


def load_noise(path: Path | str) -> NoiseModel:
    """The noise model of a baseline file (or of a bare `NoiseModel.to_dict()` JSON file)."""
    path = Path(path)
    from fwlab.validation import read_text

    text = read_text(path, "noise file", FwlabError, fix="give a baseline file written by 'fwlab baseline'")
    data = loads_json(text, f"noise file {path}", FwlabError, fix="rebuild it with 'fwlab baseline'", finite=True)
    if isinstance(data, dict) and data.get("format") == BASELINE_FORMAT:
        if data.get("version") != BASELINE_VERSION:
            raise FwlabError(f"baseline file {path} has version {data.get('version')!r}, "
                             f"this fwlab reads {BASELINE_VERSION}", fix="rebuild it with 'fwlab baseline'")
        data = data.get("noise")
    return NoiseModel.from_dict(data)
