"""Seed 004's Table 3 procedure: single-stream probes while the multi-stream load runs (parallel
option ``during``). The schedule on a simulated clock, the load in its own thread beside the
probes (a fake iperf3 whose load ends at a chosen probe), the probe port, and the Table 3 finding
on such records reaching reproduced, not reproduced and inconclusive. No root, no traffic."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from test_published_new_kinds import (  # noqa: F401  (fast_probes is a fixture)
    fast_probes,
    iperf3_tcp,
    record,
    seed004_trials,
    spec_dict,
)
from test_published_verdicts import run_of

from fwlab.errors import RunnerError
from fwlab.methods import recovery
from fwlab.methods.recovery import LOAD_THREAD, ProbePlan, run_beside_load, run_probes
from fwlab.published.compare import INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, compare_study
from fwlab.runners.base import TrafficSpec

T3_DURING = {"interval_s": 5, "probe_s": 2, "max_probes": 6, "tolerance": 0.10, "during": True}


def test_during_is_a_checked_plan_option():
    assert ProbePlan.from_options({}).during is False
    assert ProbePlan.from_options({"during": True}).to_dict()["during"] is True
    with pytest.raises(ValueError, match="during"):
        ProbePlan.from_options({"during": "yes"})


def sim_clock(probe_s):
    now = [0.0]
    return now, (lambda: now[0]), (lambda d: now.__setitem__(0, now[0] + d))


def test_probes_stop_when_the_load_ends_and_a_probe_past_it_does_not_recover():
    plan = ProbePlan.from_options({"interval_s": 5, "probe_s": 2, "max_probes": 10, "tolerance": 0.1})
    now, clock, sleep = sim_clock(2)
    rates = iter([0.2, 0.3, 0.99, 0.99])

    def probe():
        now[0] += 2
        return next(rates)

    # the load ends at 11 s: probes at 0, 5 end inside it; the one at 10 s ends at 12 s, after it
    rows = run_probes(probe, 1.0, plan, clock=clock, sleep=sleep, load_running=lambda: now[0] < 11)
    assert [r["t_after_s"] for r in rows] == [0.0, 5.0, 10.0]
    assert [r["during_load"] for r in rows] == [True, True, False]
    assert not any(r["recovered"] for r in rows)          # 99 % at 10 s, but on a path the load had left
    assert recovery.probe_metrics(rows, 1.0)["recovered"] is False
    # while the load runs, a probe within the tolerance recovers and ends the probing
    now[0] = 0.0
    rates = iter([0.2, 0.95, 0.99])
    rows = run_probes(probe, 1.0, plan, clock=clock, sleep=sleep, load_running=lambda: True)
    assert [r["recovered"] for r in rows] == [False, True] and rows[1]["during_load"] is True


def join_load():
    """Wait until the load's thread has ended (gone already: it has)."""
    for t in threading.enumerate():
        if t.name == LOAD_THREAD:
            t.join()


class LoadAndProbes:
    """A fake iperf3: the multi-stream load blocks until the probe numbered ``load_probes`` (the
    first to end after the load) or, when probing stops first, ``timeout_s``; probes answer from
    a queue. Records each spec it ran."""

    def __init__(self, probe_rates, load_bps, load_probes: int | None, timeout_s: float = 1.0,
                 load_error: str | None = None):
        self.load_error = load_error
        self.rates = list(probe_rates)
        self.load_bps = load_bps
        self.load_probes = load_probes
        self.release = threading.Event()
        self.timeout_s = timeout_s
        self.specs: list[TrafficSpec] = []
        self.n = 0
        self.started_ports: list[int] = []

    def start(self, bed, spec):
        self.started_ports.append(spec.port)

    def run_clients(self, bed, spec):
        self.specs.append(spec)
        if spec.streams > 1:
            self.release.wait(self.timeout_s)
            if self.load_error:
                raise RunnerError(self.load_error, fix="none")
            return iperf3_tcp(self.load_bps, spec.streams, "tcp")
        if threading.current_thread().name == LOAD_THREAD:
            raise AssertionError("a probe ran in the load's thread")
        k, self.n = self.n, self.n + 1
        rate = self.rates.pop(0)
        if self.load_probes is not None and k == self.load_probes:
            self.release.set()     # the load ends while this probe runs
            join_load()
        return iperf3_tcp(rate)


