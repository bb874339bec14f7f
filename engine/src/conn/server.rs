//! `conn-server`: one epoll thread that accepts on one or more ports and echoes. Connections
//! stay open until the peer closes, resets, or a `!` byte asks the server to close its side.
//! Stops at `--duration-s`, SIGINT or SIGTERM and prints its counters as JSON.

use super::{END_BYTE, Epoll, close_fd, empty_events, read_fd, set_int, write_fd};
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
                    let _ = set_int(c, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
                    if ep
                        .add(c, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, c as u64)
                        .is_err()
                    {
                        close_fd(c, false);
                        continue;
                    }
                    res.accepted += 1;
                    open += 1;
                    res.peak_open = res.peak_open.max(open);
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
            match read_fd(fd, &mut buf) {
                Ok(0) => {
                    close_fd(fd, false);
                    open -= 1;
                    res.closed_by_peer += 1;
                }
                Ok(n) => {
                    let data = &buf[..n];
                    let end = data.contains(&END_BYTE);
                    match write_fd(fd, data) {
                        Ok(w) if w == n => {
                            res.bytes_echoed += w as u64;
                            if end {
                                close_fd(fd, false);
                                open -= 1;
                                res.closed_after_end += 1;
                            }
                        }
                        Ok(w) => {
                            res.bytes_echoed += w as u64;
                            backlog.insert(fd, (data[w..].to_vec(), end));
                            let _ = ep.modify(fd, libc::EPOLLOUT as u32, token);
                        }
                        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                            backlog.insert(fd, (data.to_vec(), end));
                            let _ = ep.modify(fd, libc::EPOLLOUT as u32, token);
                        }
                        Err(_) => {
                            close_fd(fd, false);
                            open -= 1;
                            res.closed_on_error += 1;
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                Err(_) => {
                    close_fd(fd, false);
                    open -= 1;
                    res.closed_on_error += 1;
                }
            }
            if sys::stopped() {
                break 'outer;
            }
        }
    }
    res.open_at_stop = open;
    res.elapsed_s = (mono_ns() - t0) as f64 / 1e9;
    Ok(res)
}
