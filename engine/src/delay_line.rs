//! `delayline`: a wire with a fixed one-way delay, for kernels without sch_netem. Two
//! interfaces A and B (veth ends in a namespace of their own, spliced into a link); every frame
//! read on one side (AF_PACKET, recvmmsg batches) is stamped, held in a FIFO
//! (`delay_queue`) and sent on the other side (sendmmsg) once `now >= stamp + delay`. Both
//! directions, in order, in one thread: a ppoll() with a nanosecond timeout (timer slack 1 ns)
//! waits for the next frame or the next due time, so an idle line costs no CPU.
//!
//! Frames cross unchanged, with their offload state: the sockets use PACKET_VNET_HDR, so a
//! frame whose checksum the sender left to "hardware" (veth's CHECKSUM_PARTIAL) or a GSO super
//! frame is sent on with the same metadata instead of arriving with a bad checksum.
//!
//! Counters (per direction: frames and bytes in and out, tail drops at the queue bound, frames
//! the kernel dropped because the line's socket was full, oversize frames, send errors, the
//! largest queue, how late frames left) are printed as JSON at exit and, with --stats-file,
//! written there every --stats-interval-s and on SIGUSR1 (atomically: write then rename).

use crate::delay_queue::{DelayQueue, QueueCounters};
use crate::rate::{mono_ns, tight_timer_slack};
use crate::sys::{self, Fd};
use hdrhistogram::Histogram;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

const PACKET_STATISTICS: i32 = 6;
const PACKET_VNET_HDR: i32 = 15;
const PACKET_QDISC_BYPASS: i32 = 20;
const PACKET_IGNORE_OUTGOING: i32 = 23;
const PACKET_OUTGOING: u8 = 4;
const ETH_P_ALL: u16 = 0x0003;
/// struct virtio_net_hdr, which PACKET_VNET_HDR puts before every frame
pub const VNET_HDR_LEN: usize = 10;
/// room for one frame: a 64 KiB GSO frame and its header
const SLOT: usize = 65536 + 256;

#[derive(Debug, Clone)]
pub struct DelayLineConfig {
    pub a: String,
    pub b: String,
    pub delay_ns: u64,
    /// stop after this long (None: until SIGINT/SIGTERM)
    pub duration_ns: Option<u64>,
    pub limit_frames: usize,
    pub limit_bytes: usize,
    pub batch: usize,
    pub stats_file: Option<String>,
    pub stats_interval_ns: u64,
    /// stop when the process that started it is gone
    pub exit_with_parent: bool,
    pub cpu: Option<usize>,
    /// busy-wait the last spin_ns before a due time instead of sleeping
    pub spin_ns: u64,
    /// socket receive buffer [bytes]
    pub rcvbuf_bytes: i32,
}

static DUMP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    DUMP.store(true, Ordering::SeqCst);
}

