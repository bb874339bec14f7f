//! Thin, safe-ish wrappers over the libc calls the engine needs (sockets,
//! socket options, CPU affinity, interface lookups, signals). Owns no policy.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};

/// `sendmmsg` of the first `n` messages: how many the kernel took.
pub fn sendmmsg(fd: &Fd, msgs: &mut [libc::mmsghdr], n: usize, flags: i32) -> io::Result<usize> {
    let n = n.min(msgs.len());
    // SAFETY: msgs[..n] are initialised and, by the caller's contract, point to live buffers.
    let r = unsafe { libc::sendmmsg(fd.0, msgs.as_mut_ptr(), n as u32, flags) };
    if r < 0 {
        Err(last_err())
    } else {
        Ok(r as usize)
    }
}

pub fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Owned file descriptor closed on drop.
pub struct Fd(pub libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.0) };
    }
}

pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<Fd> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 { Err(last_err()) } else { Ok(Fd(fd)) }
}

pub fn setsockopt<T>(fd: &Fd, level: i32, name: i32, val: &T) -> io::Result<()> {
    // SAFETY: val points to a live T of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd.0,
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 { Err(last_err()) } else { Ok(()) }
}

pub fn getsockopt_int(fd: &Fd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut l = std::mem::size_of::<i32>() as u32;
    // SAFETY: v and l are valid for writing.
    let r = unsafe {
        libc::getsockopt(
            fd.0,
            level,
            name,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut l,
        )
    };
    if r < 0 { Err(last_err()) } else { Ok(v) }
}

/// Set a socket buffer size, bypassing the global cap when root (`*BUFFORCE`).
/// Returns the size the kernel reports afterwards.
pub fn set_buf(fd: &Fd, rcv: bool, bytes: i32) -> i32 {
    let (force, plain) = if rcv {
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    } else {
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    };
    if setsockopt(fd, libc::SOL_SOCKET, force, &bytes).is_err() {
        let _ = setsockopt(fd, libc::SOL_SOCKET, plain, &bytes);
    }
    getsockopt_int(fd, libc::SOL_SOCKET, plain).unwrap_or(0)
}

/// Encode a socket address; returns the storage and its length.
pub fn sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as u16,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

pub fn bind(fd: &Fd, a: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(a);
    // SAFETY: ss holds a valid address of length len.
    let r = unsafe { libc::bind(fd.0, &ss as *const _ as *const libc::sockaddr, len) };
    if r < 0 { Err(last_err()) } else { Ok(()) }
}

/// Bind an AF_PACKET socket to interface `ifindex` for `proto_be` (an ETH_P_* value already in
/// network byte order as the socket call takes it; 0 = receive nothing, for a TX-only socket).
pub fn bind_packet(fd: &Fd, ifindex: i32, proto_be: u16) -> io::Result<()> {
    // SAFETY: a zeroed sockaddr_ll is valid; the fields that matter are set below.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto_be;
    sll.sll_ifindex = ifindex;
    // SAFETY: sll is a valid sockaddr_ll and the length matches it.
    let r = unsafe {
        libc::bind(
            fd.0,
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r < 0 { Err(last_err()) } else { Ok(()) }
}

pub fn connect(fd: &Fd, a: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(a);
    // SAFETY: as above.
    let r = unsafe { libc::connect(fd.0, &ss as *const _ as *const libc::sockaddr, len) };
    if r < 0 { Err(last_err()) } else { Ok(()) }
}

pub fn family(ip: &IpAddr) -> i32 {
    if ip.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    }
}

/// Pin the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cpu number too large",
            ));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) < 0 {
            return Err(last_err());
        }
    }
    Ok(())
}

/// This process's CPU time so far: (user, system) [s] (getrusage RUSAGE_SELF; on veth the
/// kernel's packet path, softirq included, mostly runs in the sending process's context).
pub fn own_cpu_s() -> (f64, f64) {
    // SAFETY: ru is plain data written by the kernel.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return (0.0, 0.0);
        }
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        (t(ru.ru_utime), t(ru.ru_stime))
    }
}

/// CPU the calling thread runs on now.
pub fn current_cpu() -> i32 {
    // SAFETY: plain call.
    unsafe { libc::sched_getcpu() }
}

/// Index of the interface `name` (if_nametoindex).
pub fn ifindex(name: &str) -> io::Result<i32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad name"))?;
    // SAFETY: valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(last_err())
    } else {
        Ok(i as i32)
    }
}

/// Hardware address of an interface (SIOCGIFHWADDR).
pub fn if_mac(name: &str) -> io::Result<[u8; 6]> {
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    // SAFETY: zeroed ifreq is valid; name is copied with bounds check.
    unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        let nb = name.as_bytes();
        if nb.len() >= req.ifr_name.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "interface name too long",
            ));
        }
        for (i, b) in nb.iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(fd.0, libc::SIOCGIFHWADDR, &mut req) < 0 {
            return Err(last_err());
        }
        let sa = req.ifr_ifru.ifru_hwaddr;
        let mut m = [0u8; 6];
        for (dst, src) in m.iter_mut().zip(sa.sa_data.iter()) {
            *dst = *src as u8;
        }
        Ok(m)
    }
}

/// Raise RLIMIT_NOFILE to at least `n` (best effort).
pub fn raise_nofile(n: u64) {
    // SAFETY: rlimit is plain data.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < n {
            r.rlim_cur = n.min(r.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// Set by SIGINT/SIGTERM once `install_stop_handler` ran.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Catch SIGINT and SIGTERM into `STOP` (no SA_RESTART, so blocking calls return EINTR).
pub fn install_stop_handler() {
    // SAFETY: sigaction with a handler that only stores to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_stop as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = 0;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Parse a CPU list such as `0`, `0,1` or `0-3`.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad CPU list '{s}'"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (n(a)?, n(b)?);
                if b < a {
                    return Err(format!("bad CPU list '{s}'"));
                }
                v.extend(a..=b);
            }
            None => v.push(n(part)?),
        }
    }
    if v.is_empty() {
        return Err(format!("empty CPU list '{s}'"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0").unwrap(), vec![0]);
        assert_eq!(parse_cpus("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpus("1-3").unwrap(), vec![1, 2, 3]);
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("3-1").is_err());
    }

    #[test]
    fn sockaddr_encodes_ports_big_endian() {
        let (ss, len) = sockaddr(&"198.18.0.1:5555".parse().unwrap());
        assert_eq!(len as usize, std::mem::size_of::<libc::sockaddr_in>());
        // SAFETY: just written as sockaddr_in.
        let sin = unsafe { *(&ss as *const _ as *const libc::sockaddr_in) };
        assert_eq!(u16::from_be(sin.sin_port), 5555);
        assert_eq!(u32::from_be(sin.sin_addr.s_addr), 0xC612_0001);
    }
}
