//! The connection client: `hold` (open N connections, hold them, probe them, close) and
//! `rate` (one short transaction per connection at a target rate, open loop). One epoll thread.
//!
//! Source addresses are taken round-robin from `srcs` (bound with IP_BIND_ADDRESS_NO_PORT so the
//! kernel picks the port per 4-tuple at connect time), destination ports round-robin from
//! `ports`: connection k uses `srcs[k % S]` and `ports[(k / S) % P]`.
//!
//! Failures are split into DUT-side (`failed`: connect timeout, refused, reset, unreachable,
//! short reply, reply timeout) and generator-side (`local_errors`: no descriptor, no local port,
//! no memory), which say nothing about the DUT and are reported apart.

use super::{
    END_BYTE, Epoll, FILL_BYTE, Failures, LatHist, LatencyUs, PROBE_BYTE, close_fd, connect_start,
    empty_events, errno_class, read_fd, so_error, tcp_socket, write_fd,
};
use crate::rate::mono_ns;
use crate::result::{ENGINE_VERSION, SCHEMA_VERSION};
use crate::sys;
use serde::Serialize;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

/// Where connection k goes from and to.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub dst: IpAddr,
    pub ports: Vec<u16>,
    /// Local source addresses (empty: let the kernel choose).
    pub srcs: Vec<IpAddr>,
}

impl Endpoints {
    pub fn pick(&self, k: u64) -> (Option<IpAddr>, SocketAddr) {
        let s = self.srcs.len().max(1) as u64;
        let src = if self.srcs.is_empty() {
            None
        } else {
            Some(self.srcs[(k % s) as usize])
        };
        let port = self.ports[((k / s) % self.ports.len() as u64) as usize];
        (src, SocketAddr::new(self.dst, port))
    }

    /// Socket, bind to the source, start connecting. Err((is_local, class)).
    fn open(&self, k: u64) -> Result<(i32, bool), (bool, &'static str)> {
        self.open_with(k, false)
    }

    /// As [`Endpoints::open`]; `lean`: no TCP_NODELAY (one small request is sent at once
    /// anyway) but TCP_QUICKACK off, so the handshake's last ACK is delayed and rides on the
    /// request instead of being a packet of its own.
    fn open_with(&self, k: u64, lean: bool) -> Result<(i32, bool), (bool, &'static str)> {
        let (src, dst) = self.pick(k);
        let fd = tcp_socket(self.dst.is_ipv6())
            .map_err(|e| (true, errno_class(e.raw_os_error().unwrap_or(0))))?;
        if lean {
            let _ = super::set_int(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 0);
        } else {
            let _ = super::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        }
        if let Some(a) = src {
            let _ = super::set_int(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
            if let Err(e) = super::bind_sa(fd, &SocketAddr::new(a, 0)) {
                close_fd(fd, false);
                return Err((true, errno_class(e.raw_os_error().unwrap_or(0))));
            }
        }
        match connect_start(fd, &dst) {
            Ok(done) => Ok((fd, done)),
            Err(e) => {
                close_fd(fd, false);
                let c = errno_class(e.raw_os_error().unwrap_or(0));
                Err((matches!(c, "no_local_port" | "no_fd" | "no_memory"), c))
            }
        }
    }
}

fn is_local(class: &str) -> bool {
    matches!(class, "no_local_port" | "no_fd" | "no_memory")
}

/// One per-second sample.
#[derive(Debug, Serialize, Clone)]
pub struct Sample {
    pub t_s: f64,
    /// hold: connections established so far; rate: transactions started in this second.
    pub a: u64,
    /// hold: failures so far; rate: transactions that succeeded in this second.
    pub b: u64,
    /// rate: transactions that failed in this second (hold: 0).
    pub c: u64,
}

// -- hold ---------------------------------------------------------------------------------------

pub struct HoldConfig {
    pub ep: Endpoints,
    pub count: u64,
    /// Opening rate [connections/s]; None: as fast as `max_pending` allows.
    pub open_rate_cps: Option<f64>,
    /// Connects in progress at most.
    pub max_pending: usize,
    pub connect_timeout_s: f64,
    pub hold_s: f64,
    /// Probe every k-th established connection (1: all; 0: none).
    pub probe_every: u64,
    pub probe_timeout_s: f64,
    /// Close with RST (SO_LINGER 0) instead of FIN.
    pub close_rst: bool,
    /// Stop opening after the first failure.
    pub stop_on_failure: bool,
    pub cpu: Option<usize>,
    /// Written (JSON) when the opening phase ends, before the hold.
    pub held_file: Option<String>,
    /// Worker mode: hold until this fd is readable (the parent's barrier) instead of hold_s.
    pub release_fd: Option<i32>,
}

#[derive(Debug, Serialize, Default)]
pub struct HoldResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub engine_version: &'static str,
    pub dst: String,
    pub ports: Vec<u16>,
    pub sources: usize,
    pub cpu: Option<usize>,
    pub pinned: bool,
    pub nofile_limit: u64,
    /// Connections asked for.
    pub requested: u64,
    /// Connect attempts started (socket, bind and connect call succeeded or in progress).
    pub started: u64,
    /// Connections that completed the handshake during the opening phase.
    pub established: u64,
    /// DUT-side failures while opening (timeout, refused, reset, unreachable, other).
    pub failed: Failures,
    /// Generator-side failures (no descriptor / local port / memory): not the DUT's.
    pub local_errors: Failures,
    /// Connections established when the first failure (of either kind) happened; null: none.
    pub first_failure_at: Option<u64>,
    pub open_elapsed_s: f64,
    /// established / open_elapsed_s [connections/s].
    pub open_rate_cps: f64,
    /// Established connections closed or reset by the other side before the probe.
    pub dropped_during_hold: u64,
    pub hold_s: f64,
    /// Connections still open after the hold.
    pub held: u64,
    pub probed: u64,
    /// Probes echoed correctly.
    pub probe_ok: u64,
    pub probe_failed: Failures,
    pub probe_elapsed_s: f64,
    pub close: &'static str,
    pub close_elapsed_s: f64,
    pub connect_us: LatencyUs,
    pub probe_us: LatencyUs,
    pub series: Vec<Sample>,
    pub interrupted: bool,
}

