//! Cross-module tests: dry-run profiles written to pcap and read back with our
//! own reader; headers, checksums, sizes and sequence numbers checked.

use crate::frame::{self, FrameSpec, Template};
use crate::header;
use crate::pcap::{self, PcapWriter};
use crate::profile::{FlowGen, ProfileSpec};

fn dry_run(spec: ProfileSpec, count: u64) -> Vec<pcap::Record> {
    let p = spec.resolve().unwrap();
    let fs = FrameSpec::new(p.ipv6, p.proto, p.frame_size).unwrap();
    let t = Template::new(fs, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], p.stream_id);
    let g = FlowGen::new(&p);
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let mut buf = t.bytes.clone();
    for seq in 0..count {
        t.write(&mut buf, &g.flow(seq), seq, 1_000_000_000 + seq * 1000);
        w.write(1_000_000_000 + seq * 1000, &buf).unwrap();
    }
    let bytes = w.finish().unwrap();
    let (lt, recs) = pcap::read_all(&bytes[..]).unwrap();
    assert_eq!(lt, pcap::LINKTYPE_ETHERNET);
    recs
}

fn ipv4_header_ok(f: &[u8]) -> bool {
    crate::checksum::fold(crate::checksum::sum16(0, &f[14..34])) == 0xffff
}

#[test]
fn pcap_udp_ipv4_all_rfc2544_sizes() {
    for size in [64usize, 128, 256, 512, 1024, 1280, 1518, 9000] {
        let spec = ProfileSpec {
            dst: Some("198.18.1.2".into()),
            src: Some("198.19.0.1-198.19.255.255".into()),
            src_port: Some("rfc4814-src".into()),
            dst_port: Some("rfc4814-dst".into()),
            flow_mode: Some("random".into()),
            frame_size: Some(size),
            stream_id: Some(42),
            ..Default::default()
        };
        let recs = dry_run(spec, 200);
        assert_eq!(recs.len(), 200);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.data.len() + frame::FCS_LEN, size);
            assert!(ipv4_header_ok(&r.data), "IPv4 header checksum, size {size}");
            let p = frame::parse_eth(&r.data).unwrap();
            assert_eq!(p.proto, 17);
            assert!(
                frame::l4_checksum_ok(&p),
                "UDP checksum, size {size} pkt {i}"
            );
            assert!(p.sport >= 1024 && (1..=49151).contains(&p.dport));
            assert!((0xC613_0001..=0xC613_FFFF).contains(&(p.src as u32)));
            assert_eq!(p.dst as u32, 0xC612_0102);
            let h = header::decode(p.payload).unwrap();
            assert_eq!((h.stream, h.seq), (42, i as u64));
            assert_eq!(h.compact, size < 70);
            assert_eq!(r.ts_ns, 1_000_000_000 + i as u64 * 1000);
        }
    }
}

#[test]
fn pcap_udp_ipv6_min_frame() {
    let spec = ProfileSpec {
        dst: Some("2001:2:0:1::2".into()),
        src: Some("2001:2::100/120".into()),
        ..Default::default()
    };
    let recs = dry_run(spec, 300);
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.data.len(), 74);
        assert_eq!(
            u16::from_be_bytes([r.data[12], r.data[13]]),
            frame::ETH_P_IPV6
        );
        let p = frame::parse_eth(&r.data).unwrap();
        assert!(p.ipv6);
        assert!(frame::l4_checksum_ok(&p));
        assert_eq!(p.src & 0xfff, 0x100 + (i as u128 % 256));
        let h = header::decode(p.payload).unwrap();
        assert!(h.compact);
        assert_eq!(h.seq, i as u64);
    }
}

#[test]
fn pcap_tcp_syn_flood() {
    for dst in ["198.18.1.2", "2001:2:0:1::2"] {
        let spec = ProfileSpec {
            dst: Some(dst.into()),
            src: Some(
                if dst.contains(':') {
                    "2001:2::/112"
                } else {
                    "198.19.0.0/16"
                }
                .into(),
            ),
            src_port: Some("rfc4814-src".into()),
            dst_port: Some("80".into()),
            proto: Some("tcp-syn".into()),
            flow_mode: Some("random".into()),
            ..Default::default()
        };
        let recs = dry_run(spec, 100);
        for (i, r) in recs.iter().enumerate() {
            let p = frame::parse_eth(&r.data).unwrap();
            assert_eq!(p.proto, 6);
            assert_eq!(p.l4.len(), 20, "SYN carries no payload");
            assert_eq!(p.l4[13], 0x02, "only SYN set");
            assert_eq!(u32::from_be_bytes(p.l4[4..8].try_into().unwrap()), i as u32);
            assert!(frame::l4_checksum_ok(&p));
            assert_eq!(p.dport, 80);
            if !p.ipv6 {
                assert!(ipv4_header_ok(&r.data));
                assert_eq!(r.data.len(), 60);
            } else {
                assert_eq!(r.data.len(), 74);
            }
        }
    }
}

/// Per-packet user-space cost of building a frame (run with
/// `cargo test --release -- --ignored --nocapture build_cost`).
#[test]
#[ignore]
fn build_cost() {
    for (name, src, sp) in [
        ("constant", "198.18.0.1", "10000"),
        ("rfc4814 random", "198.19.0.0/16", "rfc4814-src"),
    ] {
        let spec = ProfileSpec {
            dst: Some("198.18.1.2".into()),
            src: Some(src.into()),
            src_port: Some(sp.into()),
            flow_mode: Some("random".into()),
            ..Default::default()
        };
        let p = spec.resolve().unwrap();
        let fs = FrameSpec::new(p.ipv6, p.proto, p.frame_size).unwrap();
        let t = Template::new(fs, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 1);
        let g = FlowGen::new(&p);
        let mut buf = t.bytes.clone();
        let n = 20_000_000u64;
        let t0 = std::time::Instant::now();
        for seq in 0..n {
            t.write(&mut buf, &g.flow(seq), seq, seq);
            std::hint::black_box(&mut buf);
        }
        println!(
            "{name}: {:.1} ns/packet",
            t0.elapsed().as_nanos() as f64 / n as f64
        );
    }
}
