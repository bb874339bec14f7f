//! Receiver: binds, prints READY, reads test packets in recvmmsg batches and
//! feeds `stats.rs` until the duration elapses, the idle timeout fires after
//! the last packet, or SIGINT/SIGTERM arrives. Two receive paths:
//! * `udp`: UDP socket(s) on one port (several threads share it with SO_REUSEPORT);
//! * `packet`: AF_PACKET on an interface, any UDP port (for profiles whose
//!   destination port varies), several threads via PACKET_FANOUT (hash).
//!
//! Receive timestamps are the kernel's (SO_TIMESTAMPNS, CLOCK_REALTIME) unless
//! `--rx-timestamp user`.

use crate::frame;
use crate::header;
use crate::rate;
use crate::result::{self, RecvResult, RecvTotals};
use crate::stats::{Latency, RecvStats};
use crate::sys::{self, Fd};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

const PACKET_FANOUT: i32 = 18;
const PACKET_FANOUT_HASH: i32 = 0;
const PACKET_STATISTICS: i32 = 6;
const PACKET_OUTGOING: u8 = 4;
const BUF_BYTES: usize = 9216 + 64;
const CMSG_BYTES: usize = 128;

#[derive(Debug, Clone)]
pub enum RxPath {
    Udp { bind: IpAddr, port: u16 },
    Packet { iface: String, port: Option<u16> },
}

#[derive(Debug, Clone)]
pub struct RecvConfig {
    pub path: RxPath,
    pub duration_s: Option<f64>,
    pub idle_timeout_s: Option<f64>,
    pub threads: usize,
    pub cpus: Option<Vec<usize>>,
    pub batch: usize,
    pub rcvbuf: i32,
    pub kernel_ts: bool,
    pub ready_file: Option<String>,
}

struct Shared {
    stop: AtomicBool,
    last_rx_mono: AtomicU64,
}

struct Rx {
    fd: Fd,
    packet: bool,
    port_filter: Option<u16>,
    batch: usize,
    bufs: Vec<u8>,
    cmsgs: Vec<u8>,
    names: Vec<libc::sockaddr_ll>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    drops: u64,
}

// SAFETY: the raw pointers in Rx point only into Rx's own heap buffers, which
// move with it; one thread uses an Rx at a time.
unsafe impl Send for Rx {}

fn open_socket(cfg: &RecvConfig) -> Result<(Fd, i32), String> {
    let one: i32 = 1;
    match &cfg.path {
        RxPath::Udp { bind, port } => {
            let fd = sys::socket(sys::family(bind), libc::SOCK_DGRAM, 0)
                .map_err(|e| format!("socket: {e}"))?;
            let _ = sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, &one);
            if cfg.threads > 1 {
                sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, &one)
                    .map_err(|e| format!("SO_REUSEPORT: {e}"))?;
            }
            let rb = sys::set_buf(&fd, true, cfg.rcvbuf);
            let _ = sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &one);
            if cfg.kernel_ts {
                sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &one)
                    .map_err(|e| format!("SO_TIMESTAMPNS: {e}"))?;
            }
            let a = SocketAddr::new(*bind, *port);
            sys::bind(&fd, &a).map_err(|e| format!("bind {a}: {e}"))?;
            Ok((fd, rb))
        }
        RxPath::Packet { iface, .. } => {
            let proto = (libc::ETH_P_ALL as u16).to_be() as i32;
            let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, proto)
                .map_err(|e| format!("AF_PACKET socket: {e} (needs root)"))?;
            let rb = sys::set_buf(&fd, true, cfg.rcvbuf);
            if cfg.kernel_ts {
                sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &one)
                    .map_err(|e| format!("SO_TIMESTAMPNS: {e}"))?;
            }
            let ifindex = sys::ifindex(iface).map_err(|e| format!("interface {iface}: {e}"))?;
            sys::bind_packet(&fd, ifindex, proto as u16)
                .map_err(|e| format!("bind to {iface}: {e}"))?;
            if cfg.threads > 1 {
                let id = (std::process::id() & 0xffff) as i32 | (PACKET_FANOUT_HASH << 16);
                sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_FANOUT, &id)
                    .map_err(|e| format!("PACKET_FANOUT: {e}"))?;
            }
            Ok((fd, rb))
        }
    }
}