def during_trial(rules, rep, probe_rates, load_probes, baseline=1e9, streams=500, load_bps=2e9, load_error=None):
    opts = ProbePlan.from_options(T3_DURING).to_dict()
    spec = spec_dict(mode="bridge", backend="nftables", rules=rules, traffic="parallel", streams=streams, rep=rep,
                     options=opts)
    fake = LoadAndProbes([baseline] + list(probe_rates), load_bps, None if load_probes is None else load_probes + 1,
                         load_error=load_error)
    ts = TrafficSpec(traffic="parallel", tool="iperf3", streams=streams, duration_s=5.0, options=opts)
    m = recovery.measure_with_probes(fake, None, ts)
    return record(spec, m), fake


def test_probes_run_beside_the_load_on_a_port_of_their_own(fast_probes):
    t, fake = during_trial(10000, 1, [0.3e9, 0.5e9, 0.6e9], load_probes=2)
    # 500 streams: 4 load processes on ports 5201..5204, the probes on 5205 (started before the load)
    load = [s for s in fake.specs if s.streams > 1][0]
    probes = [s for s in fake.specs if s.streams == 1]
    assert fake.started_ports == [load.port + 4] and {s.port for s in probes} == {load.port + 4}
    rows = t["extra"]["probes"]
    assert [r["during_load"] for r in rows] == [True, True, False]
    assert t["extra"]["probe_plan"]["during"] is True and t["metrics"]["recovered"] is False
    assert t["metrics"]["throughput_bps"] == pytest.approx(2e9, rel=0.01)
    assert any(f["code"] == "not-recovered" and "during the multi-stream run" in f["message"] for f in t["flags"])


def test_the_loads_error_reaches_the_caller_when_no_probe_ended_beside_it():
    plan = ProbePlan.from_options({"interval_s": 1, "probe_s": 1, "max_probes": 1, "during": True})

    def load():
        raise RunnerError("2 of 4 iperf3 clients hung", fix="none")

    def probe():          # the load has failed before this probe ends
        join_load()
        return 1.0

    with pytest.raises(RunnerError, match="hung"):
        run_beside_load(load, probe, 1.0, plan, clock=lambda: 0.0, sleep=lambda d: None)

    def not_a_runner_error():
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run_beside_load(not_a_runner_error, probe, 1.0, plan, clock=lambda: 0.0, sleep=lambda d: None)


def seed004_during(t3_trials):
    """seed004_trials' Table 2 trials (probes after the load there) with its 500-stream 10,000-rule
    trials replaced by probes-during-the-load trials."""
    ts = [t for t in seed004_trials([1e9]) if not (t["streams"] == 500 and t["rules"] == 10000)]
    return ts + t3_trials


def t3(cmp):
    return next(f for f in cmp.findings if f.id == "seed-004/probe-recovers-in-20s")


def test_table_3_during_the_load_reaches_all_three(fast_probes):
    # recovered at 10 s while the load still ran (probe 2 of 0..2 inside it)
    rec = [during_trial(10000, r, [0.4e9, 0.7e9, 0.95e9], load_probes=None)[0] for r in (1, 2)]
    f = t3(compare_study(run_of("seed-004"), seed004_during(rec)))
    assert f.verdict == REPRODUCED and "first probe during the load at 40 %" in f.fwlab
    # the load ran past 20 s and no probe inside it came back: not reproduced
    never = [during_trial(10000, r, [0.1e9] * 6, load_probes=None)[0] for r in (1, 2)]
    f = t3(compare_study(run_of("seed-004"), seed004_during(never)))
    assert f.verdict == NOT_REPRODUCED and "never in 0 of 2" in f.fwlab
    # the load ended at the probe of 10 s: that probe (99 %) met an idle path and does not count;
    # the probes inside the load stopped before 20 s: inconclusive, saying why
    short = [during_trial(10000, r, [0.1e9, 0.1e9, 0.99e9], load_probes=2)[0] for r in (1, 2)]
    assert all(not t["metrics"]["recovered"] for t in short)
    f = t3(compare_study(run_of("seed-004"), seed004_during(short)))
    assert f.verdict == INCONCLUSIVE and "ended before 20 s without recovering" in f.reason
    table = next(t for t in compare_study(run_of("seed-004"), seed004_during(short)).tables if "表3" in t.title)
    assert next(r for r in table.rows if r[0] == "probe at 10 s")[5] == "0 of 2 recovered; 2 ended after the load"
    # the same probes after the load: not testable here
    after = compare_study(run_of("seed-004"), seed004_trials([0.4e9, 0.7e9, 0.95e9]))
    assert t3(after).verdict == NOT_TESTABLE


