"""iperf3's JSON (``-J``) read into fwlab's figures: one client process's document into a
:class:`Measurement` (metrics, per-direction and per-stream figures, 1 s series, the socket
buffers the kernel gave), several client processes of one trial added into one, a run that
overran its length re-rated over its real span, and the ping probe's samples beside it.

Owns: pure reading of iperf3's output. Never runs iperf3 (runners.iperf3 does).
"""

from __future__ import annotations

import json

from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement

#: a run whose clients took longer than FACTOR x its length + SLACK overran it (stalled streams):
#: its throughput is taken over the whole run, not iperf3's nominal length
OVERRUN_FACTOR, OVERRUN_SLACK_S = 1.2, 2.0

#: metrics added over client processes
_SUMMED = ("throughput_bps", "throughput_up_bps", "throughput_down_bps", "offered_bps", "bytes",
           "bytes_up", "bytes_down", "retransmits", "tx_packets", "rx_packets", "cpu_sender_pct",
           "cpu_receiver_pct")


def _load(text: str) -> dict:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunnerError(f"iperf3 printed no JSON ({exc.msg})", fix="check that iperf3 >= 3.7 is installed") from exc
    if doc.get("error"):
        raise RunnerError(f"iperf3 failed: {doc['error']}", fix="check the test bed and the firewall's permit rule")
    return doc


def _direction_of(doc: dict) -> str:
    ts = (doc.get("start") or {}).get("test_start") or {}
    if ts.get("bidir"):
        return "bidir"
    if ts.get("reverse"):
        return "down"
    # iperf3 3.12 does not write "bidir" into test_start: the reverse sums tell
    if "sum_sent_bidir_reverse" in (doc.get("end") or {}) or "sum_bidir_reverse" in (doc.get("end") or {}):
        return "bidir"
    return "up"


def stream_rates(doc: dict, traffic: str) -> dict[str, list[float]]:
    """Per-stream received rate [bit/s] by direction ("up": client to server, "down")."""
    out: dict[str, list[float]] = {"up": [], "down": []}
    reverse = _direction_of(doc) == "down"
    for s in (doc.get("end") or {}).get("streams") or []:
        if traffic == "udp":
            u = s.get("udp") or {}
            sent_by_client = bool(u.get("sender")) if "sender" in u else not reverse
            pk = int(u.get("packets") or 0)
            lost = int(u.get("lost_packets") or 0)
            bps = float(u.get("bits_per_second") or 0) * ((pk - lost) / pk if pk else 0)
        else:
            snd = s.get("sender") or {}
            rcv = s.get("receiver") or {}
            sent_by_client = bool(snd.get("sender")) if "sender" in snd else not reverse
            bps = float(rcv.get("bits_per_second") or 0)
        out["up" if sent_by_client else "down"].append(bps)
    return out


def _udp_sum(s: dict) -> dict:
    seconds = float(s.get("seconds") or 0) or None
    packets = int(s.get("packets") or 0)
    lost = int(s.get("lost_packets") or 0)
    received = max(0, packets - lost)
    return {"bps": float(s.get("bits_per_second") or 0) * (received / packets if packets else 0),
            "offered_bps": float(s.get("bits_per_second") or 0), "tx": packets, "rx": received,
            "seconds": seconds, "jitter_ms": s.get("jitter_ms"), "bytes": int(s.get("bytes") or 0)}


