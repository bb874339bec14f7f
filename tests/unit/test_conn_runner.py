"""Connection runner: option validation, counting, limit causes, the 'only' filter, the
host-sysctl guard and the report section (no root, no network)."""

import json
import time

import pytest

from fwlab.errors import FwlabError, RunnerError
from fwlab.report.section_connections import render
from fwlab.runners import conn
from fwlab.runners import conn_counts
from fwlab.runners import conn_options
from fwlab.methods.connections import limit_cause
from fwlab.suites import parse_suite
from fwlab.run.plan import expand
from fwlab.testbed import host_sysctl
from trials import full_trial


def test_rate_options_defaults_and_errors():
    o = conn_options.check_options("conn_rate", {})
    assert o["search"] == "binary" and o["failure_ratio"] == 1e-5
    with pytest.raises(ValueError, match="unknown conn_rate option"):
        conn_options.check_options("conn_rate", {"rate": 5})
    with pytest.raises(ValueError, match="needs rate_cps"):
        conn_options.check_options("conn_rate", {"search": "none"})
    with pytest.raises(ValueError, match="below max_rate_cps"):
        conn_options.check_options("conn_rate", {"min_rate_cps": 5000, "max_rate_cps": 100})
    with pytest.raises(ValueError, match="req_bytes"):
        conn_options.check_options("conn_rate", {"req_bytes": 0})


def test_capacity_host_sysctl_needs_explicit_permission():
    with pytest.raises(ValueError, match="allow_host_sysctl"):
        conn_options.check_options("conn_capacity", {"host_conntrack_max": 524288})
    o = conn_options.check_options("conn_capacity", {"host_conntrack_max": 524288, "allow_host_sysctl": True})
    assert o["host_conntrack_max"] == 524288
    assert conn_options.check_options("conn_capacity", {})["allow_host_sysctl"] is False


def test_addresses_and_workers_scale_with_the_count():
    o = conn_options.check_options("conn_capacity", {"max_count": 500000})
    assert conn_options.addresses_needed("conn_capacity", o) == 11  # 64512 ports per address pair
    assert conn_options.workers_for(500000) == 27  # RLIMIT_NOFILE 20000 per process here
    assert conn_options.workers_for(2000) == 1
    assert conn_options.addresses_needed("conn_rate", conn_options.check_options("conn_rate", {"addresses": 3})) == 3


def test_rate_trial_counts_late_launches_as_not_offered():
    doc = {"intended": 1000, "started": 1000, "succeeded": 1000, "late": 50}
    tr = conn_counts.rate_trial_result(doc, 1.0, 1000.0)
    assert tr.offered_count == 950 and tr.generator_short
    ok = conn_counts.rate_trial_result({"intended": 1000, "started": 1000, "succeeded": 999, "late": 0}, 1.0, 1000.0)
    assert ok.loss_ratio == pytest.approx(0.001) and not ok.generator_short


def test_hold_forwarded_counts_probed_and_unprobed():
    assert conn_counts.hold_forwarded({"held": 100, "probed": 100, "probe_ok": 98}) == 98
    assert conn_counts.hold_forwarded({"held": 100, "probed": 10, "probe_ok": 10}) == 100
    assert conn_counts.hold_forwarded({"held": 100, "probed": 0, "probe_ok": 0}) == 100
    tr = conn_counts.hold_trial_result({"started": 100, "held": 100, "probed": 100, "probe_ok": 100}, 100, 2.0)
    assert tr.loss_ratio == 0 and not tr.generator_short


def test_limit_cause_names_a_full_connection_table():
    trial = {"client": {"failed": {"timeout": 12}, "local_errors": {}},
             "server": {"accept_errors": {}},
             "conntrack_held": {"nf_conntrack_max": 262144, "nf_conntrack_count": 262144}}
    text = limit_cause(trial, None)
    assert "connection table full" in text and "timeout" in text
    gen = limit_cause({"client": {"local_errors": {"no_fd": 3}}, "conntrack_held": {}}, None)
    assert "generator-side" in gen
    assert limit_cause(None, None) is None


def test_parse_doc_checks_the_kind():
    assert conn.parse_doc(json.dumps({"kind": "conn-rate", "schema_version": 1}), "conn-rate")["kind"] == "conn-rate"
    with pytest.raises(FwlabError):
        conn.parse_doc(json.dumps({"kind": "conn-hold", "schema_version": 1}), "conn-rate")
    with pytest.raises(FwlabError):
        conn.parse_doc("not json", "conn-rate")