def test_seed_004_presets_probe_during_the_500_stream_load():
    from fwlab.suites.loader import load_suite

    for name in ("seed-004", "seed-004-quick"):
        s, _ = load_suite(name)
        probed = [t for t in s.traffic if (t.options or {}).get("max_probes", 12) > 0]
        assert probed and all(t.streams == 500 and t.options.get("during") is True for t in probed), name


def test_load_s_needs_during_and_whole_seconds():
    assert ProbePlan.from_options({"during": True, "load_s": 25}).load_s == 25.0
    for bad in ({"load_s": 25}, {"during": True, "load_s": 2.5}, {"during": True, "load_s": 0}):
        with pytest.raises(ValueError, match="load_s"):
            ProbePlan.from_options(bad)


def test_load_s_sets_the_loads_length_and_the_estimate_counts_the_overlap():
    opts = ProbePlan.from_options({**T3_DURING, "load_s": 25}).to_dict()
    fake = LoadAndProbes([1e9, 0.95e9], 2e9, None, timeout_s=0.0)
    recovery.measure_with_probes(fake, None, TrafficSpec(traffic="parallel", tool="iperf3", streams=500,
                                                         duration_s=5.0, options=opts))
    assert [s.duration_s for s in fake.specs if s.streams > 1] == [25.0]
    assert {s.duration_s for s in fake.specs if s.streams == 1} == {2.0}
    opts = {"during": True, "load_s": 25, "probe_s": 2, "interval_s": 5, "max_probes": 5}
    # the baseline (2 s + 1) and the load's 20 s beyond the 5 s trial; the probes overlap the load
    assert ProbePlan.from_options(opts).estimate_s(5.0) == pytest.approx(3.0 + 20.0)
    after = ProbePlan.from_options({**opts, "during": False, "load_s": None})
    assert after.estimate_s(5.0) == pytest.approx(3.0 + 4 * 5 + 3)


def test_a_load_that_fails_keeps_the_probes_that_ran_beside_it(fast_probes):
    # the load gives up (stalled streams: iperf3's ETIMEDOUT) while the probe of 10 s runs
    err = "iperf3 failed: unable to write to stream socket: Connection timed out"
    t, _ = during_trial(1000, 1, [0.2e9, 0.3e9, 0.99e9], load_probes=2, load_error=err)
    assert t["metrics"]["throughput_bps"] is None and t["error"] is None
    flag = next(f for f in t["flags"] if f["code"] == "load-failed")
    assert "Connection timed out" in flag["message"] and t["extra"]["load_error"].startswith("iperf3 failed")
    assert [p["during_load"] for p in t["extra"]["probes"]] == [True, True, False]
    assert t["metrics"]["recovered"] is False and t["metrics"]["baseline_bps"] == 1e9
    # the finding reads such trials: the probes inside the load ended before 20 s -> inconclusive
    f = t3(compare_study(run_of("seed-004"), seed004_during([t, during_trial(1000, 2, [0.2e9, 0.3e9, 0.99e9],
                                                                              load_probes=2, load_error=err)[0]])))
    assert f.verdict == INCONCLUSIVE


class SsBed:
    """A bed whose client namespace reports `counts` established connections, one per poll."""

    def __init__(self, counts):
        self.counts = list(counts)
        self.argv = None

    def sh(self, role, *argv, check=True):
        assert role == "client"
        self.argv = argv
        n = self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]
        return SimpleNamespace(returncode=0, stdout="ESTAB x\n" * n, stderr="")


def test_probes_wait_until_the_loads_streams_are_up():
    from fwlab.methods.recovery import wait_streams_up

    spec = TrafficSpec(traffic="tcp", tool="iperf3", streams=500, duration_s=25.0, port=5201)
    # 500 streams in 4 processes: 500 data + 4 control connections on ports 5201..5204
    bed = SsBed([0, 200, 503, 504])
    wait_streams_up(bed, spec, lambda: True, poll_s=0.0)
    assert bed.counts == [504] and bed.argv[-9:] == ("(", "dport", ">=", ":5201", "and", "dport", "<=", ":5204", ")")
    # a load that ended stops the wait at once
    bed = SsBed([0])
    assert wait_streams_up(bed, spec, lambda: False, poll_s=0.0) < 1.0 and bed.argv is None


NETSTAT = ("TcpExt: SyncookiesSent TCPAbortOnData TCPAbortOnMemory TCPAbortOnTimeout\n"
           "TcpExt: 0 2 0 {n}\n"
           "IpExt: InNoRoutes\nIpExt: 0\n")


