//! TCP connection tests: an epoll echo server (`conn-server`) and a client that either holds
//! many connections open (`conn-hold`, concurrent connection capacity) or runs one short
//! transaction per connection at a target rate (`conn-rate`, setup and tear-down rate).
//!
//! The wire protocol is tiny and the same for both: the server echoes every byte it reads; a
//! `!` byte means "last byte": the server echoes it and then closes its side (FIN). A rate
//! transaction is `req_bytes - 1` filler bytes plus `!`; the client reads the echo until EOF,
//! then closes (its FIN comes second, so the client never holds TIME_WAIT sockets and its
//! ephemeral ports are free again at once). A capacity probe is one `.` byte echoed back.
//!
//! Owns: non-blocking sockets, epoll, the connection state machines, their counters and JSON
//! results. Never touches the firewall, namespaces or sysctls (the Python runner does).

pub mod client;
pub mod server;
pub mod workers;

use crate::sys::{self, Fd};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Byte that ends a transaction: the server echoes it and closes.
pub const END_BYTE: u8 = b'!';
/// Filler byte of a request.
pub const FILL_BYTE: u8 = b'x';
/// Capacity probe byte (echoed, connection stays open).
pub const PROBE_BYTE: u8 = b'.';

/// Thin epoll wrapper; tokens are u64 chosen by the caller.
pub struct Epoll {
    fd: Fd,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            Err(sys::last_err())
        } else {
            Ok(Epoll { fd: Fd(fd) })
        }
    }

    fn ctl(&self, op: i32, fd: i32, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event.
        let r = unsafe { libc::epoll_ctl(self.fd.0, op, fd, &mut ev) };
        if r < 0 { Err(sys::last_err()) } else { Ok(()) }
    }

    pub fn add(&self, fd: i32, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    pub fn modify(&self, fd: i32, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Wait up to `timeout_ms` (-1: forever); returns the number of events filled in `buf`.
    pub fn wait(&self, buf: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() events.
        let n =
            unsafe { libc::epoll_wait(self.fd.0, buf.as_mut_ptr(), buf.len() as i32, timeout_ms) };
        if n < 0 {
            let e = sys::last_err();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

pub fn empty_events(n: usize) -> Vec<libc::epoll_event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; n]
}

/// Raw non-blocking TCP socket (not wrapped in Fd: connection tables store plain ints and
/// close them explicitly, which keeps 500k entries small).
pub fn tcp_socket(v6: bool) -> io::Result<i32> {
    let dom = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: plain syscall.
    let fd = unsafe {
        libc::socket(
            dom,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 { Err(sys::last_err()) } else { Ok(fd) }
}

pub fn set_int(fd: i32, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: v lives for the call.
    let r =
        unsafe { libc::setsockopt(fd, level, name, &v as *const i32 as *const libc::c_void, 4) };
    if r < 0 { Err(sys::last_err()) } else { Ok(()) }
}

/// SO_ERROR of a socket (0: none).
pub fn so_error(fd: i32) -> i32 {
    let mut v: i32 = 0;
    let mut l: libc::socklen_t = 4;
    // SAFETY: v and l are valid for writing.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut l,
        )
    };
    if r < 0 {
        sys::last_err().raw_os_error().unwrap_or(libc::EIO)
    } else {
        v
    }
}

/// Close a socket; with `rst` an abortive close (SO_LINGER 0: RST, no TIME_WAIT).
pub fn close_fd(fd: i32, rst: bool) {
    if rst {
        let lg = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: lg lives for the call.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &lg as *const libc::linger as *const libc::c_void,
                std::mem::size_of::<libc::linger>() as u32,
            )
        };
    }
    // SAFETY: the caller owns fd.
    unsafe { libc::close(fd) };
}

pub fn bind_sa(fd: i32, a: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sys::sockaddr(a);
    // SAFETY: ss holds a valid address of length len.
    let r = unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) };
    if r < 0 { Err(sys::last_err()) } else { Ok(()) }
}

