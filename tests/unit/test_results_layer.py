"""The typed record layer: one identity, the kinds really written, TrialRecord round trips."""

import json
import re
from pathlib import Path

import pytest

from goldens import GOLDEN
from fwlab.suites.background import FloodSpec
from fwlab.results import TrialIdentity, TrialKind, TrialRecord, build_trial
from fwlab.results.curves import Curve, curves
from fwlab.results.identity import CURVE_FIELDS, config_label, trial_id
from fwlab.results.kinds import TRIAL_KINDS
from fwlab.suites import parse_suite
from fwlab.run.plan import expand

SRC = Path(__file__).resolve().parents[2] / "src" / "fwlab"


def _ident(**kw) -> TrialIdentity:
    base = dict(suite="s", mode="routed", backend="nftables", layout="linear", rules=1000, stateful_shortcut=True,
                ip_version=4, traffic="udp", tool="iperf3", size_bytes=64, streams=1, rate_bps=None,
                duration_s=2.0, repetition=1)
    return TrialIdentity(**{**base, **kw})


def test_trial_id_format_is_the_documented_one():
    assert _ident().trial_id == "ip4udp-64B-nftables-1000r-linear-sf-routed-r1"
    flood = FloodSpec(kind="udp_flood", rate_pps=9500, frame_size=64).to_dict()
    t = _ident(size_bytes=None, streams=4, label="bulk", stateful_shortcut=False, background=flood, repetition=3)
    assert t.trial_id == "ip4udp-bulk-dflt-4s-udpflood9500pps-nftables-1000r-linear-routed-r3"
    assert FloodSpec.from_dict(flood).id_part == "udpflood9500pps"
    # the functions on a plain trial line give the same answers as the identity
    line = t.to_dict()
    assert trial_id(line) == t.trial_id and config_label(line) == t.config_label == "nftables linear [bulk]"


def test_golden_trial_ids_come_back_from_their_fields():
    for line in (GOLDEN / "run-tiny" / "trials.jsonl").read_text().splitlines():
        t = json.loads(line)
        assert trial_id(t) == t["trial_id"]


def test_planned_trials_carry_the_one_identity():
    suite = parse_suite({"name": "x", "backends": ["nftables"], "rules": [0, 10], "layouts": ["linear", "set"],
                         "traffic": [{"kind": "udp", "sizes": [64]}]}, "test")
    plan = expand(suite)
    assert plan.trials and all(isinstance(t, TrialIdentity) for t in plan.trials)
    t = plan.trials[0]
    assert t.config_key == (t.mode, t.backend, t.layout, t.rules, t.stateful_shortcut, t.ip_version)
    assert t.curve_key == tuple(getattr(t, f) for f in CURVE_FIELDS)


def test_curve_labels_are_the_identity_labels():
    t = _ident().to_dict()
    c = Curve(tuple(t[f] for f in CURVE_FIELDS))
    assert c.label == config_label(t) == "nftables linear +established"
    assert c.traffic_label == "IPv4 UDP 64 B payload (routed)"
    assert Curve(tuple({**t, "backend": "none"}[f] for f in CURVE_FIELDS)).label == "none (no firewall)"


READERS = ("report", "published", "analysis")


def _kinds_in_source(readers: bool) -> set[str]:
    """Kinds named in the source: by the writers (measurements, the orchestrator) or by the
    readers (report sections)."""
    found = set()
    for p in SRC.rglob("*.py"):
        if (p.relative_to(SRC).parts[0] in READERS) != readers:
            continue
        if p.relative_to(SRC).parts[0] == "rules":
            continue  # an imported rule set's kind ("nft", "iptables") is not a trial kind
        text = p.read_text()
        found |= set(re.findall(r"\bkind=\"([\w-]+)\"", text))
        if not readers:
            found |= set(re.findall(r"\bm\.kind = \"(\w+)\"", text))
            found |= set(re.findall(r"\bkind = \"(\w+)\" if kind ==", text))
            found |= set(re.findall(r"^\s+kind: str = \"(\w+)\"  #: the trial record's kind", text, re.M))
    return found


def test_every_written_kind_is_a_trial_kind_and_every_trial_kind_is_written():
    written = _kinds_in_source(readers=False)
    assert {"rfc2544", "connections", "transactions", "rtt", "parallel", "attack", "stream"} <= written
    assert written == set(TRIAL_KINDS)


def test_report_sections_name_trial_kinds():
    assert _kinds_in_source(readers=True) <= set(TRIAL_KINDS)


def test_trial_record_round_trip_keeps_the_line():
    rec = build_trial(_ident().to_dict(), kind="attack", metrics={"rx_pps": 1.0, "goal": "pdr"}, started_utc="t0",
                      flags=[{"code": "cpu-saturated", "severity": "warning", "message": "m", "extra_key": 1}],
                      dut_counters_before={"deny": 1}, dut_counters_after={"deny": 4},
                      raw={"iperf3": {"anything": [1, {"x": None}]}})
    assert rec.kind is TrialKind.ATTACK and rec.identity.rules == 1000
    assert rec.dut_counters_delta == {"deny": 3}
    line = rec.to_json()
    assert line["kind"] == "attack" and line["rules"] == 1000 and "identity" not in line
    assert json.loads(json.dumps(line)) == line
    again = TrialRecord.from_json(line)
    assert again == rec and again.to_json() == line
    assert again.flags[0].model_extra == {"extra_key": 1}


def test_unknown_top_level_keys_are_kept_and_bad_kinds_refused():
    line = {**build_trial(_ident().to_dict(), metrics=None, started_utc="t", error="x").to_json(), "future": 7}
    assert TrialRecord.from_json(line).to_json()["future"] == 7
    with pytest.raises(ValueError):
        TrialRecord.from_json({**line, "kind": "search_trial"})


def test_curves_from_results_group_by_the_curve_key():
    lines = [build_trial(_ident(rules=n, repetition=r).to_dict(), metrics={"rx_pps": float(n + r)},
                         started_utc="t").to_json() for n in (0, 1000) for r in (1, 2)]
    (c,) = curves(lines)
    assert sorted(c.points) == [0, 1000] and c.points[1000].values["rx_pps"] == [1001.0, 1002.0]
