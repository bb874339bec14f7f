"""Exports of a run record: CSV of all trials, the record as one JSON document, flent files, the
long-format series CSV (trial id, t_s, field, value), and both tables as Parquet (pyarrow, typed
columns, zstd) for histories too large for CSV.

Owns: flattening trials into CSV rows (identity fields, ``metrics.*`` columns, flag codes, error;
never the raw tool output), the ``{run, trials}`` JSON document, and writing the per-interval
series of every trial of a kind that has one (`FLENT_KINDS`: stream, parallel, attack, rtt) as a
flent data file (``.flent.gz``: gzipped JSON, file format version 3),
plus `read_flent`, a small reader that checks a file the way flent's loader does. Reads records
only through `RunRecord`. Never touches: statistics, plots, the test bed or traffic.

flent's format (tohojo/flent, flent/resultset.py): a JSON object with ``version`` (int),
``metadata`` (``NAME`` required; ``TIME`` and ``T0`` as UTC ``%Y-%m-%dT%H:%M:%S.%fZ``;
``TOTAL_LENGTH``, ``STEP_SIZE``, ``TITLE``, ``DATA_FILENAME`` ...), ``x_values`` (shared x axis,
seconds since T0), ``results`` (series name -> y values, one per x value, null where missing) and
``raw_values`` (series name -> list of ``{"t": epoch seconds, "val": value}``). We write file
format version 3 (flent 1.x reads it as is; flent 2.x, whose version is 4, upgrades it on load,
a no-op for our series). flent picks its plot definitions by the test ``NAME`` (`_flent_test`): a
single TCP stream is ``tcp_1up_noping`` (series ``TCP upload``, Mbits/s), or ``tcp_1up`` when an
RTT probe ran beside it (its per-second median RTT as ``Ping (ms) ICMP``); several streams and
kind ``parallel`` are ``tcp_nup`` (``TCP upload sum`` and ``TCP upload avg``, test parameter
``upload_streams``); UDP is ``udp_flood`` (``UDP upload``); kind ``rtt`` (ping through the DUT) is
``ping`` (``Ping (ms) ICMP``); kind ``attack`` is its traffic's test with the flood in
``FWLAB_BACKGROUND``. ``flent -i FILE -p totals`` (``-p ping`` for ping) plots them. A UDP
trial (iperf3 UDP or fwlab-engine test packets) also carries its packets lost per interval
(client sent minus server received, from the link counters) as a series ``qdisc_stats_dut-path``
in the shape of flent's qdisc mixin (``-p drops``), and gets a second file ``<id>.pps.flent.gz``:
its received packet rate as flent's generic ``command-output`` test (``-p command-values``); an
RFC 2544 trial exports its search trace (the offered load of each search trial, loss ratio and
pass/fail riding along) as ``<id>.search.flent.gz``, ``command-output`` too. The other
series (``tx packet rate``, ``TCP retransmits``, any other numeric field under its own name) and
fwlab's identity fields (``TEST_PARAMETERS``) ride along; flent's own metadata fields (``NAME``,
``TITLE``, ``NOTE``, ``TIME``, ``T0``, ``LENGTH``, ``TOTAL_LENGTH``, ``STEP_SIZE``, ``IP_VERSION``,
``LOCAL_HOST``, ``KERNEL_NAME``, ``KERNEL_RELEASE``, ``DATA_FILENAME``, ``SERIES_META``) are set.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from calendar import timegm
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fwlab
from fwlab.errors import FwlabError
from fwlab.analysis.load import IDENTITY_FIELDS, SERIES_COLUMNS, series_rows
from fwlab.files import check_output, check_output_dir, write_output
from fwlab.results.curves import curves
from fwlab.results.record import RunRecord
from fwlab.results.trial import TrialRecord, as_records
from fwlab.stats.run_summary import point_summaries

__all__ = [
    "FLENT_FILEFORMAT_VERSION",
    "FLENT_SUFFIX",
    "FLENT_TESTS",
    "FORMATS",
    "FlentData",
    "PARQUET_FILES",
    "export_run",
    "flent_documents",
    "rfc2544_document",
    "udp_rate_document",
    "read_flent",
    "record_json",
    "series_csv",
    "series_table",
    "trial_rows",
    "trials_csv",
    "trials_table",
    "write_flent",
    "write_parquet",
]

FORMATS = ("csv", "json", "flent", "series", "parquet")


FLENT_FILEFORMAT_VERSION = 3
"""The version we write; `read_flent` also reads 4 (flent 2.x), which has the same layout."""
FLENT_READS = (3, 4)
FLENT_SUFFIX = ".flent.gz"
#: traffic -> (flent test NAME whose plot definitions fit, name of the throughput series)
FLENT_TESTS = {"tcp": ("tcp_1up_noping", "TCP upload"), "udp": ("udp_flood", "UDP upload"),
               "engine": ("udp_flood", "UDP upload")}
#: traffic that is UDP datagrams: iperf3's UDP and fwlab-engine's test packets
UDP_TRAFFIC = ("udp", "engine")
#: record kinds with a per-interval series that export as flent files
FLENT_KINDS = ("stream", "parallel", "attack", "rtt")
PING_SERIES = "Ping (ms) ICMP"
"""flent's name for ICMP round-trip times (its ``ping`` runner), in ms."""
_FLENT_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
_FLENT_TIME_KEYS = ("TIME", "BATCH_TIME", "T0")

