//! Traffic profiles: *what* to send (addresses, ports, frame size, protocol,
//! flow variation). Profiles are data: a JSON file and/or CLI flags, merged
//! into a resolved [`Profile`]. The rate is not part of a profile; it is given
//! at start (see `rate.rs`). Never touches sockets or clocks.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

// what a frame carries is the frame's to define; a profile walks flows of these
pub use crate::frame::{Flow, Proto};

/// How varying fields walk their ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowMode {
    /// Field k of packet i is `lo + i mod n` (each field wraps on its own).
    Increment,
    /// Field k of packet i is a seeded hash of (seed, i, k) mapped into its range.
    Random,
}

impl FlowMode {
    pub fn parse(s: &str) -> Result<FlowMode, String> {
        match s {
            "inc" | "increment" | "incrementing" => Ok(FlowMode::Increment),
            "random" | "rand" | "pseudo-random" => Ok(FlowMode::Random),
            _ => Err(format!(
                "unknown flow mode '{s}' (expected increment or random)"
            )),
        }
    }
}

/// An inclusive range of addresses of one family, as `base + [0, count)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrRange {
    pub v6: bool,
    pub base: u128,
    pub count: u64,
}

fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.trim()
        .parse::<IpAddr>()
        .map_err(|_| format!("bad IP address '{s}'"))
}

fn ip_to_u128(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(a) => (false, u32::from(a) as u128),
        IpAddr::V6(a) => (true, u128::from(a)),
    }
}

impl AddrRange {
    /// Parse `A`, `A-B` (inclusive) or `A/prefix` (every address in the prefix).
    pub fn parse(s: &str) -> Result<AddrRange, String> {
        let s = s.trim();
        let too_big = |n: u128| -> Result<u64, String> {
            if n == 0 || n > (1u128 << 32) {
                Err(format!("address range '{s}' must hold 1..=2^32 addresses"))
            } else {
                Ok(n as u64)
            }
        };
        if let Some((a, b)) = s.split_once('-') {
            let (v6a, lo) = ip_to_u128(parse_ip(a)?);
            let (v6b, hi) = ip_to_u128(parse_ip(b)?);
            if v6a != v6b {
                return Err(format!("address range '{s}' mixes IPv4 and IPv6"));
            }
            if hi < lo {
                return Err(format!("address range '{s}' is reversed"));
            }
            return Ok(AddrRange {
                v6: v6a,
                base: lo,
                count: too_big(hi - lo + 1)?,
            });
        }
        if let Some((a, p)) = s.split_once('/') {
            let (v6, addr) = ip_to_u128(parse_ip(a)?);
            let bits = if v6 { 128 } else { 32 };
            let plen: u32 = p
                .parse()
                .map_err(|_| format!("bad prefix length in '{s}'"))?;
            if plen > bits {
                return Err(format!("bad prefix length in '{s}'"));
            }
            let host_bits = bits - plen;
            if host_bits > 32 {
                return Err(format!("prefix '{s}' is larger than 2^32 addresses"));
            }
            let size = 1u128 << host_bits;
            let base = addr & !(size - 1);
            return Ok(AddrRange {
                v6,
                base,
                count: too_big(size)?,
            });
        }
        let (v6, a) = ip_to_u128(parse_ip(s)?);
        Ok(AddrRange {
            v6,
            base: a,
            count: 1,
        })
    }

    pub fn first_ip(&self) -> IpAddr {
        self.ip_at(0)
    }

    pub fn ip_at(&self, k: u64) -> IpAddr {
        let v = self.base + k as u128;
        if self.v6 {
            IpAddr::V6(v.into())
        } else {
            IpAddr::V4((v as u32).into())
        }
    }

    pub fn describe(&self) -> String {
        if self.count == 1 {
            self.first_ip().to_string()
        } else {
            format!("{}-{}", self.first_ip(), self.ip_at(self.count - 1))
        }
    }
}

/// An inclusive port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    /// Parse `P` or `LO-HI`; `rfc4814-src` (1024-65535) and `rfc4814-dst` (1-49151) are aliases.
    pub fn parse(s: &str) -> Result<PortRange, String> {
        let s = s.trim();
        match s {
            "rfc4814-src" => {
                return Ok(PortRange {
                    lo: 1024,
                    hi: 65535,
                });
            }
            "rfc4814-dst" => return Ok(PortRange { lo: 1, hi: 49151 }),
            _ => {}
        }
        let p = |x: &str| {
            x.trim()
                .parse::<u16>()
                .map_err(|_| format!("bad port '{x}' in '{s}'"))
        };
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (p(a)?, p(b)?),
            None => (p(s)?, p(s)?),
        };
        if hi < lo {
            return Err(format!("port range '{s}' is reversed"));
        }
        Ok(PortRange { lo, hi })
    }
    pub fn count(&self) -> u64 {
        (self.hi - self.lo) as u64 + 1
    }
    pub fn describe(&self) -> String {
        if self.lo == self.hi {
            self.lo.to_string()
        } else {
            format!("{}-{}", self.lo, self.hi)
        }
    }
}

pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.trim().split([':', '-']).collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC address '{s}'"));
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address '{s}'"))?;
    }
    Ok(m)
}

pub fn mac_string(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Profile as written by a user (JSON file or CLI flags); every field optional.
/// Field names equal the long CLI flags with `_` for `-`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    pub dst: Option<String>,
    pub dst_port: Option<String>,
    pub src: Option<String>,
    pub src_port: Option<String>,
    pub frame_size: Option<usize>,
    pub proto: Option<String>,
    pub flow_mode: Option<String>,
    pub seed: Option<u64>,
    pub stream_id: Option<u16>,
    pub dst_mac: Option<String>,
    pub src_mac: Option<String>,
}

impl ProfileSpec {
    pub fn load(path: &str) -> Result<ProfileSpec, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read profile {path}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("bad profile {path}: {e}"))
    }

    /// Fields set in `self` win over `base`.
    pub fn over(self, base: ProfileSpec) -> ProfileSpec {
        ProfileSpec {
            dst: self.dst.or(base.dst),
            dst_port: self.dst_port.or(base.dst_port),
            src: self.src.or(base.src),
            src_port: self.src_port.or(base.src_port),
            frame_size: self.frame_size.or(base.frame_size),
            proto: self.proto.or(base.proto),
            flow_mode: self.flow_mode.or(base.flow_mode),
            seed: self.seed.or(base.seed),
            stream_id: self.stream_id.or(base.stream_id),
            dst_mac: self.dst_mac.or(base.dst_mac),
            src_mac: self.src_mac.or(base.src_mac),
        }
    }

    pub fn resolve(&self) -> Result<Profile, String> {
        let dst = AddrRange::parse(self.dst.as_deref().ok_or("--dst is required")?)?;
        let src = match &self.src {
            Some(s) => Some(AddrRange::parse(s)?),
            None => None,
        };
        if let Some(s) = &src
            && s.v6 != dst.v6
        {
            return Err("--src and --dst are of different address families".into());
        }
        let ipv6 = dst.v6;
        let proto = Proto::parse(self.proto.as_deref().unwrap_or("udp"))?;
        let frame_size = self.frame_size.unwrap_or(if ipv6 { 78 } else { 64 });
        let p = Profile {
            ipv6,
            proto,
            frame_size,
            src,
            dst,
            src_port: PortRange::parse(self.src_port.as_deref().unwrap_or(DEFAULT_SRC_PORT))?,
            dst_port: PortRange::parse(self.dst_port.as_deref().unwrap_or(DEFAULT_DST_PORT))?,
            flow_mode: FlowMode::parse(self.flow_mode.as_deref().unwrap_or("increment"))?,
            seed: self.seed.unwrap_or(1),
            stream_id: self.stream_id.unwrap_or(1),
            dst_mac: self.dst_mac.as_deref().map(parse_mac).transpose()?,
            src_mac: self.src_mac.as_deref().map(parse_mac).transpose()?,
        };
        crate::frame::FrameSpec::new(p.ipv6, p.proto, p.frame_size)?;
        Ok(p)
    }
}

pub const DEFAULT_SRC_PORT: &str = "10000";
pub const DEFAULT_DST_PORT: &str = "5555";

/// A resolved, validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    pub ipv6: bool,
    pub proto: Proto,
    /// Ethernet frame size in bytes including the 4-byte FCS (RFC 2544 counting).
    pub frame_size: usize,
    /// None: let the kernel choose (udp backend only).
    pub src: Option<AddrRange>,
    pub dst: AddrRange,
    pub src_port: PortRange,
    pub dst_port: PortRange,
    pub flow_mode: FlowMode,
    pub seed: u64,
    pub stream_id: u16,
    pub dst_mac: Option<[u8; 6]>,
    pub src_mac: Option<[u8; 6]>,
}

#[inline(always)]
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Map a 64-bit hash uniformly onto [0, n).
#[inline(always)]
fn bounded(h: u64, n: u64) -> u64 {
    ((h as u128 * n as u128) >> 64) as u64
}

/// Computes the flow of packet number i; no allocation, a few multiplies.
#[derive(Debug, Clone)]
pub struct FlowGen {
    mode: FlowMode,
    seed: u64,
    src: AddrRange,
    dst: AddrRange,
    sp: PortRange,
    dp: PortRange,
}

impl FlowGen {
    pub fn new(p: &Profile) -> FlowGen {
        let src = p.src.unwrap_or(AddrRange {
            v6: p.ipv6,
            base: 0,
            count: 1,
        });
        FlowGen {
            mode: p.flow_mode,
            seed: splitmix64(p.seed),
            src,
            dst: p.dst,
            sp: p.src_port,
            dp: p.dst_port,
        }
    }

    #[inline(always)]
    fn pick(&self, i: u64, field: u64, n: u64) -> u64 {
        if n == 1 {
            return 0;
        }
        match self.mode {
            FlowMode::Increment => i % n,
            FlowMode::Random => bounded(
                splitmix64(self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ field),
                n,
            ),
        }
    }

