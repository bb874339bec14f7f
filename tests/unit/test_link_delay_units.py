"""Emulated delay without root: delays parse as netem writes them, bad ones are one line (exit 2),
the bed gains wire namespaces only when a delay is asked for, the delay line's command line and
per-trial counter deltas, and the delayline-limited flag (raised, not raised, counters missing)."""

import pytest

from fwlab import cli
from fwlab.errors import SuiteError
from fwlab.stats.quality import flag_delayline_limited
from fwlab.suites import parse_suite
from fwlab.testbed import Topology
from fwlab.testbed.delayline import DelayLine, trial_deltas
from fwlab.validation import parse_delay_us


@pytest.mark.parametrize("text,us", [("5ms", 5000.0), ("250us", 250.0), ("0.25ms", 250.0), ("1s", 1e6),
                                     (" 10US ", 10.0)])
def test_delays(text, us):
    assert parse_delay_us(text) == us


@pytest.mark.parametrize("text", ["5", "5 msec", "", "1us", "2s", "-5ms", "fast"])
def test_bad_delays(text):
    with pytest.raises(ValueError):
        parse_delay_us(text)


def test_a_suite_link_delay_is_checked_and_kept_in_microseconds():
    s = parse_suite({"name": "t", "traffic": [{"kind": "udp"}], "link_delay": "5ms"}, "test")
    assert s.link_delay_us == 5000.0
    assert parse_suite({"name": "t", "traffic": [{"kind": "udp"}]}, "test").link_delay_us is None
    with pytest.raises(SuiteError) as ei:
        parse_suite({"name": "t", "traffic": [{"kind": "udp"}], "link_delay": "5 msec"}, "test")
    assert "link_delay" in ei.value.one_line() and "5ms" in ei.value.one_line()


def test_a_bad_link_delay_on_the_command_line_is_one_line_and_exit_2(capsys):
    assert cli.main(["run", "quick", "--link-delay", "lots", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lots" in err[0] and "--link-delay" in err[0]


def test_a_link_delay_on_the_command_line_reaches_the_plan(capsys):
    assert cli.main(["run", "quick", "--link-delay", "250us", "--dry-run"]) == 0


def test_wires_exist_only_with_a_delay_and_fit_interface_names():
    assert Topology(run_id="abc123").wires == ()
    routed = Topology(run_id="abc123", link_delay_us=5000.0).wires
    assert [(w.tag, w.outer_role, w.inner_role) for w in routed] == [("wc", "client", "dut"), ("ws", "server", "dut")]
    assert routed[0].ns == "fwl-abc123-wc" and routed[0].a_if == "fwl-abc123-wc0"
    assert all(len(n) <= 15 for w in routed for n in (w.a_if, w.b_if))
    assert routed[0].inner_if == "fwl-abc123-d0" and routed[1].inner_if == "fwl-abc123-d1"
    direct = Topology(run_id="abc123", mode="direct", link_delay_us=5000.0).wires
    assert [(w.tag, w.outer_role, w.inner_role, w.inner_if) for w in direct] == [
        ("wc", "client", "server", "fwl-abc123-s0")]


def test_the_delay_line_command_line():
    argv = DelayLine(250.0).argv("/e", "A", "B", "/tmp/s.json")
    assert argv[:5] == ["chrt", "-f", "50", "/e", "delayline"]  # real-time, as a wire
    assert DelayLine(250.0, rt_priority=None).argv("/e", "A", "B", "/s")[:2] == ["/e", "delayline"]
    assert argv[argv.index("--delay-us") + 1] == "250" and "--exit-with-parent" in argv
    assert argv[argv.index("--a") + 1] == "A" and argv[argv.index("--stats-file") + 1] == "/tmp/s.json"
    assert float(argv[argv.index("--duration-s") + 1]) > 0  # bounded in time


def _line(sent=0, dropped=0, late=0, socket=0, tail=0, running=True):
    d = {"rx_frames": sent + dropped, "rx_bytes": 0, "sent_frames": sent, "sent_bytes": 0, "tail_drops": tail,
         "socket_drops": socket, "oversize_drops": 0, "tx_errors": 0, "dropped_frames": dropped,
         "late_over_1ms_frames": late, "max_queue_frames": 3, "late_us": None}
    return {"running": running, "stopped_by": None if running else "signal", "queue_limit_frames": 10,
            "a_to_b": d, "b_to_a": dict(d)}


def test_trial_deltas_subtract_counters_and_keep_the_state():
    d = trial_deltas({"wc": _line(sent=10)}, {"wc": _line(sent=25, dropped=2, socket=2), "ws": _line()})
    assert d["wc"]["a_to_b"]["sent_frames"] == 15 and d["wc"]["a_to_b"]["socket_drops"] == 2
    assert d["wc"]["running"] and d["ws"] is None  # not read before the trial


def test_delayline_limited_is_raised_on_drops_lateness_or_a_stopped_line():
    assert flag_delayline_limited({"wc": _line(sent=1000, late=5), "ws": _line()}) == []  # 0.5 % late: kept up
    dropped = flag_delayline_limited({"wc": _line(sent=1000, dropped=3, socket=3)})
    assert [f.code for f in dropped] == ["delayline-limited"] and "3 socket full" in dropped[0].message
    late = flag_delayline_limited({"ws": _line(sent=1000, late=50)})
    assert late and "50 of 1000 frames over 1 ms late" in late[0].message
    assert flag_delayline_limited({"wc": _line(sent=10, running=False)})
    assert "not read" in flag_delayline_limited({"wc": None})[0].message



def test_the_report_overview_names_the_emulated_wires_with_a_rate_or_a_list_of_rates():
    """A link-rate list (main's link_rate lists) crashed the overview once (join of a list)."""
    from fwlab.report.overview import _wires
    assert _wires({}) == ""
    assert _wires({"link_rate": "100mbit"}) == "; emulated wires: 100mbit each"
    both = _wires({"link_rate": ["100mbit", "none"], "link_delay": "250us"})
    assert both == "; emulated wires: 100mbit / unshaped (a bed each), 250us one-way delay (delay line) each"
