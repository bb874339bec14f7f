//! Ethernet frame layout and the precomputed frame template.
//!
//! Sizes follow RFC 2544: `frame_size` counts the Ethernet header, IP header,
//! L4 header, payload and the 4-byte FCS. The bytes we hand to the kernel (and
//! write to pcap) are `frame_size - 4`; the NIC (or veth) does not add an FCS
//! we could control. A template holds every constant byte and the partial
//! one's-complement sums of the constant words, so per packet only addresses,
//! ports, seq/timestamp and the two checksums are written.
//! Owns byte layout and what a frame carries ([`Proto`], one [`Flow`]'s addresses
//! and ports; profiles walk flows of these); never touches sockets or clocks.

use crate::checksum::{finish, sum16};
use crate::header::{self, Layout};
use serde::Serialize;

pub const ETH_HLEN: usize = 14;
pub const FCS_LEN: usize = 4;
pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86DD;
pub const MAX_FRAME: usize = 9018;
pub const TTL: u8 = 64;
pub const TCP_WINDOW: u16 = 64240;

/// Layer-4 protocol of generated packets.
///
/// `TcpSynAck` and `TcpAck` carry fixed sequence and acknowledgement numbers
/// (the same in every packet), so a flow opened by a SYN, a SYN-ACK and an ACK
/// stays inside conntrack's TCP window for any number of later ACK packets.
/// `IcmpEcho` is an ICMP (IPv4) or ICMPv6 echo request whose identifier is the
/// source port and whose sequence number is the packet's sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Proto {
    Udp,
    TcpSyn,
    TcpSynAck { seq: u32, ack: u32 },
    TcpAck { seq: u32, ack: u32 },
    IcmpEcho,
}

fn seq_ack(s: &str, what: &str) -> Result<(u32, u32), String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 3 {
        return Err(format!("proto '{s}': expected {what}:SEQ:ACK"));
    }
    let n = |x: &str| x.parse::<u32>().map_err(|_| format!("proto '{s}': '{x}' is not a 32-bit number"));
    Ok((n(parts[1])?, n(parts[2])?))
}

impl Proto {
    pub fn parse(s: &str) -> Result<Proto, String> {
        match s {
            "udp" => Ok(Proto::Udp),
            "tcp-syn" | "tcp_syn" | "syn" => Ok(Proto::TcpSyn),
            "icmp-echo" | "icmp" | "icmpv6-echo" => Ok(Proto::IcmpEcho),
            _ if s.starts_with("tcp-synack:") => {
                let (seq, ack) = seq_ack(s, "tcp-synack")?;
                Ok(Proto::TcpSynAck { seq, ack })
            }
            _ if s.starts_with("tcp-ack:") => {
                let (seq, ack) = seq_ack(s, "tcp-ack")?;
                Ok(Proto::TcpAck { seq, ack })
            }
            _ => Err(format!(
                "unknown proto '{s}' (expected udp, tcp-syn, tcp-synack:SEQ:ACK, tcp-ack:SEQ:ACK or icmp-echo)"
            )),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Proto::Udp => "udp",
            Proto::TcpSyn => "tcp-syn",
            Proto::TcpSynAck { .. } => "tcp-synack",
            Proto::TcpAck { .. } => "tcp-ack",
            Proto::IcmpEcho => "icmp-echo",
        }
    }
    /// TCP flags byte (0 for non-TCP).
    pub fn tcp_flags(self) -> u8 {
        match self {
            Proto::TcpSyn => 0x02,
            Proto::TcpSynAck { .. } => 0x12,
            Proto::TcpAck { .. } => 0x10,
            _ => 0,
        }
    }
    /// Fixed (seq, ack) of a SYN-ACK or ACK; None: the seq field counts packets (SYN).
    pub fn seq_ack(self) -> Option<(u32, u32)> {
        match self {
            Proto::TcpSynAck { seq, ack } | Proto::TcpAck { seq, ack } => Some((seq, ack)),
            _ => None,
        }
    }
}

/// The varying fields of one packet. IPv4 addresses sit in the low 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
}

/// Sizes and offsets of one frame shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSpec {
    pub ipv6: bool,
    pub proto: Proto,
    pub frame_size: usize,
}

impl FrameSpec {
    pub fn new(ipv6: bool, proto: Proto, frame_size: usize) -> Result<FrameSpec, String> {
        let s = FrameSpec {
            ipv6,
            proto,
            frame_size,
        };
        let min = s.min_frame();
        if frame_size < min || frame_size > MAX_FRAME {
            return Err(format!(
                "frame size {frame_size} out of range {min}..={MAX_FRAME} for {} {}",
                if ipv6 { "IPv6" } else { "IPv4" },
                proto.name()
            ));
        }
        Ok(s)
    }

