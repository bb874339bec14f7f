//! Test-packet header carried at the start of the UDP payload.
//!
//! Owns the byte layout (network byte order) and its encode/decode. It never
//! touches sockets, clocks or frame layout.
//!
//! Two layouts, chosen by the room the payload leaves:
//!
//! * **full** (24 bytes, payload >= 24):
//!   `magic u32 = 0x46574C45 ("FWLE") | version u8 = 1 | flags u8 | stream u16 |
//!    seq u64 | tx_ns u64`
//! * **compact** (12 bytes, 12 <= payload < 24; used by 64 B IPv4 and 78 B IPv6 frames):
//!   `magic u16 = 0xF1C1 (compact, version 1) | stream u16 | seq u32 | tx_ns u32`
//!   where seq and tx_ns are the low 32 bits. The receiver extends seq to 64 bits
//!   against the highest one seen and takes latency modulo 2^32 ns (valid below 4.29 s).
//!
//! `tx_ns` is CLOCK_REALTIME in nanoseconds (see README: both ends on one host).

/// Magic of the full header ("FWLE").
pub const MAGIC_FULL: u32 = 0x4657_4C45;
/// Magic of the compact header (its last nibble is the compact layout version).
pub const MAGIC_COMPACT: u16 = 0xF1C1;
/// Version of the full layout.
pub const VERSION: u8 = 1;
/// Bytes of the full layout.
pub const FULL_LEN: usize = 24;
/// Bytes of the compact layout.
pub const COMPACT_LEN: usize = 12;

/// Which layout a payload carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Full,
    Compact,
}

impl Layout {
    /// The layout that fits in `payload_len` bytes, or None if none fits.
    pub fn for_payload(payload_len: usize) -> Option<Layout> {
        if payload_len >= FULL_LEN {
            Some(Layout::Full)
        } else if payload_len >= COMPACT_LEN {
            Some(Layout::Compact)
        } else {
            None
        }
    }

    #[allow(dead_code)]
    pub fn len(self) -> usize {
        match self {
            Layout::Full => FULL_LEN,
            Layout::Compact => COMPACT_LEN,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Layout::Full => "full",
            Layout::Compact => "compact",
        }
    }
}

/// A decoded header. For the compact layout `seq` and `tx_ns` hold only the
/// low 32 bits and `compact` is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestHeader {
    pub stream: u16,
    pub seq: u64,
    pub tx_ns: u64,
    pub flags: u8,
    pub compact: bool,
}

/// Write the header into `buf` (which must hold `layout.len()` bytes).
#[inline(always)]
pub fn encode(buf: &mut [u8], layout: Layout, stream: u16, seq: u64, tx_ns: u64) {
    match layout {
        Layout::Full => {
            buf[0..4].copy_from_slice(&MAGIC_FULL.to_be_bytes());
            buf[4] = VERSION;
            buf[5] = 0;
            buf[6..8].copy_from_slice(&stream.to_be_bytes());
            buf[8..16].copy_from_slice(&seq.to_be_bytes());
            buf[16..24].copy_from_slice(&tx_ns.to_be_bytes());
        }
        Layout::Compact => {
            buf[0..2].copy_from_slice(&MAGIC_COMPACT.to_be_bytes());
            buf[2..4].copy_from_slice(&stream.to_be_bytes());
            buf[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
            buf[8..12].copy_from_slice(&(tx_ns as u32).to_be_bytes());
        }
    }
}

/// Patch only seq and timestamp of an already encoded header.
#[inline(always)]
pub fn patch(buf: &mut [u8], layout: Layout, seq: u64, tx_ns: u64) {
    match layout {
        Layout::Full => {
            buf[8..16].copy_from_slice(&seq.to_be_bytes());
            buf[16..24].copy_from_slice(&tx_ns.to_be_bytes());
        }
        Layout::Compact => {
            buf[4..8].copy_from_slice(&(seq as u32).to_be_bytes());
            buf[8..12].copy_from_slice(&(tx_ns as u32).to_be_bytes());
        }
    }
}

/// Decode a payload; None if it carries neither magic or is too short.
#[inline]
pub fn decode(p: &[u8]) -> Option<TestHeader> {
    if p.len() >= FULL_LEN && p[0..4] == MAGIC_FULL.to_be_bytes() {
        if p[4] != VERSION {
            return None;
        }
        return Some(TestHeader {
            stream: u16::from_be_bytes([p[6], p[7]]),
            seq: u64::from_be_bytes(p[8..16].try_into().unwrap()),
            tx_ns: u64::from_be_bytes(p[16..24].try_into().unwrap()),
            flags: p[5],
            compact: false,
        });
    }
    if p.len() >= COMPACT_LEN && p[0..2] == MAGIC_COMPACT.to_be_bytes() {
        return Some(TestHeader {
            stream: u16::from_be_bytes([p[2], p[3]]),
            seq: u32::from_be_bytes(p[4..8].try_into().unwrap()) as u64,
            tx_ns: u32::from_be_bytes(p[8..12].try_into().unwrap()) as u64,
            flags: 0,
            compact: true,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_choice() {
        assert_eq!(Layout::for_payload(18), Some(Layout::Compact)); // 64 B IPv4
        assert_eq!(Layout::for_payload(12), Some(Layout::Compact)); // 78 B IPv6
        assert_eq!(Layout::for_payload(24), Some(Layout::Full));
        assert_eq!(Layout::for_payload(11), None);
    }

    #[test]
    fn full_roundtrip() {
        let mut b = [0u8; 30];
        encode(&mut b, Layout::Full, 7, 0x0102_0304_0506_0708, 99);
        assert_eq!(&b[0..4], b"FWLE");
        let h = decode(&b).unwrap();
        assert_eq!(
            (h.stream, h.seq, h.tx_ns, h.compact),
            (7, 0x0102_0304_0506_0708, 99, false)
        );
        patch(&mut b, Layout::Full, 5, 6);
        let h = decode(&b).unwrap();
        assert_eq!((h.seq, h.tx_ns), (5, 6));
    }

    #[test]
    fn compact_roundtrip_truncates() {
        let mut b = [0u8; 18];
        encode(&mut b, Layout::Compact, 300, 0x1_0000_0005, 0x7_0000_0009);
        let h = decode(&b).unwrap();
        assert_eq!((h.stream, h.seq, h.tx_ns, h.compact), (300, 5, 9, true));
    }

    #[test]
    fn rejects_garbage() {
        assert!(decode(&[0u8; 40]).is_none());
        assert!(decode(b"FWLE").is_none());
    }
}