def parse_json(text: str, traffic: str) -> Measurement:
    """Parse one iperf3 client JSON document (``-J``) into a Measurement.

    TCP: throughput from ``end.sum_received`` (and ``sum_received_bidir_reverse`` for the other
    direction of --bidir); retransmits from the ``sum_sent`` entries. UDP: ``end.sum`` (and
    ``sum_bidir_reverse``) carry the receiver's packet and loss counts (iperf3 fetches them).
    ``throughput_bps`` is the sum of both directions; ``throughput_up_bps`` (client to server)
    and ``throughput_down_bps`` are each direction's. ``rx_pps`` for TCP is left None here; the
    runner fills it from interface counters. ``extra["per_stream_bps"]`` holds each stream's
    received rate by direction.
    """
    doc = _load(text)
    traffic = "tcp" if traffic == "parallel" else traffic
    end = doc.get("end") or {}
    direction = _direction_of(doc)
    cpu = end.get("cpu_utilization_percent") or {}
    metrics: dict = {
        "cpu_sender_pct": cpu.get("host_total"),
        "cpu_receiver_pct": cpu.get("remote_total"),
        "direction": direction,
    }
    if end.get("sender_tcp_congestion"):
        # the sender's TCP congestion control (the namespace's default unless option congestion)
        metrics["tcp_congestion"] = end["sender_tcp_congestion"]
    main = "down" if direction == "down" else "up"
    if traffic == "udp":
        per = {main: _udp_sum(end.get("sum") or {})}
        if direction == "bidir":
            per["down"] = _udp_sum(end.get("sum_bidir_reverse") or {})
        tx = sum(p["tx"] for p in per.values())
        rx = sum(p["rx"] for p in per.values())
        seconds = max((p["seconds"] or 0) for p in per.values()) or None
        jit = [(p["jitter_ms"], p["rx"]) for p in per.values() if p["jitter_ms"] is not None]
        metrics.update({
            "throughput_bps": sum(p["bps"] for p in per.values()),
            "offered_bps": sum(p["offered_bps"] for p in per.values()),
            "tx_packets": tx, "rx_packets": rx,
            "tx_pps": tx / seconds if seconds else None,
            "rx_pps": rx / seconds if seconds else None,
            "loss_ratio": (tx - rx) / tx if tx else None,
            "jitter_ms": (sum(j * n for j, n in jit) / sum(n for _, n in jit)) if jit and sum(n for _, n in jit)
                         else (jit[0][0] if jit else None),
            "duration_s": seconds,
        })
        for d, p in per.items():
            metrics[f"throughput_{d}_bps"] = p["bps"]
            metrics[f"jitter_{d}_ms"] = p["jitter_ms"]
            metrics[f"loss_{d}_ratio"] = (p["tx"] - p["rx"]) / p["tx"] if p["tx"] else None
    else:
        pairs = {main: (end.get("sum_sent") or {}, end.get("sum_received") or {})}
        if direction == "bidir":
            pairs["down"] = (end.get("sum_sent_bidir_reverse") or {}, end.get("sum_received_bidir_reverse") or {})
        retr = [s.get("retransmits") for s, _ in pairs.values() if s.get("retransmits") is not None]
        metrics.update({
            "throughput_bps": sum(float(r.get("bits_per_second") or 0) for _, r in pairs.values()),
            "bytes": sum(int(r.get("bytes") or 0) for _, r in pairs.values()),
            "retransmits": sum(retr) if retr else None,
            "rx_pps": None,
            "loss_ratio": None,
            "duration_s": max(float(r.get("seconds") or 0) for _, r in pairs.values()) or None,
        })
        for d, (_, r) in pairs.items():
            metrics[f"throughput_{d}_bps"] = float(r.get("bits_per_second") or 0)
            metrics[f"bytes_{d}"] = int(r.get("bytes") or 0)
    series = []
    for iv in doc.get("intervals") or []:
        s = iv.get("sum") or {}
        bps = float(s.get("bits_per_second") or 0)
        sample = {"t_s": round(float(s.get("end", 0)), 3), "throughput_bps": bps, f"throughput_{main}_bps": bps}
        if traffic == "udp" and s.get("packets") is not None:
            sample["tx_pps"] = float(s["packets"]) / float(s.get("seconds") or 1)
        if s.get("retransmits") is not None:
            sample["retransmits"] = s["retransmits"]
        rev = iv.get("sum_bidir_reverse")
        if rev:
            rbps = float(rev.get("bits_per_second") or 0)
            sample["throughput_down_bps"] = rbps
            sample["throughput_bps"] = bps + rbps
            if rev.get("retransmits") is not None:
                sample["retransmits"] = (sample.get("retransmits") or 0) + rev["retransmits"]
        series.append(sample)
    return Measurement(metrics=metrics, series=series, raw={"iperf3_client_json": doc},
                       extra={"per_stream_bps": stream_rates(doc, traffic), "socket_buffers": _buffers(doc)})


def _buffers(doc: dict) -> dict:
    """The client's socket buffers as iperf3 reports them: the size asked for with -w (0: the
    system's default) and what the kernel gave (Linux doubles the value asked for)."""
    st = doc.get("start") or {}
    return {"requested_bytes": st.get("sock_bufsize"), "sndbuf_actual_bytes": st.get("sndbuf_actual"),
            "rcvbuf_actual_bytes": st.get("rcvbuf_actual")}