fn install_usr1() {
    // SAFETY: a handler that only stores to an atomic; no SA_RESTART so ppoll returns EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

/// One side of the line: a raw socket bound to one interface and its receive batch.
struct Port {
    name: String,
    fd: Fd,
    bufs: Vec<u8>,
    iov: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_ll>,
    msgs: Vec<libc::mmsghdr>,
    /// frames the kernel dropped because this socket's receive queue was full
    socket_drops: u64,
    /// frames the kernel queued to this socket (PACKET_STATISTICS), incl. dropped ones
    socket_packets: u64,
}

impl Port {
    fn open(name: &str, batch: usize, rcvbuf: i32) -> Result<Port, String> {
        let ctx = |what: &str, e: io::Error| format!("{what} on {name}: {e}");
        let ifindex = sys::ifindex(name).map_err(|e| ctx("no such interface", e))?;
        // protocol 0 until bound: no frame of another interface slips in before bind()
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)
            .map_err(|e| ctx("AF_PACKET socket (needs root or CAP_NET_RAW)", e))?;
        let one: i32 = 1;
        sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_VNET_HDR, &one)
            .map_err(|e| ctx("PACKET_VNET_HDR", e))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &one)
            .map_err(|e| ctx("PACKET_IGNORE_OUTGOING", e))?;
        let _ = sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, &one);
        sys::set_buf(&fd, true, rcvbuf);
        sys::set_buf(&fd, false, 4 << 20);
        sys::bind_packet(&fd, ifindex, ETH_P_ALL.to_be()).map_err(|e| ctx("bind", e))?;
        let mut p = Port {
            name: name.to_string(),
            fd,
            bufs: vec![0u8; batch * SLOT],
            iov: Vec::with_capacity(batch),
            // SAFETY: zeroed sockaddr_ll / mmsghdr are valid plain data.
            names: vec![unsafe { std::mem::zeroed() }; batch],
            msgs: vec![unsafe { std::mem::zeroed() }; batch],
            socket_drops: 0,
            socket_packets: 0,
        };
        for i in 0..batch {
            p.iov.push(libc::iovec {
                // SAFETY: offset inside bufs (batch * SLOT bytes)
                iov_base: unsafe { p.bufs.as_mut_ptr().add(i * SLOT) } as *mut libc::c_void,
                iov_len: SLOT,
            });
        }
        p.read_socket_stats(); // reset what arrived before the loop starts
        p.socket_drops = 0;
        p.socket_packets = 0;
        Ok(p)
    }

    /// Read up to a batch without blocking; for each frame call `take(arrival_ns, bytes,
    /// truncated)`, the arrival being the time the batch was read.
    fn recv(&mut self, mut take: impl FnMut(u64, &[u8], bool)) -> io::Result<usize> {
        let n = self.msgs.len();
        for i in 0..n {
            let m = &mut self.msgs[i];
            m.msg_hdr.msg_iov = &mut self.iov[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_name = &mut self.names[i] as *mut _ as *mut libc::c_void;
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            m.msg_hdr.msg_control = std::ptr::null_mut();
            m.msg_hdr.msg_controllen = 0;
            m.msg_hdr.msg_flags = 0;
            m.msg_len = 0;
        }
        // SAFETY: every message points at live buffers of this Port.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.0,
                self.msgs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = sys::last_err();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        let got = r as usize;
        let now = mono_ns();
        for i in 0..got {
            if self.names[i].sll_pkttype == PACKET_OUTGOING {
                continue; // our own sends (PACKET_IGNORE_OUTGOING should have kept them out)
            }
            let len = self.msgs[i].msg_len as usize;
            let trunc = self.msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || len > SLOT;
            let l = len.min(SLOT);
            take(now, &self.bufs[i * SLOT..i * SLOT + l], trunc);
        }
        Ok(got)
    }

    /// Add the kernel's per-socket counters (reading them resets them).
    fn read_socket_stats(&mut self) {
        let mut st = [0u32; 2];
        let mut l = 8u32;
        // SAFETY: st is 8 writable bytes, struct tpacket_stats {tp_packets, tp_drops}.
        let r = unsafe {
            libc::getsockopt(
                self.fd.0,
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut l,
            )
        };
        if r == 0 {
            self.socket_packets += st[0] as u64;
            self.socket_drops += st[1] as u64;
        }
    }
}

/// One direction: frames read on `from`, held, sent on `to`.
struct Direction {
    queue: DelayQueue,
    rx_frames: u64,
    rx_bytes: u64,
    sent_frames: u64,
    sent_bytes: u64,
    oversize_drops: u64,
    tx_errors: u64,
    tx_retries: u64,
    last_tx_error: Option<String>,
    /// how late frames left [us] (sent time - due time)
    late_us: Histogram<u64>,
    /// frames that left more than 1 ms after their due time (the line could not keep up)
    late_over_1ms: u64,
    tx_iov: Vec<libc::iovec>,
    tx_msgs: Vec<libc::mmsghdr>,
}

/// Outcome of a send attempt.
enum Sent {
    Some,
    /// the kernel has no room now (EAGAIN/ENOBUFS): try again shortly
    Busy,
    /// the interface is gone (namespace deleted)
    Gone(String),
}

impl Direction {
    fn new(cfg: &DelayLineConfig) -> Direction {
        Direction {
            queue: DelayQueue::new(cfg.delay_ns, cfg.limit_frames, cfg.limit_bytes),
            rx_frames: 0,
            rx_bytes: 0,
            sent_frames: 0,
            sent_bytes: 0,
            oversize_drops: 0,
            tx_errors: 0,
            tx_retries: 0,
            last_tx_error: None,
            late_us: Histogram::new_with_bounds(1, 60_000_000, 2).expect("valid bounds"),
            late_over_1ms: 0,
            // SAFETY: zeroed iovec/mmsghdr are valid plain data.
            tx_iov: vec![unsafe { std::mem::zeroed() }; cfg.batch],
            tx_msgs: vec![unsafe { std::mem::zeroed() }; cfg.batch],
        }
    }

    fn take(&mut self, now: u64, data: &[u8], truncated: bool) {
        self.rx_frames += 1;
        let frame_len = data.len().saturating_sub(VNET_HDR_LEN);
        self.rx_bytes += frame_len as u64;
        if truncated || data.len() <= VNET_HDR_LEN {
            self.oversize_drops += 1;
            return;
        }
        self.queue.push(now, data, frame_len);
    }

