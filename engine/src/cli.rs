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
    /// Print version, schema version, backends and header constants as JSON.
    Version,
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
    /// L4 protocol: udp | tcp-syn (tcp-syn needs the packet backend) [default: udp]
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
    /// Transmit backend: udp | packet
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
