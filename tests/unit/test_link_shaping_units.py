"""Emulated links without root: rates parse as tc writes them, bad ones are one line, the shaper's
arguments count Ethernet overhead, its counters parse, a link-limited trial is flagged."""

from types import SimpleNamespace

import pytest

from fwlab.stats.quality import flag_link_limited
from fwlab.suites import parse_suite
from fwlab.errors import SuiteError
from fwlab.runners.iperf3 import build_client_args, data_tos
from fwlab.runners.ping import ping_args
from fwlab.runners import TrafficSpec
from fwlab.testbed.shaping import DATA_TOS, LinkShape, parse_qdisc_stats
from fwlab.linerate import LineRate


@pytest.mark.parametrize("text,bps", [("100mbit", 100_000_000), ("1gbit", 10**9), ("2.5gbit", 2_500_000_000),
                                      ("64000bit", 64_000), (" 10Mbit ", 10**7)])
def test_rates(text, bps):
    assert LineRate.parse(text) == bps


@pytest.mark.parametrize("text", ["100mbps", "fast", "", "1kbit", "1000gbit", "-5mbit"])
def test_bad_rates(text):
    with pytest.raises(ValueError):
        LineRate.parse(text)


def test_a_suite_link_rate_is_checked_and_kept_as_bits():
    s = parse_suite({"name": "t", "traffic": [{"kind": "udp"}], "link_rate": "100mbit"}, "test")
    assert s.own_link_rate == 100_000_000
    assert parse_suite({"name": "t", "traffic": [{"kind": "udp"}]}, "test").own_link_rate is None
    with pytest.raises(SuiteError) as ei:
        parse_suite({"name": "t", "traffic": [{"kind": "udp"}], "link_rate": "100 Mb/s"}, "test")
    assert "link_rate" in ei.value.one_line() and "100mbit" in ei.value.one_line()


def test_the_shaper_counts_frames_as_on_ethernet():
    root, queue = LinkShape(100_000_000).tc_commands("eth9")
    assert root[:6] == ["tc", "qdisc", "replace", "dev", "eth9", "root"]
    assert root[root.index("overhead") + 1] == "24" and "tbf" in root and "100000000bit" in root
    # the queue counts frames, as a NIC's ring counts descriptors (not bytes: 18x more 64 B frames)
    assert queue[-3:] == ["pfifo_head_drop", "limit", "256"] and queue[queue.index("parent") + 1] == "1:1"
    assert round(LinkShape(100_000_000).line_rate_pps(64)) == 148810  # 100BASE-TX, 64 B frames
    assert round(LinkShape(10**9).line_rate_pps(1518)) == 81274


def test_a_full_shaper_queue_drops_its_oldest_frame_not_the_senders():
    """A tail drop on the sender's own interface is refused to its socket, which Linux TCP takes for
    local congestion and aborts on within seconds; the wire's queue drops at its head instead."""
    shape = LinkShape(100_000_000)
    root, q = shape.tc_commands("eth9")
    assert root[root.index("handle") + 1] == "1:"
    assert q[q.index("parent") + 1] == "1:1" and "pfifo_head_drop" in q and q[q.index("limit") + 1] == "256"
    assert shape.to_dict()["queue"] == "pfifo_head_drop" and "bands" not in shape.to_dict()


