"""A trial whose runner fails is recorded with the kind its runner's measurements have: a failed
``parallel`` trial belongs to the parallel section, not to a stream curve of its own (seen: a
900-stream trial whose iperf3 client hung became kind ``stream``, and the terminal summary showed
a curve "0r: missing" beside the parallel trials that had figures)."""

import io

from fwlab.errors import RunnerError
from fwlab.methods.recovery import ParallelStreams


def test_a_failed_parallel_trial_keeps_its_kind(tmp_path, monkeypatch):
    from fwlab.run.start import start as start_run
    from fwlab.report import print_summary
    from fwlab.results import RunRecord
    from fwlab.suites import parse_suite

    calls = []
    real = ParallelStreams.measure

    def measure(self, bed, spec, env):
        calls.append(1)
        if len(calls) == 1:  # the first repetition fails on the real bed, the second measures
            raise RunnerError("1 of 1 iperf3 clients hung; this trial's figure is missing", fix="none needed")
        return real(self, bed, spec, env)

    monkeypatch.setattr(ParallelStreams, "measure", measure)
    suite = parse_suite({"name": "failed-kind", "mode": ["direct"], "backends": ["nftables"], "rules": [0],
                         "duration_s": 1, "repetitions": 2, "settle_s": 0,
                         "traffic": [{"kind": "parallel", "tool": "parallel", "streams": 2,
                                      "options": {"baseline": False, "max_probes": 0}}]}, "test")
    rec = start_run(suite, "", tmp_path, quiet=True)
    trials = list(RunRecord.open(rec.path).trials())
    assert [t["kind"] for t in trials] == ["parallel", "parallel"]
    assert "hung" in trials[0]["error"] and not trials[1]["error"]
    out = io.StringIO()
    print_summary(rec.path, out)
    assert "missing" not in out.getvalue()
