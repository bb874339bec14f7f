"""The engine's JSON results read into fwlab's figures: one send and one recv document into a
:class:`Measurement`, several generators' send documents into one, two directions into one
bidirectional trial.

Counting (engine/README.md): ``offered_count`` is what the kernel accepted from the sender;
``forwarded_count`` is the receiver's count of distinct test packets (duplicates excluded);
loss = offered - forwarded, so tail loss is counted too. Rates and ``throughput_bps`` are
Ethernet frame rates: ``throughput_bps`` = received frames x frame size (including the 4-byte
FCS) x 8 / the sender's elapsed time [bit/s] — RFC 2544 frame bits, without preamble and gap.

Owns: pure reading of the documents. Never runs a process or reads a test bed.
"""

from __future__ import annotations

import json
from typing import Any

from fwlab.errors import RunnerError
from fwlab.runners.base import Measurement, skew_flag, span_overlap

LATENCY_KEYS = ("min", "mean", "p50", "p90", "p99", "p999", "max")
#: the receiver's per-packet counts (``metrics_from``): a bidirectional trial sums its two directions'
RECEIVER_COUNTS = ("reordered", "duplicated", "late", "receiver_lost", "foreign")


def parse_result(text: str, kind: str) -> dict:
    """One engine JSON document of ``kind`` ("send" or "recv")."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunnerError(f"fwlab-engine {kind} printed no JSON ({exc.msg})",
                          fix="run 'make engine' to rebuild it; see its stderr") from exc
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise RunnerError(f"fwlab-engine {kind} printed a '{doc.get('kind') if isinstance(doc, dict) else '?'}' "
                          f"document", fix="check the engine version (schema_version 1)")
    if doc.get("schema_version") != 1:
        raise RunnerError(f"fwlab-engine {kind} JSON has schema_version {doc.get('schema_version')}, "
                          f"fwlab reads 1", fix="use the engine built from this checkout ('make engine')")
    return doc


def metrics_from(send: dict, recv: dict, frame_size: int, intended_count: int | None = None,
                 rx_pps: float | None = None) -> Measurement:
    """Measurement from the engine's send and recv documents.

    ``intended_count``: what the caller asked for (rate x duration); the engine's own value is
    used when given, and None for ``max``. ``rx_pps``: the received rate when it is not the
    forwarded count over the sender's time (several generators: see :func:`aggregate`).
    """
    total = recv.get("total") or {}
    offered = int(send.get("offered_count") or 0)
    forwarded = int(total.get("unique") or 0)
    intended = send.get("intended_count")
    if intended is None:
        intended = intended_count
    elapsed = float(send.get("elapsed_s") or 0) or None
    lat = total.get("latency_ns") or {}
    latency = {k: lat.get(k) for k in LATENCY_KEYS} if lat.get("samples") else None
    if rx_pps is None:
        rx_pps = forwarded / elapsed if elapsed else None
    metrics: dict[str, Any] = {
        "intended_count": intended,
        "intended_pps": send.get("intended_pps"),
        "offered_count": offered,
        "forwarded_count": forwarded,
        "tx_packets": offered,
        "rx_packets": forwarded,
        "lost": offered - forwarded,
        "loss_ratio": (offered - forwarded) / offered if offered else None,
        "tx_pps": send.get("achieved_pps"),
        "rx_pps": rx_pps,
        "throughput_bps": rx_pps * frame_size * 8 if rx_pps is not None else None,
        "throughput_basis": "Ethernet frame bits incl. 4-byte FCS (no preamble/gap)",
        "frame_size": frame_size,
        "latency_ns": latency,
        "latency_samples": lat.get("samples"),
        # every packet's latency: HdrHistogram V2 compressed, base64 (fwlab.stats.latency reads it)
        "latency_hdr_b64": total.get("latency_hdr_b64") if latency else None,
        "latency_hdr_unit": total.get("latency_hdr_unit") if latency and total.get("latency_hdr_b64") else None,
        "jitter_ns": total.get("jitter_ns"),
        "reordered": total.get("reordered"),
        "duplicated": total.get("duplicated"),
        "late": total.get("late"),
        "receiver_lost": total.get("lost"),
        "foreign": recv.get("foreign"),
        "socket_drops": recv.get("socket_drops"),
        "generator_short": bool(send.get("generator_short")),
        "send_errors": send.get("errors"),
        "lag_skipped_count": send.get("lag_skipped_count"),
        "duration_s": elapsed,
        "pinning": {"send": send.get("cpu_pinning"), "recv": recv.get("cpu_pinning"),
                    "send_observed": [t.get("cpu_observed") for t in send.get("threads") or []]},
        "backend": send.get("backend"),
        "threads": len(send.get("threads") or []) or None,
    }
    flags = []
    if send.get("generator_short"):
        flags.append({"code": "generator-short", "severity": "warning",
                      "message": f"fwlab-engine sent {offered} of {intended} intended packets "
                                 f"({send.get('achieved_pps') or 0:.0f} pps achieved): this trial says "
                                 f"nothing about the DUT at the intended rate"})
    if recv.get("socket_drops"):
        flags.append({"code": "receiver-bound", "severity": "warning",
                      "message": f"the engine's receiver socket dropped {recv['socket_drops']} packets: "
                                 f"receiver loss, not DUT loss"})
    if send.get("errors"):
        flags.append({"code": "send-errors", "severity": "warning",
                      "message": f"{send['errors']} failed send calls ({send.get('first_error')})"})
    return Measurement(metrics=metrics, flags=flags, raw={"engine_send_json": send, "engine_recv_json": recv})


def aggregate(sends: list[dict], recv: dict, gens: list[tuple[str, int, float]]) -> dict:
    """Several generators' send documents as one, and their common interval.

    ``gens``: (role, first stream id, that host's clock offset to this machine [s]) in the order
    of ``sends``. Each generator's received rate is its own distinct packets over its own sending
    time; the aggregate rate is their sum: the rate while all of them send, i.e. over their common
    interval [latest start, earliest end] (start times put on this machine's clock).
    """
    streams = recv.get("streams") or []
    per = []
    for (role, sid0, off), sd in zip(gens, sends):
        n_thr = len(sd.get("threads") or []) or 1
        fwd = sum(int(s.get("unique") or 0) for s in streams
                  if sid0 <= int(s.get("stream_id", -1)) < sid0 + n_thr)
        el = float(sd.get("elapsed_s") or 0)
        start = (sd["started_unix_ns"] / 1e9 - off) if sd.get("started_unix_ns") else None
        per.append({"role": role, "stream_ids": [sid0, sid0 + n_thr - 1],
                    "offered_count": int(sd.get("offered_count") or 0), "forwarded_count": fwd,
                    "elapsed_s": el or None, "rx_pps": fwd / el if el else None,
                    "tx_pps": sd.get("achieved_pps"), "start_local_s": start})
    skew, common = span_overlap([(p["start_local_s"], p["elapsed_s"]) for p in per])
    merged = dict(sends[0])

    def total(key):
        vals = [sd.get(key) for sd in sends]
        return None if any(v is None for v in vals) else sum(vals)
    merged.update({
        "offered_count": sum(int(sd.get("offered_count") or 0) for sd in sends),
        "intended_count": total("intended_count"), "intended_pps": total("intended_pps"),
        "achieved_pps": total("achieved_pps"), "errors": sum(int(sd.get("errors") or 0) for sd in sends),
        "lag_skipped_count": total("lag_skipped_count"),
        "generator_short": any(sd.get("generator_short") for sd in sends),
        "first_error": next((sd.get("first_error") for sd in sends if sd.get("first_error")), None),
        "elapsed_s": max(float(sd.get("elapsed_s") or 0) for sd in sends),
        "threads": [th for sd in sends for th in (sd.get("threads") or [])],
        "cpu_pinning": [sd.get("cpu_pinning") for sd in sends] if len(sends) > 1 else sends[0].get("cpu_pinning"),
    })
    rx = [p["rx_pps"] for p in per]
    return {"send": merged, "generators": per, "start_skew_s": skew, "common_interval_s": common,
            "rx_pps": sum(rx) if all(v is not None for v in rx) else None}


def combine_directions(up: Measurement, down: Measurement, up_start_s: float | None,
                       down_start_s: float | None) -> Measurement:
    """One bidirectional trial's Measurement from its two directions' (each from
    :func:`metrics_from`): offered, forwarded and intended counts summed (so the loss ratio is over
    both directions and a trial passes only when neither loses), rates summed (the aggregate),
    each direction's own figures under ``directions`` ("up": client to server, "down": server to
    client), and how far apart the two senders started (``start_skew_s``) and how long they both
    sent (``common_interval_s``). The receivers' counts (reordered, duplicated, late, lost, foreign)
    are summed too; latency and jitter are each path's own, so they are per direction only and
    the aggregate's are None with the reason under ``aggregate_missing``. Flags of either
    direction are kept, named by direction."""
    u, d = up.metrics, down.metrics

    def add(key):
        a, b = u.get(key), d.get(key)
        return None if a is None or b is None else a + b
    offered = int(u["offered_count"]) + int(d["offered_count"])
    forwarded = int(u["forwarded_count"]) + int(d["forwarded_count"])
    keep = ("intended_count", "offered_count", "forwarded_count", "loss_ratio", "tx_pps", "rx_pps",
            "throughput_bps", "generator_short", "socket_drops", "duration_s", "latency_ns", "latency_samples",
            "jitter_ns", *RECEIVER_COUNTS, "pinning")
    metrics = dict(u)
    metrics.update({
        "direction": "bidir",
        "intended_count": add("intended_count"), "intended_pps": add("intended_pps"),
        "offered_count": offered, "forwarded_count": forwarded, "tx_packets": offered, "rx_packets": forwarded,
        "lost": offered - forwarded, "loss_ratio": (offered - forwarded) / offered if offered else None,
        "tx_pps": add("tx_pps"), "rx_pps": add("rx_pps"), "throughput_bps": add("throughput_bps"),
        "throughput_basis": u.get("throughput_basis", "") + "; bidirectional: both directions summed",
        "generator_short": bool(u.get("generator_short") or d.get("generator_short")),
        "socket_drops": add("socket_drops"), "send_errors": add("send_errors"),
        "lag_skipped_count": add("lag_skipped_count"),
        **{k: add(k) for k in RECEIVER_COUNTS},
        # one latency or jitter would mix two paths: each direction keeps its own
        "latency_ns": None, "latency_samples": None, "latency_hdr_b64": None, "latency_hdr_unit": None,
        "jitter_ns": None,
        "aggregate_missing": {k: "bidirectional: two paths, one figure would mix them; see directions.up/down"
                              for k in ("latency_ns", "jitter_ns")},
        "directions": {"up": {k: u.get(k) for k in keep}, "down": {k: d.get(k) for k in keep}},
    })
    skew, common = span_overlap([(up_start_s, u.get("duration_s")), (down_start_s, d.get("duration_s"))])
    metrics["start_skew_s"], metrics["common_interval_s"] = skew, common
    flags = [{**f, "message": f"client to server: {f['message']}"} for f in up.flags]
    flags += [{**f, "message": f"server to client: {f['message']}"} for f in down.flags]
    shortest = min(float(u.get("duration_s") or 0), float(d.get("duration_s") or 0))
    flag = skew_flag(common, shortest, skew, "the two directions", "the trial is partly unidirectional")
    if flag:
        flags.append(flag)
    return Measurement(metrics=metrics, flags=flags,
                       raw={"engine_send_jsons": [up.raw.get("engine_send_json"), down.raw.get("engine_send_json")],
                            "engine_recv_jsons": [up.raw.get("engine_recv_json"), down.raw.get("engine_recv_json")]})