/// Start a non-blocking connect; Ok(true) when already connected, Ok(false) when in progress.
pub fn connect_start(fd: i32, a: &SocketAddr) -> io::Result<bool> {
    let (ss, len) = sys::sockaddr(a);
    // SAFETY: as above.
    let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
    if r == 0 {
        return Ok(true);
    }
    let e = sys::last_err();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// read(2) on a raw fd: Ok(n) (0 = EOF), Err on error (EAGAIN included).
pub fn read_fd(fd: i32, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writing buf.len() bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    if n < 0 {
        Err(sys::last_err())
    } else {
        Ok(n as usize)
    }
}

/// send(2) with `flags` and MSG_NOSIGNAL (no SIGPIPE): the bytes written.
fn send_flags(fd: i32, buf: &[u8], flags: i32) -> io::Result<usize> {
    // SAFETY: buf is valid for reading.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL | flags,
        )
    };
    if n < 0 {
        Err(sys::last_err())
    } else {
        Ok(n as usize)
    }
}

/// send(2) without SIGPIPE.
pub fn write_fd(fd: i32, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd, buf, 0)
}

/// send(2) without SIGPIPE and with MSG_MORE: the bytes wait in the socket (corked) for what
/// follows, e.g. a close whose FIN then leaves in the same segment.
pub fn write_fd_more(fd: i32, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd, buf, libc::MSG_MORE)
}

/// errno -> the failure class reported in results.
pub fn errno_class(e: i32) -> &'static str {
    match e {
        libc::ETIMEDOUT => "timeout",
        libc::ECONNREFUSED => "refused",
        libc::ECONNRESET | libc::EPIPE => "reset",
        libc::EHOSTUNREACH | libc::ENETUNREACH => "unreachable",
        libc::EADDRNOTAVAIL => "no_local_port",
        libc::EMFILE | libc::ENFILE => "no_fd",
        libc::ENOBUFS | libc::ENOMEM => "no_memory",
        _ => "other",
    }
}

/// Count of failures by class.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Failures(pub BTreeMap<&'static str, u64>);

impl Failures {
    pub fn add(&mut self, class: &'static str) {
        *self.0.entry(class).or_insert(0) += 1;
    }
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

/// Latency summary [us].
#[derive(Debug, Serialize, Default)]
pub struct LatencyUs {
    pub samples: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

pub struct LatHist {
    h: hdrhistogram::Histogram<u64>,
}

impl Default for LatHist {
    fn default() -> Self {
        LatHist {
            h: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("bounds"),
        }
    }
}

impl LatHist {
    pub fn record_ns(&mut self, ns: u64) {
        let us = (ns / 1000).clamp(1, 3_600_000_000);
        let _ = self.h.record(us);
    }
    pub fn summary(&self) -> LatencyUs {
        if self.h.is_empty() {
            return LatencyUs::default();
        }
        LatencyUs {
            samples: self.h.len(),
            min: self.h.min() as f64,
            mean: self.h.mean(),
            p50: self.h.value_at_quantile(0.5) as f64,
            p90: self.h.value_at_quantile(0.9) as f64,
            p99: self.h.value_at_quantile(0.99) as f64,
            p999: self.h.value_at_quantile(0.999) as f64,
            max: self.h.max() as f64,
        }
    }
}

/// Parse a list of ports: `5601`, `5601-5604` or `5601,5603`.
pub fn parse_ports(s: &str) -> Result<Vec<u16>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let r = crate::profile::PortRange::parse(part)?;
        if r.lo == 0 {
            return Err(format!("port 0 in '{s}'"));
        }
        v.extend(r.lo..=r.hi);
    }
    if v.is_empty() {
        return Err(format!("empty port list '{s}'"));
    }
    if v.len() > 1024 {
        return Err(format!("port list '{s}' has more than 1024 ports"));
    }
    Ok(v)
}

/// Parse source addresses: comma-separated `A`, `A-B` or `A/len` items, at most 65536 in all.
pub fn parse_addrs(s: &str) -> Result<Vec<IpAddr>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let r = crate::profile::AddrRange::parse(part)?;
        if v.len() as u64 + r.count > 65536 {
            return Err(format!("address list '{s}' has more than 65536 addresses"));
        }
        v.extend((0..r.count).map(|k| r.ip_at(k)));
    }
    if v.is_empty() {
        return Err(format!("empty address list '{s}'"));
    }
    let fam = v[0].is_ipv6();
    if v.iter().any(|a| a.is_ipv6() != fam) {
        return Err(format!("address list '{s}' mixes IPv4 and IPv6"));
    }
    Ok(v)
}

