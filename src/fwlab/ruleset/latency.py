"""One latency trial of a derived class (``fwlab run --ruleset``'s ``class-latency`` method).

Owns: a class's frames at a given load sent from the side it enters on and received by
``fwlab-engine recv --backend packet`` on the far side's bed host (one-way latency HDR histogram,
the host's own clock), the trial written to the record (kind ``ruleset-class``, traffic
``ruleset-class-latency``). Never chooses the load or the round (the rule-set run plans them) and
never loads a rule set.
"""

from __future__ import annotations

import time

from fwlab.errors import FwlabError
from fwlab.results import RunRecord, trial_record, utc_now
from fwlab.rules.derive import TrafficClass
from fwlab.ruleset.probe import Bed, Routes, class_spec, frame_size, send_args, send_frames
from fwlab.runners.engine import wait_ready
from fwlab.runners.engine_counts import metrics_from, parse_result

LATENCY_IDLE_S = 0.3  #: the latency receiver stops this long after the last frame [s]


def latency_trial(rec: RunRecord, b: Bed, routes: Routes, engine: str, c: TrafficClass, cond: str, k: int, *,
                  count: int, identity: dict, load: float | None) -> dict:
    """One latency trial of class ``c`` in round ``k``: ``count`` frames at ``load`` [packets/s]
    (:func:`fwlab.ruleset.costs.latency_load`, the same in both conditions), received by the engine
    on the far side's bed host (AF_PACKET, the class's port); ``identity`` is the condition's
    backend, layout and rule set. Appends the trial (traffic ``ruleset-class-latency``) and returns
    {hdr, samples, load_pps, round, why}."""
    if not load:
        return {"hdr": None, "samples": 0, "load_pps": None, "round": k,
                "why": "no rate measured in this round to load at"}
    routes.ensure(c)
    role, send_argv = send_args(engine, b, c, count=count, rate=str(int(load)))
    other = "server" if role == "client" else "client"
    host, ns = b.bed.host, b.bed.ns(other)
    ready = host.scratch_path(f"latency-ready-{c.class_id}-{cond}-{k}-{time.monotonic_ns()}")
    iface = b.link(c.packet.oif, other).peer
    recv_argv = [engine, "recv", "--backend", "packet", "--iface", iface, "--port", str(c.packet.describe()["dport"]),
                 "--idle-timeout-s", str(LATENCY_IDLE_S), "--duration-s", str(round(count / load * 2 + 10)),
                 "--ready-file", ready]
    started = utc_now()
    error, send, recv = None, {}, {}
    rx = host.spawn(recv_argv, ns=ns)
    try:
        wait_ready(host, rx, ready, "recv (latency)", timeout_s=5.0, fix="check the engine build ('make engine')")
        send = send_frames(b, role, send_argv)
        try:
            rx.proc.wait(timeout=LATENCY_IDLE_S + 3.0)
        except Exception:  # noqa: BLE001 - still running: stopped below
            pass
        out, _ = rx.stop(sig=2, wait_s=5.0)
        recv = parse_result(out, "recv") if out.strip() else {}
        if not recv:
            error = "fwlab-engine recv printed nothing"
    except FwlabError as exc:
        error = exc.one_line()
    finally:
        if rx.proc.poll() is None:
            rx.stop()
        host.forget(rx)
    m = metrics_from(send, recv, frame_size(c)).metrics if send and recv else {}
    ident = identity
    spec = class_spec(rec, c, cond, k, trial_id=f"{c.class_id}-{cond}-latency-r{k}", traffic="ruleset-class-latency",
                      backend=ident["backend"], layout=ident["layout"], duration_s=m.get("duration_s"))
    keep = ("tx_pps", "rx_pps", "offered_count", "forwarded_count", "loss_ratio", "duration_s", "latency_ns",
            "latency_samples", "latency_hdr_b64", "latency_hdr_unit", "jitter_ns", "generator_short")
    metrics = {key: m.get(key) for key in keep} | {"ns_per_packet": None, "load_pps": load}
    rec.append_trial(trial_record(
        spec, kind="ruleset-class", started_utc=started, metrics=metrics if m else None, ruleset=ident["ruleset"],
        raw={"engine_send_json": send, "engine_recv_json": {k2: v for k2, v in recv.items() if k2 != "streams"},
             "argv": {"send": send_argv, "recv": recv_argv}},
        error=error, extra={"class": c.to_dict()}))
    hdr = m.get("latency_hdr_b64") if m else None
    why = error or (None if hdr else f"no frame reached the receiver ({m.get('forwarded_count', 0) if m else 0} "
                                     f"of {m.get('offered_count', 0) if m else 0})")
    return {"hdr": hdr, "samples": m.get("latency_samples") if m else 0, "load_pps": load, "round": k, "why": why}
