"""Per-role CPU series: /proc/stat parsing, per-interval %, role -> CPU mapping, and the report's plot."""

from types import SimpleNamespace

from fwlab.report.cpu import render
from fwlab.testbed.cpuseries import CpuRoles, CpuSampler, cpu_rates, merge_short_tail, read_proc_stat
from fwlab.testbed.topology import Pinning
from trials import full_trial

STAT0 = """cpu  300 0 100 1600 0 0 0 0 0 0
cpu0 100 0 50 800 0 0 50 0 0 0
cpu1 200 0 50 800 0 0 0 0 0 0
intr 1 2 3
"""
# +100 jiffies each: cpu0 80 busy of which 30 softirq; cpu1 25 busy
STAT1 = """cpu  0 0 0 0 0 0 0 0 0 0
cpu0 140 0 60 820 0 0 80 0 0 0
cpu1 210 0 65 870 5 0 0 0 0 0
"""


def _bed(device_model="veth", pinning=Pinning(), remote=(), has_dut=True):
    topo = SimpleNamespace(pinning=pinning, device_model=device_model, has_dut=has_dut)
    return SimpleNamespace(topo=topo, is_remote=lambda r: r in remote)


def test_read_proc_stat_per_cpu_only():
    s = read_proc_stat(STAT0)
    assert set(s) == {0, 1}
    assert s[0] == (1000, 800, 50)


def test_rates_veth_dut_is_client_softirq():
    roles = CpuRoles.of(_bed())
    assert (roles.client_cpu, roles.server_cpu, roles.dut_cpu, roles.dut_measure) == (0, 1, 0, "softirq")
    rows = cpu_rates([(0.0, read_proc_stat(STAT0)), (1.0, read_proc_stat(STAT1))], roles)
    assert len(rows) == 1
    r = rows[0]
    assert r["t_s"] == 1.0
    assert abs(r["client_busy_pct"] - 80.0) < 1e-9 and abs(r["client_softirq_pct"] - 30.0) < 1e-9
    assert abs(r["dut_busy_pct"] - 30.0) < 1e-9
    assert abs(r["server_busy_pct"] - 25.0) < 1e-9  # iowait counts as idle
    assert abs(r["host_busy_pct"] - 52.5) < 1e-9


def test_a_short_last_interval_joins_the_one_before():
    """The trial's end reading comes a fraction of a second after the last whole one; at 1/100 s
    ticks its own row would jump (5 ticks: 0, 20 ... 100 %). It is merged into the row before."""
    a, b, c = ({0: (t, t // 2, 0)} for t in (0, 100, 105))
    merged = merge_short_tail([(0.0, a), (1.0, b), (1.05, c)], 1.0)
    assert [t for t, _ in merged] == [0.0, 1.05]
    kept = [(0.0, a), (1.0, b), (1.6, c)]
    assert merge_short_tail(kept, 1.0) == kept  # 0.6 s: a row of its own
    assert merge_short_tail(kept[:2], 1.0) == kept[:2]  # one interval: nothing to merge into
    roles = CpuRoles(0, None, None, "busy")
    assert [r["t_s"] for r in cpu_rates(merged, roles)] == [1.05]


def test_napi_dut_has_its_own_cpu_and_remote_roles_are_missing_with_reason():
    roles = CpuRoles.of(_bed("napi", Pinning(0, 1, 1), remote=("server",)))
    assert roles.dut_cpu == 1 and roles.dut_measure == "busy" and roles.server_cpu is None
    assert "remote" in roles.missing["server"]
    rows = cpu_rates([(0.0, read_proc_stat(STAT0)), (1.0, read_proc_stat(STAT1))], roles)
    assert abs(rows[0]["dut_busy_pct"] - 25.0) < 1e-9 and "server_busy_pct" not in rows[0]
    unpinned = CpuRoles.of(_bed(pinning=Pinning(None, None, None)))
    assert unpinned.client_cpu is None and "not pinned" in unpinned.missing["client"]
    assert "not pinned" in unpinned.missing["dut"]


def test_sampler_unreadable_stat_is_recorded_not_raised(tmp_path):
    s = CpuSampler(_bed(), interval_s=0.05, stat_path=tmp_path / "nope")
    rec = s.start().stop()
    assert rec["samples"] == [] and "nope" in rec["error"]


def test_sampler_reads_this_machine(tmp_path):
    import time
    s = CpuSampler(_bed(), interval_s=0.05).start()
    time.sleep(0.2)
    rec = s.stop()
    assert rec["client_cpu"] == 0 and rec["samples"]
    assert all(0.0 <= row["host_busy_pct"] <= 100.0 for row in rec["samples"] if "host_busy_pct" in row)


def _trial(backend, rep, level, cs_extra=None):
    samples = [{"t_s": float(i + 1), "client_busy_pct": level, "dut_busy_pct": level / 2,
                "server_busy_pct": 10.0} for i in range(3)]
    cs = {"interval_s": 1.0, "client_cpu": 0, "server_cpu": 1, "dut_cpu": 0, "dut_measure": "softirq",
          "missing": {}, "samples": samples, **(cs_extra or {})}
    return full_trial({"trial_id": f"{backend}-{rep}", "kind": "stream", "traffic": "udp", "backend": backend,
                       "layout": "linear", "rules": 10, "size_bytes": 64, "repetition": rep, "metrics": {"rx_pps": 1.0},
                       "extra": {"cpu_series": cs}})


def test_report_plots_roles_with_units_and_medians():
    trials = [_trial("nftables", 1, 40.0), _trial("nftables", 2, 60.0), _trial("nftables", 3, 90.0),
              _trial("iptables", 1, 70.0)]
    h = render(trials)
    assert "CPU use per role over time" in h and "<svg" in h
    assert "CPU busy [%]" in h and "time in the trial [s]" in h
    assert "60 (40–90)" in h and "30 (20–45)" in h  # client and DUT: median (range) of per-trial means
    assert "softirq" in h


def test_report_names_missing_roles_and_is_empty_without_series():
    t = _trial("nftables", 1, 40.0, {"missing": {"server": "on a remote host"}, "server_cpu": None})
    assert "server: no CPU series — on a remote host" in render([t])
    assert render([full_trial(extra={})]) == ""


def test_a_veth_bed_says_its_roles_split_by_cpu_and_a_napi_bed_does_not():
    """On veth a second can show client ~0 % and server 100 % (TCP sends from the ACK's softirq on
    the server's CPU): the report says so under the plots; a napi bed's DUT has its own CPU."""
    veth = render([_trial("nftables", 1, 40.0)])
    assert "whole path can run on the server's CPU" in veth and 'device_model = "napi"' in veth
    napi = render([_trial("nftables", 1, 40.0, {"dut_measure": "busy", "dut_cpu": 1})])
    assert "CPU use per role over time" in napi and "whole path can run" not in napi