impl Rx {
    fn new(fd: Fd, cfg: &RecvConfig) -> Rx {
        let batch = cfg.batch.clamp(1, 1024);
        let (packet, port_filter) = match &cfg.path {
            RxPath::Packet { port, .. } => (true, *port),
            RxPath::Udp { .. } => (false, None),
        };
        let mut rx = Rx {
            fd,
            packet,
            port_filter,
            batch,
            bufs: vec![0u8; batch * BUF_BYTES],
            cmsgs: vec![0u8; batch * CMSG_BYTES],
            // SAFETY: zeroed sockaddr_ll is valid.
            names: vec![unsafe { std::mem::zeroed() }; batch],
            iovs: Vec::with_capacity(batch),
            msgs: Vec::with_capacity(batch),
            drops: 0,
        };
        for k in 0..batch {
            // SAFETY: offset inside bufs.
            let base = unsafe { rx.bufs.as_mut_ptr().add(k * BUF_BYTES) };
            rx.iovs.push(libc::iovec {
                iov_base: base as *mut libc::c_void,
                iov_len: BUF_BYTES,
            });
        }
        for k in 0..batch {
            // SAFETY: zeroed msghdr is valid; the pointers target heap blocks that never move.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = &mut rx.iovs[k];
            h.msg_iovlen = 1;
            rx.msgs.push(libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            });
        }
        rx
    }

    fn reset(&mut self, k: usize) {
        let h = &mut self.msgs[k].msg_hdr;
        // SAFETY: offset inside cmsgs.
        h.msg_control = unsafe { self.cmsgs.as_mut_ptr().add(k * CMSG_BYTES) } as *mut libc::c_void;
        h.msg_controllen = CMSG_BYTES;
        if self.packet {
            h.msg_name = &mut self.names[k] as *mut _ as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        }
        h.msg_flags = 0;
    }

    /// Kernel receive timestamp and SO_RXQ_OVFL drop counter from message k.
    fn control(&mut self, k: usize) -> Option<u64> {
        let h = &self.msgs[k].msg_hdr;
        let mut ts = None;
        // SAFETY: walking the control buffer the kernel filled, with the libc CMSG macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                let lvl = (*c).cmsg_level;
                let ty = (*c).cmsg_type;
                if lvl == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPNS {
                    let t = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                } else if lvl == libc::SOL_SOCKET && ty == libc::SO_RXQ_OVFL {
                    self.drops = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32) as u64;
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        ts
    }
}

#[inline]
fn account(stats: &mut RecvStats, payload: &[u8], rx_ns: u64) {
    match header::decode(payload) {
        Some(h) => {
            let lat = if h.compact {
                Some(((rx_ns as u32).wrapping_sub(h.tx_ns as u32)) as u64)
            } else if rx_ns >= h.tx_ns {
                Some(rx_ns - h.tx_ns)
            } else {
                None
            };
            stats.stream(h.stream).record(h.seq, h.compact, lat, rx_ns);
        }
        None => stats.foreign += 1,
    }
}