/// Raise RLIMIT_NOFILE (soft and, as root, hard) to `n`; returns the soft limit now in force.
pub fn raise_nofile_to(n: u64) -> u64 {
    // SAFETY: rlimit is plain data.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < n {
            let want = libc::rlimit {
                rlim_cur: n,
                rlim_max: r.rlim_max.max(n),
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
                r.rlim_cur = n.min(r.rlim_max);
                libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            }
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur
    }
}

/// Write `text` to `path` atomically enough for a poller (write a temp file, rename).
pub fn write_marker(path: &str, text: &str) -> Result<(), String> {
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {tmp}: {e}"))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot rename {tmp}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_addresses() {
        assert_eq!(parse_ports("5601").unwrap(), vec![5601]);
        assert_eq!(
            parse_ports("5601-5603,5605").unwrap(),
            vec![5601, 5602, 5603, 5605]
        );
        assert!(parse_ports("0").is_err());
        assert!(parse_ports("").is_err());
        let a = parse_addrs("198.18.1.10-198.18.1.12,198.18.1.1").unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!(a[3].to_string(), "198.18.1.1");
        assert!(parse_addrs("198.18.1.1,2001:2::1").is_err());
        assert!(parse_addrs("10.0.0.0/8").is_err());
    }

    #[test]
    fn errno_classes() {
        assert_eq!(errno_class(libc::ETIMEDOUT), "timeout");
        assert_eq!(errno_class(libc::ECONNRESET), "reset");
        assert_eq!(errno_class(libc::EADDRNOTAVAIL), "no_local_port");
        assert_eq!(errno_class(libc::EMFILE), "no_fd");
        let mut f = Failures::default();
        f.add("reset");
        f.add("reset");
        f.add("timeout");
        assert_eq!(f.total(), 3);
        assert_eq!(f.0["reset"], 2);
    }

    #[test]
    fn latency_summary() {
        let mut h = LatHist::default();
        for us in 1..=1000u64 {
            h.record_ns(us * 1000);
        }
        let s = h.summary();
        assert_eq!(s.samples, 1000);
        assert!((s.p50 - 500.0).abs() <= 1.0);
        assert_eq!(s.max, 1000.0);
        assert_eq!(LatHist::default().summary().samples, 0);
    }
}

