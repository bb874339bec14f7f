//! Command line: parse flags, build configs, call the library, print JSON.
//! Thin on purpose; all logic lives in the modules it calls.

use crate::backend::{self, BackendOpts};
use crate::frame::{FrameSpec, Template};
use crate::pcap::PcapWriter;
use crate::profile::{FlowGen, ProfileSpec};
use crate::rate::{self, Rate};
use crate::recv::{self, RecvConfig, RxPath};
use crate::result;
use crate::send::{self, SendConfig};
use crate::sys;
use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Results are one JSON object on stdout (schema in engine/README.md). Errors are one
line on stderr and exit status 2.

Examples:
  fwlab-engine recv --bind 198.18.1.2 --port 5555 --duration-s 10 --idle-timeout-s 1
  fwlab-engine send --dst 198.18.1.2 --rate-pps 100k --duration-s 3 --cpu 0
  fwlab-engine send --backend packet --iface veth-c --dst-mac 02:00:00:00:00:02 \\
      --src 198.19.0.1-198.19.255.255 --dst 198.18.1.2 --src-port rfc4814-src \\
      --flow-mode random --rate-pps max --duration-s 3 --cpu 0
  fwlab-engine dry-run --count 10 --pcap out.pcap --dst 198.18.1.2 --frame-size 128";

#[derive(Parser, Debug)]
#[command(
    name = "fwlab-engine",
    version,
    about = "fwlab traffic engine: RFC 2544-style packet generator and measuring receiver",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Send a profile at a given rate for a duration or a count; prints the send result.
    Send(SendArgs),
    /// Receive and measure test packets (loss, reordering, duplicates, latency, jitter).
    Recv(RecvArgs),
    /// Write a profile's first N frames to a pcap file (no root, no network).
    DryRun(DryRunArgs),
    /// TCP echo server for the connection tests (epoll; `!` ends a transaction).
    ConnServer(ConnServerArgs),
    /// Open N TCP connections, hold them, probe them with an echoed byte, close them.
    ConnHold(ConnHoldArgs),
    /// One short transaction per TCP connection at a target rate (connect, send, echo, FIN).
    ConnRate(ConnRateArgs),
    /// Relay frames between two interfaces after a fixed one-way delay, both directions (a wire
    /// with latency, for kernels without sch_netem); prints its counters as JSON at exit.
    Delayline(DelaylineArgs),
    /// Print version, schema version, backends and header constants as JSON.
    Version,
}

#[derive(Args, Debug)]
pub struct DelaylineArgs {
    /// One side of the line (an interface in this namespace)
    #[arg(long)]
    pub a: String,
    /// The other side
    #[arg(long)]
    pub b: String,
    /// One-way delay [us] added to every frame, both directions
    #[arg(long, value_name = "US")]
    pub delay_us: f64,
    /// Stop after this long [s] (else SIGINT/SIGTERM)
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// Most frames held per direction; more are tail-dropped (and counted)
    #[arg(long, default_value_t = 65536)]
    pub queue_frames: usize,
    /// Most frame bytes held per direction; more are tail-dropped (and counted)
    #[arg(long, default_value_t = 64 << 20)]
    pub queue_bytes: usize,
    /// Frames read / sent per system call
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Write the counters (JSON) to this file every --stats-interval-s and on SIGUSR1
    #[arg(long, value_name = "FILE")]
    pub stats_file: Option<String>,
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    pub stats_interval_s: f64,
    /// Stop when the process that started this one exits
    #[arg(long)]
    pub exit_with_parent: bool,
    /// CPU to pin to
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Busy-wait this long before a due time instead of sleeping [us] (0: always sleep)
    #[arg(long, default_value_t = 0.0, value_name = "US")]
    pub spin_us: f64,
    /// Receive buffer of each side's socket [bytes]
    #[arg(long, default_value_t = 16 << 20)]
    pub rcvbuf: i32,
}

#[derive(Args, Debug)]
pub struct ConnServerArgs {
    /// Local address to listen on (:: for IPv6 any)
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: String,
    /// Port(s): 5601, 5601-5604 or 5601,5603
    #[arg(long, default_value = "5601")]
    pub port: String,
    /// Stop after this long [s] (else SIGINT/SIGTERM)
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// listen(2) backlog (the kernel caps it at net.core.somaxconn)
    #[arg(long, default_value_t = 65535)]
    pub backlog: i32,
    /// CPU to pin to
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Raise RLIMIT_NOFILE to this many descriptors (root may raise the hard limit)
    #[arg(long, default_value_t = 1_048_576)]
    pub max_fds: u64,
    /// Write READY to this file once listening
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<String>,
    /// Worker processes (each its own descriptor limit); worker i listens on every port
    /// whose position in --port is i modulo N
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Lean echo: read a new connection's request right after accept (it rides on the
    /// handshake's last ACK with `conn-rate --lean`), no per-connection setsockopt (TCP_NODELAY
    /// only for a request that did not come whole with the handshake), and the
    /// echo of a request's last byte leaves in one segment with the server's FIN
    #[arg(long)]
    pub lean: bool,
}

