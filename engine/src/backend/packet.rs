//! `packet` backend: AF_PACKET socket with a TPACKET_V2 TX ring (PACKET_TX_RING),
//! sending complete Ethernet frames built from a precomputed template. Any
//! source address/port (spoofing) and TCP SYN frames are possible. Needs
//! `--iface` and `--dst-mac` (the next hop's MAC); root or CAP_NET_RAW.
//!
//! Each ring slot is filled with the template once; per packet only the
//! addresses, ports, seq/timestamp and the two checksums are rewritten. A
//! batch is handed over with one non-blocking `send()`; slots the kernel took
//! are reused once it marks them available again (on veth that happens before
//! `send()` returns), slots it did not take are withdrawn and refilled. By default the qdisc layer is bypassed
//! (PACKET_QDISC_BYPASS), like trafgen.

use super::{TxBackend, TxContext};
use crate::frame::{FrameSpec, Template};
use crate::profile::{FlowGen, mac_string};
use crate::sys::{self, Fd};
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

const TPACKET_V2: i32 = 1;
const PACKET_VERSION: i32 = 10;
const PACKET_TX_RING: i32 = 13;
const PACKET_LOSS: i32 = 14;
const PACKET_QDISC_BYPASS: i32 = 20;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
/// Frame data offset for TPACKET_V2 TX: TPACKET2_HDRLEN - sizeof(sockaddr_ll) = 52 - 20.
const DATA_OFF: usize = 32;
const RING_FRAMES: usize = 1024;

#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

struct Ring {
    base: *mut u8,
    len: usize,
    frame_size: usize,
    frames_per_block: usize,
    block_size: usize,
    frames: usize,
}

impl Ring {
    #[inline(always)]
    fn slot(&self, i: usize) -> *mut u8 {
        let b = i / self.frames_per_block;
        let f = i % self.frames_per_block;
        // SAFETY: i < frames, so the offset lies inside the mapping.
        unsafe { self.base.add(b * self.block_size + f * self.frame_size) }
    }
    #[inline(always)]
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte aligned u32 of each slot, shared with the kernel.
        unsafe { &*(self.slot(i) as *const AtomicU32) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

pub struct PacketTx {
    ring: Ring,
    raw: RawSocket,
    cursor: usize,
    flows: FlowGen,
    thread: usize,
    threads: usize,
    batch: usize,
}

/// What both AF_PACKET backends share: a bound, transmit-only raw socket and
/// the frame template for this thread's stream.
pub(super) struct RawSocket {
    pub fd: Fd,
    pub tmpl: Template,
    pub wire_len: usize,
    pub iface: String,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub qdisc_bypass: bool,
    ifindex: i32,
}

impl RawSocket {
    /// Open the socket and set the options that must precede `bind` (the TX
    /// ring, if any, is set up by `setup` before the socket is bound).
    pub(super) fn open(
        cx: &TxContext,
        setup: impl FnOnce(&Fd, usize) -> Result<(), String>,
    ) -> Result<RawSocket, String> {
        let p = cx.profile;
        let iface = cx
            .opts
            .iface
            .clone()
            .ok_or("packet backend needs --iface")?;
        let dst_mac = p
            .dst_mac
            .ok_or("packet backend needs --dst-mac (MAC of the next hop)")?;
        if p.src.is_none() {
            return Err("packet backend needs --src (source address or range)".into());
        }
        let ifindex = sys::ifindex(&iface).map_err(|e| format!("interface {iface}: {e}"))?;
        let src_mac = match p.src_mac {
            Some(m) => m,
            None => sys::if_mac(&iface).map_err(|e| format!("MAC of {iface}: {e}"))?,
        };
        let spec = FrameSpec::new(p.ipv6, p.proto, p.frame_size)?;
        let tmpl = Template::new(spec, src_mac, dst_mac, cx.stream);
        let wire_len = spec.wire_len();

        // Protocol 0: this socket transmits only and receives nothing.
        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)
            .map_err(|e| format!("AF_PACKET socket: {e} (needs root)"))?;
        let one: i32 = 1;
        let qdisc_bypass = cx.opts.qdisc_bypass
            && sys::setsockopt(&fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, &one).is_ok();
        setup(&fd, wire_len)?;
        sys::bind_packet(&fd, ifindex, 0).map_err(|e| format!("bind to {iface}: {e}"))?;
        Ok(RawSocket {
            fd,
            tmpl,
            wire_len,
            iface,
            src_mac,
            dst_mac,
            qdisc_bypass,
            ifindex,
        })
    }

    pub(super) fn info(&self) -> serde_json::Value {
        serde_json::json!({
            "iface": self.iface,
            "ifindex": self.ifindex,
            "src_mac": mac_string(&self.src_mac),
            "dst_mac": mac_string(&self.dst_mac),
            "qdisc_bypass": self.qdisc_bypass,
            "wire_bytes": self.wire_len,
        })
    }
}

pub fn open(cx: &TxContext) -> Result<Box<dyn TxBackend>, String> {
    let mut ring_req = None;
    let raw = RawSocket::open(cx, |fd, wire_len| {
        sys::setsockopt(fd, libc::SOL_PACKET, PACKET_VERSION, &TPACKET_V2)
            .map_err(|e| format!("PACKET_VERSION: {e}"))?;
        let one: i32 = 1;
        sys::setsockopt(fd, libc::SOL_PACKET, PACKET_LOSS, &one)
            .map_err(|e| format!("PACKET_LOSS: {e}"))?;
        let req = ring_shape(wire_len);
        sys::setsockopt(fd, libc::SOL_PACKET, PACKET_TX_RING, &req)
            .map_err(|e| format!("PACKET_TX_RING: {e}"))?;
        ring_req = Some(req);
        Ok(())
    })?;
    let req = ring_req.expect("setup ran");
    let fd = &raw.fd;
    let wire_len = raw.wire_len;
    let frame_size = req.frame_size as usize;
    let block_size = req.block_size as usize;
    let frames_per_block = block_size / frame_size;
    let frames = req.frame_nr as usize;
    let len = block_size * req.block_nr as usize;
    // SAFETY: mapping the ring the kernel just allocated for this socket.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.0,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(format!("mmap TX ring: {}", sys::last_err()));
    }
    let ring = Ring {
        base: base as *mut u8,
        len,
        frame_size,
        frames_per_block,
        block_size,
        frames,
    };