def test_only_restricts_a_traffic_item_to_some_configurations():
    s = parse_suite({"name": "t", "rules": [0, 100], "stateful_shortcut": [False, True],
                     "traffic": [{"kind": "conn_rate", "tool": "conn"},
                                 {"kind": "conn_capacity", "tool": "conn",
                                  "only": {"rules": [0], "stateful_shortcut": [True]}}],
                     "repetitions": 1}, "test")
    ids = [t.trial_id for t in expand(s).trials]
    cap = [i for i in ids if "capacity" in i]
    assert len([i for i in ids if "conn_rate" in i]) == 4
    assert cap == ["ip4conn_capacity-dflt-nftables-0r-linear-sf-routed-r1"]
    with pytest.raises(FwlabError, match="only"):
        parse_suite({"name": "t", "traffic": [{"kind": "conn_rate", "tool": "conn", "only": {"size": [1]}}]}, "t")


def test_builtin_connection_suites_parse():
    from fwlab.suites.loader import load_suite

    for name in ("connections", "connections-quick", "connections-conntrack"):
        suite, _text = load_suite(name)
        assert any(t.tool == "conn" for t in suite.traffic)
        reps = suite.repetitions
        assert name == "connections-conntrack" or reps >= 2


def test_host_sysctl_refuses_keys_outside_the_allow_list():
    with pytest.raises(FwlabError, match="does not change"):
        with host_sysctl.host_sysctl("net.ipv4.ip_forward", 1, {}):
            pass
    log: dict = {}
    with host_sysctl.host_sysctl("net.netfilter.nf_conntrack_max", None, log):
        pass
    assert log == {}


def _trial(test, rules, value, **kw):
    m = {"conn_rate_cps": value} if test == "rate" else {
        "capacity_connections": value, "conntrack_max": 262144, "conntrack_buckets": 262144,
        "conntrack_count_held": value, "limit_cause": kw.get("cause")}
    return full_trial({"kind": "connections", "trial_id": f"x-{rules}-{value}", "mode": "routed",
                       "backend": "nftables", "layout": "linear", "stateful_shortcut": True, "ip_version": 4,
                       "rules": rules, "traffic": f"conn_{test}", "metrics": m, "flags": [], "extra": {"test": test}})


def test_section_renders_rate_and_capacity_tables():
    trials = [_trial("rate", 0, 4000.0), _trial("rate", 0, 4200.0), _trial("rate", 1000, 3000.0),
              _trial("rate", 1000, 3100.0),
              _trial("capacity", 0, 262000, cause="DUT connection table full")]
    out = render({}, trials)
    assert "Connection setup and tear-down rate" in out and "<svg" in out
    assert "4100" in out  # median of two repetitions
    assert "Concurrent TCP connection capacity" in out and "DUT connection table full" in out
    assert render({}, []) is None


def test_capacity_search_with_fractional_loads_completes(monkeypatch):
    """Ramp to the first failure, then a binary search whose loads are fractions (e.g. 135822.45):
    the measurer holds the nearest whole count and reports the load as asked, so the search's
    consistency check passes and the result is a count that was really held."""
    from fwlab.methods.connections import ConnRunner

    limit = 135_509                      # the simulated DUT table: more connections fail

    def fake_hold(bed, *, ip_version, count, o, srcs, stop_on_failure=False):
        held = min(count, limit)
        doc = {"started": count, "established": held, "held": held, "probed": held, "probe_ok": held,
               "failed": {"timeout": count - held} if count > held else {}, "local_errors": {},
               "probe_failed": {}, "first_failure_at": limit + 1 if count > limit else None}
        return doc, {}, {"nf_conntrack_count": 0}, {"nf_conntrack_count": held, "nf_conntrack_max": limit}

    monkeypatch.setattr(conn, "run_hold", fake_hold)
    o = conn_options.check_options("conn_capacity", {"max_count": 300000, "min_count": 10000, "hold_s": 1.0,
                                             "relative_width": 0.05})
    m = conn.ConnCapacityMeasurer(None, 4, o, ["198.18.1.10"])
    cap, upper, sr, irregular, ramp = ConnRunner()._capacity_search(m, o)
    assert cap is not None and cap <= limit and cap >= limit * 0.95 - 1
    assert any(t["count"] == cap for t in m.trials)          # the result is a count that was held
    assert upper is not None and upper > limit and ramp["count"] == 300000
    assert any(not float(t["result"]["intended_load_pps"]).is_integer() for t in sr["trials"])


class _SysctlBed:
    """A bed whose client is remote and server local: records the sysctl commands it is given."""

    def __init__(self):
        self.cmds = []

    def is_remote(self, role):
        return role == "client"

    def sh(self, role, *argv, check=True):
        self.cmds.append((role, argv))
        out = "32768\t60999\n" if argv[:2] == ("sysctl", "-n") else ""
        return type("CP", (), {"returncode": 0, "stdout": out, "stderr": ""})()


