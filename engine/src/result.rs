//! JSON result shapes printed on stdout (one object per run). The schema is
//! documented in README.md; bump SCHEMA_VERSION on any incompatible change.
//! Owns serialisation shapes only.

use crate::stats::{Latency, StreamReport};
use serde::Serialize;
use std::collections::BTreeMap;

pub const SCHEMA_VERSION: u32 = 1;
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Serialize)]
pub struct Clocks {
    /// Clock of the send timestamp in the test header.
    pub header_timestamp: &'static str,
    /// Clock used for pacing and elapsed times.
    pub pacing: &'static str,
}

pub const CLOCKS: Clocks = Clocks {
    header_timestamp: "CLOCK_REALTIME",
    pacing: "CLOCK_MONOTONIC",
};

#[derive(Debug, Serialize)]
pub struct ProfileReport {
    pub proto: &'static str,
    pub ipv6: bool,
    /// Ethernet frame size including FCS [bytes].
    pub frame_size: usize,
    /// Bytes handed to the kernel per packet: frame_size - 4 (packet backend) [bytes].
    pub wire_bytes: usize,
    /// UDP payload [bytes] (0 for tcp-syn).
    pub payload_bytes: usize,
    /// "full", "compact" or null (tcp-syn).
    pub header_layout: Option<&'static str>,
    pub src: Option<String>,
    pub dst: String,
    pub src_port: String,
    pub dst_port: String,
    pub flow_mode: &'static str,
    pub seed: u64,
    /// Stream id of thread 0; thread t uses stream_id + t.
    pub stream_id: u16,
}

#[derive(Debug, Serialize)]
pub struct ThreadReport {
    pub thread: usize,
    pub stream_id: u16,
    /// CPU requested with --cpu (null: not pinned).
    pub cpu: Option<usize>,
    /// sched_setaffinity succeeded.
    pub pinned: bool,
    /// CPU the thread ran on when it finished (sched_getcpu).
    pub cpu_observed: i32,
    pub intended_count: Option<u64>,
    pub sent: u64,
    /// Packets skipped because the thread was more than --max-lag-us behind its schedule.
    pub lag_skipped: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub achieved_pps: f64,
    pub backend_info: serde_json::Value,
}

#[derive(Debug, Serialize)]
pub struct SendResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub engine_version: &'static str,
    pub backend: &'static str,
    pub profile: ProfileReport,
    /// Intended rate [packets/s]; null for `max`.
    pub intended_pps: Option<f64>,
    pub rate_max: bool,
    /// Burst length [packets] (1: evenly paced).
    pub burst: u64,
    /// --max-lag [packets] (null: lag is always caught up).
    pub max_lag: Option<u64>,
    /// Longest busy-wait before a send time [us] (see --spin-us).
    pub spin_us: u64,
    /// Packets skipped rather than sent in a catch-up burst (see --max-lag).
    pub lag_skipped_count: u64,
    pub duration_s: Option<f64>,
    pub count: Option<u64>,
    /// rate*duration or --count; null for `max` with a duration.
    pub intended_count: Option<u64>,
    /// Packets the kernel accepted (actually sent).
    pub offered_count: u64,
    /// offered_count / elapsed_s [packets/s].
    pub achieved_pps: f64,
    /// From the common start to the last thread's end [s].
    pub elapsed_s: f64,
    /// achieved < 99 % of intended rate, or offered < intended count.
    pub generator_short: bool,
    pub errors: u64,
    /// errno name -> count.
    pub error_kinds: BTreeMap<String, u64>,
    pub first_error: Option<String>,
    pub interrupted: bool,
    pub threads: Vec<ThreadReport>,
    /// CPUs given with --cpu, in thread order (null: not pinned).
    pub cpu_pinning: Option<Vec<usize>>,
    pub started_unix_ns: u64,
    pub clocks: Clocks,
}

#[derive(Debug, Serialize)]
pub struct RecvTotals {
    pub streams: usize,
    pub received: u64,
    pub unique: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub late: u64,
    pub negative_latency: u64,
    pub latency_ns: Latency,
    /// The latency histogram of every stream merged (HdrHistogram V2
    /// compressed, base64; see `stats::hist_b64`); null when no sample.
    pub latency_hdr_b64: Option<String>,
    /// Unit of the histogram's values ("ns").
    pub latency_hdr_unit: &'static str,
    /// Mean of per-stream RFC 3550 jitter weighted by packets received [ns].
    pub jitter_ns: f64,
    /// unique / (last - first receive time) [packets/s].
    pub rx_pps: f64,
}

#[derive(Debug, Serialize)]
pub struct RecvResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub engine_version: &'static str,
    pub backend: &'static str,
    pub bind: Option<String>,
    pub port: Option<u16>,
    pub iface: Option<String>,
    pub threads: usize,
    pub cpu_pinning: Option<Vec<usize>>,
    /// "kernel" (SO_TIMESTAMPNS) or "user" (clock_gettime after recvmmsg).
    pub rx_timestamp: &'static str,
    pub clock: &'static str,
    /// From READY to stop [s].
    pub elapsed_s: f64,
    /// "duration", "idle", "signal" or "count".
    pub stop_reason: &'static str,
    pub total: RecvTotals,
    pub streams: Vec<StreamReport>,
    /// Datagrams/frames without a valid test header.
    pub foreign: u64,
    /// Drops on the receive socket(s) reported by SO_RXQ_OVFL (udp backend)
    /// or PACKET_STATISTICS (packet backend).
    pub socket_drops: u64,
    pub rcvbuf_bytes: i32,
    pub started_unix_ns: u64,
}

/// Print one JSON object on stdout.
pub fn print<T: Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("serialisable"));
}

/// errno as its symbolic name where known.
pub fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EAGAIN) => "EAGAIN".into(),
        Some(libc::ENOBUFS) => "ENOBUFS".into(),
        Some(libc::ECONNREFUSED) => "ECONNREFUSED".into(),
        Some(libc::ENETUNREACH) => "ENETUNREACH".into(),
        Some(libc::EHOSTUNREACH) => "EHOSTUNREACH".into(),
        Some(libc::EMSGSIZE) => "EMSGSIZE".into(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::EINTR) => "EINTR".into(),
        Some(libc::ENXIO) => "ENXIO".into(),
        Some(libc::ENETDOWN) => "ENETDOWN".into(),
        Some(libc::EMFILE) => "EMFILE".into(),
        Some(libc::ENFILE) => "ENFILE".into(),
        Some(n) => format!("errno{n}"),
        None => "other".into(),
    }
}