    // Pre-fill every slot with the template and its length.
    for i in 0..frames {
        let s = ring.slot(i);
        // SAFETY: the slot holds DATA_OFF + wire_len <= frame_size bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(raw.tmpl.bytes.as_ptr(), s.add(DATA_OFF), wire_len);
            *(s.add(4) as *mut u32) = wire_len as u32; // tp_len
        }
    }
    let batch = cx.opts.batch.clamp(1, frames);
    Ok(Box::new(PacketTx {
        ring,
        raw,
        cursor: 0,
        flows: cx.flowgen(),
        thread: cx.thread,
        threads: cx.threads,
        batch,
    }))
}

/// TX ring geometry for frames of `wire_len` bytes: at least RING_FRAMES slots.
fn ring_shape(wire_len: usize) -> TpacketReq {
    let frame_size = (DATA_OFF + wire_len).div_ceil(16) * 16;
    let block_size = (frame_size.div_ceil(4096) * 4096).max(4096 * 4);
    let frames_per_block = block_size / frame_size;
    let block_nr = RING_FRAMES.div_ceil(frames_per_block);
    TpacketReq {
        block_size: block_size as u32,
        block_nr: block_nr as u32,
        frame_size: frame_size as u32,
        frame_nr: (block_nr * frames_per_block) as u32,
    }
}

impl TxBackend for PacketTx {
    fn send(&mut self, seq0: u64, n: usize, tx_ns: u64) -> io::Result<usize> {
        let n = n.min(self.batch);
        let frames = self.ring.frames;
        let mut filled = 0;
        for k in 0..n {
            let i = (self.cursor + k) % frames;
            if self.ring.status(i).load(Ordering::Acquire) != TP_STATUS_AVAILABLE {
                break; // still in flight (owned by the kernel)
            }
            let seq = seq0 + k as u64;
            let f = self
                .flows
                .flow(TxContext::flow_index(seq, self.thread, self.threads));
            // SAFETY: slot data area of wire_len bytes inside the mapping; we own the slot.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(self.ring.slot(i).add(DATA_OFF), self.raw.wire_len)
            };
            self.raw.tmpl.write(buf, &f, seq, tx_ns);
            self.ring
                .status(i)
                .store(TP_STATUS_SEND_REQUEST, Ordering::Release);
            filled += 1;
        }
        if filled == 0 {
            // Kick the kernel to finish whatever it holds.
            // SAFETY: send with no buffer flushes the TX ring.
            unsafe { libc::send(self.raw.fd.0, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            return Ok(0);
        }
        // SAFETY: send with no buffer transmits the ring's SEND_REQUEST slots.
        // Non-blocking: slots still in flight (SENDING) are skipped when refilling.
        let r = unsafe { libc::send(self.raw.fd.0, std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        let err = if r < 0 { Some(sys::last_err()) } else { None };
        // The kernel consumed (and moved its head past) the prefix of slots no
        // longer marked SEND_REQUEST; withdraw the rest so they are refilled.
        let mut done = 0;
        while done < filled
            && self
                .ring
                .status((self.cursor + done) % frames)
                .load(Ordering::Acquire)
                != TP_STATUS_SEND_REQUEST
        {
            done += 1;
        }
        for k in done..filled {
            self.ring
                .status((self.cursor + k) % frames)
                .store(TP_STATUS_AVAILABLE, Ordering::Release);
        }
        self.cursor = (self.cursor + done) % frames;
        match err {
            Some(e) if done == 0 => Err(e),
            _ => Ok(done),
        }
    }

    fn max_batch(&self) -> usize {
        self.batch
    }

    fn info(&self) -> serde_json::Value {
        let mut v = self.raw.info();
        v["ring_frames"] = self.ring.frames.into();
        v["ring_frame_bytes"] = self.ring.frame_size.into();
        v["tpacket_version"] = 2.into();
        v
    }
}