def test_bulk_data_queues_apart_from_everything_else_on_a_banded_wire():
    """iperf3's control connection (unmarked) must not be head-dropped with 900 streams' data:
    unmarked frames go to the first htb class (the default), only DATA_TOS (IPv4 TOS, IPv6 traffic
    class) to the second; equal priority (served in turn, neither starves); each band keeps the
    head-drop queue; tbf sets the rate."""
    shape = LinkShape(100_000_000, bands=True)
    root, htb, *rest = shape.tc_commands("eth9")
    assert root == LinkShape(100_000_000).tc_commands("eth9")[0]  # the same wire
    assert rest == shape.queue_commands("eth9")[1:]
    assert htb[htb.index("parent") + 1] == "1:1" and htb[-3:] == ["htb", "default", "1"]
    # a handle of its own: replacing the single queue (10:) grafts it in one step, and back
    assert htb[htb.index("handle") + 1] == "20:"
    classes = [c for c in rest if c[1] == "class"]
    assert [(c[c.index("classid") + 1], c[c.index("prio") + 1]) for c in classes] == [("20:1", "0"), ("20:2", "0")]
    for c in classes:  # the classes never hold anything back: their rate is 10x the wire's
        assert c[c.index("rate") + 1] == c[c.index("ceil") + 1] == "1000000000bit"
    queues = [c for c in rest if c[1] == "qdisc"]
    assert [(q[q.index("parent") + 1], q[q.index("handle") + 1]) for q in queues] == [("20:1", "21:"), ("20:2", "22:")]
    for q in queues:
        assert q[-3:] == ["pfifo_head_drop", "limit", "256"]
    filters = [c for c in rest if c[1] == "filter"]
    assert {(c[c.index("protocol") + 1], c[c.index("match") + 1]) for c in filters} == {("ip", "ip"), ("ipv6", "ip6")}
    for c in filters:
        m = c.index("match")
        assert int(c[m + 3], 16) == DATA_TOS and c[m + 4] == "0xfc" and c[-1] == "20:2"
    assert DATA_TOS & 0x03 == 0  # the ECN bits stay the kernel's
    assert set(shape.to_dict()["bands"]) == {"1", "2"}
    single = LinkShape(100_000_000).queue_commands("eth9")
    assert len(single) == 1 and single[0][single[0].index("handle") + 1] == "10:"


def test_the_bed_switches_its_queues_only_when_asked_to_change():
    """The orchestrator asks before every trial; tc runs only when the trial's tool differs."""
    from fwlab.testbed.bed import Testbed
    from fwlab.testbed.topology import Topology

    calls = []
    bed = Testbed(Topology(run_id="abc123", mode="routed", link_rate_bps=100_000_000))
    bed._tc = lambda role, cmds: calls.extend((role, tuple(c)) for c in cmds)
    bed.set_link_bands(False)
    assert calls == [] and not bed.link_bands
    bed.set_link_bands(True)
    assert bed.link_bands and {r for r, _ in calls} == {"client", "server"}
    assert all(a[:2] in (("tc", "qdisc"), ("tc", "class"), ("tc", "filter")) for _, a in calls)
    assert not any("root" in a for _, a in calls)  # the tbf (rate, counters) stays
    n = len(calls)
    bed.set_link_bands(True)
    assert len(calls) == n
    bed.set_link_bands(False)
    assert [a[a.index("handle") + 1] for _, a in calls[n:]] == ["10:", "10:"] and not bed.link_bands
    unshaped = Testbed(Topology(run_id="abc124", mode="routed"))
    unshaped._tc = lambda role, cmds: calls.extend((role, tuple(c)) for c in cmds)
    unshaped.set_link_bands(True)
    assert not unshaped.link_bands and len(calls) == n + 2


def test_iperf3_marks_its_data_only_when_asked():
    spec = TrafficSpec("tcp", "iperf3", streams=113)
    a = build_client_args(spec, "198.19.1.1", None, tos=DATA_TOS)
    assert a[a.index("-S") + 1] == "0x04"
    assert "-S" not in build_client_args(spec, "198.19.1.1", None)


@pytest.mark.parametrize("rate,bands,direction,ipv,marked", [
    (10**8, True, "up", 4, True), (10**8, True, "up", 6, True), (10**8, True, "down", 6, True),
    (10**8, True, "bidir", 6, True),
    # the server's IPv4 data too: its server is IPv4-only (iperf3 -s -4), which marks it
    (10**8, True, "down", 4, True), (10**8, True, "bidir", 4, True),
    (10**8, False, "up", 4, False), (None, False, "up", 4, False)])
def test_data_is_marked_on_a_banded_wire_only(rate, bands, direction, ipv, marked):
    bed = SimpleNamespace(topo=SimpleNamespace(link_rate_bps=rate), link_bands=bands)
    spec = TrafficSpec("tcp", "iperf3", ip_version=ipv, options={"direction": direction})
    assert data_tos(bed) == (DATA_TOS if marked else None)
    assert ("-S" in build_client_args(spec, "198.19.1.1", None, tos=data_tos(bed))) == marked


def test_a_ping_beside_a_marked_stream_is_marked_alike():
    """Delay under load must still wait in the data's queue on a banded wire."""
    a = ping_args("198.19.1.1", 4, 5, 10.0, tos=DATA_TOS)
    assert a[a.index("-Q") + 1] == "0x04" and a[-1] == "198.19.1.1"
    assert "-Q" not in ping_args("198.19.1.1", 4, 5, 10.0)