#: record series field -> (flent series name, scale from the stored unit, unit); None: the
#: throughput series of the trial's flent test (`_flent_test`)
_SERIES = {"throughput_bps": (None, 1e-6, "Mbits/s"),
           "tx_pps": ("tx packet rate", 1.0, "packets/s"),
           "retransmits": ("TCP retransmits", 1.0, "count"),
           "rtt_p50_ms": (PING_SERIES, 1.0, "ms"),
           "rtt_max_ms": ("Ping max (ms) ICMP", 1.0, "ms"),
           "rtt_ipdv_ms": ("Ping IPDV (ms) ICMP", 1.0, "ms")}
#: other numeric series fields ride along under their own name, unit from the name's suffix
_SUFFIX_UNITS = (("_bps", 1e-6, "Mbits/s"), ("_pps", 1.0, "packets/s"), ("_ms", 1.0, "ms"), ("_s", 1.0, "s"))


def _flent_test(trial: TrialRecord) -> tuple[str, str | None]:
    """(flent test NAME, name of the throughput series) whose plots fit the trial: one TCP stream
    as ``tcp_1up`` (``tcp_1up_noping`` without an RTT probe), N streams as ``tcp_nup`` (total as
    ``TCP upload sum``), UDP as ``udp_flood``, a ping trial as ``ping``."""
    kind, traffic = trial.kind, trial.traffic
    has_rtt = any("rtt_p50_ms" in s for s in trial.series or [])
    if kind == "rtt":
        return "ping", None
    if kind == "parallel" or (traffic == "tcp" and (trial.streams or 1) > 1):
        return "tcp_nup", "TCP upload sum"
    if traffic == "tcp":
        return ("tcp_1up" if has_rtt else "tcp_1up_noping"), "TCP upload"
    if traffic in UDP_TRAFFIC:
        return "udp_flood", "UDP upload"
    return "fwlab", "throughput"


# --- CSV -------------------------------------------------------------------------------------------

def _cell(v: Any) -> Any:
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return v


def trial_rows(trials: list[TrialRecord]) -> tuple[list[str], list[dict]]:
    """The columns and rows of the trials export (CSV and Parquet alike): identity fields,
    ``metrics.<name>`` columns (the union over all trials, sorted), ``flags`` (codes joined by ';')
    and ``error``; a dict or list value as compact JSON text, a missing value None."""
    trials = as_records(trials)
    metric_names = sorted({m for t in trials for m in (t.metrics or {})})
    cols = list(IDENTITY_FIELDS) + [f"metrics.{m}" for m in metric_names] + ["flags", "error"]
    rows = []
    for t in trials:
        row = {f: _cell(getattr(t, f)) for f in IDENTITY_FIELDS}
        row["kind"] = str(t.kind)
        row.update({f"metrics.{m}": _cell(t.metric(m)) for m in metric_names})
        row["flags"] = ";".join(t.flag_codes)
        row["error"] = t.error
        rows.append(row)
    return cols, rows