def test_tcp_abort_counters_are_read_from_the_senders_netstat():
    from fwlab.methods.recovery import parse_tcpext, tcp_aborts

    assert parse_tcpext(NETSTAT.format(n=7)) == {"SyncookiesSent": 0, "TCPAbortOnData": 2, "TCPAbortOnMemory": 0,
                                                 "TCPAbortOnTimeout": 7}
    assert parse_tcpext("IpExt: a\nIpExt: 1\n") == {}
    bed = SimpleNamespace(sh=lambda role, *a, check=True: SimpleNamespace(returncode=0, stdout=NETSTAT.format(n=3)))
    assert tcp_aborts(bed, "client") == {"TCPAbortOnTimeout": 3, "TCPAbortOnMemory": 0, "TCPAbortOnData": 2}
    assert tcp_aborts(None, "client") is None


def test_the_load_failures_cause_is_named_from_what_was_measured():
    from fwlab.methods.recovery import load_failure_cause

    err = "iperf3 failed: unable to write to stream socket: Connection timed out"
    shaped = load_failure_cause(err, {"TCPAbortOnTimeout": 1, "TCPAbortOnMemory": 0}, 100_000_000)
    assert "100 Mbit/s" in shaped and "local congestion" in shaped and "TCPAbortOnTimeout +1" in shaped
    assert "Mbit/s" not in load_failure_cause(err, {"TCPAbortOnTimeout": 1}, None)
    assert "memory" in load_failure_cause(err, {"TCPAbortOnTimeout": 0, "TCPAbortOnMemory": 4}, None)
    assert load_failure_cause("2 of 4 iperf3 clients hung", {"TCPAbortOnTimeout": 0}, 100_000_000) is None


class AbortBed:
    """A bed whose sender's TCPAbortOnTimeout rises by one over the load, on a 100 Mbit/s wire."""

    def __init__(self):
        self.n = 0
        self.topo = SimpleNamespace(link_rate_bps=100_000_000)

    def sh(self, role, *argv, check=True):
        if argv[:2] == ("cat", "/proc/net/netstat"):
            out = NETSTAT.format(n=self.n)
            self.n += 1
            return SimpleNamespace(returncode=0, stdout=out, stderr="")
        return SimpleNamespace(returncode=0, stdout="ESTAB x\n" * 600, stderr="")


def test_a_dead_loads_measured_cause_reaches_the_flag_and_the_finding(fast_probes):
    err = "iperf3 failed: unable to write to stream socket: Connection timed out"
    ts = []
    for rep in (1, 2):
        opts = ProbePlan.from_options(T3_DURING).to_dict()
        spec = spec_dict(mode="bridge", backend="nftables", rules=1000, traffic="parallel", streams=500, rep=rep,
                         options=opts)
        fake = LoadAndProbes([1e9, 0.2e9, 0.3e9, 0.99e9], 2e9, 3, load_error=err)
        m = recovery.measure_with_probes(fake, AbortBed(), TrafficSpec(traffic="parallel", tool="iperf3",
                                                                       streams=500, duration_s=5.0, options=opts))
        ts.append(record(spec, m))
    t = ts[0]
    assert t["extra"]["load_tcp_aborts"]["TCPAbortOnTimeout"] == 1
    assert "local congestion" in t["extra"]["load_failure_cause"]
    assert "measured cause" in next(f for f in t["flags"] if f["code"] == "load-failed")["message"]
    f = t3(compare_study(run_of("seed-004"), seed004_during(ts)))
    assert f.verdict == INCONCLUSIVE and "load died" in f.reason and "local congestion" in f.reason


def test_a_timed_out_load_is_read_as_local_congestion_only_when_the_counter_rose():
    """TCPAbortOnTimeout +0, or counters unread: only the facts, no cause asserted."""
    from fwlab.methods.recovery import load_failure_cause, load_failure_facts

    err = "iperf3 failed: unable to write to stream socket: Connection timed out"
    assert load_failure_cause(err, {"TCPAbortOnTimeout": 0, "TCPAbortOnMemory": 0}, 100_000_000, 3.2) is None
    assert load_failure_cause(err, None, 100_000_000, 3.2) is None
    zero = load_failure_facts(err, {"TCPAbortOnTimeout": 0, "TCPAbortOnMemory": 0}, 3.2)
    assert "timed out" in zero and "TCPAbortOnTimeout +0" in zero and "3.2 s" in zero
    assert "local congestion" not in zero and "no cause measured" in zero
    unread = load_failure_facts(err, None, None)
    assert "could not be read" in unread and "local congestion" not in unread
    # the counter rose: the reading says when the load ended; a load that ran past the
    # retransmissions' give-up time is not read as local congestion
    rose = load_failure_cause(err, {"TCPAbortOnTimeout": 2}, None, 4.0)
    assert "local congestion" in rose and "ended 4.0 s after it began" in rose
    assert load_failure_cause(err, {"TCPAbortOnTimeout": 2}, None, 1000.0) is None