def test_qdisc_counters_parse_the_root_of_shaper_and_queue():
    text = ("qdisc tbf 1: root refcnt 3 rate 100Mbit burst 3Kb lat 31.3ms \n"
            " Sent 2520000 bytes 30000 pkt (dropped 512, overlimits 8110 requeues 0) \n backlog 0b 0p requeues 0\n"
            "qdisc pfifo_head_drop 10: parent 1:1 limit 256p\n"
            " Sent 2520000 bytes 30000 pkt (dropped 9, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n")
    assert parse_qdisc_stats(text)["dropped"] == 512


def test_qdisc_counters_parse():
    text = ("qdisc tbf 8002: root refcnt 3 rate 100Mbit burst 3076b lat 30.8ms \n"
            " Sent 2520000 bytes 30000 pkt (dropped 512, overlimits 8110 requeues 0) \n backlog 0b 0p requeues 0\n")
    assert parse_qdisc_stats(text) == {"sent_bytes": 2520000, "sent_packets": 30000, "dropped": 512,
                                       "overlimits": 8110}
    assert parse_qdisc_stats("qdisc noqueue 0: root refcnt 2\n") is None


def test_link_limited_flag():
    rate = 100_000_000
    assert flag_link_limited({"client:c0": {"dropped": 0, "overlimits": 0}, "server:s0": None}, rate) == []
    (f,) = flag_link_limited({"client:c0": {"dropped": 3, "overlimits": 40}}, rate)
    assert f.code == "link-limited" and "100 Mbit/s" in f.message and "3 dropped" in f.message



def test_link_limited_only_when_the_wire_dropped_or_was_busy():
    """Overlimits alone on a wire far from full (a TCP flow's bursts) are no limit; the same
    overlimits on a wire carrying >= 90 % of its rate, or any drop, are."""
    rate, window_s = 1_000_000_000, 2.0
    def shaped(mbit, dropped=0):  # 1514 B frames carrying `mbit` Mbit/s of line time over the window
        pkts = int(mbit * 1e6 * window_s / ((1514 + 24) * 8))
        return {"c0": {"sent_bytes": pkts * 1514, "sent_packets": pkts, "overlimits": 500, "dropped": dropped}}
    assert flag_link_limited(shaped(200), rate, window_s=window_s) == []
    (f,) = flag_link_limited(shaped(950), rate, window_s=window_s)
    assert "95% busy" in f.message
    (f,) = flag_link_limited(shaped(200, dropped=7), rate, window_s=window_s)
    assert "7 dropped" in f.message and "20% busy" in f.message
    assert flag_link_limited({"c0": {"sent_bytes": 0, "sent_packets": 0, "overlimits": 0, "dropped": 0}},
                             rate, window_s=window_s) == []

def test_a_reference_capped_by_the_emulated_wire_is_named_in_the_headline_but_decides_no_verdict():
    from fwlab.published.compare import LIMIT_FLAGS
    from fwlab.report.overview import reference_limit

    assert "link-limited" not in LIMIT_FLAGS  # the seeds' own regime: verdicts stay decided
    assert reference_limit(["link-limited"]) == " [0-rule reference capped by the emulated wire (link-limited)]"
    assert reference_limit(["high-cv"]) == ""


def test_band_counters_parse_per_band():
    text = ("qdisc tbf 1: root refcnt 3 rate 100Mbit burst 3056b lat 31.3ms \n"
            " Sent 9000 bytes 30 pkt (dropped 7, overlimits 80 requeues 0) \n backlog 0b 0p requeues 0\n"
            "qdisc htb 20: parent 1:1 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000\n"
            " Sent 9000 bytes 30 pkt (dropped 7, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n"
            "qdisc pfifo_head_drop 21: parent 20:1 limit 256p\n"
            " Sent 900 bytes 12 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n"
            "qdisc pfifo_head_drop 22: parent 20:2 limit 256p\n"
            " Sent 8100 bytes 18 pkt (dropped 7, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n")
    assert parse_qdisc_stats(text) == {"sent_bytes": 9000, "sent_packets": 30, "dropped": 7, "overlimits": 80,
                                       "unmarked_sent_packets": 12, "unmarked_dropped": 0,
                                       "data_sent_packets": 18, "data_dropped": 7}