/// Where client connections go.
#[derive(Args, Debug)]
pub struct ConnTargetArgs {
    /// Server address
    #[arg(long)]
    pub dst: String,
    /// Server port(s): 5601, 5601-5604 or 5601,5603 (round-robin)
    #[arg(long, default_value = "5601")]
    pub port: String,
    /// Local source addresses, round-robin: A, A-B, A/len, comma-separated [default: kernel's choice]
    #[arg(long)]
    pub src: Option<String>,
    /// CPU to pin to
    #[arg(long)]
    pub cpu: Option<usize>,
}

impl ConnTargetArgs {
    fn endpoints(&self) -> Result<crate::conn::client::Endpoints, String> {
        let dst: std::net::IpAddr = self
            .dst
            .parse()
            .map_err(|_| format!("bad --dst address '{}'", self.dst))?;
        let srcs = match &self.src {
            Some(s) => crate::conn::parse_addrs(s)?,
            None => vec![],
        };
        if srcs.first().is_some_and(|a| a.is_ipv6() != dst.is_ipv6()) {
            return Err("--src and --dst are of different IP versions".into());
        }
        Ok(crate::conn::client::Endpoints {
            dst,
            ports: crate::conn::parse_ports(&self.port)?,
            srcs,
        })
    }
}

#[derive(Args, Debug)]
pub struct ConnHoldArgs {
    #[command(flatten)]
    pub target: ConnTargetArgs,
    /// Connections to open
    #[arg(long)]
    pub count: u64,
    /// Opening rate [connections/s] (1000, 20k); default: as fast as --max-pending allows
    #[arg(long, value_name = "CPS")]
    pub open_rate_cps: Option<String>,
    /// Connects in progress at most
    #[arg(long, default_value_t = 2000)]
    pub max_pending: usize,
    /// A connect not done after this long fails [s]
    #[arg(long, default_value_t = 3.0)]
    pub connect_timeout_s: f64,
    /// Hold every connection this long before probing [s]
    #[arg(long, default_value_t = 1.0)]
    pub hold_s: f64,
    /// Probe every k-th held connection with one echoed byte (1: all; 0: none)
    #[arg(long, default_value_t = 1)]
    pub probe_every: u64,
    /// A probe not echoed after this long fails [s]
    #[arg(long, default_value_t = 5.0)]
    pub probe_timeout_s: f64,
    /// How to close at the end: rst (SO_LINGER 0: no TIME_WAIT) | fin
    #[arg(long, default_value = "rst")]
    pub close: String,
    /// Stop opening at the first failure (a ramp to the first failure)
    #[arg(long)]
    pub stop_on_failure: bool,
    /// Write a JSON line to this file when the opening phase ends (before the hold)
    #[arg(long, value_name = "FILE")]
    pub held_file: Option<String>,
    /// Worker processes (0: as many as RLIMIT_NOFILE needs); worker i uses the i-th port of
    /// --port (there must be at least as many ports) and a share of --count
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
}

#[derive(Args, Debug)]
pub struct ConnRateArgs {
    #[command(flatten)]
    pub target: ConnTargetArgs,
    /// Intended rate [connections/s] (1000, 20k) or max (closed loop at --max-inflight)
    #[arg(long, value_name = "CPS|max")]
    pub rate_cps: String,
    /// Launch transactions for this long [s]; then wait for the last ones
    #[arg(long)]
    pub duration_s: f64,
    /// Request size [bytes], echoed back by the server
    #[arg(long, default_value_t = 16)]
    pub req_bytes: usize,
    /// A transaction not done this long after its connect started fails [s]
    #[arg(long, default_value_t = 3.0)]
    pub timeout_s: f64,
    /// Transactions in flight at most (open loop: a launch beyond waits and is counted deferred)
    #[arg(long, default_value_t = 20000)]
    pub max_inflight: usize,
    /// How the client closes after the echo and the server's FIN: fin | rst (SO_LINGER 0: one
    /// packet fewer, and the DUT's connection-table entry ends at once instead of in TIME_WAIT)
    #[arg(long, default_value = "fin")]
    pub close: String,
    /// Worker processes, each with its own epoll loop, rate / N, max_inflight / N and (with at
    /// least N source addresses) its own share of --src; results are merged. With N > 1 the
    /// workers are not pinned (--cpu ignored): the scheduler spreads them
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Lean transaction, same protocol: the handshake's last ACK rides on the request
    /// (TCP_QUICKACK off), one edge-triggered epoll registration per connection, SO_ERROR only
    /// on error events. With `conn-server --lean`: 7 TCP segments per transaction (FIN) instead
    /// of 10, 6 instead of 9 with RST (both ends' OutSegs, the server's ACK of the request included)
    #[arg(long)]
    pub lean: bool,
}