class NoAbortBed(AbortBed):
    """TCPAbortOnTimeout stays put over the load."""

    def sh(self, role, *argv, check=True):
        if argv[:2] == ("cat", "/proc/net/netstat"):
            return SimpleNamespace(returncode=0, stdout=NETSTAT.format(n=5), stderr="")
        return super().sh(role, *argv, check=check)


class UnreadBed(AbortBed):
    """/proc/net/netstat cannot be read in the sending namespace."""

    def sh(self, role, *argv, check=True):
        if argv[:2] == ("cat", "/proc/net/netstat"):
            return SimpleNamespace(returncode=1, stdout="", stderr="no such file")
        return super().sh(role, *argv, check=check)


@pytest.mark.parametrize("bed,shown", [(NoAbortBed, "TCPAbortOnTimeout +0"), (UnreadBed, "could not be read")])
def test_a_dead_load_with_no_measured_cause_says_only_the_facts(fast_probes, bed, shown):
    err = "iperf3 failed: unable to write to stream socket: Connection timed out"
    ts = []
    for rep in (1, 2):
        opts = ProbePlan.from_options(T3_DURING).to_dict()
        spec = spec_dict(mode="bridge", backend="nftables", rules=1000, traffic="parallel", streams=500, rep=rep,
                         options=opts)
        fake = LoadAndProbes([1e9, 0.2e9, 0.3e9, 0.99e9], 2e9, 3, load_error=err)
        m = recovery.measure_with_probes(fake, bed(), TrafficSpec(traffic="parallel", tool="iperf3",
                                                                  streams=500, duration_s=5.0, options=opts))
        ts.append(record(spec, m))
    t = ts[0]
    assert "load_failure_cause" not in t["extra"] and shown in t["extra"]["load_failure_facts"]
    msg = next(f for f in t["flags"] if f["code"] == "load-failed")["message"]
    assert "measured cause" not in msg and "local congestion" not in msg and shown in msg
    f = t3(compare_study(run_of("seed-004"), seed004_during(ts)))
    assert f.verdict == INCONCLUSIVE and "load died" in f.reason and "local congestion" not in f.reason
    assert "measured cause" not in f.reason and "no cause measured" in f.reason


def test_seed_004s_undecided_reason_joins_every_cause_and_checks_the_20_s():
    """A dead load's reason joins the other repetitions' reasons (not replaces them); no double
    space when the end was not recorded; 'before 20 s' only for a load that ended before it; a
    load planned shorter than 20 s says so."""
    from fwlab.published.study_004 import _undecided_recovery
    from fwlab.results.trial import as_records

    def rec(rep, *, load_s=25, **extra):
        t = spec_dict(mode="bridge", backend="nftables", rules=1000, traffic="parallel", streams=500, rep=rep)
        t.update(trial_id=f"t3-{rep}", kind="parallel", metrics={"throughput_bps": 1e9}, error=None, flags=[],
                 extra={"probe_plan": {"during": True, "load_s": load_s}, **extra})
        return t

    err = "iperf3 failed: Connection timed out"
    stopped, died = rec(1), rec(2, load_error=err, load_ended_s=4.2, load_failure_facts="iperf3 timed out; no cause")
    why = _undecided_recovery(500, as_records([stopped, died]))
    assert "of 1 repetition(s) ended before 20 s without recovering" in why          # the one that did not die
    assert "load died 4.2 s after it began in 1 repetition(s), before 20 s" in why and "no cause measured" in why
    unknown = _undecided_recovery(500, as_records([rec(3, load_error=err)]))
    assert "  " not in unknown and "died (when it ended was not recorded) in 1" in unknown and "before 20" not in unknown
    # a load that died after 20 s did not stop the probes before it: not given as the reason
    late = _undecided_recovery(500, as_records([rec(4, load_error=err, load_ended_s=22.0)]))
    assert "died" not in late and "ended before 20 s without recovering" in late
    # a load planned for 10 s could never give a probe 20 s
    short = _undecided_recovery(500, as_records([rec(5, load_s=10)]))
    assert "planned for 10 s" in short and "shorter than the 20 s" in short
