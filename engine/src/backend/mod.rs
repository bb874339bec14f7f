//! Transmit backends: a small trait plus a registry selected by name.
//! A backend owns its sockets and per-packet buffers; the sender driver
//! (`send.rs`) owns pacing, counting and threads.

pub mod packet;
pub mod packet_mmsg;
pub mod udp;

use crate::profile::{FlowGen, Profile};
use std::io;

/// Options every backend may read (set from the CLI).
#[derive(Debug, Clone)]
pub struct BackendOpts {
    /// Packets per send call at most.
    pub batch: usize,
    /// Interface (packet backend).
    pub iface: Option<String>,
    /// Packet backend: bypass the qdisc layer (PACKET_QDISC_BYPASS).
    pub qdisc_bypass: bool,
    /// Socket send buffer request [bytes] (udp backend).
    pub sndbuf: i32,
}

/// What one sender thread's backend instance needs.
pub struct TxContext<'a> {
    pub profile: &'a Profile,
    pub opts: &'a BackendOpts,
    /// Stream id written into this thread's packets.
    pub stream: u16,
    pub thread: usize,
    pub threads: usize,
}

impl TxContext<'_> {
    /// Flow generator shared by all backends.
    pub fn flowgen(&self) -> FlowGen {
        FlowGen::new(self.profile)
    }
    /// Index into the profile's flow sequence for this thread's packet `seq`
    /// (threads interleave so together they walk the same flow sequence).
    #[inline(always)]
    pub fn flow_index(seq: u64, thread: usize, threads: usize) -> u64 {
        seq.wrapping_mul(threads as u64).wrapping_add(thread as u64)
    }
}

/// One sender thread's transmit path.
pub trait TxBackend {
    /// Send the packets with sequence numbers `seq0 .. seq0 + n` (n <= `max_batch()`),
    /// all stamped with `tx_ns`. Returns how many left (a prefix); the caller
    /// retries the rest.
    fn send(&mut self, seq0: u64, n: usize, tx_ns: u64) -> io::Result<usize>;
    fn max_batch(&self) -> usize;
    /// Facts worth recording in the result (e.g. buffer sizes, ring shape).
    fn info(&self) -> serde_json::Value;
}

/// iovecs and `mmsghdr`s for `batch` messages of `len` bytes laid out back to back in `bufs`
/// (message k is `bufs[k * len..]`); with `names`, message k is addressed to `names.0[k]`
/// (`names.1` bytes). The headers hold raw pointers into `bufs`, `names` and the returned iovec
/// vector's heap block: the caller keeps all three alive and never resizes them.
pub(crate) fn mmsg_headers(
    bufs: &mut [u8],
    len: usize,
    batch: usize,
    mut names: Option<(&mut [libc::sockaddr_storage], u32)>,
) -> (Vec<libc::iovec>, Vec<libc::mmsghdr>) {
    assert!(bufs.len() >= batch * len);
    let base = bufs.as_mut_ptr();
    let mut iovs: Vec<libc::iovec> = (0..batch)
        .map(|k| libc::iovec {
            // SAFETY: offset within the bufs allocation (checked above).
            iov_base: unsafe { base.add(k * len) } as *mut libc::c_void,
            iov_len: len,
        })
        .collect();
    let msgs = (0..batch)
        .map(|k| {
            // SAFETY: a zeroed msghdr is valid; the pointers set here stay valid (see above).
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            if let Some((names, name_len)) = names.as_mut() {
                h.msg_name = &mut names[k] as *mut _ as *mut libc::c_void;
                h.msg_namelen = *name_len;
            }
            h.msg_iov = &mut iovs[k];
            h.msg_iovlen = 1;
            libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            }
        })
        .collect();
    (iovs, msgs)
}

pub type OpenFn = fn(&TxContext) -> Result<Box<dyn TxBackend>, String>;

pub struct BackendInfo {
    pub name: &'static str,
    pub about: &'static str,
    pub open: OpenFn,
}

/// All transmit backends, by name.
pub const REGISTRY: &[BackendInfo] = &[
    BackendInfo {
        name: "udp",
        about: "UDP sockets, sendmmsg batches (kernel builds headers; no GSO)",
        open: udp::open,
    },
    BackendInfo {
        name: "packet",
        about: "AF_PACKET TPACKET_V2 TX ring, raw Ethernet frames (spoofing, TCP SYN)",
        open: packet::open,
    },
    BackendInfo {
        name: "packet-mmsg",
        about: "AF_PACKET socket, sendmmsg batches of raw Ethernet frames (linear skbs; spoofing, TCP SYN)",
        open: packet_mmsg::open,
    },
];

pub fn lookup(name: &str) -> Result<&'static BackendInfo, String> {
    REGISTRY.iter().find(|b| b.name == name).ok_or_else(|| {
        let names: Vec<&str> = REGISTRY.iter().map(|b| b.name).collect();
        format!("unknown backend '{name}' (available: {})", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lookup() {
        assert_eq!(lookup("udp").unwrap().name, "udp");
        assert_eq!(lookup("packet").unwrap().name, "packet");
        let e = lookup("dpdk").err().unwrap();
        assert!(e.contains("udp, packet, packet-mmsg"), "{e}");
    }

    #[test]
    fn threads_interleave_flows() {
        let idx: Vec<u64> = (0..3)
            .flat_map(|s| (0..2).map(move |t| TxContext::flow_index(s, t, 2)))
            .collect();
        assert_eq!(idx, vec![0, 1, 2, 3, 4, 5]);
    }
}