/// Merge the JSON results of worker processes: numbers under `sum` are added, maps under
/// `maps` are added key by key, latency summaries under `lats` are combined (samples, min and
/// max exact; mean weighted; percentiles: the highest worker's, an upper bound), series are
/// added per second. Everything else is taken from the first worker; each worker's own
/// document is kept under "workers".
pub fn merge_docs(
    docs: Vec<serde_json::Value>,
    sum: &[&str],
    maps: &[&str],
    lats: &[&str],
) -> Result<serde_json::Value, String> {
    use serde_json::{Map, Value};
    for d in &docs {
        if let Some(e) = d.get("error") {
            return Err(format!("a worker failed: {}", e.as_str().unwrap_or("?")));
        }
    }
    let mut out = docs.first().cloned().ok_or("no workers")?;
    let o = out
        .as_object_mut()
        .ok_or("worker result is not an object")?;
    for k in sum {
        let mut t = 0.0f64;
        let mut int = true;
        for d in &docs {
            if let Some(Value::Number(n)) = d.get(*k) {
                int &= n.is_u64();
                t += n.as_f64().unwrap_or(0.0);
            }
        }
        o.insert(
            (*k).into(),
            if int {
                Value::from(t as u64)
            } else {
                Value::from(t)
            },
        );
    }
    for k in maps {
        let mut m: BTreeMap<String, u64> = BTreeMap::new();
        for d in &docs {
            if let Some(Value::Object(x)) = d.get(*k) {
                for (kk, v) in x {
                    *m.entry(kk.clone()).or_insert(0) += v.as_u64().unwrap_or(0);
                }
            }
        }
        o.insert((*k).into(), serde_json::to_value(m).expect("map"));
    }
    for k in lats {
        let parts: Vec<&Value> = docs
            .iter()
            .filter_map(|d| d.get(*k))
            .filter(|l| l["samples"].as_u64().unwrap_or(0) > 0)
            .collect();
        let n: u64 = parts
            .iter()
            .map(|l| l["samples"].as_u64().unwrap_or(0))
            .sum();
        let mut l = Map::new();
        l.insert("samples".into(), n.into());
        if n > 0 {
            let f = |l: &Value, key: &str| l[key].as_f64().unwrap_or(0.0);
            let mean = parts
                .iter()
                .map(|p| f(p, "mean") * p["samples"].as_f64().unwrap_or(0.0))
                .sum::<f64>()
                / n as f64;
            l.insert("mean".into(), mean.into());
            let min = parts
                .iter()
                .map(|p| f(p, "min"))
                .fold(f64::INFINITY, f64::min);
            l.insert("min".into(), min.into());
            for key in ["p50", "p90", "p99", "p999", "max"] {
                let v = parts.iter().map(|p| f(p, key)).fold(0.0, f64::max);
                l.insert(key.into(), v.into());
            }
            l.insert(
                "percentiles".into(),
                "highest of the workers' (an upper bound)".into(),
            );
        }
        o.insert((*k).into(), Value::Object(l));
    }
    let mut series: Vec<Value> = Vec::new();
    for d in &docs {
        if let Some(Value::Array(s)) = d.get("series") {
            for (i, smp) in s.iter().enumerate() {
                if series.len() <= i {
                    series.push(smp.clone());
                    continue;
                }
                for key in ["a", "b", "c"] {
                    let v = series[i][key].as_u64().unwrap_or(0) + smp[key].as_u64().unwrap_or(0);
                    series[i][key] = v.into();
                }
            }
        }
    }
    o.insert("series".into(), Value::Array(series));
    o.insert("workers".into(), Value::from(docs.len()));
    o.insert(
        "per_worker".into(),
        Value::Array(
            docs.into_iter()
                .map(|mut d| {
                    if let Some(x) = d.as_object_mut() {
                        x.remove("series");
                    }
                    d
                })
                .collect(),
        ),
    );
    Ok(out)
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    #[test]
    fn merge_sums_and_maps() {
        let a = serde_json::json!({"kind": "conn-hold", "established": 10, "failed": {"timeout": 1},
            "connect_us": {"samples": 10, "mean": 100.0, "min": 5.0, "p50": 90.0, "p90": 1.0,
                           "p99": 1.0, "p999": 1.0, "max": 300.0},
            "series": [{"t_s": 1.0, "a": 5, "b": 0, "c": 0}]});
        let b = serde_json::json!({"kind": "conn-hold", "established": 7, "failed": {"timeout": 2, "reset": 1},
            "connect_us": {"samples": 30, "mean": 200.0, "min": 7.0, "p50": 80.0, "p90": 1.0,
                           "p99": 1.0, "p999": 1.0, "max": 200.0},
            "series": [{"t_s": 1.0, "a": 3, "b": 1, "c": 0}, {"t_s": 2.0, "a": 7, "b": 1, "c": 0}]});
        let m = merge_docs(vec![a, b], &["established"], &["failed"], &["connect_us"]).unwrap();
        assert_eq!(m["established"], 17);
        assert_eq!(m["failed"]["timeout"], 3);
        assert_eq!(m["failed"]["reset"], 1);
        assert_eq!(m["connect_us"]["samples"], 40);
        assert_eq!(m["connect_us"]["mean"], 175.0);
        assert_eq!(m["connect_us"]["min"], 5.0);
        assert_eq!(m["connect_us"]["p50"], 90.0);
        assert_eq!(m["series"][0]["a"], 8);
        assert_eq!(m["series"][1]["a"], 7);
        assert_eq!(m["workers"], 2);
        let e = merge_docs(vec![serde_json::json!({"error": "x"})], &[], &[], &[]);
        assert!(e.is_err());
    }
}

/// Real sockets on loopback (no root): the server in a thread, the client in the test.
#[cfg(test)]
mod loopback_tests {
    use super::client::{Endpoints, HoldConfig, RateConfig, hold, rate};
    use super::server::{ServerConfig, run};

