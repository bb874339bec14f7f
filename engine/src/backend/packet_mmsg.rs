//! `packet-mmsg` backend: the same raw Ethernet frames as `packet`, handed to
//! an AF_PACKET socket with `sendmmsg` instead of a TX ring.
//!
//! Why a second AF_PACKET path: the TX ring hands the kernel an skb whose
//! payload is a page fragment pointing into the ring, so anything on the path
//! that needs the frame linear (generic XDP, netfilter reading the headers of
//! a fragment-backed skb) copies it again (`skb_copy_ubufs`,
//! `pskb_expand_head`, `__pskb_pull_tail` in a `perf` profile). `sendmsg` on a
//! packet socket copies a small frame once into a linear skb (packet_snd
//! makes the whole frame linear when it fits in a page), and one `sendmmsg`
//! call carries a whole batch. Frames are written in a user-space batch buffer
//! from the same template as the ring backend (addresses, ports, seq/timestamp
//! and checksums per packet).

use super::packet::RawSocket;
use super::{TxBackend, TxContext};
use crate::profile::FlowGen;
use crate::sys;
use std::io;

pub struct PacketMmsgTx {
    raw: RawSocket,
    flows: FlowGen,
    thread: usize,
    threads: usize,
    batch: usize,
    // The raw pointers in `iovs`/`msgs` point into the heap blocks of `bufs`
    // and `iovs`, which are never resized.
    bufs: Vec<u8>,
    _iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

pub fn open(cx: &TxContext) -> Result<Box<dyn TxBackend>, String> {
    let raw = RawSocket::open(cx, |_, _| Ok(()))?;
    let wire_len = raw.wire_len;
    let batch = cx.opts.batch.clamp(1, 1024);
    let mut bufs = vec![0u8; batch * wire_len];
    for k in 0..batch {
        bufs[k * wire_len..(k + 1) * wire_len].copy_from_slice(&raw.tmpl.bytes[..wire_len]);
    }
    // No address: the socket is bound to the interface, the kernel reads the protocol from the frame.
    let (iovs, msgs) = super::mmsg_headers(&mut bufs, wire_len, batch, None);
    Ok(Box::new(PacketMmsgTx {
        raw,
        flows: cx.flowgen(),
        thread: cx.thread,
        threads: cx.threads,
        batch,
        bufs,
        _iovs: iovs,
        msgs,
    }))
}

impl TxBackend for PacketMmsgTx {
    fn send(&mut self, seq0: u64, n: usize, tx_ns: u64) -> io::Result<usize> {
        let n = n.min(self.batch);
        let w = self.raw.wire_len;
        for k in 0..n {
            let seq = seq0 + k as u64;
            let f = self
                .flows
                .flow(TxContext::flow_index(seq, self.thread, self.threads));
            self.raw
                .tmpl
                .write(&mut self.bufs[k * w..(k + 1) * w], &f, seq, tx_ns);
        }
        sys::sendmmsg(&self.raw.fd, &mut self.msgs, n, libc::MSG_DONTWAIT)
    }

    fn max_batch(&self) -> usize {
        self.batch
    }

    fn info(&self) -> serde_json::Value {
        let mut v = self.raw.info();
        v["send_call"] = "sendmmsg".into();
        v
    }
}