def account_overrun(m: Measurement, traffic: str, direction: str, duration_s: float, completion_s: float) -> None:
    """A TCP run whose clients took longer than ``OVERRUN_FACTOR`` x its length + slack overran
    it: iperf3 divides by its nominal test length, but stalled streams went on delivering after
    it, so over the run's real span the path carried less (seen: 900 streams "at 160 Mbit/s"
    through a 100 Mbit/s wire, in a run that took 11 s for 5). Its throughput becomes every byte
    over the whole run (``throughput_nominal_bps`` keeps iperf3's) and the trial is flagged."""
    if traffic != "tcp" or completion_s <= OVERRUN_FACTOR * duration_s + OVERRUN_SLACK_S or not m.metrics.get("bytes"):
        return
    m.metrics["throughput_nominal_bps"] = m.metrics.get("throughput_bps")
    m.metrics["throughput_bps"] = 8.0 * m.metrics["bytes"] / completion_s
    if direction in ("up", "down"):
        m.metrics[f"throughput_{direction}_bps"] = m.metrics["throughput_bps"]
    m.flags.append({"code": "overran", "severity": "warning",
                    "message": f"the clients ran {completion_s:.1f} s for a nominal {duration_s:g} s: "
                               f"throughput is every byte over the whole run"})


def combine(parts: list[Measurement]) -> Measurement:
    """Several client processes of one trial, run at once, as one Measurement: rates, bytes,
    packets and CPU added; series added interval by interval; per-stream rates concatenated."""
    if len(parts) == 1:
        return parts[0]
    m0 = parts[0].metrics
    metrics: dict = {"direction": m0.get("direction")}
    if m0.get("tcp_congestion"):
        metrics["tcp_congestion"] = m0["tcp_congestion"]
    for k in _SUMMED:
        vals = [p.metrics.get(k) for p in parts if p.metrics.get(k) is not None]
        if vals:
            metrics[k] = sum(vals)
    durs = [p.metrics.get("duration_s") for p in parts if p.metrics.get("duration_s")]
    metrics["duration_s"] = max(durs) if durs else None
    dur = metrics["duration_s"]
    # The aggregate rate is what all processes moved over the time the trial took, not the sum
    # of each process's own rate: a process that stalled and ended late has a short-looking
    # rate of its own, and adding rates over unequal spans overstated the aggregate (seen: 160
    # Mbit/s "through" a 100 Mbit/s wire with 900 streams in 8 processes).
    for rate, nbytes in (("throughput_bps", "bytes"), ("throughput_up_bps", "bytes_up"),
                         ("throughput_down_bps", "bytes_down")):
        if dur and metrics.get(nbytes) and rate in metrics:
            metrics[rate] = 8.0 * metrics[nbytes] / dur
    metrics["rx_pps"] = None
    metrics["loss_ratio"] = None
    if "tx_packets" in metrics:  # UDP
        tx, rx = metrics["tx_packets"], metrics.get("rx_packets", 0)
        metrics["tx_pps"] = tx / dur if dur else None
        metrics["rx_pps"] = rx / dur if dur else None
        metrics["loss_ratio"] = (tx - rx) / tx if tx else None
        jit = [(p.metrics["jitter_ms"], p.metrics.get("rx_packets") or 0) for p in parts
               if p.metrics.get("jitter_ms") is not None]
        w = sum(n for _, n in jit)
        metrics["jitter_ms"] = sum(j * n for j, n in jit) / w if w else None
    n = max(len(p.series) for p in parts)
    series = []
    for i in range(n):
        rows = [p.series[i] for p in parts if i < len(p.series)]
        sample: dict = {"t_s": max(r["t_s"] for r in rows)}
        for k in {k for r in rows for k in r if k != "t_s"}:
            sample[k] = sum(r.get(k) or 0 for r in rows)
        sample["processes"] = len(rows)
        series.append(sample)
    per: dict[str, list[float]] = {"up": [], "down": []}
    for p in parts:
        for d, xs in (p.extra.get("per_stream_bps") or {}).items():
            per.setdefault(d, []).extend(xs)
    return Measurement(metrics=metrics, series=series,
                       raw={"iperf3_client_json": [p.raw.get("iperf3_client_json") for p in parts]},
                       extra={"per_stream_bps": per})


def add_rtt_probe(m: Measurement, samples, argv: list[str]) -> None:
    """Delay under load: the ping probe's raw samples beside the stream (``fwlab.stats.derive``
    makes them ``rtt_*`` metrics and the per-second median RTT in the series)."""
    if samples is None or not samples.samples:
        m.flags.append({"code": "rtt-probe-missing", "severity": "warning",
                        "message": "the ping probe beside the stream got no reply: no delay under load"})
        m.raw["ping_argv"] = argv
        return
    # raw samples only: fwlab.stats.derive adds the rtt_* figures and the series' rtt_p50_ms
    m.extra.setdefault("rtt_samples", {})["rtt"] = samples.raw()
    m.raw["ping_argv"] = argv