def trials_csv(trials: list[TrialRecord]) -> str:
    """One row per trial (`trial_rows`); missing cells are empty."""
    cols, rows = trial_rows(trials)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def series_csv(trials: list[TrialRecord]) -> str:
    """Long-format CSV of every trial's per-interval series: ``trial_id,t_s,field,value``, one row
    per sample and field (`fwlab.analysis.load.series_rows`)."""

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SERIES_COLUMNS)
    w.writerows(series_rows(trials))
    return buf.getvalue()


# --- Parquet ---------------------------------------------------------------------------------------

PARQUET_FILES = ("trials.parquet", "series.parquet")
"""What ``--format parquet`` writes into its directory: the trials table and the long-format
series (the same rows and values as ``--format csv`` and ``--format series``, typed)."""


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise FwlabError("pyarrow is not installed (needed for --format parquet)",
                         fix="pip install 'fwlab[analysis]', or export csv") from None
    return pyarrow


def _column(pa, values: list):
    """One typed column: booleans, integers, floats (integers among floats become floats), else
    text (a number among text becomes its text, as in the CSV)."""
    seen = [v for v in values if v is not None]
    if seen and all(isinstance(v, bool) for v in seen):
        return pa.array(values, type=pa.bool_())
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
        if all(isinstance(v, int) for v in seen) and seen:
            return pa.array(values, type=pa.int64())
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    return pa.array([None if v is None else v if isinstance(v, str) else str(v) for v in values], type=pa.string())


def trials_table(trials: list[TrialRecord]):
    """`trial_rows` as a pyarrow Table, one typed column each, in the CSV's column order."""
    pa = _pyarrow()
    cols, rows = trial_rows(trials)
    return pa.table({c: _column(pa, [r.get(c) for r in rows]) for c in cols})


def series_table(trials: list[TrialRecord]):
    """The long-format series (`series_rows`) as a pyarrow Table: trial_id, t_s, field, value."""
    pa = _pyarrow()
    rows = series_rows(trials)
    types = (pa.string(), pa.float64(), pa.string(), pa.float64())
    return pa.table({name: pa.array([r[i] for r in rows], type=typ)
                     for i, (name, typ) in enumerate(zip(SERIES_COLUMNS, types))})


def write_parquet(rec: RunRecord, out_dir: Path | str) -> list[Path]:
    """`PARQUET_FILES` into `out_dir` (created if missing, its parent not), each written whole or not at all (`write_output`);
    zstd-compressed, for histories too large for CSV."""
    pa = _pyarrow()
    out = check_output_dir(out_dir, "parquet output directory")
    trials = rec.trials()
    paths = []
    for name, table in zip(PARQUET_FILES, (trials_table(trials), series_table(trials))):
        buf = pa.BufferOutputStream()
        pa.parquet.write_table(table, buf, compression="zstd")
        paths.append(write_output(out / name, buf.getvalue().to_pybytes(), "parquet output file"))
    return paths


# --- JSON ------------------------------------------------------------------------------------------

def record_json(rec: RunRecord) -> str:
    """The record as one JSON document: ``{"run": run.json, "trials": [trial, ...], "summary":
    [row, ...]}``, the summary being summary.csv's rows with their ``key``
    (``fwlab.stats.run_summary``: the values the report shows)."""
    trials = rec.trials()
    summary = [{"key": ps.key(), **ps.row()} for ps in point_summaries(curves(trials))]
    return json.dumps({"run": rec.run, "trials": trials, "summary": summary}, indent=1, default=str) + "\n"


# --- flent -----------------------------------------------------------------------------------------