/// What to send (a JSON --profile file may set the same fields; flags win).
#[derive(Args, Debug, Clone, Default)]
pub struct ProfileArgs {
    /// JSON profile file; keys as the long flags with '_' (dst, dst_port, src, src_port,
    /// frame_size, proto, flow_mode, seed, stream_id, dst_mac, src_mac)
    #[arg(long, value_name = "FILE")]
    pub profile: Option<String>,
    /// Destination address, range A-B or prefix A/len (IPv6 is inferred from the address)
    #[arg(long, value_name = "ADDR")]
    pub dst: Option<String>,
    /// Destination port or range LO-HI [default: 5555]; rfc4814-dst = 1-49151
    #[arg(long, value_name = "P")]
    pub dst_port: Option<String>,
    /// Source address, range A-B or prefix A/len (packet backend spoofs any; udp: one local address)
    #[arg(long, value_name = "ADDR")]
    pub src: Option<String>,
    /// Source port or range LO-HI [default: 10000]; rfc4814-src = 1024-65535
    #[arg(long, value_name = "P")]
    pub src_port: Option<String>,
    /// Ethernet frame size including the 4-byte FCS [default: 64 IPv4, 78 IPv6; max 9018]
    #[arg(long, value_name = "BYTES")]
    pub frame_size: Option<usize>,
    /// L4 protocol: udp | tcp-syn | tcp-synack:SEQ:ACK | tcp-ack:SEQ:ACK | icmp-echo (all but udp need the packet backend) [default: udp]
    #[arg(long)]
    pub proto: Option<String>,
    /// How ranges are walked: increment | random (seeded, RFC 4814) [default: increment]
    #[arg(long)]
    pub flow_mode: Option<String>,
    /// Seed for --flow-mode random [default: 1]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stream id of the first sender thread (thread t uses id + t) [default: 1]
    #[arg(long)]
    pub stream_id: Option<u16>,
    /// Destination MAC (next hop), packet backend and dry-run
    #[arg(long, value_name = "MAC")]
    pub dst_mac: Option<String>,
    /// Source MAC [default: the interface's]
    #[arg(long, value_name = "MAC")]
    pub src_mac: Option<String>,
}

impl ProfileArgs {
    fn spec(&self) -> Result<ProfileSpec, String> {
        let file = match &self.profile {
            Some(p) => ProfileSpec::load(p)?,
            None => ProfileSpec::default(),
        };
        let cli = ProfileSpec {
            dst: self.dst.clone(),
            dst_port: self.dst_port.clone(),
            src: self.src.clone(),
            src_port: self.src_port.clone(),
            frame_size: self.frame_size,
            proto: self.proto.clone(),
            flow_mode: self.flow_mode.clone(),
            seed: self.seed,
            stream_id: self.stream_id,
            dst_mac: self.dst_mac.clone(),
            src_mac: self.src_mac.clone(),
        };
        Ok(cli.over(file))
    }
}

#[derive(Args, Debug)]
pub struct SendArgs {
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Transmit backend: udp | packet | packet-mmsg
    #[arg(long, default_value = "udp")]
    pub backend: String,
    /// Rate in packets/s (1000, 100k, 1.5M) or max; split evenly over threads
    #[arg(long, value_name = "PPS|max")]
    pub rate_pps: String,
    /// Send for this long [s]
    #[arg(
        long,
        value_name = "S",
        conflicts_with = "count",
        required_unless_present = "count"
    )]
    pub duration_s: Option<f64>,
    /// Send exactly this many packets
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Release packets in bursts of N back-to-back frames (average rate unchanged)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub burst: u64,
    /// Never fall more than N packets behind the schedule: packets due earlier are skipped
    /// (not sent, reported as lag_skipped_count; the run is then generator_short), so a
    /// descheduled sender cannot release a catch-up burst of more than N + batch packets
    #[arg(long, value_name = "N")]
    pub max_lag: Option<u64>,
    /// Busy-wait at most this long before a send time, sleep the rest [us]. Lower it (with
    /// --burst) under SCHED_FIFO: a real-time sender busy over 95 % of each second is throttled
    /// by the kernel (sched_rt_runtime_us) and skips or delays packets
    #[arg(long, value_name = "US", default_value_t = 60)]
    pub spin_us: u64,
    /// Sender threads (each its own stream id and sockets/ring)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// CPU(s) to pin sender threads to: N, or a list 0,1 / 0-1 (one per thread)
    #[arg(long, value_name = "LIST")]
    pub cpu: Option<String>,
    /// Interface to send on (packet backend)
    #[arg(long)]
    pub iface: Option<String>,
    /// Packets per send call
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Packet backend: go through the qdisc layer instead of bypassing it
    #[arg(long)]
    pub qdisc: bool,
    /// Socket send buffer [bytes] (udp backend; forced past wmem_max when root)
    #[arg(long, default_value_t = 4 << 20)]
    pub sndbuf: i32,
}