const S_CONNECTING: u8 = 0;
const S_OPEN: u8 = 1;
const S_DEAD: u8 = 2;
const S_PROBING: u8 = 3;
const S_PROBED: u8 = 4;

pub fn hold(cfg: HoldConfig) -> Result<HoldResult, String> {
    sys::install_stop_handler();
    let mut r = HoldResult {
        schema_version: SCHEMA_VERSION,
        kind: "conn-hold",
        engine_version: ENGINE_VERSION,
        dst: cfg.ep.dst.to_string(),
        ports: cfg.ep.ports.clone(),
        sources: cfg.ep.srcs.len(),
        cpu: cfg.cpu,
        requested: cfg.count,
        hold_s: cfg.hold_s,
        close: if cfg.close_rst { "rst" } else { "fin" },
        ..Default::default()
    };
    if let Some(c) = cfg.cpu {
        r.pinned = sys::pin_to_cpu(c).is_ok();
    }
    r.nofile_limit = super::raise_nofile_to(cfg.count + 1024);
    let ep = Epoll::new().map_err(|e| format!("epoll_create: {e}"))?;
    let n = cfg.count as usize;
    let mut fds: Vec<i32> = Vec::with_capacity(n);
    let mut state: Vec<u8> = Vec::with_capacity(n);
    // start of the connect, then of the probe [us since t0]
    let mut t_us: Vec<u32> = Vec::with_capacity(n);
    let mut pendq: VecDeque<(u32, u64)> = VecDeque::new();
    let mut pending = 0usize;
    let mut events = empty_events(4096);
    let mut conn_h = LatHist::default();
    let mut probe_h = LatHist::default();
    let t0 = mono_ns();
    let us_since = |t: u64| ((t - t0) / 1000) as u32;
    let timeout_ns = (cfg.connect_timeout_s * 1e9) as u64;
    let mut next_sample = t0 + 1_000_000_000;
    let first_failure = |r: &mut HoldResult| {
        if r.first_failure_at.is_none() {
            r.first_failure_at = Some(r.established);
        }
    };
    // -- opening
    loop {
        if sys::stopped() {
            r.interrupted = true;
            break;
        }
        let now = mono_ns();
        let allowed = match cfg.open_rate_cps {
            Some(rate) => (((now - t0) as f64 / 1e9 * rate) as u64 + 1).min(cfg.count),
            None => cfg.count,
        };
        let halt = cfg.stop_on_failure && r.first_failure_at.is_some();
        while !halt && (fds.len() as u64) < allowed && pending < cfg.max_pending {
            let k = fds.len() as u64;
            t_us.push(us_since(mono_ns()));
            match cfg.ep.open(k) {
                Ok((fd, done)) => {
                    r.started += 1;
                    let ev = if done {
                        (libc::EPOLLIN | libc::EPOLLRDHUP) as u32
                    } else {
                        libc::EPOLLOUT as u32
                    };
                    if ep.add(fd, ev, k).is_err() {
                        close_fd(fd, true);
                        fds.push(-1);
                        state.push(S_DEAD);
                        r.local_errors.add("no_memory");
                        first_failure(&mut r);
                        continue;
                    }
                    fds.push(fd);
                    if done {
                        state.push(S_OPEN);
                        r.established += 1;
                    } else {
                        state.push(S_CONNECTING);
                        pendq.push_back((k as u32, mono_ns()));
                        pending += 1;
                    }
                }
                Err((local, class)) => {
                    fds.push(-1);
                    state.push(S_DEAD);
                    if local {
                        r.local_errors.add(class);
                    } else {
                        r.failed.add(class);
                    }
                    first_failure(&mut r);
                }
            }
        }
        let opened_all = fds.len() as u64 >= cfg.count || halt;
        if opened_all && pending == 0 {
            break;
        }
        let wait_ms = if !opened_all && pending < cfg.max_pending && (fds.len() as u64) < allowed {
            0
        } else {
            1
        };
        let m = ep
            .wait(&mut events, wait_ms)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        let now = mono_ns();
        for ev in &events[..m] {
            let k = ev.u64 as usize;
            match state[k] {
                S_CONNECTING => {
                    let err = so_error(fds[k]);
                    pending -= 1;
                    if err == 0 && ev.events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
                        state[k] = S_OPEN;
                        r.established += 1;
                        conn_h.record_ns((now - t0).saturating_sub(t_us[k] as u64 * 1000));
                        let _ =
                            ep.modify(fds[k], (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, k as u64);
                    } else {
                        state[k] = S_DEAD;
                        close_fd(fds[k], true);
                        fds[k] = -1;
                        let class = errno_class(if err == 0 { libc::ECONNRESET } else { err });
                        if is_local(class) {
                            r.local_errors.add(class);
                        } else {
                            r.failed.add(class);
                        }
                        first_failure(&mut r);
                    }
                }
                S_OPEN => {
                    // Nothing is sent while opening: an event means the peer closed or reset.
                    state[k] = S_DEAD;
                    close_fd(fds[k], true);
                    fds[k] = -1;
                    r.dropped_during_hold += 1;
                }
                _ => {}
            }
        }
        // connect timeouts: entries are in start order
        while let Some(&(k, t)) = pendq.front() {
            let k = k as usize;
            if state[k] != S_CONNECTING {
                pendq.pop_front();
                continue;
            }
            if now - t < timeout_ns {
                break;
            }
            pendq.pop_front();
            pending -= 1;
            state[k] = S_DEAD;
            close_fd(fds[k], true);
            fds[k] = -1;
            r.failed.add("timeout");
            first_failure(&mut r);
        }
        if now >= next_sample {
            r.series.push(Sample {
                t_s: (now - t0) as f64 / 1e9,
                a: r.established,
                b: r.failed.total() + r.local_errors.total(),
                c: 0,
            });
            next_sample += 1_000_000_000;
        }
    }
    let t_open = mono_ns();
    r.open_elapsed_s = (t_open - t0) as f64 / 1e9;
    r.open_rate_cps = if r.open_elapsed_s > 0.0 {
        r.established as f64 / r.open_elapsed_s
    } else {
        0.0
    };
    r.connect_us = conn_h.summary();
    if let Some(p) = &cfg.held_file {
        let text = serde_json::json!({"established": r.established,
            "failed": r.failed.total(), "local_errors": r.local_errors.total()});
        super::write_marker(p, &text.to_string())?;
    }
    // -- hold
    const RELEASE: u64 = u64::MAX;
    let hold_end = match cfg.release_fd {
        Some(fd) => {
            ep.add(fd, libc::EPOLLIN as u32, RELEASE)
                .map_err(|e| format!("epoll add: {e}"))?;
            u64::MAX
        }
        None => mono_ns() + (cfg.hold_s * 1e9) as u64,
    };
    let t_hold = mono_ns();
    'hold: while !sys::stopped() {
        let now = mono_ns();
        if now >= hold_end {
            break;
        }
        let ms = ((hold_end - now) / 1_000_000).clamp(1, 100) as i32;
        let m = ep
            .wait(&mut events, ms)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..m] {
            if ev.u64 == RELEASE {
                break 'hold;
            }
            let k = ev.u64 as usize;
            if state[k] == S_OPEN {
                state[k] = S_DEAD;
                close_fd(fds[k], true);
                fds[k] = -1;
                r.dropped_during_hold += 1;
            }
        }
    }
    r.interrupted |= sys::stopped();
    r.hold_s = (mono_ns() - t_hold) as f64 / 1e9;
    r.held = state.iter().filter(|&&s| s == S_OPEN).count() as u64;
    // -- probe: a window of at most max_pending outstanding probes
    let t_probe = mono_ns();
    if cfg.probe_every > 0 && !sys::stopped() {
        let ptimeout = (cfg.probe_timeout_s * 1e9) as u64;
        let targets: Vec<u32> = (0..state.len() as u32)
            .filter(|&k| state[k as usize] == S_OPEN)
            .step_by(cfg.probe_every as usize)
            .collect();
        let mut todo = targets.into_iter().map(|k| k as usize);
        let mut outq: VecDeque<(u32, u64)> = VecDeque::new();
        let mut outstanding = 0usize;
        let mut exhausted = false;
        let mut rbuf = [0u8; 64];
        loop {
            while !exhausted && outstanding < cfg.max_pending {
                match todo.next() {
                    Some(k) => {
                        r.probed += 1;
                        match write_fd(fds[k], &[PROBE_BYTE]) {
                            Ok(1) => {
                                state[k] = S_PROBING;
                                t_us[k] = us_since(mono_ns());
                                outq.push_back((k as u32, mono_ns()));
                                outstanding += 1;
                            }
                            Ok(_) | Err(_) => {
                                state[k] = S_DEAD;
                                r.probe_failed.add("reset");
                            }
                        }
                    }
                    None => exhausted = true,
                }
            }
            if exhausted && outstanding == 0 {
                break;
            }
            let m = ep
                .wait(&mut events, 1)
                .map_err(|e| format!("epoll_wait: {e}"))?;
            let now = mono_ns();
            for ev in &events[..m] {
                if ev.u64 == RELEASE {
                    continue;
                }
                let k = ev.u64 as usize;
                if state[k] != S_PROBING {
                    continue;
                }
                match read_fd(fds[k], &mut rbuf) {
                    Ok(1) if rbuf[0] == PROBE_BYTE => {
                        state[k] = S_PROBED;
                        probe_h.record_ns((now - t0).saturating_sub(t_us[k] as u64 * 1000));
                        r.probe_ok += 1;
                        outstanding -= 1;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                    Ok(0) => {
                        state[k] = S_DEAD;
                        r.probe_failed.add("closed");
                        outstanding -= 1;
                    }
                    Ok(_) => {
                        state[k] = S_DEAD;
                        r.probe_failed.add("bad_echo");
                        outstanding -= 1;
                    }
                    Err(e) => {
                        state[k] = S_DEAD;
                        r.probe_failed
                            .add(errno_class(e.raw_os_error().unwrap_or(0)));
                        outstanding -= 1;
                    }
                }
            }
            while let Some(&(k, t)) = outq.front() {
                let k = k as usize;
                if state[k] != S_PROBING {
                    outq.pop_front();
                    continue;
                }
                if now - t < ptimeout {
                    break;
                }
                outq.pop_front();
                state[k] = S_DEAD;
                r.probe_failed.add("timeout");
                outstanding -= 1;
            }
            if sys::stopped() {
                r.interrupted = true;
                break;
            }
        }
    }
    r.probe_us = probe_h.summary();
    r.probe_elapsed_s = (mono_ns() - t_probe) as f64 / 1e9;
    // -- close
    let t_close = mono_ns();
    for &fd in &fds {
        if fd >= 0 {
            close_fd(fd, cfg.close_rst);
        }
    }
    r.close_elapsed_s = (mono_ns() - t_close) as f64 / 1e9;
    Ok(r)
}