def _parse_utc(text: str | None) -> datetime | None:
    if not text:
        return None
    for fmt in (_FLENT_TIME, "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def _epoch(dt: datetime) -> float:
    return timegm(dt.timetuple()) + dt.microsecond / 1e6


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _series_spec(field: str, throughput_name: str | None) -> tuple[str, float, str] | None:
    if field in _SERIES:
        name, scale, unit = _SERIES[field]
        return (name or throughput_name or "throughput"), scale, unit
    for suffix, scale, unit in _SUFFIX_UNITS:
        if field.endswith(suffix):
            return field, scale, unit
    return field, 1.0, ""


def flent_document(trial: TrialRecord, run: dict) -> dict | None:
    """flent data file (format version 3) for one trial of a `FLENT_KINDS` kind with a
    per-interval series; None otherwise."""
    trial = as_records([trial])[0]
    series = [s for s in trial.series or [] if s.get("t_s") is not None]
    if trial.kind not in FLENT_KINDS or not series:
        return None
    t0 = _parse_utc(trial.started_utc) or datetime.now(UTC).replace(tzinfo=None)
    x = [float(s["t_s"]) for s in series]
    results: dict[str, list] = {}
    raw: dict[str, list] = {}
    series_meta: dict[str, dict] = {}
    test_name, throughput_series = _flent_test(trial)
    fields = [f for f in _SERIES if any(f in s for s in series)]
    fields += sorted({f for s in series for f, v in s.items()
                      if f != "t_s" and f not in _SERIES and isinstance(v, (int, float)) and not isinstance(v, bool)})
    for field in fields:
        name, scale, unit = _series_spec(field, throughput_series)
        if name in results:
            continue
        ys = [None if not isinstance(s.get(field), (int, float)) else float(s[field]) * scale for s in series]
        results[name] = ys
        raw[name] = [{"t": _epoch(t0) + xi, "val": y} for xi, y in zip(x, ys) if y is not None]
        series_meta[name] = {"UNITS": unit, "FWLAB_FIELD": field}
    streams = int(trial.streams or 1)
    if test_name == "tcp_nup" and throughput_series in results:
        name = "TCP upload avg"  # flent's tcp_nup plots the per-stream average beside the sum
        results[name] = [None if y is None else y / streams for y in results[throughput_series]]
        raw[name] = [{"t": v["t"], "val": v["val"] / streams} for v in raw[throughput_series]]
        series_meta[name] = {"UNITS": "Mbits/s", "FWLAB_FIELD": f"throughput_bps / {streams}"}
    stamp = t0.strftime(_FLENT_TIME)
    host = run.get("host") or {}
    params = {f: getattr(trial, f) for f in IDENTITY_FIELDS[:16]}
    if test_name == "tcp_nup":
        params["upload_streams"] = streams
    metadata = {
        "NAME": test_name,
        "TITLE": trial.trial_id,
        "TIME": stamp,
        "T0": stamp,
        "LENGTH": trial.duration_s,
        "TOTAL_LENGTH": max(x),
        "STEP_SIZE": (x[1] - x[0]) if len(x) > 1 else (x[0] or 1.0),
        "HOST": None,
        "HOSTS": [],
        "LOCAL_HOST": host.get("hostname"),
        "IP_VERSION": trial.ip_version,
        "NOTE": f"fwlab {trial.kind} trial: {trial.tool} {trial.traffic} through "
                f"{trial.backend} {trial.layout} with {trial.rules} rules ({trial.mode})",
        "DATA_FILENAME": _safe_name(trial.trial_id) + FLENT_SUFFIX,
        "TEST_PARAMETERS": params,
        "SERIES_META": series_meta,
        "KERNEL_NAME": "Linux",
        "KERNEL_RELEASE": host.get("kernel"),
        "FWLAB_VERSION": host.get("fwlab_version", fwlab.__version__),
        "FWLAB_SUITE": (run.get("suite") or {}).get("name"),
        "FWLAB_KIND": str(trial.kind),
        "FWLAB_METRICS": trial.metrics,
    }
    if trial.kind == "attack":
        metadata["FWLAB_BACKGROUND"] = (trial.extra or {}).get("background") or trial.background
    loss = _link_loss(trial) if test_name == "udp_flood" else None
    if loss is not None:  # flent's 'drops' plot (qdisc_stats.inc): lost packets per interval
        lx, lost = loss
        at = {round(xi, 6): v for xi, v in zip(lx, lost, strict=True)}
        results[LOSS_SERIES] = [at.get(round(xi, 6)) for xi in x]
        # flent's loader turns a file format 3 series' "dropped" from a running count into per
        # interval values (as tc reports them): a running count from 0 at the trial's start
        total, raw[LOSS_SERIES] = 0.0, [{"t": _epoch(t0), "val": 0.0, "dropped": 0.0, "ecn_mark": 0}]
        for xi, v in zip(lx, lost, strict=True):
            total += v
            raw[LOSS_SERIES].append({"t": _epoch(t0) + xi, "val": v, "dropped": total, "ecn_mark": 0})
        series_meta[LOSS_SERIES] = {"UNITS": "packets", "FWLAB_FIELD": "client_tx_pps - server_rx_pps per interval "
                                                                        "(extra.link_series)"}
        params.update({"qdisc_stats_hosts": LOSS_HOST, "qdisc_stats_interfaces": "lost"})
        metadata["NOTE"] += (f"; '{LOSS_SERIES}' (flent -p drops): packets lost per interval, the client's sent "
                             f"minus the server's received link counter, not a qdisc; the counters are read a "
                             f"moment apart, so an interval can show a few hundred more or fewer (negative: "
                             f"frames counted sent in one interval and received in the next), their sum is the "
                             f"trial's loss")
    return {"version": FLENT_FILEFORMAT_VERSION, "metadata": metadata, "x_values": x,
            "results": results, "raw_values": raw}



def flent_documents(rec: RunRecord) -> list[dict]:
    """flent documents for every trial of a `FLENT_KINDS` kind that has a per-interval series,
    a UDP trial's packet-rate companion (`udp_rate_document`) and every RFC 2544 trial's search
    trace (`rfc2544_document`)."""
    docs: list[dict | None] = []
    for t in rec.records():
        if t.kind in FLENT_KINDS:
            docs.append(flent_document(t, rec.run))
            if t.traffic in UDP_TRAFFIC:
                docs.append(udp_rate_document(t, rec.run))
        elif t.kind == "rfc2544":
            docs.append(rfc2544_document(t, rec.run))
    return [d for d in docs if d is not None]


#: the qdisc mixin of flent's tests (qdisc_stats.inc, included by udp_flood): a series
#: ``qdisc_stats_<host>`` whose raw values carry ``dropped`` is drawn by flent's 'drops' plot
LOSS_HOST = "dut-path"
LOSS_SERIES = f"qdisc_stats_{LOSS_HOST}"
#: flent's generic one-series test: its 'command-values' plot is a time series labelled by the
#: test parameter ``command-label`` (the packet rate of a UDP trial, the load of each search trial)
VALUES_TEST, VALUES_SERIES = "command-output", "command-values"


def _link_loss(trial: TrialRecord) -> tuple[list[float], list[float]] | None:
    """(t_s, packets lost in each interval) from the trial's link counters (``extra.link_series``:
    the client's sent minus the server's received packets per interval; negative where frames
    queued in one interval arrive in the next), None without both counters."""
    pts = [p for p in (trial.extra or {}).get("link_series") or []
           if isinstance(p, dict) and p.get("t_s") is not None
           and isinstance(p.get("client_tx_pps"), (int, float)) and isinstance(p.get("server_rx_pps"), (int, float))]
    if not pts:
        return None
    xs, lost, prev = [], [], 0.0
    for p in pts:
        t = float(p["t_s"])
        xs.append(t)
        lost.append((float(p["client_tx_pps"]) - float(p["server_rx_pps"])) * (t - prev))
        prev = t
    return xs, lost


def _values_document(trial: TrialRecord, run: dict, x: list[float], ys: list[float], *, label: str, units: str,
                     suffix: str, note: str, extra_results: dict[str, list] | None = None,
                     extra_meta: dict[str, dict] | None = None) -> dict:
    """A flent ``command-output`` document: one value series over x [s since the trial's start]."""
    t0 = _parse_utc(trial.started_utc) or datetime.now(UTC).replace(tzinfo=None)
    stamp = t0.strftime(_FLENT_TIME)
    host = run.get("host") or {}
    results = {VALUES_SERIES: ys, **(extra_results or {})}
    raw = {name: [{"t": _epoch(t0) + xi, "val": y} for xi, y in zip(x, vals, strict=True) if y is not None]
           for name, vals in results.items()}
    params = {f: getattr(trial, f) for f in IDENTITY_FIELDS[:16]}
    params.update({"command": f"fwlab {trial.kind} trial {trial.trial_id}", "command-label": label})
    metadata = {
        "NAME": VALUES_TEST, "TITLE": trial.trial_id, "TIME": stamp, "T0": stamp,
        "LENGTH": max(x), "TOTAL_LENGTH": max(x),
        "STEP_SIZE": (x[1] - x[0]) if len(x) > 1 else (x[0] or 1.0),
        "HOST": None, "HOSTS": [], "LOCAL_HOST": host.get("hostname"), "IP_VERSION": trial.ip_version,
        "NOTE": note, "DATA_FILENAME": _safe_name(trial.trial_id) + suffix + FLENT_SUFFIX,
        "TEST_PARAMETERS": params,
        "SERIES_META": {VALUES_SERIES: {"UNITS": units, "FWLAB_FIELD": label}, **(extra_meta or {})},
        "KERNEL_NAME": "Linux", "KERNEL_RELEASE": host.get("kernel"),
        "FWLAB_VERSION": host.get("fwlab_version", fwlab.__version__),
        "FWLAB_SUITE": (run.get("suite") or {}).get("name"), "FWLAB_KIND": str(trial.kind),
        "FWLAB_METRICS": trial.metrics,
    }
    return {"version": FLENT_FILEFORMAT_VERSION, "metadata": metadata, "x_values": x,
            "results": results, "raw_values": raw}


def udp_rate_document(trial: TrialRecord, run: dict) -> dict | None:
    """A UDP trial's received packet rate per interval [packets/s] as flent's ``command-output``
    test (``flent -i F -p command-values``), beside its ``udp_flood`` file; None without a
    per-interval packet rate (the series' ``rx_pps``, else the server's link counter)."""
    trial = as_records([trial])[0]
    pts = [(float(p["t_s"]), float(p["rx_pps"])) for p in trial.series or []
           if p.get("t_s") is not None and isinstance(p.get("rx_pps"), (int, float))]
    source = "the received packet rate of the trial's series"
    if not pts:
        pts = [(float(p["t_s"]), float(p["server_rx_pps"])) for p in (trial.extra or {}).get("link_series") or []
               if isinstance(p, dict) and p.get("t_s") is not None
               and isinstance(p.get("server_rx_pps"), (int, float))]
        source = "the server's link counter (received packets per interval)"
    if not pts:
        return None
    x, ys = [p[0] for p in pts], [p[1] for p in pts]
    return _values_document(trial, run, x, ys, label="received packets/s", units="packets/s", suffix=".pps",
                            note=f"fwlab UDP trial through {trial.backend} {trial.layout} with {trial.rules} rules "
                                 f"({trial.mode}): {source}; the bandwidth and loss are in the udp_flood file "
                                 f"{_safe_name(trial.trial_id) + FLENT_SUFFIX}")


def rfc2544_document(trial: TrialRecord, run: dict) -> dict | None:
    """An RFC 2544 trial's search trace as flent's ``command-output`` test: the offered load of
    each search trial [packets/s] at the end of that trial (x: seconds of search trials so far),
    with each trial's loss ratio, pass/fail and phase riding along; None without a trace."""
    trial = as_records([trial])[0]
    steps = [s for s in trial.series or [] if isinstance(s.get("load_pps"), (int, float))]
    if not steps:
        return None
    x, elapsed = [], 0.0
    for s in steps:
        elapsed += float(s.get("duration_s") or 0.0)
        x.append(float(s["t_s"]) if s.get("t_s") is not None else elapsed)
    ys = [float(s["load_pps"]) for s in steps]
    loss = [None if not isinstance(s.get("loss_ratio"), (int, float)) else float(s["loss_ratio"]) for s in steps]
    passed = [None if s.get("passed") is None else float(bool(s["passed"])) for s in steps]
    tput = trial.metric("throughput_pps")
    return _values_document(trial, run, x, ys, label="offered load of each search trial [packets/s]",
                            units="packets/s", suffix=".search",
                            note=f"fwlab RFC 2544 search ({trial.metric('algorithm')}) through {trial.backend} "
                                 f"{trial.layout} with {trial.rules} rules ({trial.mode}), {len(steps)} search trials; "
                                 f"throughput {tput if tput is None else round(tput)} packets/s",
                            extra_results={"search trial loss ratio": loss, "search trial passed": passed},
                            extra_meta={"search trial loss ratio": {"UNITS": "ratio", "FWLAB_FIELD": "loss_ratio"},
                                        "search trial passed": {"UNITS": "1 = passed", "FWLAB_FIELD": "passed"}})


def write_flent(rec: RunRecord, out_dir: Path | str) -> list[Path]:
    """Write one ``<trial id>.flent.gz`` per trial with a series (`flent_documents`) into `out_dir`
    (created if missing, its parent not: fwlab.files.check_output_dir), each safely
    (fwlab.files.write_output)."""
    docs = flent_documents(rec)
    if not docs:
        return []
    out_dir = check_output_dir(out_dir, "flent output directory")
    paths = []
    for doc in docs:
        path = out_dir / doc["metadata"]["DATA_FILENAME"]
        text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False)
        paths.append(write_output(path, gzip.compress(text.encode("utf-8"), mtime=0), "flent file"))
    return paths