    /// Smallest frame that still carries the test header (UDP) or a bare SYN.
    pub fn min_frame(&self) -> usize {
        let need = match self.proto {
            Proto::Udp => self.payload_off() + header::COMPACT_LEN + FCS_LEN,
            _ => self.payload_off() + FCS_LEN,
        };
        need.max(64).max(if self.ipv6 { 78 } else { 64 })
    }
    pub fn ip_hlen(&self) -> usize {
        if self.ipv6 { 40 } else { 20 }
    }
    pub fn l4_hlen(&self) -> usize {
        match self.proto {
            Proto::Udp | Proto::IcmpEcho => 8,
            _ => 20,
        }
    }
    pub fn l4_off(&self) -> usize {
        ETH_HLEN + self.ip_hlen()
    }
    pub fn payload_off(&self) -> usize {
        self.l4_off() + self.l4_hlen()
    }
    /// Bytes handed to the kernel / written to pcap (no FCS).
    pub fn wire_len(&self) -> usize {
        self.frame_size - FCS_LEN
    }
    /// L4 payload bytes (UDP: everything up to the FCS; TCP SYN: none, the
    /// frame is padded with zeros after the IP packet).
    pub fn payload_len(&self) -> usize {
        match self.proto {
            Proto::Udp => self.wire_len() - self.payload_off(),
            _ => 0,
        }
    }
    /// L4 segment length (header + payload).
    pub fn l4_len(&self) -> usize {
        self.l4_hlen() + self.payload_len()
    }
    /// Test header layout in the UDP payload (None for TCP SYN).
    pub fn layout(&self) -> Option<Layout> {
        match self.proto {
            Proto::Udp => Layout::for_payload(self.payload_len()),
            _ => None,
        }
    }
    /// Offset and length of the source+destination address block.
    fn addr_span(&self) -> (usize, usize) {
        if self.ipv6 {
            (ETH_HLEN + 8, 32)
        } else {
            (ETH_HLEN + 12, 8)
        }
    }
}

/// A frame with all constant bytes filled in, plus partial checksums.
#[derive(Debug, Clone)]
pub struct Template {
    pub spec: FrameSpec,
    pub layout: Option<Layout>,
    pub bytes: Vec<u8>,
    ip_base: u64,
    l4_base: u64,
    /// (offset, len) of the seq/timestamp (UDP) or TCP sequence field.
    seq_span: (usize, usize),
}

