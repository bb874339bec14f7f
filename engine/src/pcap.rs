//! Minimal classic-pcap writer (and a reader for tests and checks).
//! Nanosecond-resolution format (magic 0xa1b23c4d), link type Ethernet.
//! Owns the file format only.

use std::io::{self, Read, Write};

pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
#[cfg_attr(not(test), allow(dead_code))]
pub const MAGIC_US: u32 = 0xa1b2_c3d4;
pub const LINKTYPE_ETHERNET: u32 = 1;
pub const SNAPLEN: u32 = 65535;

pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_NS.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(frame)
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg_attr(not(test), allow(dead_code))]
/// One record read back: timestamp in ns and the captured bytes.
#[derive(Debug, Clone)]
pub struct Record {
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

#[cfg_attr(not(test), allow(dead_code))]
/// Read a whole little- or big-endian classic pcap (us or ns resolution).
pub fn read_all<R: Read>(mut r: R) -> Result<(u32, Vec<Record>), String> {
    let mut buf = Vec::new();
    r.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    if buf.len() < 24 {
        return Err("pcap too short".into());
    }
    let m = u32::from_le_bytes(buf[0..4].try_into().unwrap());
    let (le, ns) = match m {
        MAGIC_NS => (true, true),
        MAGIC_US => (true, false),
        _ => match u32::from_be_bytes(buf[0..4].try_into().unwrap()) {
            MAGIC_NS => (false, true),
            MAGIC_US => (false, false),
            _ => return Err(format!("not a pcap file (magic {m:#x})")),
        },
    };
    let u32at = |o: usize| {
        let b: [u8; 4] = buf[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let linktype = u32at(20);
    let mut recs = Vec::new();
    let mut o = 24;
    while o + 16 <= buf.len() {
        let sec = u32at(o) as u64;
        let frac = u32at(o + 4) as u64;
        let incl = u32at(o + 8) as usize;
        o += 16;
        if o + incl > buf.len() {
            return Err("truncated pcap record".into());
        }
        let ts_ns = sec * 1_000_000_000 + if ns { frac } else { frac * 1000 };
        recs.push(Record {
            ts_ns,
            data: buf[o..o + incl].to_vec(),
        });
        o += incl;
    }
    Ok((linktype, recs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(1_500_000_001, &[1, 2, 3]).unwrap();
        w.write(2, &[9; 60]).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len(), 24 + 16 + 3 + 16 + 60);
        let (lt, recs) = read_all(&bytes[..]).unwrap();
        assert_eq!(lt, LINKTYPE_ETHERNET);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].ts_ns, 1_500_000_001);
        assert_eq!(recs[0].data, vec![1, 2, 3]);
        assert_eq!(recs[1].data.len(), 60);
        assert!(read_all(&[0u8; 30][..]).is_err());
    }
}