@dataclass(frozen=True)
class FlentData:
    """A flent data file as flent's loader sees it."""

    version: int
    metadata: dict
    """Metadata, with TIME/BATCH_TIME/T0 parsed into naive UTC datetimes."""
    x_values: list
    results: dict
    raw_values: dict

    def series(self, name: str) -> list:
        return self.results[name]


def read_flent(path: Path | str) -> FlentData:
    """Read a flent data file following flent's loader (``ResultSet.unserialise``).

    Raises `FwlabError` where flent's loader would fail: not JSON, a file format newer than 3,
    no ``NAME``, a time it cannot parse, a series whose length differs from ``x_values``.
    """
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            obj = json.load(fh)
    except (OSError, ValueError) as exc:
        raise FwlabError(f"cannot load flent data from {path}: {exc}", fix="re-export it") from None
    try:
        version = int(obj["version"])
    except (KeyError, ValueError, TypeError):
        version = 1
    if version > max(FLENT_READS):
        raise FwlabError(f"{path}: flent file format version {version} is too new", fix="re-export it")
    if version < min(FLENT_READS):
        raise FwlabError(f"{path}: flent file format version {version} needs flent's own upgrade",
                         fix="open it with flent")
    try:
        metadata = dict(obj["metadata"])
        x_values = list(obj["x_values"])
        results = dict(obj["results"])
        raw_values = obj["raw_values"]
    except (KeyError, TypeError) as exc:
        raise FwlabError(f"{path}: missing top-level key {exc}", fix="re-export it") from None
    if not metadata.get("NAME"):
        raise FwlabError(f"{path}: metadata has no NAME (flent: 'Missing name for resultset')",
                         fix="re-export it")
    if metadata.get("TOTAL_LENGTH") is None:
        metadata["TOTAL_LENGTH"] = max(x_values)
    for key in _FLENT_TIME_KEYS:
        if metadata.get(key) is not None:
            dt = _parse_utc(metadata[key])
            if dt is None:
                raise FwlabError(f"{path}: metadata {key} {metadata[key]!r} is not an ISO time",
                                 fix="re-export it")
            metadata[key] = dt
    for name, ys in results.items():
        if len(ys) != len(x_values):
            raise FwlabError(f"{path}: series {name!r} has {len(ys)} values for {len(x_values)} x values",
                             fix="re-export it")
    if raw_values and "T0" not in metadata and "TIME" not in metadata:
        raise FwlabError(f"{path}: raw values need T0 or TIME in the metadata", fix="re-export it")
    return FlentData(version=version, metadata=metadata, x_values=x_values, results=results,
                     raw_values=raw_values)


