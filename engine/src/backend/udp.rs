//! `udp` backend: ordinary UDP sockets and sendmmsg batches. The kernel builds
//! IP/UDP headers and checksums; we write only the test header per packet.
//! Never uses UDP GSO.
//!
//! Limits (by design of UDP sockets): the source address is one local address
//! (or the kernel's choice); a source-port range uses one bound socket per
//! port (at most MAX_SOCKETS) and the port is chosen per batch (from the flow
//! of the batch's first packet); destination address and port vary per packet.

use super::{TxBackend, TxContext};
use crate::frame::FrameSpec;
use crate::header::{self, Layout};
use crate::profile::FlowGen;
use crate::sys::{self, Fd};
use std::io;
use std::net::{IpAddr, SocketAddr};

pub const MAX_SOCKETS: u64 = 4096;

pub struct UdpTx {
    socks: Vec<Fd>,
    sport_lo: u16,
    connected: bool,
    v6: bool,
    flows: FlowGen,
    thread: usize,
    threads: usize,
    layout: Layout,
    batch: usize,
    // Batch buffers; the raw pointers in `iovs`/`msgs` point into the heap
    // blocks of `bufs`/`names`, which are never resized.
    _bufs: Vec<u8>,
    bufs_ptr: *mut u8,
    payload_len: usize,
    names: Vec<libc::sockaddr_storage>,
    _iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    sndbuf: i32,
}

pub fn open(cx: &TxContext) -> Result<Box<dyn TxBackend>, String> {
    let p = cx.profile;
    if p.proto != crate::profile::Proto::Udp {
        return Err("udp backend sends only --proto udp (use --backend packet for tcp-syn)".into());
    }
    if let Some(src) = &p.src
        && src.count > 1
    {
        return Err("udp backend cannot vary source addresses; use --backend packet".into());
    }
    if p.src_port.count() > MAX_SOCKETS {
        return Err(format!(
            "udp backend opens one socket per source port; range {} exceeds {MAX_SOCKETS} (use --backend packet)",
            p.src_port.describe()
        ));
    }
    let spec = FrameSpec::new(p.ipv6, p.proto, p.frame_size)?;
    let payload_len = spec.payload_len();
    let layout = spec.layout().ok_or("frame too small for the test header")?;
    let connected = p.dst.count == 1 && p.dst_port.count() == 1;
    let dst0 = SocketAddr::new(p.dst.first_ip(), p.dst_port.lo);
    let src_ip: IpAddr = match &p.src {
        Some(s) => s.first_ip(),
        None if p.ipv6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        None => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    };
    sys::raise_nofile(p.src_port.count() * cx.threads as u64 + 256);
    let mut socks = Vec::new();
    let mut sndbuf = 0;
    for port in p.src_port.lo..=p.src_port.hi {
        let fd = sys::socket(sys::family(&src_ip), libc::SOCK_DGRAM, 0)
            .map_err(|e| format!("socket: {e}"))?;
        sndbuf = sys::set_buf(&fd, false, cx.opts.sndbuf);
        if cx.threads > 1 {
            // Several sender threads may share source ports.
            let one: i32 = 1;
            let _ = sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, &one);
        }
        let local = SocketAddr::new(src_ip, port);
        sys::bind(&fd, &local).map_err(|e| format!("bind {local}: {e}"))?;
        if connected {
            sys::connect(&fd, &dst0).map_err(|e| format!("connect {dst0}: {e}"))?;
        }
        socks.push(fd);
    }

    let batch = cx.opts.batch.clamp(1, 1024);
    let mut bufs = vec![0u8; batch * payload_len];
    for k in 0..batch {
        header::encode(&mut bufs[k * payload_len..], layout, cx.stream, 0, 0);
    }
    let (ss0, name_len) = sys::sockaddr(&dst0);
    let mut names = vec![ss0; batch];
    let bufs_ptr = bufs.as_mut_ptr();
    let (iovs, msgs) = super::mmsg_headers(
        &mut bufs,
        payload_len,
        batch,
        (!connected).then_some((&mut names[..], name_len)),
    );
    Ok(Box::new(UdpTx {
        socks,
        sport_lo: p.src_port.lo,
        connected,
        v6: p.ipv6,
        flows: cx.flowgen(),
        thread: cx.thread,
        threads: cx.threads,
        layout,
        batch,
        _bufs: bufs,
        bufs_ptr,
        payload_len,
        names,
        _iovs: iovs,
        msgs,
        sndbuf,
    }))
}

impl UdpTx {
    #[inline(always)]
    fn set_dst(&mut self, k: usize, addr: u128, port: u16) {
        let ss = &mut self.names[k] as *mut libc::sockaddr_storage;
        // SAFETY: names[k] was initialised as sockaddr_in/in6 of this family.
        unsafe {
            if self.v6 {
                let s = ss as *mut libc::sockaddr_in6;
                (*s).sin6_port = port.to_be();
                (*s).sin6_addr.s6_addr = addr.to_be_bytes();
            } else {
                let s = ss as *mut libc::sockaddr_in;
                (*s).sin_port = port.to_be();
                (*s).sin_addr.s_addr = (addr as u32).to_be();
            }
        }
    }
}

impl TxBackend for UdpTx {
    fn send(&mut self, seq0: u64, n: usize, tx_ns: u64) -> io::Result<usize> {
        let n = n.min(self.batch);
        let first = self
            .flows
            .flow(TxContext::flow_index(seq0, self.thread, self.threads));
        let sock = if self.socks.len() == 1 {
            0
        } else {
            (first.sport - self.sport_lo) as usize
        };
        for k in 0..n {
            let seq = seq0 + k as u64;
            if !self.connected {
                let f = if k == 0 {
                    first
                } else {
                    self.flows
                        .flow(TxContext::flow_index(seq, self.thread, self.threads))
                };
                self.set_dst(k, f.dst, f.dport);
            }
            // SAFETY: k < batch, so the slice lies inside the bufs allocation.
            let b = unsafe {
                std::slice::from_raw_parts_mut(
                    self.bufs_ptr.add(k * self.payload_len),
                    self.payload_len,
                )
            };
            header::patch(b, self.layout, seq, tx_ns);
        }
        // msgs[..n] point into the live batch buffers.
        sys::sendmmsg(&self.socks[sock], &mut self.msgs, n, 0)
    }

    fn max_batch(&self) -> usize {
        self.batch
    }

    fn info(&self) -> serde_json::Value {
        serde_json::json!({
            "sockets": self.socks.len(),
            "connected": self.connected,
            "sndbuf_bytes": self.sndbuf,
            "header_layout": self.layout.name(),
            "udp_payload_bytes": self.payload_len,
        })
    }
}
