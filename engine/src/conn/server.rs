//! `conn-server`: one epoll thread that accepts on one or more ports and echoes. Connections
//! stay open until the peer closes, resets, or a `!` byte asks the server to close its side.
//! Stops at `--duration-s`, SIGINT or SIGTERM and prints its counters as JSON.

use super::{END_BYTE, Epoll, close_fd, empty_events, read_fd, set_int, write_fd, write_fd_more};
use crate::rate::mono_ns;
use crate::result::{ENGINE_VERSION, SCHEMA_VERSION};
use crate::sys;
use serde::Serialize;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

pub struct ServerConfig {
    pub bind: IpAddr,
    pub ports: Vec<u16>,
    pub duration_s: Option<f64>,
    pub backlog: i32,
    pub cpu: Option<usize>,
    pub max_fds: u64,
    pub ready_file: Option<String>,
    /// Read a new connection at once (its request may have come with the handshake's last
    /// ACK), no per-connection setsockopt, echo of the last byte corked so the FIN joins it.
    pub lean: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct ServerResult {
    pub schema_version: u32,
    pub kind: &'static str,
    pub engine_version: &'static str,
    pub bind: String,
    pub ports: Vec<u16>,
    pub cpu: Option<usize>,
    pub pinned: bool,
    /// RLIMIT_NOFILE soft limit in force.
    pub nofile_limit: u64,
    pub accepted: u64,
    /// accept(2) failures by errno name (EMFILE: out of descriptors).
    pub accept_errors: HashMap<String, u64>,
    /// Closed by the server after a `!` (transaction end).
    pub closed_after_end: u64,
    /// Closed because the peer closed (EOF).
    pub closed_by_peer: u64,
    /// Closed on a read/write error (mostly resets).
    pub closed_on_error: u64,
    /// Open connections when the server stopped.
    pub open_at_stop: u64,
    /// Highest number of connections open at once.
    pub peak_open: u64,
    pub bytes_echoed: u64,
    pub elapsed_s: f64,
    pub stop_reason: &'static str,
    pub lean: bool,
    /// lean: connections served completely right after accept (never registered with epoll).
    pub served_at_accept: u64,
    /// This process's CPU time while serving [s] (user space / kernel, softirq it ran included).
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
}

/// What became of a connection after one read-and-echo.
#[derive(PartialEq)]
enum Served {
    /// Closed (EOF, error, or the transaction ended).
    Closed,
    /// Still open, waiting for more input.
    Open,
    /// Still open, an echo is pending (registered for EPOLLOUT).
    Pending,
}

/// One read and its echo on connection `fd` (level-triggered: one read per event is enough).
/// `registered`: fd is in the epoll set (else a pending echo adds it).
#[allow(clippy::too_many_arguments)]
fn serve(
    fd: i32,
    buf: &mut [u8],
    lean: bool,
    registered: bool,
    ep: &Epoll,
    res: &mut ServerResult,
    open: &mut u64,
    backlog: &mut HashMap<i32, (Vec<u8>, bool)>,
) -> Served {
    let want_out = |fd: i32| {
        let ev = libc::EPOLLOUT as u32;
        if registered {
            let _ = ep.modify(fd, ev, fd as u64);
        } else {
            let _ = ep.add(fd, ev, fd as u64);
        }
    };
    match read_fd(fd, buf) {
        Ok(0) => {
            close_fd(fd, false);
            *open -= 1;
            res.closed_by_peer += 1;
            Served::Closed
        }
        Ok(n) => {
            let data = &buf[..n];
            let end = data.contains(&END_BYTE);
            let sent = if lean && end {
                write_fd_more(fd, data)
            } else {
                write_fd(fd, data)
            };
            match sent {
                Ok(w) if w == n => {
                    res.bytes_echoed += w as u64;
                    if end {
                        close_fd(fd, false);
                        *open -= 1;
                        res.closed_after_end += 1;
                        Served::Closed
                    } else {
                        Served::Open
                    }
                }
                Ok(w) => {
                    res.bytes_echoed += w as u64;
                    backlog.insert(fd, (data[w..].to_vec(), end));
                    want_out(fd);
                    Served::Pending
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    backlog.insert(fd, (data.to_vec(), end));
                    want_out(fd);
                    Served::Pending
                }
                Err(_) => {
                    close_fd(fd, false);
                    *open -= 1;
                    res.closed_on_error += 1;
                    Served::Closed
                }
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Served::Open,
        Err(_) => {
            close_fd(fd, false);
            *open -= 1;
            res.closed_on_error += 1;
            Served::Closed
        }
    }
}

const LISTEN_TOKEN_BASE: u64 = u64::MAX - 4096;

pub fn run(cfg: ServerConfig) -> Result<ServerResult, String> {
    sys::install_stop_handler();
    let mut res = ServerResult {
        schema_version: SCHEMA_VERSION,
        kind: "conn-server",
        engine_version: ENGINE_VERSION,
        bind: cfg.bind.to_string(),
        ports: cfg.ports.clone(),
        cpu: cfg.cpu,
        lean: cfg.lean,
        ..Default::default()
    };
    if let Some(c) = cfg.cpu {
        res.pinned = sys::pin_to_cpu(c).is_ok();
    }
    res.nofile_limit = super::raise_nofile_to(cfg.max_fds);
    let ep = Epoll::new().map_err(|e| format!("epoll_create: {e}"))?;
    let mut listeners = Vec::new();
    for (i, &port) in cfg.ports.iter().enumerate() {
        let fd = super::tcp_socket(cfg.bind.is_ipv6()).map_err(|e| format!("socket: {e}"))?;
        let _ = set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
        super::bind_sa(fd, &SocketAddr::new(cfg.bind, port))
            .map_err(|e| format!("cannot bind {}:{port}: {e}", cfg.bind))?;
        // SAFETY: plain syscall on our socket.
        if unsafe { libc::listen(fd, cfg.backlog) } < 0 {
            return Err(format!("listen on port {port}: {}", sys::last_err()));
        }
        ep.add(fd, libc::EPOLLIN as u32, LISTEN_TOKEN_BASE + i as u64)
            .map_err(|e| format!("epoll add: {e}"))?;
        listeners.push(fd);
    }
    if let Some(p) = &cfg.ready_file {
        super::write_marker(p, "READY\n")?;
    }
    eprintln!("READY");
    let cpu0 = sys::own_cpu_s();
    let t0 = mono_ns();
    let deadline = cfg.duration_s.map(|d| t0 + (d * 1e9) as u64);
    let mut events = empty_events(1024);
    let mut buf = vec![0u8; 65536];
    // Bytes still to be echoed when a write was short (rare: replies are a few bytes).
    let mut backlog: HashMap<i32, (Vec<u8>, bool)> = HashMap::new();
    let mut open: u64 = 0;
    res.stop_reason = "signal";
    'outer: loop {
        if sys::stopped() {
            break;
        }
        if let Some(d) = deadline
            && mono_ns() >= d
        {
            res.stop_reason = "duration";
            break;
        }
        let n = ep
            .wait(&mut events, 100)
            .map_err(|e| format!("epoll_wait: {e}"))?;
        for ev in &events[..n] {
            let token = ev.u64;
            let flags = ev.events;
            if token >= LISTEN_TOKEN_BASE {
                let lfd = listeners[(token - LISTEN_TOKEN_BASE) as usize];
                loop {
                    // SAFETY: plain syscall; we do not need the peer address.
                    let c = unsafe {
                        libc::accept4(
                            lfd,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                        )
                    };
                    if c < 0 {
                        let e = sys::last_err();
                        let code = e.raw_os_error().unwrap_or(0);
                        if code == libc::EAGAIN || code == libc::EINTR {
                            break;
                        }
                        *res.accept_errors
                            .entry(crate::result::errno_name(&e))
                            .or_insert(0) += 1;
                        if code == libc::EMFILE || code == libc::ENFILE {
                            // Out of descriptors: leave the rest in the backlog for now.
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        break;
                    }
                    res.accepted += 1;
                    open += 1;
                    res.peak_open = res.peak_open.max(open);
                    if cfg.lean {
                        match serve(
                            c,
                            &mut buf,
                            true,
                            false,
                            &ep,
                            &mut res,
                            &mut open,
                            &mut backlog,
                        ) {
                            Served::Closed => {
                                res.served_at_accept += 1;
                                continue;
                            }
                            served => {
                                // the request did not come whole with the handshake: echo what
                                // follows at once, as without --lean (Nagle would hold a short
                                // echo until the client's delayed ACK)
                                let _ = set_int(c, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
                                if served == Served::Pending {
                                    continue;
                                }
                            }
                        }
                    } else {
                        let _ = set_int(c, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
                    }
                    if ep
                        .add(c, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, c as u64)
                        .is_err()
                    {
                        close_fd(c, false);
                        open -= 1;
                        continue;
                    }
                }
                continue;
            }
            let fd = token as i32;
            if flags & libc::EPOLLOUT as u32 != 0
                && let Some((pending, close_after)) = backlog.remove(&fd)
            {
                match write_fd(fd, &pending) {
                    Ok(w) if w == pending.len() => {
                        res.bytes_echoed += w as u64;
                        if close_after {
                            close_fd(fd, false);
                            open -= 1;
                            res.closed_after_end += 1;
                            continue;
                        }
                        let _ = ep.modify(fd, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, token);
                    }
                    Ok(w) => {
                        res.bytes_echoed += w as u64;
                        backlog.insert(fd, (pending[w..].to_vec(), close_after));
                        continue;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                        backlog.insert(fd, (pending, close_after));
                        continue;
                    }
                    Err(_) => {
                        close_fd(fd, false);
                        open -= 1;
                        res.closed_on_error += 1;
                        continue;
                    }
                }
            }
            if flags & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLERR | libc::EPOLLHUP) as u32
                == 0
            {
                continue;
            }
            if backlog.contains_key(&fd) {
                // Still echoing: read more only once the backlog is written.
                if flags & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    backlog.remove(&fd);
                    close_fd(fd, false);
                    open -= 1;
                    res.closed_on_error += 1;
                }
                continue;
            }
            // Level-triggered: one read per event is enough; the rest comes next round.
            serve(
                fd,
                &mut buf,
                cfg.lean,
                true,
                &ep,
                &mut res,
                &mut open,
                &mut backlog,
            );
            if sys::stopped() {
                break 'outer;
            }
        }
    }
    res.open_at_stop = open;
    let (u1, s1) = sys::own_cpu_s();
    res.cpu_user_s = u1 - cpu0.0;
    res.cpu_sys_s = s1 - cpu0.1;
    res.elapsed_s = (mono_ns() - t0) as f64 / 1e9;
    Ok(res)
}
