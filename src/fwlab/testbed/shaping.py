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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwlab.validation import parse_rate_bps  # noqa: F401  (re-exported: the unit's one parser)

#: bytes of line time an Ethernet frame costs beyond what tc sees: FCS + preamble/SFD + IFG
ETHERNET_OVERHEAD_BYTES = 4 + 8 + 12
#: a full-size frame as tc sees it (1500 B of IP + 14 B Ethernet header)
FULL_FRAME_BYTES = 1514
#: the shaper's queue, in full-size frames (a NIC's transmit ring)
QUEUE_FRAMES = 256


@dataclass(frozen=True)
class LinkShape:
    """One emulated line rate, applied to the egress of a data interface."""

    rate_bps: int  #: line rate [bit/s], Ethernet L1 (every frame + 24 bytes)

    def tc_commands(self, dev: str) -> list[list[str]]:
        """The tc commands that shape ``dev``'s egress: tbf at the root (its own byte limit only
        sizes the default queue), then its queue replaced by QUEUE_FRAMES frames dropping at the head."""
        burst = self.burst_bytes
        limit = QUEUE_FRAMES * (FULL_FRAME_BYTES + ETHERNET_OVERHEAD_BYTES)
        return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:",
                 "stab", "overhead", str(ETHERNET_OVERHEAD_BYTES), "linklayer", "ethernet",
                 "tbf", "rate", f"{self.rate_bps}bit", "burst", str(burst), "limit", str(limit)],
                # head drop: a full queue loses its oldest frame, never refuses the sender's
                ["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:",
                 "pfifo_head_drop", "limit", str(QUEUE_FRAMES)]]

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
                "queue_frames": QUEUE_FRAMES, "qdisc": "tbf + pfifo_head_drop", "queue": "pfifo_head_drop",
                "where": "client and server egress"}


_STATS = re.compile(r"Sent (?P<bytes>\d+) bytes (?P<pkts>\d+) pkt \(dropped (?P<dropped>\d+), "
                    r"overlimits (?P<overlimits>\d+)")


def parse_qdisc_stats(text: str) -> dict[str, int] | None:
    """`tc -s qdisc show dev X` -> sent bytes/packets, dropped, overlimits of its root qdisc."""
    m = _STATS.search(text)
    if not m:
        return None
    return {"sent_bytes": int(m["bytes"]), "sent_packets": int(m["pkts"]),
            "dropped": int(m["dropped"]), "overlimits": int(m["overlimits"])}