// -- rate ---------------------------------------------------------------------------------------

pub struct RateConfig {
    pub ep: Endpoints,
    /// Intended rate [connections/s]; None: closed loop, `max_inflight` always in flight.
    pub rate_cps: Option<f64>,
    pub duration_s: f64,
    /// Request size [bytes], echoed back (>= 1; the last byte is the end marker).
    pub req_bytes: usize,
    /// A transaction not done this long after it started fails [s].
    pub timeout_s: f64,
    pub max_inflight: usize,
    pub cpu: Option<usize>,
    /// Close a finished transaction with RST (SO_LINGER 0) instead of FIN.
    pub close_rst: bool,
    /// Fewer packets and system calls per transaction, same transaction: the handshake's last
    /// ACK rides on the request (TCP_QUICKACK off), one edge-triggered epoll registration per
    /// connection, SO_ERROR read only on an error event, the reply read right after the
    /// request when it is already there (on veth it often is). With `conn-server --lean` the
    /// echo and the server's FIN are one segment: 7 TCP segments per transaction with FIN close
    /// instead of 10, 6 instead of 9 with RST (both ends' OutSegs; one of them is the server
    /// kernel's immediate ACK of a new connection's first data).
    pub lean: bool,
}

/// Worker `i` of `n`'s source addresses: every n-th one starting at i when there are at least
/// n (so no two workers share a source address and compete for its ports), else all of them.
pub fn split_sources(ep: &Endpoints, i: usize, n: usize) -> Endpoints {
    let srcs = if ep.srcs.len() >= n && n > 1 {
        ep.srcs.iter().skip(i).step_by(n).copied().collect()
    } else {
        ep.srcs.clone()
    };
    Endpoints { srcs, ..ep.clone() }
}