fn thread_main(cfg: &RecvConfig, rx: &mut Rx, shared: &Shared) -> RecvStats {
    let mut stats = RecvStats::new();
    while !shared.stop.load(Ordering::Relaxed) && !sys::stopped() {
        for k in 0..rx.batch {
            rx.reset(k);
        }
        // SAFETY: msgs describe live buffers; timeout via SO_RCVTIMEO.
        let r = unsafe {
            libc::recvmmsg(
                rx.fd.0,
                rx.msgs.as_mut_ptr(),
                rx.batch as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r <= 0 {
            continue; // timeout or EINTR: re-check the stop conditions
        }
        let user_ns = rate::real_ns();
        shared
            .last_rx_mono
            .store(rate::mono_ns(), Ordering::Relaxed);
        for k in 0..r as usize {
            let len = rx.msgs[k].msg_len as usize;
            let rx_ns = if cfg.kernel_ts {
                rx.control(k).unwrap_or(user_ns)
            } else {
                user_ns
            };
            let data = &rx.bufs[k * BUF_BYTES..k * BUF_BYTES + len.min(BUF_BYTES)];
            if rx.packet {
                if rx.names[k].sll_pkttype == PACKET_OUTGOING {
                    continue;
                }
                match frame::parse_eth(data) {
                    Some(p) if p.proto == 17 && rx.port_filter.is_none_or(|f| f == p.dport) => {
                        account(&mut stats, p.payload, rx_ns)
                    }
                    _ => {}
                }
            } else {
                account(&mut stats, data, rx_ns);
            }
        }
    }
    if rx.packet {
        // struct tpacket_stats { tp_packets, tp_drops }
        let mut st = [0u32; 2];
        let mut l = 8u32;
        // SAFETY: st is 8 writable bytes.
        unsafe {
            libc::getsockopt(
                rx.fd.0,
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut l,
            )
        };
        rx.drops = st[1] as u64;
    }
    stats
}

pub fn run(cfg: RecvConfig) -> Result<RecvResult, String> {
    let n = cfg.threads.max(1);
    if let Some(c) = &cfg.cpus
        && c.len() != 1
        && c.len() != n
    {
        return Err(format!("--cpu lists {} CPUs for {n} threads", c.len()));
    }
    sys::install_stop_handler();
    // Bind every socket before READY so no early packet is refused.
    let mut rxs = Vec::new();
    let mut rcvbuf = 0;
    for _ in 0..n {
        let (fd, rb) = open_socket(&cfg)?;
        rcvbuf = rb;
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 50_000,
        };
        sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)
            .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
        rxs.push(Rx::new(fd, &cfg));
    }
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        last_rx_mono: AtomicU64::new(0),
    });
    let cfg = Arc::new(cfg);
    let barrier = Arc::new(Barrier::new(n + 1));
    let mut handles = Vec::new();
    for (t, mut rx) in rxs.into_iter().enumerate() {
        let cfg = cfg.clone();
        let shared = shared.clone();
        let barrier = barrier.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("fwlab-rx{t}"))
                .spawn(move || {
                    if let Some(c) = &cfg.cpus {
                        let _ = sys::pin_to_cpu(c[t % c.len()]);
                    }
                    barrier.wait();
                    let s = thread_main(&cfg, &mut rx, &shared);
                    (s, rx.drops)
                })
                .map_err(|e| format!("spawn: {e}"))?,
        );
    }
    barrier.wait();
    let started_unix_ns = rate::real_ns();
    let t_start = rate::mono_ns();
    eprintln!("READY");
    if let Some(f) = &cfg.ready_file {
        std::fs::write(f, "READY\n").map_err(|e| format!("ready file {f}: {e}"))?;
    }
    let deadline = cfg.duration_s.map(|d| t_start + (d * 1e9) as u64);
    let idle_ns = cfg.idle_timeout_s.map(|s| (s * 1e9) as u64);
    let stop_reason;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let now = rate::mono_ns();
        if sys::stopped() {
            stop_reason = "signal";
            break;
        }
        if deadline.is_some_and(|d| now >= d) {
            stop_reason = "duration";
            break;
        }
        let last = shared.last_rx_mono.load(Ordering::Relaxed);
        if let Some(idle) = idle_ns
            && last != 0
            && now.saturating_sub(last) >= idle
        {
            stop_reason = "idle";
            break;
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    let elapsed_s = (rate::mono_ns() - t_start) as f64 / 1e9;
    let mut all = RecvStats::new();
    let mut drops = 0;
    for h in handles {
        let (s, d) = h.join().expect("receiver thread panicked");
        all.merge(&s);
        drops += d;
    }
    let streams: Vec<_> = all.iter().map(|s| s.report()).collect();
    let mut hist: Option<hdrhistogram::Histogram<u64>> = None;
    let mut lat_sum = 0u128;
    let mut jw = 0.0;
    let (mut first_rx, mut last_rx) = (u64::MAX, 0u64);
    for s in all.iter() {
        match &mut hist {
            Some(h) => h.add(s.hist()).expect("same bounds"),
            None => hist = Some(s.hist().clone()),
        }
        lat_sum += s.lat_sum();
        jw += s.jitter() * s.received as f64;
        first_rx = first_rx.min(s.first_rx_ns);
        last_rx = last_rx.max(s.last_rx_ns);
    }
    let sum = |f: fn(&crate::stats::StreamReport) -> u64| streams.iter().map(f).sum::<u64>();
    let received = sum(|s| s.received);
    let unique = sum(|s| s.unique);
    let span = last_rx.saturating_sub(first_rx) as f64 / 1e9;
    let totals = RecvTotals {
        streams: streams.len(),
        received,
        unique,
        lost: sum(|s| s.lost),
        reordered: sum(|s| s.reordered),
        duplicated: sum(|s| s.duplicated),
        late: sum(|s| s.late),
        negative_latency: sum(|s| s.negative_latency),
        latency_ns: match &hist {
            Some(h) => Latency::from_hist(h, lat_sum),
            None => Latency::from_hist(&hdrhistogram::Histogram::new(3).unwrap(), 0),
        },
        latency_hdr_b64: hist.as_ref().and_then(crate::stats::hist_b64),
        latency_hdr_unit: crate::stats::HIST_UNIT,
        jitter_ns: if received > 0 {
            jw / received as f64
        } else {
            0.0
        },
        rx_pps: if span > 0.0 {
            unique as f64 / span
        } else {
            0.0
        },
    };
    let (bind, port, iface) = match &cfg.path {
        RxPath::Udp { bind, port } => (Some(bind.to_string()), Some(*port), None),
        RxPath::Packet { iface, port } => (None, *port, Some(iface.clone())),
    };
    Ok(RecvResult {
        schema_version: result::SCHEMA_VERSION,
        kind: "recv",
        engine_version: result::ENGINE_VERSION,
        backend: if matches!(cfg.path, RxPath::Udp { .. }) {
            "udp"
        } else {
            "packet"
        },
        bind,
        port,
        iface,
        threads: n,
        cpu_pinning: cfg
            .cpus
            .as_ref()
            .map(|c| (0..n).map(|t| c[t % c.len()]).collect()),
        rx_timestamp: if cfg.kernel_ts { "kernel" } else { "user" },
        clock: "CLOCK_REALTIME",
        elapsed_s,
        stop_reason,
        total: totals,
        streams,
        foreign: all.foreign,
        socket_drops: drops,
        rcvbuf_bytes: rcvbuf,
        started_unix_ns,
    })
}