    /// Send every due frame (in batches) on `to`.
    fn send_due(&mut self, to: &Port) -> Sent {
        loop {
            let now = mono_ns();
            let n = self.queue.due_count(now, self.tx_msgs.len());
            if n == 0 {
                return Sent::Some;
            }
            for i in 0..n {
                let h = self.queue.peek(i).expect("due frame");
                self.tx_iov[i] = libc::iovec {
                    iov_base: h.buf.as_ptr() as *mut libc::c_void,
                    iov_len: h.buf.len(),
                };
                let m = &mut self.tx_msgs[i];
                m.msg_hdr.msg_iov = &mut self.tx_iov[i];
                m.msg_hdr.msg_iovlen = 1;
                m.msg_hdr.msg_name = std::ptr::null_mut();
                m.msg_hdr.msg_namelen = 0;
                m.msg_len = 0;
            }
            match sys::sendmmsg(&to.fd, &mut self.tx_msgs, n, libc::MSG_DONTWAIT) {
                Ok(k) => {
                    let now = mono_ns();
                    for _ in 0..k {
                        let len = self.queue.peek(0).map_or(0, |h| h.frame_len);
                        if let Some(due) = self.queue.release() {
                            let late = now.saturating_sub(due);
                            let _ = self.late_us.record((late / 1000).max(1));
                            self.late_over_1ms += (late > 1_000_000) as u64;
                        }
                        self.sent_frames += 1;
                        self.sent_bytes += len as u64;
                    }
                    if k < n {
                        continue; // the next one fails or the kernel took part: ask again
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                        self.tx_retries += 1;
                        return Sent::Busy;
                    }
                    Some(libc::ENXIO) | Some(libc::ENODEV) | Some(libc::ENETDOWN) => {
                        return Sent::Gone(format!("sending on {}: {e}", to.name));
                    }
                    _ => {
                        // this frame cannot be sent (e.g. EMSGSIZE): drop it, keep the rest
                        self.tx_errors += 1;
                        self.last_tx_error = Some(format!("{e}"));
                        self.queue.release();
                    }
                },
            }
        }
    }

    fn json(&self, socket_drops: u64) -> serde_json::Value {
        let QueueCounters {
            enqueued,
            tail_drops,
            tail_drop_bytes,
            max_frames,
            max_bytes,
            ..
        } = self.queue.counters;
        let h = &self.late_us;
        let late = if h.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::json!({"p50": h.value_at_quantile(0.5), "p99": h.value_at_quantile(0.99),
                               "max": h.max(), "mean": (h.mean() * 10.0).round() / 10.0})
        };
        serde_json::json!({
            "rx_frames": self.rx_frames,
            "rx_bytes": self.rx_bytes,
            "enqueued_frames": enqueued,
            "sent_frames": self.sent_frames,
            "sent_bytes": self.sent_bytes,
            "tail_drops": tail_drops,
            "tail_drop_bytes": tail_drop_bytes,
            "socket_drops": socket_drops,
            "oversize_drops": self.oversize_drops,
            "tx_errors": self.tx_errors,
            "tx_retries": self.tx_retries,
            "last_tx_error": self.last_tx_error,
            "dropped_frames": tail_drops + socket_drops + self.oversize_drops + self.tx_errors,
            "max_queue_frames": max_frames,
            "max_queue_bytes": max_bytes,
            "queued_frames": self.queue.len(),
            "late_us": late,
            "late_over_1ms_frames": self.late_over_1ms,
        })
    }
}

struct Line {
    cfg: DelayLineConfig,
    pa: Port,
    pb: Port,
    ab: Direction,
    ba: Direction,
    t0: u64,
    seq: u64,
    stopped_by: &'static str,
}

impl Line {
    fn json(&mut self) -> serde_json::Value {
        self.pa.read_socket_stats();
        self.pb.read_socket_stats();
        let ab = self.ab.json(self.pa.socket_drops);
        let ba = self.ba.json(self.pb.socket_drops);
        let dropped = ab["dropped_frames"].as_u64().unwrap_or(0) + ba["dropped_frames"].as_u64().unwrap_or(0);
        serde_json::json!({
            "kind": "delayline",
            "a": self.cfg.a,
            "b": self.cfg.b,
            "delay_us": self.cfg.delay_ns as f64 / 1000.0,
            "queue_limit_frames": self.cfg.limit_frames,
            "queue_limit_bytes": self.cfg.limit_bytes,
            "elapsed_s": (mono_ns() - self.t0) as f64 / 1e9,
            "seq": self.seq,
            "running": self.stopped_by.is_empty(),
            "stopped_by": if self.stopped_by.is_empty() { serde_json::Value::Null } else { self.stopped_by.into() },
            "dropped_frames": dropped,
            "a_to_b": ab,
            "b_to_a": ba,
        })
    }