#[derive(Debug, Serialize, Default)]
pub struct RateResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub engine_version: &'static str,
    pub dst: String,
    pub ports: Vec<u16>,
    pub sources: usize,
    pub cpu: Option<usize>,
    pub pinned: bool,
    pub nofile_limit: u64,
    /// Intended rate [connections/s]; null for max.
    pub intended_cps: Option<f64>,
    pub duration_s: f64,
    pub req_bytes: usize,
    /// How a finished transaction was closed: fin | rst.
    pub close: &'static str,
    /// The lean transaction (see [`RateConfig::lean`]).
    pub lean: bool,
    /// rate x duration; null for max.
    pub intended: Option<u64>,
    /// Transactions started (connect called); the offered load.
    pub started: u64,
    /// Complete reply and the server's FIN received.
    pub succeeded: u64,
    /// DUT-side failures by class (timeout = connect timeout, reply_timeout, refused, reset,
    /// short_reply, unreachable, other).
    pub failed: Failures,
    /// Generator-side failures (not started): no descriptor / local port / memory.
    pub local_errors: Failures,
    /// Launches that waited because max_inflight transactions were in flight.
    pub deferred: u64,
    /// Highest number of transactions in flight at once.
    pub peak_inflight: usize,
    /// started / duration [connections/s].
    pub achieved_cps: f64,
    /// succeeded / duration [connections/s].
    pub succeeded_cps: f64,
    /// Transactions launched more than 50 ms after their scheduled time (the client fell behind).
    pub late: u64,
    /// Largest delay of a launch behind its schedule [ms].
    pub max_lag_ms: f64,
    /// started < 99 % of intended, or more than 1 % of them late.
    pub generator_short: bool,
    /// Time after the launch window until the last transaction ended [s].
    pub drain_s: f64,
    pub connect_us: LatencyUs,
    pub transaction_us: LatencyUs,
    pub series: Vec<Sample>,
    pub interrupted: bool,
    /// This process's CPU time over the run [s] (user space / kernel, softirq it ran included).
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
}