    fn port(off: u16) -> u16 {
        30000 + (std::process::id() % 10000) as u16 + off
    }

    fn server(p: u16, secs: f64) -> std::thread::JoinHandle<super::server::ServerResult> {
        server_with(p, secs, false)
    }

    fn server_with(
        p: u16,
        secs: f64,
        lean: bool,
    ) -> std::thread::JoinHandle<super::server::ServerResult> {
        let h = std::thread::spawn(move || {
            run(ServerConfig {
                bind: "127.0.0.1".parse().unwrap(),
                ports: vec![p],
                duration_s: Some(secs),
                backlog: 4096,
                cpu: None,
                max_fds: 4096,
                ready_file: None,
                lean,
            })
            .unwrap()
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        h
    }

    fn ep(p: u16) -> Endpoints {
        Endpoints {
            dst: "127.0.0.1".parse().unwrap(),
            ports: vec![p],
            srcs: vec!["127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()],
        }
    }

    #[test]
    fn rate_and_hold_against_the_echo_server() {
        let p = port(1);
        let srv = server(p, 4.0);
        let r = rate(RateConfig {
            ep: ep(p),
            rate_cps: Some(400.0),
            duration_s: 0.5,
            req_bytes: 16,
            timeout_s: 2.0,
            max_inflight: 1000,
            cpu: None,
            close_rst: false,
            lean: false,
        })
        .unwrap();
        assert_eq!(r.intended, Some(200));
        assert_eq!(r.started, 200);
        assert_eq!(r.succeeded, 200, "failures: {:?}", r.failed);
        assert_eq!(r.transaction_us.samples, 200);
        let h = hold(HoldConfig {
            ep: ep(p),
            count: 300,
            open_rate_cps: None,
            max_pending: 100,
            connect_timeout_s: 2.0,
            hold_s: 0.2,
            probe_every: 1,
            probe_timeout_s: 2.0,
            close_rst: true,
            stop_on_failure: false,
            cpu: None,
            held_file: None,
            release_fd: None,
        })
        .unwrap();
        assert_eq!(h.established, 300);
        assert_eq!(h.held, 300);
        assert_eq!(h.probe_ok, 300);
        assert!(h.first_failure_at.is_none());
        let s = srv.join().unwrap();
        assert_eq!(s.accepted, 500);
        assert_eq!(s.closed_after_end, 200);
        assert_eq!(s.peak_open >= 300, true);
    }

    #[test]
    fn lean_transactions_against_the_lean_server() {
        // both close modes; a longer request (split reads are echoed before the end byte)
        let p = port(3);
        let srv = server_with(p, 3.0, true);
        let mut total = 0;
        for (close_rst, req_bytes) in [(false, 16), (true, 16), (false, 3000)] {
            let r = rate(RateConfig {
                ep: ep(p),
                rate_cps: Some(400.0),
                duration_s: 0.25,
                req_bytes,
                timeout_s: 2.0,
                max_inflight: 1000,
                cpu: None,
                close_rst,
                lean: true,
            })
            .unwrap();
            assert!(r.lean);
            assert_eq!(r.started, 100);
            assert_eq!(r.succeeded, 100, "failures: {:?}", r.failed);
            total += r.succeeded;
        }
        let s = srv.join().unwrap();
        assert!(s.lean);
        assert_eq!(s.accepted, total);
        assert_eq!(s.closed_after_end, total);
        assert_eq!(s.bytes_echoed, 200 * 16 + 100 * 3000);
    }

    #[test]
    fn refused_connections_are_counted_as_failures() {
        let p = port(2); // nothing listens here
        let r = rate(RateConfig {
            ep: ep(p),
            rate_cps: Some(200.0),
            duration_s: 0.25,
            req_bytes: 4,
            timeout_s: 1.0,
            max_inflight: 100,
            cpu: None,
            close_rst: true,
            lean: false,
        })
        .unwrap();
        assert_eq!(r.started, 50);
        assert_eq!(r.succeeded, 0);
        assert_eq!(r.failed.0.get("refused"), Some(&50));
    }
}