#[derive(Args, Debug)]
pub struct RecvArgs {
    /// Receive path: udp (socket on --bind/--port) | packet (AF_PACKET on --iface, any port)
    #[arg(long, default_value = "udp")]
    pub backend: String,
    /// Local address to bind (udp); :: for IPv6 any
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: String,
    /// UDP port (udp: bound; packet: optional filter)
    #[arg(long)]
    pub port: Option<u16>,
    /// Interface (packet receive path)
    #[arg(long)]
    pub iface: Option<String>,
    /// Stop after this long from READY [s]
    #[arg(long, value_name = "S")]
    pub duration_s: Option<f64>,
    /// Stop when no packet arrived for this long after the last one [s]
    #[arg(long, value_name = "S")]
    pub idle_timeout_s: Option<f64>,
    /// Receiver threads (udp: SO_REUSEPORT sockets; packet: PACKET_FANOUT hash)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// CPU(s) to pin receiver threads to
    #[arg(long, value_name = "LIST")]
    pub cpu: Option<String>,
    /// Messages per recvmmsg call
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Socket receive buffer [bytes] (forced past rmem_max when root)
    #[arg(long, default_value_t = 32 << 20)]
    pub rcvbuf: i32,
    /// Receive timestamp: kernel (SO_TIMESTAMPNS) | user (clock after recvmmsg)
    #[arg(long, default_value = "kernel")]
    pub rx_timestamp: String,
    /// Also write READY to this file once bound
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<String>,
}

#[derive(Args, Debug)]
pub struct DryRunArgs {
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Frames to write
    #[arg(long, value_name = "N")]
    pub count: u64,
    /// Output pcap file
    #[arg(long, value_name = "FILE")]
    pub pcap: String,
    /// Rate used for the pcap timestamps (and header send times) [default: 1M]
    #[arg(long, value_name = "PPS")]
    pub rate_pps: Option<String>,
}

pub fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Send(a) => cmd_send(a),
        Cmd::Recv(a) => cmd_recv(a),
        Cmd::DryRun(a) => cmd_dry_run(a),
        Cmd::ConnServer(a) => cmd_conn_server(a),
        Cmd::ConnHold(a) => cmd_conn_hold(a),
        Cmd::ConnRate(a) => cmd_conn_rate(a),
        Cmd::Delayline(a) => cmd_delayline(a),
        Cmd::Version => {
            result::print(&version_json());
            Ok(())
        }
    }
}

pub fn version_json() -> serde_json::Value {
    serde_json::json!({
        "name": "fwlab-engine",
        "version": result::ENGINE_VERSION,
        "schema_version": result::SCHEMA_VERSION,
        "backends": backend::REGISTRY.iter().map(|b| serde_json::json!({"name": b.name, "about": b.about})).collect::<Vec<_>>(),
        "header": {
            "magic_full": format!("{:#010x}", crate::header::MAGIC_FULL),
            "magic_compact": format!("{:#06x}", crate::header::MAGIC_COMPACT),
            "version": crate::header::VERSION,
            "full_bytes": crate::header::FULL_LEN,
            "compact_bytes": crate::header::COMPACT_LEN,
            "timestamp_clock": "CLOCK_REALTIME",
        },
    })
}

fn cmd_send(a: SendArgs) -> Result<(), String> {
    let profile = a.profile.spec()?.resolve()?;
    let backend = backend::lookup(&a.backend)?;
    let rate = Rate::parse(&a.rate_pps)?;
    if let Some(d) = a.duration_s
        && !(d > 0.0 && d.is_finite())
    {
        return Err("--duration-s must be > 0".into());
    }
    if a.count == Some(0) {
        return Err("--count must be > 0".into());
    }
    if a.burst == 0 {
        return Err("--burst must be >= 1".into());
    }
    if a.max_lag == Some(0) {
        return Err("--max-lag must be >= 1".into());
    }
    if a.threads == 0 || a.threads > 64 {
        return Err("--threads must be 1..=64".into());
    }
    let cpus = a.cpu.as_deref().map(sys::parse_cpus).transpose()?;
    sys::install_stop_handler();
    let cfg = SendConfig {
        profile,
        backend,
        opts: BackendOpts {
            batch: a.batch,
            iface: a.iface,
            qdisc_bypass: !a.qdisc,
            sndbuf: a.sndbuf,
        },
        rate,
        duration_s: a.duration_s,
        count: a.count,
        burst: a.burst,
        max_lag: a.max_lag,
        threads: a.threads,
        cpus,
        spin_ns: a.spin_us * 1000,
    };
    let r = send::run(cfg)?;
    result::print(&r);
    Ok(())
}