#[derive(Clone, Copy)]
struct Slot {
    fd: i32,
    state: u8,
    generation: u32,
    got: u32,
    t0: u64,
}

/// A launch this much behind its schedule is late [ns].
const LATE_NS: f64 = 50e6;

const R_FREE: u8 = 0;
const R_CONNECTING: u8 = 1;
const R_REPLY: u8 = 2;

/// How many connections the open-loop schedule allows by `elapsed_ns`, capped at `total`.
pub fn due(rate: f64, elapsed_ns: u64, total: u64) -> u64 {
    ((elapsed_ns as f64 / 1e9 * rate).floor() as u64 + 1).min(total)
}

pub fn rate(cfg: RateConfig) -> Result<RateResult, String> {
    sys::install_stop_handler();
    if cfg.req_bytes == 0 || cfg.req_bytes > 65536 {
        return Err("--req-bytes must be 1..=65536".into());
    }
    let mut r = RateResult {
        schema_version: SCHEMA_VERSION,
        kind: "conn-rate",
        engine_version: ENGINE_VERSION,
        dst: cfg.ep.dst.to_string(),
        ports: cfg.ep.ports.clone(),
        sources: cfg.ep.srcs.len(),
        cpu: cfg.cpu,
        intended_cps: cfg.rate_cps,
        duration_s: cfg.duration_s,
        req_bytes: cfg.req_bytes,
        close: if cfg.close_rst { "rst" } else { "fin" },
        lean: cfg.lean,
        intended: cfg.rate_cps.map(|c| (c * cfg.duration_s).round() as u64),
        ..Default::default()
    };
    if let Some(c) = cfg.cpu {
        r.pinned = sys::pin_to_cpu(c).is_ok();
    }
    r.nofile_limit = super::raise_nofile_to(cfg.max_inflight as u64 + 1024);
    let max_inflight = cfg
        .max_inflight
        .min(r.nofile_limit.saturating_sub(64).max(1) as usize);
    let ep = Epoll::new().map_err(|e| format!("epoll_create: {e}"))?;
    let mut req = vec![FILL_BYTE; cfg.req_bytes];
    *req.last_mut().expect("req_bytes >= 1") = END_BYTE;
    let mut slots: Vec<Slot> = Vec::new();
    let mut free: Vec<u32> = Vec::new();
    let mut timeq: VecDeque<(u32, u32, u64)> = VecDeque::new();
    let mut inflight = 0usize;
    let mut events = empty_events(4096);
    let mut rbuf = vec![0u8; 65536];
    let mut conn_h = LatHist::default();
    let mut txn_h = LatHist::default();
    let timeout_ns = (cfg.timeout_s * 1e9) as u64;
    let dur_ns = (cfg.duration_s * 1e9) as u64;
    let total = r.intended.unwrap_or(u64::MAX);
    let secs = cfg.duration_s.ceil() as usize + (cfg.timeout_s.ceil() as usize) + 2;
    let mut per_s: Vec<[u64; 3]> = vec![[0; 3]; secs];
    let cpu0 = sys::own_cpu_s();
    let t0 = mono_ns();
    let mut k: u64 = 0;
    let mut window_end: Option<u64> = None;
    // lean: one edge-triggered registration for the whole transaction (no EPOLL_CTL_MOD)
    let reg_events = if cfg.lean {
        (libc::EPOLLOUT | libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32
    } else {
        libc::EPOLLOUT as u32
    };
    let sec = |now: u64| (((now - t0) / 1_000_000_000) as usize).min(secs - 1);

    macro_rules! finish {
        ($i:expr, $ok:expr, $class:expr, $now:expr) => {{
            let s = &mut slots[$i];
            close_fd(s.fd, !$ok || cfg.close_rst);
            s.state = R_FREE;
            s.generation = s.generation.wrapping_add(1);
            free.push($i as u32);
            inflight -= 1;
            let b = sec($now);
            if $ok {
                r.succeeded += 1;
                per_s[b][1] += 1;
            } else {
                r.failed.add($class);
                per_s[b][2] += 1;
            }
        }};
    }

    // Read the echo until EOF (the server's FIN): success when every byte came back.
    macro_rules! read_reply {
        ($i:expr, $now:expr) => {{
            let i = $i;
            let now = $now;
            loop {
                match read_fd(slots[i].fd, &mut rbuf) {
                    Ok(0) => {
                        if slots[i].got as usize == cfg.req_bytes {
                            txn_h.record_ns(now - slots[i].t0);
                            finish!(i, true, "", now);
                        } else {
                            finish!(i, false, "short_reply", now);
                        }
                        break;
                    }
                    Ok(n) => {
                        slots[i].got += n as u32;
                        if slots[i].got as usize > cfg.req_bytes {
                            finish!(i, false, "other", now);
                            break;
                        }
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => break,
                    Err(e) => {
                        let c = errno_class(e.raw_os_error().unwrap_or(0));
                        finish!(i, false, c, now);
                        break;
                    }
                }
            }
        }};
    }

    loop {
        let now = mono_ns();
        let elapsed = now - t0;
        // The last pass at the window's end launches whatever the schedule still owes.
        let last_pass = window_end.is_none() && elapsed >= dur_ns;
        let launching =
            window_end.is_none() && !sys::stopped() && (elapsed < dur_ns || cfg.rate_cps.is_some());
        if window_end.is_none() && (last_pass || sys::stopped()) {
            window_end = Some(now);
        }
        if launching {
            let allowed = match cfg.rate_cps {
                Some(_) if last_pass => total,
                Some(rate) => due(rate, elapsed, total),
                None => u64::MAX,
            };
            while k < allowed {
                if inflight >= max_inflight {
                    if cfg.rate_cps.is_some() {
                        r.deferred += 1;
                    }
                    break;
                }
                let idx = match free.pop() {
                    Some(i) => i as usize,
                    None => {
                        slots.push(Slot {
                            fd: -1,
                            state: R_FREE,
                            generation: 0,
                            got: 0,
                            t0: 0,
                        });
                        slots.len() - 1
                    }
                };
                let seq = k;
                k += 1;
                let t = mono_ns();
                if let Some(rate) = cfg.rate_cps {
                    let lag = (t - t0) as f64 - seq as f64 / rate * 1e9;
                    if lag > LATE_NS {
                        r.late += 1;
                    }
                    r.max_lag_ms = r.max_lag_ms.max(lag / 1e6);
                }
                match cfg.ep.open_with(seq, cfg.lean) {
                    Ok((fd, done)) => {
                        r.started += 1;
                        per_s[sec(t)][0] += 1;
                        let s = &mut slots[idx];
                        s.fd = fd;
                        s.got = 0;
                        s.t0 = t;
                        s.state = R_CONNECTING;
                        inflight += 1;
                        r.peak_inflight = r.peak_inflight.max(inflight);
                        timeq.push_back((idx as u32, s.generation, t));
                        let _ = done; // EPOLLOUT fires at once for an already connected socket
                        if ep.add(fd, reg_events, idx as u64).is_err() {
                            finish!(idx, false, "other", t);
                        }
                    }
                    Err((local, class)) => {
                        free.push(idx as u32);
                        if local {
                            r.local_errors.add(class);
                        } else {
                            r.started += 1;
                            per_s[sec(t)][0] += 1;
                            r.failed.add(class);
                            per_s[sec(t)][2] += 1;
                        }
                    }
                }
            }
        } else if inflight == 0 {
            break;
        } else if let Some(w) = window_end
            && now - w > timeout_ns + 1_000_000_000
        {
            break; // safety: everything left has timed out below already
        }
        let wait_ms = if launching {
            match cfg.rate_cps {
                Some(rate) if inflight < max_inflight => {
                    let next_ns = ((k as f64) / rate * 1e9) as u64;
                    (next_ns.saturating_sub(mono_ns() - t0) / 1_000_000).min(1) as i32
                }
                _ => 1,
            }
        } else {
            1
        };
        let m = ep
            .wait(&mut events, wait_ms)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..m] {
            let i = ev.u64 as usize;
            let now = mono_ns();
            match slots[i].state {
                R_CONNECTING => {
                    let bad = ev.events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
                    let err = if cfg.lean && !bad {
                        0
                    } else {
                        so_error(slots[i].fd)
                    };
                    if err != 0 || bad {
                        let c = errno_class(if err == 0 { libc::ECONNRESET } else { err });
                        finish!(i, false, c, now);
                        continue;
                    }
                    if cfg.lean && ev.events & libc::EPOLLOUT as u32 == 0 {
                        continue; // not connected yet (edge-triggered: wait for EPOLLOUT)
                    }
                    conn_h.record_ns(now - slots[i].t0);
                    match write_fd(slots[i].fd, &req) {
                        Ok(w) if w == req.len() && cfg.lean => {
                            // already registered for input; the reply may be there already
                            slots[i].state = R_REPLY;
                            read_reply!(i, mono_ns());
                        }
                        Ok(w) if w == req.len() => {
                            slots[i].state = R_REPLY;
                            let fd = slots[i].fd;
                            if ep
                                .modify(fd, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, i as u64)
                                .is_err()
                            {
                                finish!(i, false, "other", now);
                            }
                        }
                        Ok(_) => finish!(i, false, "other", now),
                        Err(e) => {
                            let c = errno_class(e.raw_os_error().unwrap_or(0));
                            finish!(i, false, c, now);
                        }
                    }
                }
                R_REPLY => read_reply!(i, now),
                _ => {}
            }
        }
        let now = mono_ns();
        while let Some(&(i, generation, t)) = timeq.front() {
            let iu = i as usize;
            if slots[iu].generation != generation || slots[iu].state == R_FREE {
                timeq.pop_front();
                continue;
            }
            if now - t < timeout_ns {
                break;
            }
            timeq.pop_front();
            let c = if slots[iu].state == R_CONNECTING {
                "timeout"
            } else {
                "reply_timeout"
            };
            finish!(iu, false, c, now);
        }
    }
    r.interrupted = sys::stopped();
    let (u1, s1) = sys::own_cpu_s();
    r.cpu_user_s = u1 - cpu0.0;
    r.cpu_sys_s = s1 - cpu0.1;
    let w = window_end.unwrap_or_else(mono_ns);
    r.drain_s = (mono_ns() - w) as f64 / 1e9;
    let launch_s = ((w - t0) as f64 / 1e9).max(1e-9);
    let basis = cfg.duration_s.min(launch_s.max(cfg.duration_s));
    r.achieved_cps = r.started as f64 / basis;
    r.succeeded_cps = r.succeeded as f64 / basis;
    r.generator_short = match r.intended {
        Some(i) => (r.started as f64) < 0.99 * i as f64 || r.late as f64 > 0.01 * i as f64,
        None => false,
    };
    r.connect_us = conn_h.summary();
    r.transaction_us = txn_h.summary();
    let used = per_s
        .iter()
        .rposition(|s| s.iter().any(|&v| v > 0))
        .map_or(0, |p| p + 1);
    r.series = per_s[..used]
        .iter()
        .enumerate()
        .map(|(i, s)| Sample {
            t_s: (i + 1) as f64,
            a: s[0],
            b: s[1],
            c: s[2],
        })
        .collect();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_round_robin() {
        let ep = Endpoints {
            dst: "198.19.1.1".parse().unwrap(),
            ports: vec![5601, 5602],
            srcs: vec![
                "198.18.1.10".parse().unwrap(),
                "198.18.1.11".parse().unwrap(),
            ],
        };
        let p: Vec<_> = (0..5).map(|k| ep.pick(k)).collect();
        assert_eq!(p[0].0.unwrap().to_string(), "198.18.1.10");
        assert_eq!(p[1].0.unwrap().to_string(), "198.18.1.11");
        assert_eq!(p[0].1.port(), 5601);
        assert_eq!(p[2].1.port(), 5602);
        assert_eq!(p[4].1.port(), 5601);
        let none = Endpoints { srcs: vec![], ..ep };
        assert!(none.pick(3).0.is_none());
    }

    #[test]
    fn workers_split_the_sources() {
        let ep = Endpoints {
            dst: "198.19.1.1".parse().unwrap(),
            ports: vec![5601, 5602],
            srcs: (10..15)
                .map(|h| format!("198.18.1.{h}").parse().unwrap())
                .collect(),
        };
        let a = split_sources(&ep, 0, 2);
        let b = split_sources(&ep, 1, 2);
        assert_eq!(a.srcs.len() + b.srcs.len(), 5);
        assert_eq!(a.srcs[1].to_string(), "198.18.1.12");
        assert_eq!(b.srcs[0].to_string(), "198.18.1.11");
        assert!(a.srcs.iter().all(|x| !b.srcs.contains(x)));
        // fewer sources than workers: every worker uses all of them
        assert_eq!(split_sources(&ep, 3, 8).srcs.len(), 5);
        assert_eq!(split_sources(&ep, 0, 1).srcs, ep.srcs);
        assert_eq!(a.ports, ep.ports);
    }

    #[test]
    fn open_loop_schedule() {
        assert_eq!(due(1000.0, 0, 10_000), 1);
        assert_eq!(due(1000.0, 1_000_000_000, 10_000), 1001);
        assert_eq!(due(1000.0, 20_000_000_000, 10_000), 10_000);
    }
}
