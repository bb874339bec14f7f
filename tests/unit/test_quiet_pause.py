"""The pause between trials ended by a measured idle bed (fwlab.testbed.quiet)."""

from fwlab.testbed.quiet import QUIET_MAX_PACKETS, QUIET_WINDOW_S, moved_packets, until_quiet


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def _reader(clock, rates_pps):
    """Counters of one interface growing at rates_pps[k] during the k-th read's window."""
    state = {"n": 0, "k": 0, "t": clock()}

    def read():
        rate = rates_pps[min(state["k"], len(rates_pps) - 1)]
        state["n"] += int(rate * (clock() - state["t"]))
        state["t"] = clock()
        state["k"] += 1
        clock.t += 0.005  # a read takes 5 ms
        return {"server:eth0": {"rx_packets": state["n"], "tx_packets": 0}}
    return read


def test_moved_packets_is_the_busiest_interface_either_way():
    a = {"c:x": {"rx_packets": 10, "tx_packets": 10}, "s:y": {"rx_packets": 0, "tx_packets": 0}}
    b = {"c:x": {"rx_packets": 11, "tx_packets": 17}, "s:y": {"rx_packets": 3, "tx_packets": 0}, "new:z": {}}
    assert moved_packets(a, b) == 7
    assert moved_packets(a, a) == 0


def test_an_idle_bed_ends_the_pause_after_one_window():
    clock = Clock()
    ref = {"server:eth0": {"rx_packets": 0, "tx_packets": 0}}
    lb, p = until_quiet(_reader(clock, [0]), ref, clock(), deadline=clock() + 0.2, clock=clock, sleep=clock.sleep)
    assert p.quiet and p.reads == 1 and abs(p.pause_s - QUIET_WINDOW_S) < 1e-9
    assert p.packets_in_pause == 0 and lb["server:eth0"]["rx_packets"] == 0


def test_traffic_still_draining_extends_the_pause_until_a_window_is_idle():
    clock = Clock()
    ref = {"server:eth0": {"rx_packets": 0, "tx_packets": 0}}
    # 1000 pps in the first two windows (50 packets each: not idle), then nothing
    lb, p = until_quiet(_reader(clock, [1000, 1000, 0]), ref, clock(), deadline=clock() + 0.2,
                        clock=clock, sleep=clock.sleep)
    assert p.quiet and p.reads == 3 and p.pause_s > 2 * QUIET_WINDOW_S
    assert p.packets_in_pause > QUIET_MAX_PACKETS  # the whole pause saw the draining packets


def test_a_bed_that_never_gets_idle_pauses_the_full_settle_time():
    clock = Clock()
    start = clock()
    ref = {"server:eth0": {"rx_packets": 0, "tx_packets": 0}}
    _, p = until_quiet(_reader(clock, [500]), ref, start, deadline=start + 0.2, clock=clock, sleep=clock.sleep)
    assert not p.quiet and p.pause_s >= 0.2 - 1e-9  # as long as the fixed pause, and says so
    assert p.to_dict()["until_quiet"] is True and p.to_dict()["window_s"] == QUIET_WINDOW_S


def test_a_pause_ending_early_says_what_it_saved():
    clock = Clock()
    ref = {"server:eth0": {"rx_packets": 0, "tx_packets": 0}}
    _, p = until_quiet(_reader(clock, [0]), ref, clock(), deadline=clock() + 0.2, clock=clock, sleep=clock.sleep)
    assert p.early and abs(p.saved_s - (0.2 - QUIET_WINDOW_S)) < 1e-9
    assert p.to_dict()["early"] is True and p.to_dict()["saved_s"] == round(p.saved_s, 4)


def test_an_idle_read_after_the_full_pause_was_used_up_saved_nothing():
    clock = Clock()
    ref = {"server:eth0": {"rx_packets": 0, "tx_packets": 0}}
    start = clock()
    clock.t += 0.3  # the bookkeeping used the whole 0.2 s pause up
    _, p = until_quiet(_reader(clock, [0]), ref, start, deadline=start + 0.2, clock=clock, sleep=clock.sleep)
    assert p.quiet and p.reads == 1  # idle, but nothing cut short
    assert p.saved_s == 0 and not p.early


def test_a_never_idle_pause_is_not_early():
    clock = Clock()
    start = clock()
    ref = {"server:eth0": {"rx_packets": 0, "tx_packets": 0}}
    _, p = until_quiet(_reader(clock, [500]), ref, start, deadline=start + 0.2, clock=clock, sleep=clock.sleep)
    assert not p.early and p.saved_s == 0


def test_the_full_length_read_saved_nothing_even_a_hair_before_the_deadline():
    class Early(Clock):  # a sleep that wakes a hair short (a coarse clock's rounding)
        def sleep(self, s):
            self.t += max(0.0, s - 1e-7)
    clock = Early()
    ref = {"server:eth0": {"rx_packets": 0, "tx_packets": 0}}
    start = clock()
    # busy for the first windows, idle in the last (full-length) one
    _, p = until_quiet(_reader(clock, [500, 500, 500, 0]), ref, start, deadline=start + 0.2,
                       clock=clock, sleep=clock.sleep)
    assert p.quiet and p.reads == 4 and p.pause_s < 0.2  # idle at the last read, taken just short of the deadline
    assert p.saved_s == 0 and not p.early and p.to_dict()["early"] is False