    fn dump(&mut self) {
        self.seq += 1;
        let Some(path) = self.cfg.stats_file.clone() else { return };
        let text = serde_json::to_string(&self.json()).expect("serialisable");
        let tmp = format!("{path}.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
}

fn parent_pid() -> i32 {
    // SAFETY: plain call.
    unsafe { libc::getppid() }
}

/// Run the line until its duration, a signal, the parent's exit or an interface vanishing;
/// return the final counters.
pub fn run(cfg: DelayLineConfig) -> Result<serde_json::Value, String> {
    if cfg.a == cfg.b {
        return Err("--a and --b must be two different interfaces".into());
    }
    if cfg.batch == 0 || cfg.batch > 1024 {
        return Err("--batch must be 1..1024".into());
    }
    if let Some(c) = cfg.cpu {
        sys::pin_to_cpu(c).map_err(|e| format!("pinning to CPU {c}: {e}"))?;
    }
    tight_timer_slack();
    sys::install_stop_handler();
    install_usr1();
    let parent = parent_pid();
    let pa = Port::open(&cfg.a, cfg.batch, cfg.rcvbuf_bytes)?;
    let pb = Port::open(&cfg.b, cfg.batch, cfg.rcvbuf_bytes)?;
    let mut line = Line {
        ab: Direction::new(&cfg),
        ba: Direction::new(&cfg),
        t0: mono_ns(),
        cfg,
        pa,
        pb,
        seq: 0,
        stopped_by: "",
    };
    let end = line.cfg.duration_ns.map(|d| line.t0 + d);
    let mut next_dump = line.t0 + line.cfg.stats_interval_ns;
    let mut next_parent_check = line.t0;
    line.dump();
    let mut fds = [
        libc::pollfd { fd: line.pa.fd.0, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: line.pb.fd.0, events: libc::POLLIN, revents: 0 },
    ];
    let mut error: Option<String> = None;
    loop {
        let now = mono_ns();
        if sys::stopped() {
            line.stopped_by = "signal";
            break;
        }
        if end.is_some_and(|e| now >= e) {
            line.stopped_by = "duration";
            break;
        }
        if line.cfg.exit_with_parent && now >= next_parent_check {
            next_parent_check = now + 100_000_000;
            if parent_pid() != parent {
                line.stopped_by = "parent-exited";
                break;
            }
        }
        // take what arrived on both sides
        let Line { pa, pb, ab, ba, .. } = &mut line;
        let mut got = 0;
        match pa.recv(|ts, d, t| ab.take(ts, d, t)) {
            Ok(n) => got += n,
            Err(e) => {
                error = Some(format!("receiving on {}: {e}", pa.name));
                break;
            }
        }
        match pb.recv(|ts, d, t| ba.take(ts, d, t)) {
            Ok(n) => got += n,
            Err(e) => {
                error = Some(format!("receiving on {}: {e}", pb.name));
                break;
            }
        }
        // send what is due on both sides
        let mut busy = false;
        for (dir, to) in [(&mut *ab, &*pb), (&mut *ba, &*pa)] {
            match dir.send_due(to) {
                Sent::Some => {}
                Sent::Busy => busy = true,
                Sent::Gone(msg) => error = Some(msg),
            }
        }
        if error.is_some() {
            break;
        }
        let now = mono_ns();
        if DUMP.swap(false, Ordering::SeqCst) || now >= next_dump {
            next_dump = now + line.cfg.stats_interval_ns;
            line.dump();
        }
        if got > 0 {
            continue; // more may be waiting: read again before sleeping
        }
        // nothing arrived: sleep until a frame comes or the head is due
        let mut wake = next_dump.min(now + 100_000_000);
        if let Some(e) = end {
            wake = wake.min(e);
        }
        for d in line.ab.queue.next_due().into_iter().chain(line.ba.queue.next_due()) {
            wake = wake.min(d);
        }
        if busy {
            wake = wake.min(now + 20_000);
        }
        if wake <= now + line.cfg.spin_ns {
            if wake > now {
                std::hint::spin_loop();
            }
            continue;
        }
        let wait = wake - now - line.cfg.spin_ns;
        let ts = libc::timespec {
            tv_sec: (wait / 1_000_000_000) as _,
            tv_nsec: (wait % 1_000_000_000) as _,
        };
        // SAFETY: two valid pollfds and a valid timespec; EINTR (a signal) just loops.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        for f in fds.iter_mut() {
            if f.revents & (libc::POLLERR | libc::POLLNVAL) != 0 && f.revents & libc::POLLIN == 0 {
                error.get_or_insert_with(|| "an interface of the line went away".into());
            }
            f.revents = 0;
        }
        if error.is_some() {
            break;
        }
    }
    if let Some(e) = &error {
        line.stopped_by = "interface-gone";
        eprintln!("fwlab-engine: delayline stopped: {e}");
    }
    line.dump();
    Ok(line.json())
}