impl Template {
    pub fn new(spec: FrameSpec, src_mac: [u8; 6], dst_mac: [u8; 6], stream: u16) -> Template {
        let mut b = vec![0u8; spec.wire_len()];
        b[0..6].copy_from_slice(&dst_mac);
        b[6..12].copy_from_slice(&src_mac);
        let l3 = ETH_HLEN;
        let l4 = spec.l4_off();
        let ipproto: u8 = match spec.proto {
            Proto::Udp => 17,
            Proto::IcmpEcho if spec.ipv6 => 58,
            Proto::IcmpEcho => 1,
            _ => 6,
        };
        let l4_len = spec.l4_len();
        if spec.ipv6 {
            b[12..14].copy_from_slice(&ETH_P_IPV6.to_be_bytes());
            b[l3] = 0x60;
            b[l3 + 4..l3 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            b[l3 + 6] = ipproto;
            b[l3 + 7] = TTL;
        } else {
            b[12..14].copy_from_slice(&ETH_P_IP.to_be_bytes());
            b[l3] = 0x45;
            b[l3 + 2..l3 + 4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            b[l3 + 6] = 0x40; // DF, id 0
            b[l3 + 8] = TTL;
            b[l3 + 9] = ipproto;
        }
        let layout = spec.layout();
        let seq_span;
        match spec.proto {
            Proto::Udp => {
                b[l4 + 4..l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
                let po = spec.payload_off();
                let lay = layout.expect("validated frame size");
                header::encode(&mut b[po..], lay, stream, 0, 0);
                seq_span = match lay {
                    Layout::Full => (po + 8, 16),
                    Layout::Compact => (po + 4, 8),
                };
            }
            Proto::IcmpEcho => {
                b[l4] = if spec.ipv6 { 128 } else { 8 }; // echo request, code 0
                seq_span = (l4 + 6, 2);
            }
            _ => {
                b[l4 + 12] = 0x50; // data offset 5 words
                b[l4 + 13] = spec.proto.tcp_flags();
                b[l4 + 14..l4 + 16].copy_from_slice(&TCP_WINDOW.to_be_bytes());
                if let Some((_, ack)) = spec.proto.seq_ack() {
                    // constant: part of the template's sum; the seq field is written per packet
                    b[l4 + 8..l4 + 12].copy_from_slice(&ack.to_be_bytes());
                }
                seq_span = (l4 + 4, 4);
            }
        }
        // Sums over the constant words (variable fields are zero right now).
        let ip_base = if spec.ipv6 {
            0
        } else {
            sum16(0, &b[l3..l3 + 20])
        };
        let pseudo = ipproto as u64 + l4_len as u64;
        let l4_base = sum16(pseudo, &b[l4..l4 + l4_len]);
        Template {
            spec,
            layout,
            bytes: b,
            ip_base,
            l4_base,
            seq_span,
        }
    }

    /// Fill a buffer that already holds `self.bytes` with one packet's
    /// varying fields and checksums.
    #[inline(always)]
    pub fn write(&self, buf: &mut [u8], flow: &Flow, seq: u64, tx_ns: u64) {
        let spec = &self.spec;
        let l3 = ETH_HLEN;
        let l4 = spec.l4_off();
        let (ao, al) = self.spec.addr_span();
        if spec.ipv6 {
            buf[ao..ao + 16].copy_from_slice(&flow.src.to_be_bytes());
            buf[ao + 16..ao + 32].copy_from_slice(&flow.dst.to_be_bytes());
        } else {
            buf[ao..ao + 4].copy_from_slice(&(flow.src as u32).to_be_bytes());
            buf[ao + 4..ao + 8].copy_from_slice(&(flow.dst as u32).to_be_bytes());
        }
        if spec.proto == Proto::IcmpEcho {
            self.write_icmp(buf, flow, seq);
            return;
        }
        buf[l4..l4 + 2].copy_from_slice(&flow.sport.to_be_bytes());
        buf[l4 + 2..l4 + 4].copy_from_slice(&flow.dport.to_be_bytes());
        let csum_off = match self.layout {
            Some(lay) => {
                header::patch(&mut buf[spec.payload_off()..], lay, seq, tx_ns);
                l4 + 6
            }
            None => {
                let tcp_seq = spec.proto.seq_ack().map_or(seq as u32, |(fixed, _)| fixed);
                buf[l4 + 4..l4 + 8].copy_from_slice(&tcp_seq.to_be_bytes());
                l4 + 16
            }
        };
        let addr_sum = sum16(0, &buf[ao..ao + al]);
        if !spec.ipv6 {
            let c = finish(self.ip_base + addr_sum);
            buf[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        let (so, sl) = self.seq_span;
        let s = sum16(self.l4_base + addr_sum, &buf[l4..l4 + 4]);
        let mut c = finish(sum16(s, &buf[so..so + sl]));
        if c == 0 && self.layout.is_some() {
            c = 0xffff; // UDP: zero means "no checksum"
        }
        buf[csum_off..csum_off + 2].copy_from_slice(&c.to_be_bytes());
    }
}

impl Template {
    /// An echo request: addresses, identifier (the flow's source port), sequence
    /// number, and the checksums computed whole (8 bytes; ICMPv6 over its
    /// pseudo-header, ICMP without one).
    fn write_icmp(&self, buf: &mut [u8], flow: &Flow, seq: u64) {
        let spec = &self.spec;
        let (l3, l4) = (ETH_HLEN, spec.l4_off());
        let (ao, al) = spec.addr_span();
        if spec.ipv6 {
            buf[ao..ao + 16].copy_from_slice(&flow.src.to_be_bytes());
            buf[ao + 16..ao + 32].copy_from_slice(&flow.dst.to_be_bytes());
        } else {
            buf[ao..ao + 4].copy_from_slice(&(flow.src as u32).to_be_bytes());
            buf[ao + 4..ao + 8].copy_from_slice(&(flow.dst as u32).to_be_bytes());
            let c = finish(self.ip_base + sum16(0, &buf[ao..ao + al]));
            buf[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        buf[l4 + 2..l4 + 4].copy_from_slice(&[0, 0]);
        buf[l4 + 4..l4 + 6].copy_from_slice(&flow.sport.to_be_bytes());
        buf[l4 + 6..l4 + 8].copy_from_slice(&(seq as u16).to_be_bytes());
        let mut s = sum16(0, &buf[l4..l4 + 8]);
        if spec.ipv6 {
            s = sum16(s + 58 + 8, &buf[ao..ao + al]);
        }
        let c = finish(s);
        buf[l4 + 2..l4 + 4].copy_from_slice(&c.to_be_bytes());
    }
}

/// Parsed view of a frame, used by tests and by the packet receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub ipv6: bool,
    pub proto: u8,
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
    /// L4 payload (UDP payload, or TCP segment after the header).
    pub payload: &'a [u8],
    pub l4: &'a [u8],
}

/// Parse an Ethernet frame (no FCS) carrying IPv4/IPv6 and UDP or TCP.
pub fn parse_eth(f: &[u8]) -> Option<Parsed<'_>> {
    if f.len() < ETH_HLEN {
        return None;
    }
    parse_ip(&f[ETH_HLEN..], u16::from_be_bytes([f[12], f[13]]))
}

/// Parse an IP packet given its ethertype.
pub fn parse_ip(p: &[u8], ethertype: u16) -> Option<Parsed<'_>> {
    let (ipv6, proto, src, dst, l4) = match ethertype {
        ETH_P_IP => {
            if p.len() < 20 || p[0] >> 4 != 4 {
                return None;
            }
            let ihl = (p[0] & 0x0f) as usize * 4;
            let tot = u16::from_be_bytes([p[2], p[3]]) as usize;
            if tot < ihl || tot > p.len() {
                return None;
            }
            let src = u32::from_be_bytes(p[12..16].try_into().unwrap()) as u128;
            let dst = u32::from_be_bytes(p[16..20].try_into().unwrap()) as u128;
            (false, p[9], src, dst, &p[ihl..tot])
        }
        ETH_P_IPV6 => {
            if p.len() < 40 || p[0] >> 4 != 6 {
                return None;
            }
            let plen = u16::from_be_bytes([p[4], p[5]]) as usize;
            if 40 + plen > p.len() {
                return None;
            }
            let src = u128::from_be_bytes(p[8..24].try_into().unwrap());
            let dst = u128::from_be_bytes(p[24..40].try_into().unwrap());
            (true, p[6], src, dst, &p[40..40 + plen])
        }
        _ => return None,
    };
    let hl = match proto {
        17 => 8,
        6 if l4.len() >= 20 => (l4[12] >> 4) as usize * 4,
        _ => return None,
    };
    if l4.len() < hl || hl < 8 {
        return None;
    }
    Some(Parsed {
        ipv6,
        proto,
        src,
        dst,
        sport: u16::from_be_bytes([l4[0], l4[1]]),
        dport: u16::from_be_bytes([l4[2], l4[3]]),
        payload: &l4[hl..],
        l4,
    })
}

#[cfg_attr(not(test), allow(dead_code))]
/// Full (non-incremental) L4 checksum verification: true if the checksum
/// over pseudo-header + segment folds to 0xffff.
pub fn l4_checksum_ok(p: &Parsed<'_>) -> bool {
    let mut s = 0u64;
    if p.ipv6 {
        s = sum16(s, &p.src.to_be_bytes());
        s = sum16(s, &p.dst.to_be_bytes());
    } else {
        s = sum16(s, &(p.src as u32).to_be_bytes());
        s = sum16(s, &(p.dst as u32).to_be_bytes());
    }
    s += p.proto as u64 + p.l4.len() as u64;
    s = sum16(s, p.l4);
    crate::checksum::fold(s) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::fold;

    const SMAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const DMAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn flow(v6: bool) -> Flow {
        if v6 {
            Flow {
                src: u128::from("2001:2::10".parse::<std::net::Ipv6Addr>().unwrap()),
                dst: u128::from("2001:2:0:1::2".parse::<std::net::Ipv6Addr>().unwrap()),
                sport: 40000,
                dport: 5555,
            }
        } else {
            Flow {
                src: 0xC613_0001,
                dst: 0xC612_0102,
                sport: 65535,
                dport: 1,
            }
        }
    }

    #[test]
    fn sizes_follow_rfc2544() {
        let s = FrameSpec::new(false, Proto::Udp, 64).unwrap();
        assert_eq!(
            (s.wire_len(), s.payload_len(), s.layout()),
            (60, 18, Some(Layout::Compact))
        );
        let s6 = FrameSpec::new(true, Proto::Udp, 78).unwrap();
        assert_eq!(
            (s6.wire_len(), s6.payload_len(), s6.layout()),
            (74, 12, Some(Layout::Compact))
        );
        let big = FrameSpec::new(false, Proto::Udp, 1518).unwrap();
        assert_eq!(
            (big.payload_len(), big.layout()),
            (1472, Some(Layout::Full))
        );
        assert_eq!(
            FrameSpec::new(false, Proto::Udp, 9000)
                .unwrap()
                .payload_len(),
            9000 - 46
        );
        assert!(FrameSpec::new(true, Proto::Udp, 77).is_err());
        assert!(FrameSpec::new(false, Proto::Udp, 63).is_err());
        assert!(FrameSpec::new(true, Proto::TcpSyn, 78).is_ok());
    }

    #[test]
    fn incremental_checksums_match_full_computation() {
        for &v6 in &[false, true] {
            for &proto in &[
                Proto::Udp,
                Proto::TcpSyn,
                Proto::TcpSynAck { seq: 7, ack: 1001 },
                Proto::TcpAck { seq: 1001, ack: 8 },
            ] {
                for &size in &[64usize, 78, 79, 128, 1518, 9000] {
                    let Ok(spec) = FrameSpec::new(v6, proto, size) else {
                        continue;
                    };
                    let t = Template::new(spec, SMAC, DMAC, 9);
                    let mut buf = t.bytes.clone();
                    for seq in [0u64, 1, 0xffff_ffff, 0x1_0000_0000, u64::MAX] {
                        let mut f = flow(v6);
                        f.sport = f.sport.wrapping_add(seq as u16);
                        t.write(&mut buf, &f, seq, seq.wrapping_mul(7919));
                        assert_eq!(buf.len(), size - 4);
                        let p = parse_eth(&buf).unwrap();
                        assert_eq!(
                            (p.src, p.dst, p.sport, p.dport),
                            (f.src, f.dst, f.sport, f.dport)
                        );
                        assert!(
                            l4_checksum_ok(&p),
                            "v6={v6} {proto:?} size={size} seq={seq}"
                        );
                        if !v6 {
                            assert_eq!(fold(sum16(0, &buf[14..34])), 0xffff);
                        }
                        match proto {
                            Proto::Udp => {
                                let h = header::decode(p.payload).unwrap();
                                assert_eq!(h.stream, 9);
                                assert_eq!(h.seq, if h.compact { seq & 0xffff_ffff } else { seq });
                            }
                            Proto::TcpSyn => {
                                assert_eq!(p.l4[13], 0x02);
                                assert_eq!(
                                    u32::from_be_bytes(p.l4[4..8].try_into().unwrap()),
                                    seq as u32
                                );
                            }
                            _ => {
                                // fixed seq and ack in every packet, the flags of the proto
                                let (s0, a0) = proto.seq_ack().unwrap();
                                assert_eq!(p.l4[13], proto.tcp_flags());
                                assert_eq!(u32::from_be_bytes(p.l4[4..8].try_into().unwrap()), s0);
                                assert_eq!(u32::from_be_bytes(p.l4[8..12].try_into().unwrap()), a0);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn icmp_echo_frames_have_valid_checksums() {
        for &v6 in &[false, true] {
            let spec = FrameSpec::new(v6, Proto::IcmpEcho, if v6 { 78 } else { 64 }).unwrap();
            let t = Template::new(spec, SMAC, DMAC, 1);
            let mut buf = t.bytes.clone();
            for seq in [0u64, 1, 0xffff, 0x1_0000] {
                let f = flow(v6);
                t.write(&mut buf, &f, seq, 0);
                let l4 = spec.l4_off();
                let icmp = &buf[l4..l4 + 8];
                assert_eq!(icmp[0], if v6 { 128 } else { 8 });
                assert_eq!(u16::from_be_bytes([icmp[4], icmp[5]]), f.sport); // identifier
                assert_eq!(u16::from_be_bytes([icmp[6], icmp[7]]), seq as u16);
                let mut sum = sum16(0, icmp);
                if v6 {
                    sum = sum16(sum + 58 + 8, &buf[22..54]);
                    assert_eq!(buf[20], 58);
                } else {
                    assert_eq!(buf[23], 1);
                    assert_eq!(fold(sum16(0, &buf[14..34])), 0xffff);
                }
                assert_eq!(fold(sum), 0xffff, "v6={v6} seq={seq}");
            }
        }
    }

    #[test]
    fn tcp_protos_parse() {
        assert_eq!(Proto::parse("tcp-ack:5:9").unwrap(), Proto::TcpAck { seq: 5, ack: 9 });
        assert_eq!(Proto::parse("tcp-synack:1:2").unwrap(), Proto::TcpSynAck { seq: 1, ack: 2 });
        assert!(Proto::parse("tcp-ack:5").is_err() && Proto::parse("tcp-ack:x:1").is_err());
        assert_eq!(Proto::parse("icmp-echo").unwrap(), Proto::IcmpEcho);
    }
}