fn cmd_recv(a: RecvArgs) -> Result<(), String> {
    let path = match a.backend.as_str() {
        "udp" => RxPath::Udp {
            bind: a
                .bind
                .parse()
                .map_err(|_| format!("bad --bind address '{}'", a.bind))?,
            port: a.port.unwrap_or(5555),
        },
        "packet" => RxPath::Packet {
            iface: a
                .iface
                .clone()
                .ok_or("recv --backend packet needs --iface")?,
            port: a.port,
        },
        other => {
            return Err(format!(
                "unknown receive backend '{other}' (available: udp, packet)"
            ));
        }
    };
    if a.duration_s.is_none() && a.idle_timeout_s.is_none() {
        eprintln!(
            "fwlab-engine: note: no --duration-s or --idle-timeout-s; stop with SIGINT/SIGTERM"
        );
    }
    let kernel_ts = match a.rx_timestamp.as_str() {
        "kernel" => true,
        "user" => false,
        o => return Err(format!("bad --rx-timestamp '{o}' (kernel or user)")),
    };
    if a.threads == 0 || a.threads > 64 {
        return Err("--threads must be 1..=64".into());
    }
    let cfg = RecvConfig {
        path,
        duration_s: a.duration_s,
        idle_timeout_s: a.idle_timeout_s,
        threads: a.threads,
        cpus: a.cpu.as_deref().map(sys::parse_cpus).transpose()?,
        batch: a.batch,
        rcvbuf: a.rcvbuf,
        kernel_ts,
        ready_file: a.ready_file,
    };
    let r = recv::run(cfg)?;
    result::print(&r);
    Ok(())
}

fn positive(name: &str, v: f64) -> Result<(), String> {
    if v > 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(format!("{name} must be > 0"))
    }
}

