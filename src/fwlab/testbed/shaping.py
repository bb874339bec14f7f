"""Emulated links: the wires of the test bed limited to a line rate, as the seeds' 100 Mbit/s and
1 Gbit/s Ethernet links were (issue: compare like with like, where the wire capped the 0-rule
figure).

Owns: the shaper put on the client's and the server's data interface (egress), i.e. on the two
wires *outside* the DUT, so the shaping's CPU cost never lands on the DUT; how it counts a frame;
reading its counters back for the record. Never touches the DUT's own interfaces or anything on a
remote host.

How a frame is counted: as on Ethernet. A veth frame's length (what tc sees) is the L2 frame
without FCS; the size table adds 24 bytes per frame (FCS 4 + preamble and start delimiter 8 +
inter-frame gap 12), so a 64-byte frame costs 84 bytes of line time, and 100 Mbit/s carries at
most 148,810 such frames per second, as a 100BASE-TX wire does.

The shaper is tbf (a burst of two full-size frames, so the rate holds within one frame time)
over a queue of 256 frames of any size (a NIC's transmit ring counts descriptors, not bytes; 31 ms
of full-size frames at 100 Mbit/s, 1.7 ms of 64-byte ones). A queue counted in bytes held 4,687
small frames, which let a 0.5 s RFC 2544 trial at 161 % of a 10 Mbit/s wire's line rate end
without loss (the queue drained after the trial). The queue drops at its head when full
(pfifo_head_drop). Head, not tail: the shaper sits on the sender's own interface, and a tail drop
there is refused to the sending socket (NET_XMIT_DROP), which Linux TCP takes for *local*
congestion: the socket probes every 0.5 s and aborts the connection with ETIMEDOUT after
tcp_retries2 (15) refusals, about 8 s (measured: seed 004's 500-stream load through a 100 Mbit/s
wire died 9.0-9.2 s in, its streams in the 'persist' timer with probe counts climbing to 15). A
wire's or a switch's drop is a loss the sender learns of from missing acknowledgements; the head
drop gives that: the new frame is accepted (NET_XMIT_CN, which TCP and UDP count as sent) and the
oldest queued one is lost. A one-way delay (netem) is not offered: this lab's kernel has no
sch_netem (docs say how to check).

The tools' control connections get a queue of their own (``bands``). iperf3 carries its test's
set-up and its results over a TCP control connection on the same wire as its data. With 900
streams through a 100 Mbit/s wire that connection's few segments were head-dropped with the data
until its retransmission back-off (cwnd 1, back-off 5, RTO 6.7 s) outlasted the runner's time-out,
and the trial was recorded failed ("1 of 8 iperf3 clients hung") for a reason of the lab's, not
the firewall's. A lab keeps its control channel off the measured path. So for a trial of a tool
that marks its data (``Runner.marks_bulk_data``: iperf3) the queue has two bands: the runner marks
iperf3's data streams ``DATA_TOS`` (``-S``: data sockets only; a ping beside a stream is marked
alike, so it still measures the data's queue) and they queue in the second band; everything
unmarked -- control connections, the bed's own frames, the engine's -- in the first. The bands
are served in turn (round robin, two full-size frames a turn: no band can starve the other), each
its own QUEUE_FRAMES-frame head-drop queue, and tbf above both sets the rate, so the wire's rate,
overhead and drop behaviour stay as they were. This kernel has no prio or drr qdisc: the bands
are two htb classes of equal priority whose own rate, 10x the wire's, never holds anything back.
htb may cost the sender per frame (iperf3's 64 B UDP sender between two namespaces at 1 Gbit/s
here: medians ~370k frames/s with the single queue, ~290k with the bands, 4 alternations; the
engine's 110 B frames through a routed bed: 262k against 233k in one round, 267k against 272k in
the next), so every other trial keeps the single queue: the orchestrator switches the queue before
each trial (the tbf, its rate and counters stay) and a trial's ``extra.link_shapers`` has the band
counts when its queue had bands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwlab.linerate import LineRate

#: bytes of line time an Ethernet frame costs beyond what tc sees: FCS + preamble/SFD + IFG
ETHERNET_OVERHEAD_BYTES = 4 + 8 + 12
#: a full-size frame as tc sees it (1500 B of IP + 14 B Ethernet header)
FULL_FRAME_BYTES = 1514
#: the shaper's queue, in full-size frames (a NIC's transmit ring), per band
QUEUE_FRAMES = 256
#: IP TOS / IPv6 traffic class the runners put on bulk data through a shaped wire: DSCP 1,
#: "lower effort" (RFC 8622), so the second band of the shaper's queue; 0x04 with ECN bits clear
DATA_TOS = 0x04
#: the shaper's bands (``LinkShape.bands``): 1 = everything unmarked (control connections
#: included), 2 = DATA_TOS
BANDS = 2


@dataclass(frozen=True)
class LinkShape:
    """One emulated line rate, applied to the egress of a data interface."""

    rate_bps: LineRate  #: line rate [bit/s], Ethernet L1 (every frame + 24 bytes)
    #: two bands: DATA_TOS-marked bulk data apart from everything else (see the module docstring)
    bands: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.rate_bps, LineRate):  # a number given: typed here
            object.__setattr__(self, "rate_bps", LineRate(self.rate_bps))

    def tc_commands(self, dev: str) -> list[list[str]]:
        """The tc commands that shape ``dev``'s egress: tbf at the root (its own byte limit only
        sizes the default queue), then its queue (:meth:`queue_commands`)."""
        burst = self.burst_bytes
        limit = QUEUE_FRAMES * (FULL_FRAME_BYTES + ETHERNET_OVERHEAD_BYTES)
        root = ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:",
                "stab", "overhead", str(ETHERNET_OVERHEAD_BYTES), "linklayer", "ethernet",
                "tbf", "rate", f"{self.rate_bps}bit", "burst", str(burst), "limit", str(limit)]
        return [root, *self.queue_commands(dev)]

    def queue_commands(self, dev: str) -> list[list[str]]:
        """The tc commands that put the tbf's queue in place (the tbf, its rate and counters stay):
        QUEUE_FRAMES frames dropping at the head (handle 10:) -- or, with ``bands``, an htb (20:)
        whose classes 20:1 (unmarked, the default) and 20:2 (DATA_TOS: IPv4 TOS, IPv6 traffic
        class), served in turn, each hold such a queue (21:, 22:). A new handle grafts the new queue
        in one step, so either replaces the other (``Testbed.set_link_bands``)."""
        # head drop: a full queue loses its oldest frame, never refuses the sender's
        if not self.bands:
            return [["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:",
                     "pfifo_head_drop", "limit", str(QUEUE_FRAMES)]]
        cmds = [["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "20:", "htb", "default", "1"]]
        # the classes' own rate never binds (tbf above sets it); their bucket holds 64 frames
        free = f"{10 * self.rate_bps}bit"
        bucket = str(64 * (FULL_FRAME_BYTES + ETHERNET_OVERHEAD_BYTES))
        for band in range(1, BANDS + 1):
            cmds.append(["tc", "class", "replace", "dev", dev, "parent", "20:", "classid", f"20:{band}", "htb",
                         "rate", free, "ceil", free, "burst", bucket, "cburst", bucket,
                         "prio", "0", "quantum", str(2 * FULL_FRAME_BYTES)])
            cmds.append(["tc", "qdisc", "replace", "dev", dev, "parent", f"20:{band}", "handle", f"{20 + band}:",
                         "pfifo_head_drop", "limit", str(QUEUE_FRAMES)])
        tos = f"0x{DATA_TOS:02x}"
        cmds += [["tc", "filter", "replace", "dev", dev, "parent", "20:", "protocol", proto, "prio", str(pref),
                  "u32", "match", field, "tos" if field == "ip" else "priority", tos, "0xfc", "flowid", "20:2"]
                 for pref, proto, field in ((1, "ip", "ip"), (2, "ipv6", "ip6"))]
        return cmds

    @property
    def burst_bytes(self) -> int:
        """The token bucket's depth: two full-size frames of line time, let out at once when the
        wire has been idle (36 frames of 64 B)."""
        return 2 * (FULL_FRAME_BYTES + ETHERNET_OVERHEAD_BYTES)

    def line_rate_pps(self, frame_bytes: int) -> float:
        """Frames per second of ``frame_bytes`` (an Ethernet frame incl. FCS) the wire carries."""
        return self.rate_bps / ((frame_bytes + 8 + 12) * 8)

    def to_dict(self) -> dict:
        return {"rate_bps": self.rate_bps, "overhead_bytes": ETHERNET_OVERHEAD_BYTES,
                "queue_frames": QUEUE_FRAMES, "queue": "pfifo_head_drop", "where": "client and server egress",
                **({"qdisc": "tbf + htb(2 bands) + pfifo_head_drop",
                    "bands": {"1": "unmarked (tools' control connections, everything else)",
                              "2": f"bulk data marked TOS 0x{DATA_TOS:02x} (iperf3 -S, ping -Q beside it)"},
                    "band_service": "round robin, 2 full-size frames a turn"}
                   if self.bands else {"qdisc": "tbf + pfifo_head_drop"})}


_STATS = re.compile(r"Sent (?P<bytes>\d+) bytes (?P<pkts>\d+) pkt \(dropped (?P<dropped>\d+), "
                    r"overlimits (?P<overlimits>\d+)")


#: the band queues' names in the record, by their handles as tc prints them (band 1: 21:, band 2: 22:)
BAND_NAMES = {"21": "unmarked", "22": "data"}

_QDISC = re.compile(r"^qdisc \S+ (?P<handle>[0-9a-f]+): ", re.M)


def parse_qdisc_stats(text: str) -> dict[str, int] | None:
    """`tc -s qdisc show dev X` -> sent bytes/packets, dropped, overlimits of its root qdisc, and
    per band queue (when the shaper has them) ``unmarked_*`` / ``data_*`` sent packets and drops:
    whether the control connections' band lost anything."""
    m = _STATS.search(text)
    if not m:
        return None
    out = {"sent_bytes": int(m["bytes"]), "sent_packets": int(m["pkts"]),
           "dropped": int(m["dropped"]), "overlimits": int(m["overlimits"])}
    heads = list(_QDISC.finditer(text))
    for k, h in enumerate(heads):
        name = BAND_NAMES.get(h["handle"])
        body = text[h.end():heads[k + 1].start() if k + 1 < len(heads) else len(text)]
        b = _STATS.search(body)
        if name and b:
            out[f"{name}_sent_packets"] = int(b["pkts"])
            out[f"{name}_dropped"] = int(b["dropped"])
    return out