# --- one entry point -------------------------------------------------------------------------------

def export_run(run_dir: Path | str, fmt: str, out: Path | str | None = None) -> tuple[str | None, list[Path]]:
    """Export a run. csv/json/series: returns (text, []) when `out` is None, else writes the file
    and returns (None, [out]). flent, parquet: write into the directory `out` (default
    ``<run>/flent``, ``<run>/parquet``), return (None, files)."""
    if fmt not in FORMATS:
        raise FwlabError(f"unknown export format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")
    if out is not None and fmt not in ("flent", "parquet"):
        check_output(out, f"{fmt} output file")  # before any work: never a record's own file
    rec = RunRecord.open(run_dir)
    if fmt == "flent":
        paths = write_flent(rec, Path(out) if out else rec.path / "flent")
        if not paths:
            raise FwlabError(f"{run_dir} has no {'/'.join(FLENT_KINDS)} trial with a per-interval series",
                             fix="export csv or json instead")
        return None, paths
    if fmt == "parquet":
        return None, write_parquet(rec, Path(out) if out else rec.path / "parquet")
    text = {"csv": trials_csv, "series": series_csv}[fmt](rec.trials()) if fmt != "json" else record_json(rec)
    if out is None:
        return text, []
    return None, [write_output(out, text, f"{fmt} output file")]