fn cmd_conn_server(a: ConnServerArgs) -> Result<(), String> {
    let bind = a
        .bind
        .parse()
        .map_err(|_| format!("bad --bind address '{}'", a.bind))?;
    if let Some(d) = a.duration_s {
        positive("--duration-s", d)?;
    }
    let ports = crate::conn::parse_ports(&a.port)?;
    if a.workers == 0 || a.workers > ports.len() {
        return Err(format!(
            "--workers must be 1..={} (one port per worker at least)",
            ports.len()
        ));
    }
    let cfg = |ports: Vec<u16>, ready_file: Option<String>| crate::conn::server::ServerConfig {
        bind,
        ports,
        duration_s: a.duration_s,
        backlog: a.backlog,
        cpu: a.cpu,
        max_fds: a.max_fds,
        ready_file,
        lean: a.lean,
    };
    if a.workers == 1 {
        let r = crate::conn::server::run(cfg(ports, a.ready_file.clone()))?;
        result::print(&r);
        return Ok(());
    }
    sys::install_stop_handler();
    let n = a.workers;
    let tag = std::process::id();
    let ready_of = |i: usize| format!("/tmp/fwlab-conn-server-{tag}-{i}.ready");
    let ws = crate::conn::workers::spawn(n, |i, _| {
        let mine: Vec<u16> = ports.iter().skip(i).step_by(n).copied().collect();
        crate::conn::server::run(cfg(mine, Some(ready_of(i))))
            .map(|r| serde_json::to_value(r).expect("json"))
    })?;
    loop {
        if (0..n).all(|i| std::path::Path::new(&ready_of(i)).exists()) {
            break;
        }
        if sys::stopped() || ws.iter().any(|w| !crate::conn::workers::alive(w)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for i in 0..n {
        let _ = std::fs::remove_file(ready_of(i));
    }
    if let Some(p) = &a.ready_file {
        crate::conn::write_marker(p, "READY\n")?;
    }
    let docs = crate::conn::workers::collect(ws);
    let mut m = crate::conn::merge_docs(
        docs,
        &[
            "accepted",
            "closed_after_end",
            "closed_by_peer",
            "closed_on_error",
            "open_at_stop",
            "peak_open",
            "bytes_echoed",
            "served_at_accept",
            "cpu_user_s",
            "cpu_sys_s",
        ],
        &["accept_errors"],
        &[],
    )?;
    m["ports"] = serde_json::to_value(&ports).expect("json");
    m.as_object_mut().expect("object").remove("series");
    result::print(&m);
    Ok(())
}

fn cmd_conn_hold(a: ConnHoldArgs) -> Result<(), String> {
    if a.count == 0 || a.count > 16_000_000 {
        return Err("--count must be 1..=16000000".into());
    }
    positive("--connect-timeout-s", a.connect_timeout_s)?;
    positive("--probe-timeout-s", a.probe_timeout_s)?;
    if !(a.hold_s >= 0.0 && a.hold_s.is_finite()) {
        return Err("--hold-s must be >= 0".into());
    }
    if a.max_pending == 0 {
        return Err("--max-pending must be >= 1".into());
    }
    let close_rst = match a.close.as_str() {
        "rst" => true,
        "fin" => false,
        o => return Err(format!("bad --close '{o}' (rst or fin)")),
    };
    let open_rate_cps = a
        .open_rate_cps
        .as_deref()
        .map(Rate::parse)
        .transpose()?
        .and_then(|r| r.pps());
    let ep = a.target.endpoints()?;
    let limit = crate::conn::raise_nofile_to(a.count + 1024);
    let n = if a.workers == 0 {
        crate::conn::workers::needed(a.count, limit)
    } else {
        a.workers
    };
    if n as u64 > a.count {
        return Err("--workers must not exceed --count".into());
    }
    let cfg = |ep, count, held_file, release_fd, rate: Option<f64>, pending| {
        crate::conn::client::HoldConfig {
            ep,
            count,
            open_rate_cps: rate,
            max_pending: pending,
            connect_timeout_s: a.connect_timeout_s,
            hold_s: a.hold_s,
            probe_every: a.probe_every,
            probe_timeout_s: a.probe_timeout_s,
            close_rst,
            stop_on_failure: a.stop_on_failure,
            cpu: a.target.cpu,
            held_file,
            release_fd,
        }
    };
    if n == 1 {
        let r = crate::conn::client::hold(cfg(
            ep,
            a.count,
            a.held_file.clone(),
            None,
            open_rate_cps,
            a.max_pending,
        ))?;
        result::print(&r);
        return Ok(());
    }
    if ep.ports.len() < n {
        return Err(format!(
            "{n} worker processes (RLIMIT_NOFILE {limit} per process) need at least {n} server \
             ports, got {}: pass --port P-(P+{})",
            ep.ports.len(),
            n - 1
        ));
    }
    sys::install_stop_handler();
    let tag = std::process::id();
    let held_of = |i: usize| format!("/tmp/fwlab-conn-hold-{tag}-{i}.held");
    let share = |i: usize| a.count / n as u64 + u64::from((i as u64) < a.count % n as u64);
    let pending = (a.max_pending / n).max(1);
    let ws = crate::conn::workers::spawn(n, |i, rel| {
        let mine = crate::conn::client::Endpoints {
            ports: vec![ep.ports[i]],
            ..ep.clone()
        };
        crate::conn::client::hold(cfg(
            mine,
            share(i),
            Some(held_of(i)),
            Some(rel),
            open_rate_cps.map(|r| r / n as f64),
            pending,
        ))
        .map(|r| serde_json::to_value(r).expect("json"))
    })?;
    // Barrier: every worker has finished opening; then hold them all together.
    loop {
        if (0..n).all(|i| std::path::Path::new(&held_of(i)).exists()) {
            break;
        }
        if sys::stopped() || ws.iter().any(|w| !crate::conn::workers::alive(w)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut est = 0u64;
    let mut fail = 0u64;
    let mut local = 0u64;
    for i in 0..n {
        if let Ok(t) = std::fs::read_to_string(held_of(i))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&t)
        {
            est += v["established"].as_u64().unwrap_or(0);
            fail += v["failed"].as_u64().unwrap_or(0);
            local += v["local_errors"].as_u64().unwrap_or(0);
        }
        let _ = std::fs::remove_file(held_of(i));
    }
    if let Some(p) = &a.held_file {
        let text = serde_json::json!({"established": est, "failed": fail, "local_errors": local,
                                      "workers": n});
        crate::conn::write_marker(p, &text.to_string())?;
    }
    let hold_end = crate::rate::mono_ns() + (a.hold_s * 1e9) as u64;
    while !sys::stopped() && crate::rate::mono_ns() < hold_end {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    crate::conn::workers::release(&ws);
    let docs = crate::conn::workers::collect(ws);
    let mut m = crate::conn::merge_docs(
        docs,
        &[
            "requested",
            "started",
            "established",
            "dropped_during_hold",
            "held",
            "probed",
            "probe_ok",
            "sources_unused_0",
        ],
        &["failed", "local_errors", "probe_failed"],
        &["connect_us", "probe_us"],
    )?;
    let per: Vec<serde_json::Value> = m["per_worker"].as_array().cloned().unwrap_or_default();
    let fmax = |k: &str| per.iter().filter_map(|w| w[k].as_f64()).fold(0.0, f64::max);
    let any_fail = per.iter().any(|w| !w["first_failure_at"].is_null());
    m["first_failure_at"] = if any_fail {
        let s: u64 = per
            .iter()
            .map(|w| {
                w["first_failure_at"]
                    .as_u64()
                    .or(w["established"].as_u64())
                    .unwrap_or(0)
            })
            .sum();
        s.into()
    } else {
        serde_json::Value::Null
    };
    for k in [
        "open_elapsed_s",
        "hold_s",
        "probe_elapsed_s",
        "close_elapsed_s",
    ] {
        m[k] = fmax(k).into();
    }
    let est = m["established"].as_f64().unwrap_or(0.0);
    let open_s = m["open_elapsed_s"].as_f64().unwrap_or(0.0);
    m["open_rate_cps"] = (if open_s > 0.0 { est / open_s } else { 0.0 }).into();
    m["ports"] = serde_json::to_value(&ep.ports[..n]).expect("json");
    m["interrupted"] = per
        .iter()
        .any(|w| w["interrupted"].as_bool() == Some(true))
        .into();
    m.as_object_mut()
        .expect("object")
        .remove("sources_unused_0");
    result::print(&m);
    Ok(())
}

fn cmd_delayline(a: DelaylineArgs) -> Result<(), String> {
    if !(a.delay_us.is_finite() && (0.0..=10_000_000.0).contains(&a.delay_us)) {
        return Err(format!(
            "--delay-us {} is outside 0..10000000 (10 s)",
            a.delay_us
        ));
    }
    if let Some(d) = a.duration_s {
        if !(d.is_finite() && d > 0.0) {
            return Err(format!("--duration-s {d} must be > 0"));
        }
    }
    if !(a.stats_interval_s.is_finite() && a.stats_interval_s > 0.0) {
        return Err("--stats-interval-s must be > 0".into());
    }
    if !(a.spin_us.is_finite() && a.spin_us >= 0.0) {
        return Err("--spin-us must be >= 0".into());
    }
    let cfg = crate::delay_line::DelayLineConfig {
        a: a.a,
        b: a.b,
        delay_ns: (a.delay_us * 1000.0).round() as u64,
        duration_ns: a.duration_s.map(|d| (d * 1e9) as u64),
        limit_frames: a.queue_frames,
        limit_bytes: a.queue_bytes,
        batch: a.batch,
        stats_file: a.stats_file,
        stats_interval_ns: (a.stats_interval_s * 1e9) as u64,
        exit_with_parent: a.exit_with_parent,
        cpu: a.cpu,
        spin_ns: (a.spin_us * 1000.0) as u64,
        rcvbuf_bytes: a.rcvbuf,
    };
    let out = crate::delay_line::run(cfg)?;
    result::print(&out);
    Ok(())
}

fn cmd_conn_rate(a: ConnRateArgs) -> Result<(), String> {
    positive("--duration-s", a.duration_s)?;
    positive("--timeout-s", a.timeout_s)?;
    if a.max_inflight == 0 {
        return Err("--max-inflight must be >= 1".into());
    }
    let close_rst = match a.close.as_str() {
        "rst" => true,
        "fin" => false,
        o => return Err(format!("bad --close '{o}' (rst or fin)")),
    };
    let n = a.workers;
    if n == 0 || n > 64 || n > a.max_inflight {
        return Err("--workers must be 1..=64 and at most --max-inflight".into());
    }
    let ep = a.target.endpoints()?;
    let rate_cps = Rate::parse(&a.rate_cps)?.pps();
    let cfg = |ep, rate_cps: Option<f64>, max_inflight, cpu| crate::conn::client::RateConfig {
        ep,
        rate_cps,
        duration_s: a.duration_s,
        req_bytes: a.req_bytes,
        timeout_s: a.timeout_s,
        max_inflight,
        cpu,
        close_rst,
        lean: a.lean,
    };
    if n == 1 {
        let r = crate::conn::client::rate(cfg(ep, rate_cps, a.max_inflight, a.target.cpu))?;
        result::print(&r);
        return Ok(());
    }
    sys::install_stop_handler();
    let ws = crate::conn::workers::spawn(n, |i, _| {
        let mine = crate::conn::client::split_sources(&ep, i, n);
        crate::conn::client::rate(cfg(
            mine,
            rate_cps.map(|r| r / n as f64),
            (a.max_inflight / n).max(1),
            None,
        ))
        .map(|r| serde_json::to_value(r).expect("json"))
    })?;
    let docs = crate::conn::workers::collect(ws);
    let mut m = crate::conn::merge_docs(
        docs,
        &[
            "intended",
            "started",
            "succeeded",
            "deferred",
            "late",
            "peak_inflight",
            "achieved_cps",
            "succeeded_cps",
            "cpu_user_s",
            "cpu_sys_s",
        ],
        &["failed", "local_errors"],
        &["connect_us", "transaction_us"],
    )?;
    let per: Vec<serde_json::Value> = m["per_worker"].as_array().cloned().unwrap_or_default();
    let fmax = |k: &str| per.iter().filter_map(|w| w[k].as_f64()).fold(0.0, f64::max);
    if rate_cps.is_none() {
        m["intended"] = serde_json::Value::Null;
    }
    m["max_lag_ms"] = fmax("max_lag_ms").into();
    m["drain_s"] = fmax("drain_s").into();
    m["intended_cps"] = rate_cps.into();
    m["sources"] = ep.srcs.len().into();
    m["cpu"] = serde_json::Value::Null;
    m["pinned"] = false.into();
    m["generator_short"] = per
        .iter()
        .any(|w| w["generator_short"].as_bool() == Some(true))
        .into();
    m["interrupted"] = per
        .iter()
        .any(|w| w["interrupted"].as_bool() == Some(true))
        .into();
    result::print(&m);
    Ok(())
}

/// Placeholder addresses for dry runs without --src/--*-mac.
const DRY_SRC_V4: &str = "198.18.0.1";
const DRY_SRC_V6: &str = "2001:2::1";
const DRY_SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const DRY_DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn cmd_dry_run(a: DryRunArgs) -> Result<(), String> {
    let mut spec = a.profile.spec()?;
    if spec.src.is_none() {
        let v6 = spec.dst.as_deref().is_some_and(|d| d.contains(':'));
        spec.src = Some(if v6 { DRY_SRC_V6 } else { DRY_SRC_V4 }.into());
    }
    let p = spec.resolve()?;
    let rate = match a.rate_pps.as_deref().map(Rate::parse).transpose()? {
        Some(Rate::Pps(r)) => r,
        _ => 1e6,
    };
    let fs = FrameSpec::new(p.ipv6, p.proto, p.frame_size)?;
    let tmpl = Template::new(
        fs,
        p.src_mac.unwrap_or(DRY_SRC_MAC),
        p.dst_mac.unwrap_or(DRY_DST_MAC),
        p.stream_id,
    );
    let flows = FlowGen::new(&p);
    let file =
        std::fs::File::create(&a.pcap).map_err(|e| format!("cannot create {}: {e}", a.pcap))?;
    let mut w = PcapWriter::new(std::io::BufWriter::new(file))
        .map_err(|e| format!("write {}: {e}", a.pcap))?;
    let t0 = rate::real_ns();
    let mut buf = tmpl.bytes.clone();
    for seq in 0..a.count {
        let ts = t0 + (seq as f64 * 1e9 / rate) as u64;
        tmpl.write(&mut buf, &flows.flow(seq), seq, ts);
        w.write(ts, &buf)
            .map_err(|e| format!("write {}: {e}", a.pcap))?;
    }
    w.finish().map_err(|e| format!("write {}: {e}", a.pcap))?;
    result::print(&serde_json::json!({
        "schema_version": result::SCHEMA_VERSION,
        "kind": "dry-run",
        "engine_version": result::ENGINE_VERSION,
        "pcap": a.pcap,
        "count": a.count,
        "profile": send::profile_report(&p, &fs),
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn send_needs_duration_or_count_not_both() {
        let ok = Cli::try_parse_from([
            "fwlab-engine",
            "send",
            "--dst",
            "198.18.1.2",
            "--rate-pps",
            "1k",
            "--count",
            "5",
        ]);
        assert!(ok.is_ok());
        let none = Cli::try_parse_from([
            "fwlab-engine",
            "send",
            "--dst",
            "198.18.1.2",
            "--rate-pps",
            "1k",
        ]);
        assert!(none.is_err());
        let both = Cli::try_parse_from([
            "fwlab-engine",
            "send",
            "--dst",
            "198.18.1.2",
            "--rate-pps",
            "1k",
            "--count",
            "5",
            "--duration-s",
            "1",
        ]);
        assert!(both.is_err());
    }

    #[test]
    fn dry_run_writes_readable_pcap() {
        let path =
            std::env::temp_dir().join(format!("fwlab-engine-test-{}.pcap", std::process::id()));
        let cli = Cli::try_parse_from([
            "fwlab-engine",
            "dry-run",
            "--count",
            "5",
            "--pcap",
            path.to_str().unwrap(),
            "--dst",
            "198.18.1.2",
            "--frame-size",
            "128",
            "--stream-id",
            "3",
        ])
        .unwrap();
        run(cli).unwrap();
        let (_, recs) = crate::pcap::read_all(std::fs::File::open(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(recs.len(), 5);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.data.len(), 124);
            let p = crate::frame::parse_eth(&r.data).unwrap();
            let h = crate::header::decode(p.payload).unwrap();
            assert_eq!((h.stream, h.seq), (3, i as u64));
        }
    }
}
