"""What each kind of trial carries in ``metrics``: one pydantic model per ``TrialKind``.

Owns: the named, typed, unit-suffixed figures of each kind (``StreamMetrics`` for ``stream``,
``RttMetrics`` for ``rtt``, ...), which of them every measured trial of the kind has (required,
possibly null when the tool cannot tell), and ``KIND_METRICS`` (kind -> model). The per-kind
JSON Schemas in docs/schema/ (``fwlab.results.schema``) and the metric tables of
docs/record-format.md are generated from these models. A tool may add figures of its own
(``extra`` allowed: e.g. ``app_*`` beside the link-counted rate); the declared ones keep their
type. A failed trial has ``metrics: null``. Never touches files or statistics.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fwlab.results.kinds import TrialKind

Num = float | None  #: a figure the tool may not be able to give (null, with the reason in flags/error)


class _Metrics(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Rates(_Metrics):
    """The three figures every traffic-moving trial carries (null where the tool cannot tell)."""

    throughput_bps: Num = Field(description="bit/s received (link-counted for UDP streams)")
    rx_pps: Num = Field(description="packets/s received by the server side")
    loss_ratio: Num = Field(description="0..1, sent but not delivered")


class _StreamFigures(_Rates):
    duration_s: Num = Field(None, description="measured duration [s]")
    tx_pps: Num = Field(None, description="packets/s sent")
    bytes: Num = Field(None, description="bytes received")
    bytes_up: Num = Field(None, description="bytes received, client to server")
    throughput_up_bps: Num = Field(None, description="bit/s client to server")
    throughput_down_bps: Num = Field(None, description="bit/s server to client")
    direction: str | None = Field(None, description="up, down or bidir (iperf3)")
    streams: int | None = Field(None, description="parallel streams")
    client_processes: int | None = Field(None, description="client processes started")
    completion_s: Num = Field(None, description="first client start to last exit [s]")
    retransmits: Num = Field(None, description="TCP retransmissions")
    jitter_ms: Num = Field(None, description="UDP jitter as the tool reports it [ms]")
    cpu_sender_pct: Num = Field(None, description="sender CPU [%]")
    cpu_receiver_pct: Num = Field(None, description="receiver CPU [%]")
    server_if_rx_packets: int | None = Field(None, description="packets the server interface received")
    fairness_jain: Num = Field(None, description="Jain's index over the streams, 1 = equal shares")
    stream_count: int | None = Field(None, description="streams in the spread figures (stream_*)")
    rtt_p50_ms: Num = Field(None, description="median RTT of the ping probe beside the stream [ms]")
    latency_hdr_b64: str | None = Field(None, description="one-way latency HDR histogram (fwlab-engine)")


class StreamMetrics(_StreamFigures):
    """``stream``: iperf3, netperf or fwlab-engine traffic for a fixed time."""


class AttackMetrics(_StreamFigures):
    """``attack``: a stream with a background flood beside it (``flood_*`` from the flood's counters)."""

    flood_intended_pps: Num = Field(None, description="the flood's intended rate [packets/s]")
    flood_offered_pps: Num = Field(None, description="the flood's achieved rate [packets/s]")
    flood_dut_rule_drops: Num = Field(None, description="flood packets the DUT's rules dropped")


class ParallelMetrics(_StreamFigures):
    """``parallel``: many TCP streams framed by single-stream baseline and recovery probes."""

    baseline_bps: Num = Field(None, description="single stream before the run [bit/s]")
    first_probe_bps: Num = Field(None, description="first single-stream probe after the run [bit/s]")
    min_probe_bps: Num = Field(None, description="slowest probe [bit/s]")
    recovered: bool | None = Field(None, description="a probe came back within tolerance of the baseline")
    recovery_s: Num = Field(None, description="end of the run to the recovered probe [s]")
    probes: int | None = Field(None, description="probes run")


class RttMetrics(_Rates):
    """``rtt``: ping round-trip times (from the raw samples, fwlab.stats.derive)."""

    rtt_samples: int = Field(description="replies")
    rtt_loss_ratio: Num = Field(description="0..1, echo requests without reply")
    rtt_sent: int | None = Field(None, description="echo requests sent")
    rtt_min_ms: Num = Field(None, description="[ms]")
    rtt_p50_ms: Num = Field(None, description="[ms]")
    rtt_p90_ms: Num = Field(None, description="[ms]")
    rtt_p99_ms: Num = Field(None, description="[ms]")
    rtt_max_ms: Num = Field(None, description="[ms]")
    rtt_mean_ms: Num = Field(None, description="[ms]")
    rtt_ipdv_ms: Num = Field(None, description="mean |difference| of consecutive RTTs (RFC 3393 style) [ms]")
    rtt_jitter_ms: Num = Field(None, description="RFC 3550 smoothed jitter [ms]")
    rtt_hdr_b64: str | None = Field(None, description="every RTT as an HDR histogram (V2, base64)")
    rtt_hdr_unit: str | None = Field(None, description="the histogram's unit, ns")
    duration_s: Num = Field(None, description="first to last reply [s]")
    interval_ms: Num = Field(None, description="ping interval [ms]")


class Rfc2544Metrics(_Metrics):
    """``rfc2544``: a throughput search, a frame-loss sweep or a back-to-back burst test."""

    frame_size: int = Field(description="Ethernet frame incl. FCS [B]")
    max_load_pps: Num = Field(description="the generator's maximum forwarding rate, no rules [packets/s]")
    search_max_load_pps: Num = Field(None, description="the search's upper load [packets/s]")
    device_model: str | None = Field(None, description="napi or veth")
    throughput_pps: Num = Field(None, description="RFC 2544 throughput (throughput test) [packets/s]")
    throughput_bps: Num = Field(None, description="the same in bit/s of frames")
    throughput_pct_of_max: Num = Field(None, description="throughput as % of max_load_pps")
    lower_bound_pps: Num = Field(None, description="search's last passing load [packets/s]")
    upper_bound_pps: Num = Field(None, description="search's first failing load [packets/s]")
    search_trials: int | None = Field(None, description="search trials")
    search_trial_s: Num = Field(None, description="traffic seconds the search spent")
    forwarded_at_loss_pps: Num = Field(None, description="highest forwarding rate in a lossy trial of the search "
                                                         "(>= 1 s or full length, generator-short left out) [packets/s]")
    throughput_pct_of_forwarded_at_loss: Num = Field(None, description="throughput as % of forwarded_at_loss_pps; "
                                                                       "below 80: flag loss-below-capacity")
    algorithm: str | None = Field(None, description="binary, mlr, ...")
    goal: str | None = Field(None, description="the search goal's name")
    rx_pps: Num = Field(None, description="= throughput_pps")
    loss_ratio: Num = Field(None, description="frame loss at the top load (frame-loss test)")
    load_pct: Num = Field(None, description="top load of the frame-loss test [% of max]")
    steps: int | None = Field(None, description="frame-loss steps")
    trial_s: Num = Field(None, description="seconds per step")
    back_to_back_frames: int | None = Field(None, description="longest burst passed without loss (back-to-back)")
    burst_max_passed: bool | None = Field(None, description="the longest burst tried passed")
    burst_rate_pps: Num = Field(None, description="burst sending rate [packets/s]")
    bursts: int | None = Field(None, description="bursts sent")


class ConnectionsMetrics(_Metrics):
    """``connections``: connection rate or capacity searches (conntrack)."""

    addresses: int = Field(description="client source addresses used")
    conntrack_max: int | None = Field(description="nf_conntrack_max during the trial")
    conntrack_buckets: int | None = Field(None, description="nf_conntrack_buckets")
    conn_rate_cps: Num = Field(None, description="highest passing new-connection rate [1/s]")
    capacity_connections: Num = Field(None, description="most concurrent connections held")
    capacity_upper_connections: Num = Field(None, description="first failing connection count")
    search_trials: int | None = Field(None, description="search trials")
    hold_s: Num = Field(None, description="seconds each capacity step holds its connections")
    duration_s: Num = Field(None, description="seconds per rate trial")
    workers: int | None = Field(None, description="generator workers")
    lean: bool | None = Field(None, description="rate: the lean transaction (engine --lean) was used")
    close: str | None = Field(None, description="rate: how the client closed a transaction (fin or rst)")
    limit_cause: str | None = Field(None, description="what stopped the capacity (conntrack table, generator, ...)")
    host_sysctls: dict[str, Any] | None = Field(None, description="host-global sysctls changed for the trial")
    ceiling_connections: int | None = Field(
        None, description="capacity: the most connections this bed allows before the DUT's own behaviour")
    ceiling_reason: str | None = Field(None, description="capacity: what sets ceiling_connections, in words")
    ceilings: dict[str, int | None] | None = Field(
        None, description="capacity: each ceiling (source_ports, conntrack_table, memory; null: none)")


class TransactionsMetrics(_Rates):
    """``transactions``: HTTP (and FTP) transactions by curl clients against nginx/vsftpd."""

    transactions_per_s: Num = Field(description="completed transactions per second")
    tpm: Num = Field(description="transactions per minute")
    transactions: int | None = Field(None, description="completed in the window")
    failures: int | None = Field(None, description="failed transactions")
    failure_pct: Num = Field(None, description="[%]")
    duration_s: Num = Field(None, description="measured window [s]")
    clients: int | None = Field(None, description="concurrent clients")
    client_processes: int | None = Field(None, description="curl processes")
    cpu_client_pct: Num = Field(None, description="CPU the clients used [%]")
    server_if_rx_packets: int | None = Field(None, description="packets the server interface received")


class RulesetClassMetrics(_Metrics):
    """``ruleset-class``: one traffic class of an imported rule set (``fwlab run --ruleset``)."""

    tx_pps: Num = Field(description="packets/s sent back to back [packets/s]")
    offered_count: int | None = Field(description="packets sent")
    duration_s: Num = Field(description="sending time [s]")
    ns_per_packet: Num = Field(description="1e9 / tx_pps [ns] (null in a latency trial)")
    load_pps: Num = Field(None, description="latency trial (traffic ruleset-class-latency): the load, fraction x "
                                            "the lower of the class's two rates (with and without the rule set) in "
                                            "the same round, the same in both conditions [packets/s]")
    forwarded_count: int | None = Field(None, description="latency trial: test frames the far side received")
    loss_ratio: Num = Field(None, description="latency trial: 0..1, sent but not received")
    latency_ns: dict | None = Field(None, description="latency trial: one-way latency min, mean, p50, p90, p99, "
                                                      "p999, max [ns] (fwlab-engine)")
    latency_samples: int | None = Field(None, description="latency trial: frames timed")
    latency_hdr_b64: str | None = Field(None, description="latency trial: one-way latency HDR histogram (fwlab-engine)")
    latency_hdr_unit: str | None = Field(None, description="latency trial: the histogram's unit, ns")


class CostMetrics(_Metrics):
    """``cost``: the firewall's own time per packet, timed inside the DUT's kernel by BPF netfilter
    brackets around its base chains at a light fixed load (tool ``kernel-cost``, docs/kernel-cost.md).
    A figure the probe could not give is null with ``fw_missing`` saying why."""

    rate_pps: Num = Field(description="the light load sent (at most the item's rate_pps, chosen from a pilot) [packets/s]")
    duration_s: Num = Field(description="sending time [s]")
    offered_count: int | None = Field(description="packets the generator sent")
    forwarded_count: int | None = Field(description="packets the far side received")
    generator_short: bool | None = Field(description="the generator sent fewer packets than intended")
    fw_missing: str | None = Field(description="why there is no in-kernel figure (null: measured)")
    fw_p50_ns: Num = Field(description="median time of a packet in the firewall's main bracket (forward hook) [ns]")
    fw_p50_low_ns: Num = Field(description="distribution-free 95 % interval of that median, over the trial's packets [ns]")
    fw_p50_high_ns: Num = Field(description="its upper end [ns]")
    fw_floor_p50_ns: Num = Field(description="the probe's own floor: median gap of an empty bracket [ns]")
    fw_net_p50_ns: Num = Field(description="fw_p50_ns - fw_floor_p50_ns [ns]")
    fw_calls_per_packet: Num = Field(description="firewall bracket passes per sent packet, all timed brackets [ratio]")
    fw_ref_ratio_p50: Num = Field(description="median over packets of (firewall gap / reference-chain gap), same "
                                              "packets [ratio]; null without a like reference")
    fw_ref_p50_ns: Num = Field(description="the reference chain's median gap on the same packets [ns]")
    fw_reference: str | None = Field(description="the reference chain (null: none)")
    fw_reference_missing: str | None = Field(description="why there is no reference figure (null: there is)")
    fw_hdr_b64: str | None = Field(description="the main bracket's gaps, HdrHistogram V2 text (base64)")
    intended_count: int | None = Field(None, description="packets the trial meant to send")
    frame_size: int | None = Field(None, description="Ethernet frame incl. FCS [B]")
    tx_pps: Num = Field(None, description="packets/s sent")
    rx_pps: Num = Field(None, description="packets/s received (forwarded_count / duration_s): the light load, not a capacity")
    loss_ratio: Num = Field(None, description="0..1, sent but not received")
    throughput_bps: Num = Field(None, description="always null: a cost trial is not a capacity trial")
    pilot_ns_per_packet: Num = Field(None, description="time per packet inside all brackets in the pilot [ns]")
    fw_family: str | None = Field(None, description="the timed netfilter family (ipv4, ipv6)")
    fw_chains: list[str] | None = Field(None, description="what the main bracket holds")
    fw_timed: int | None = Field(None, description="packets the main bracket timed")
    fw_entered: int | None = Field(None, description="packets that entered it")
    fw_unfinished: int | None = Field(None, description="entered and never left (dropped inside: not timed)")
    fw_mean_ns: Num = Field(None, description="mean gap of the main bracket [ns]")
    fw_p90_ns: Num = Field(None, description="[ns]")
    fw_p99_ns: Num = Field(None, description="[ns]")
    fw_per_packet_ns: Num = Field(None, description="every firewall bracket's mean gap x its passes per packet, added [ns]")
    fw_ref_ratio_low: Num = Field(None, description="95 % interval of fw_ref_ratio_p50 over the trial's packets [ratio]")
    fw_ref_ratio_high: Num = Field(None, description="its upper end [ratio]")
    fw_ref_median_ratio: Num = Field(None, description="fw_p50_ns / fw_ref_p50_ns (ratio of the two medians) [ratio]")
    fw_paired: int | None = Field(None, description="packets timed by both the firewall's and the reference's bracket")
    fw_hdr_unit: str | None = Field(None, description="the histogram's unit, ns")
    fw_ref_hdr_b64: str | None = Field(None, description="the reference chain's gaps on the same packets, HdrHistogram "
                                                         "V2 text (base64, ns); null without a reference")
    fw_brackets: list[dict[str, Any]] | None = Field(None, description="every bracket (hook, priority, chains, role, "
                                                                       "counts, p50, or missing) without histograms")
    fw_source: str | None = Field(None, description="where the figure comes from: null or 'brackets' (BPF netfilter "
                                                    "brackets: per-packet histogram, median); 'bpf_stats' (an XDP "
                                                    "backend: the kernel's run time per program, a mean in fw_mean_ns, "
                                                    "no median, histogram or reference)")
    fw_programs: list[dict[str, Any]] | None = Field(None, description="bpf_stats: every XDP program of the DUT (id, "
                                                                       "name, interfaces, runs, run time) over the trial")


#: kind -> the model of its ``metrics``
KIND_METRICS: dict[TrialKind, type[_Metrics]] = {
    TrialKind.STREAM: StreamMetrics,
    TrialKind.RFC2544: Rfc2544Metrics,
    TrialKind.CONNECTIONS: ConnectionsMetrics,
    TrialKind.TRANSACTIONS: TransactionsMetrics,
    TrialKind.PARALLEL: ParallelMetrics,
    TrialKind.ATTACK: AttackMetrics,
    TrialKind.RTT: RttMetrics,
    TrialKind.RULESET_CLASS: RulesetClassMetrics,
    TrialKind.COST: CostMetrics,
}


def metrics_model(kind: str | TrialKind) -> type[_Metrics]:
    return KIND_METRICS[TrialKind(kind)]