    #[inline(always)]
    pub fn flow(&self, i: u64) -> Flow {
        Flow {
            src: self.src.base + self.pick(i, 0x11, self.src.count) as u128,
            dst: self.dst.base + self.pick(i, 0x22, self.dst.count) as u128,
            sport: self.sp.lo + self.pick(i, 0x33, self.sp.count()) as u16,
            dport: self.dp.lo + self.pick(i, 0x44, self.dp.count()) as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dst: &str) -> ProfileSpec {
        ProfileSpec {
            dst: Some(dst.into()),
            ..Default::default()
        }
    }

    #[test]
    fn ranges_parse() {
        let r = AddrRange::parse("198.19.0.1-198.19.255.255").unwrap();
        assert_eq!(r.count, 65535);
        assert_eq!(r.describe(), "198.19.0.1-198.19.255.255");
        let p = AddrRange::parse("198.19.1.7/24").unwrap();
        assert_eq!(
            (p.count, p.first_ip().to_string()),
            (256, "198.19.1.0".to_string())
        );
        let v6 = AddrRange::parse("2001:2::10-2001:2::1f").unwrap();
        assert!(v6.v6);
        assert_eq!(v6.count, 16);
        assert!(AddrRange::parse("198.18.0.1-2001:2::1").is_err());
        assert!(AddrRange::parse("198.18.0.9-198.18.0.1").is_err());
        assert!(AddrRange::parse("2001:2::/64").is_err());
        assert_eq!(PortRange::parse("rfc4814-src").unwrap().count(), 64512);
        assert_eq!(
            PortRange::parse("rfc4814-dst").unwrap(),
            PortRange { lo: 1, hi: 49151 }
        );
        assert!(PortRange::parse("10-5").is_err());
        assert_eq!(
            parse_mac("02:00:00:aa:bb:0c").unwrap(),
            [2, 0, 0, 0xaa, 0xbb, 0x0c]
        );
    }

    #[test]
    fn defaults_and_family() {
        let p = spec("198.18.1.2").resolve().unwrap();
        assert_eq!((p.ipv6, p.frame_size, p.proto), (false, 64, Proto::Udp));
        let p6 = spec("2001:2::2").resolve().unwrap();
        assert_eq!((p6.ipv6, p6.frame_size), (true, 78));
        let mut bad = spec("2001:2::2");
        bad.src = Some("198.18.0.1".into());
        assert!(bad.resolve().is_err());
        let mut small = spec("2001:2::2");
        small.frame_size = Some(64);
        assert!(small.resolve().is_err());
    }

    #[test]
    fn file_spec_and_override() {
        let file: ProfileSpec = serde_json::from_str(
            r#"{"dst":"198.18.1.2","frame_size":128,"src_port":"rfc4814-src"}"#,
        )
        .unwrap();
        let cli = ProfileSpec {
            frame_size: Some(256),
            ..Default::default()
        };
        let p = cli.over(file).resolve().unwrap();
        assert_eq!(p.frame_size, 256);
        assert_eq!(p.src_port.count(), 64512);
        assert!(serde_json::from_str::<ProfileSpec>(r#"{"dts":"x"}"#).is_err());
    }

    #[test]
    fn increment_walks_each_field() {
        let mut s = spec("198.18.1.2");
        s.src = Some("198.19.0.1-198.19.0.3".into());
        s.src_port = Some("1000-1001".into());
        let g = FlowGen::new(&s.resolve().unwrap());
        let f: Vec<Flow> = (0..4).map(|i| g.flow(i)).collect();
        assert_eq!(f[0].src & 0xff, 1);
        assert_eq!(f[2].src & 0xff, 3);
        assert_eq!(f[3].src & 0xff, 1);
        assert_eq!((f[0].sport, f[1].sport, f[2].sport), (1000, 1001, 1000));
        assert_eq!(f[3].dport, 5555);
    }

    #[test]
    fn random_is_seeded_in_range_and_spread() {
        let mut s = spec("198.18.1.2");
        s.src_port = Some("rfc4814-src".into());
        s.dst_port = Some("rfc4814-dst".into());
        s.flow_mode = Some("random".into());
        let g = FlowGen::new(&s.resolve().unwrap());
        let g2 = FlowGen::new(&s.resolve().unwrap());
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            let f = g.flow(i);
            assert_eq!(f, g2.flow(i));
            assert!(f.sport >= 1024);
            assert!((1..=49151).contains(&f.dport));
            seen.insert(f.sport);
        }
        assert!(seen.len() > 5000, "ports poorly spread: {}", seen.len());
        s.seed = Some(2);
        let g3 = FlowGen::new(&s.resolve().unwrap());
        assert_ne!(
            (0..8).map(|i| g.flow(i)).collect::<Vec<_>>(),
            (0..8).map(|i| g3.flow(i)).collect::<Vec<_>>()
        );
    }
}