def test_prepare_bed_never_writes_sysctls_on_a_remote_host():
    bed = _SysctlBed()
    info = conn.prepare_bed(bed, {})
    writes = [(r, a) for r, a in bed.cmds if "-w" in a]
    assert writes and {r for r, _ in writes} == {"server"}  # the local namespace is set
    assert info["sysctls"] == {f"server:{k}": v for k, v in conn.SERVER_SYSCTLS.items()}
    assert info["sysctls_not_applied"] == {
        "client:net.ipv4.ip_local_port_range": "remote host left as handed over (it has 32768 60999)"}
    # remote server too: nothing written anywhere
    bed2 = _SysctlBed()
    bed2.is_remote = lambda role: True
    info2 = conn.prepare_bed(bed2, {})
    assert not [a for _, a in bed2.cmds if "-w" in a] and info2["sysctls"] == {}
    assert set(info2["sysctls_not_applied"]) == {f"client:{k}" for k in conn.CLIENT_SYSCTLS} | {
        f"server:{k}" for k in conn.SERVER_SYSCTLS}


_STUBBORN = ("import signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
             "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('partial', flush=True); time.sleep(60)")


def test_reader_ends_a_stubborn_process_without_racing_its_pipes(monkeypatch):
    import sys

    from fwlab.testbed.host import LocalHost

    host = LocalHost()
    sp = host.spawn([sys.executable, "-c", _STUBBORN])
    try:
        reader = conn._Reader(sp)
        time.sleep(0.5)
        # Spawned.stop would communicate() on the pipes the reader's threads read
        monkeypatch.setattr(sp, "stop", lambda *a, **k: pytest.fail("stop() raced the reader"))
        t0 = time.monotonic()
        out, _ = reader.wait(0.1, grace_s=0.2, end_s=0.5)  # INT and TERM ignored: KILLed
        assert sp.proc.poll() is not None and time.monotonic() - t0 < 10
        assert out == "partial\n"
    finally:
        if sp.proc.poll() is None:
            sp.proc.kill()
        host.forget(sp)


def test_wait_ready_returns_on_the_file_and_names_a_process_that_died(tmp_path):
    import sys

    from fwlab.runners.engine import wait_ready
    from fwlab.testbed.host import LocalHost

    host = LocalHost()
    ready = tmp_path / "ready"
    sp = host.spawn([sys.executable, "-c", f"open({str(ready)!r}, 'w').close(); import time; time.sleep(5)"])
    try:
        wait_ready(host, sp, str(ready), "conn-server", timeout_s=10.0)
        assert ready.exists()
    finally:
        sp.stop()
        host.forget(sp)
    dead = host.spawn([sys.executable, "-c", "import sys; sys.stderr.write('bad flag'); sys.exit(2)"])
    with pytest.raises(RunnerError, match="conn-server did not become ready: bad flag"):
        wait_ready(host, dead, str(tmp_path / "never"), "conn-server", timeout_s=10.0)
    host.forget(dead)


def test_rate_metrics_record_the_lean_and_close_options(monkeypatch):
    from fwlab.methods.connections import ConnRunner
    from fwlab.runners.base import TrafficSpec

    seen = []

    def fake_run_rate(bed, *, ip_version, rate_cps, duration_s, o, srcs, proc_stat=None):
        seen.append((bool(o.get("lean")), o.get("close", "fin")))
        doc = {"started": 100, "succeeded": 100, "failed": {}, "local_errors": {}, "connect_us": {"p50": 50}}
        return doc, {}, {}, {}

    monkeypatch.setattr(conn, "run_rate", fake_run_rate)
    monkeypatch.setattr(conn, "read_conntrack", lambda bed: dict.fromkeys(conn.CONNTRACK_KEYS))
    for lean, close in ((True, "fin"), (False, "rst")):
        o = conn_options.check_options("conn_rate", {"search": "none", "rate_cps": 100, "lean": lean, "close": close})
        spec = TrafficSpec(traffic="conn_rate", tool="conn", duration_s=1.0, options=o)
        m = ConnRunner()._rate(None, spec, o, ["198.18.1.10"])
        # what the engine was run with, not the defaults
        assert (m.metrics["lean"], m.metrics["close"]) == (lean, close) == seen[-1]


def test_mem_available_b_is_the_least_of_the_hosts():
    class H:
        def __init__(self, kib):
            self.kib = kib

        def run(self, argv, check=True):
            out = f"MemTotal: 9999999 kB\nMemAvailable: {self.kib} kB\n" if self.kib else "garbage\n"
            return type("CP", (), {"stdout": out, "returncode": 0})()

    a, b = H(4000), H(3000)
    bed = type("B", (), {"host_for": lambda self, r: {"client": a, "server": b, "dut": a}[r]})()
    assert conn.mem_available_b(bed) == 3000 * 1024
    unreadable = type("B", (), {"host_for": lambda self, r: H(None)})()
    assert conn.mem_available_b(unreadable) is None
