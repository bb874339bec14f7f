//! Receiver-side statistics: per-stream sequence tracking (loss, reordering,
//! duplicates with a bitmap window), latency (HDR histogram) and RFC 3550
//! inter-arrival jitter, and the histogram's serialisation for the JSON result
//! (HdrHistogram V2 compressed, base64, the form HdrHistogram's other ports
//! decode). Pure computation: no sockets, no clocks.

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use serde::Serialize;

/// Sequence numbers remembered behind the highest one seen (bits).
pub const WINDOW: u64 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;
/// Largest latency the histogram holds exactly (larger ones saturate) [ns].
pub const HIST_MAX_NS: u64 = 60_000_000_000;
/// Unit of the values in a serialised latency histogram.
pub const HIST_UNIT: &str = "ns";

/// A latency histogram as HdrHistogram's V2 compressed serialisation
/// (cookie 0x1c849314, zlib payload), base64 (standard alphabet, padded):
/// the same text as Java's `encodeIntoCompressedByteBuffer` + base64, or
/// HdrHistogram_py's `encode()`. None when the histogram is empty.
pub fn hist_b64(h: &Histogram<u64>) -> Option<String> {
    if h.is_empty() {
        return None;
    }
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serialising to a Vec cannot fail");
    Some(base64::engine::general_purpose::STANDARD.encode(buf))
}

/// Per-stream state.
pub struct StreamStats {
    pub stream: u16,
    /// Every test packet of this stream, duplicates included.
    pub received: u64,
    pub duplicated: u64,
    /// Arrived after a packet with a higher sequence number (includes `late`).
    pub reordered: u64,
    /// Arrived more than WINDOW behind the highest sequence seen (duplicate
    /// check impossible; counted as unique).
    pub late: u64,
    pub first_seq: u64,
    pub max_seq: u64,
    /// Packets whose send timestamp was after their receive timestamp.
    pub negative_latency: u64,
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
    hist: Histogram<u64>,
    lat_sum: u128,
    jitter: f64,
    last_transit: Option<i64>,
    bits: Box<[u64; WORDS]>,
    started: bool,
}

impl StreamStats {
    pub fn new(stream: u16) -> StreamStats {
        StreamStats {
            stream,
            received: 0,
            duplicated: 0,
            reordered: 0,
            late: 0,
            first_seq: 0,
            max_seq: 0,
            negative_latency: 0,
            first_rx_ns: 0,
            last_rx_ns: 0,
            hist: Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("histogram bounds"),
            lat_sum: 0,
            jitter: 0.0,
            last_transit: None,
            bits: Box::new([0u64; WORDS]),
            started: false,
        }
    }

    #[inline(always)]
    fn bit(&mut self, seq: u64) -> (usize, u64) {
        let i = (seq % WINDOW) as usize;
        (i / 64, 1u64 << (i % 64))
    }

    /// Extend a 32-bit sequence number to 64 bits next to the highest seen.
    #[inline]
    pub fn extend_seq(&self, seq32: u64) -> u64 {
        if !self.started {
            return seq32;
        }
        let base = self.max_seq & !0xffff_ffff;
        let mut c = base | seq32;
        if c > self.max_seq.saturating_add(1 << 31) && c >= 1 << 32 {
            c -= 1 << 32;
        } else if c + (1 << 31) < self.max_seq {
            c += 1 << 32;
        }
        c
    }

    /// Account one packet. `latency_ns` is receive minus send time (None if
    /// negative); `compact` means seq is only the low 32 bits.
    #[inline]
    pub fn record(&mut self, seq_in: u64, compact: bool, latency_ns: Option<u64>, rx_ns: u64) {
        let seq = if compact {
            self.extend_seq(seq_in)
        } else {
            seq_in
        };
        self.received += 1;
        if !self.started {
            self.started = true;
            self.first_seq = seq;
            self.max_seq = seq;
            self.first_rx_ns = rx_ns;
            let (w, m) = self.bit(seq);
            self.bits[w] |= m;
        } else if seq > self.max_seq {
            // Clear the bits of the sequence numbers the window moves over.
            let gap = seq - self.max_seq;
            if gap >= WINDOW {
                self.bits.fill(0);
            } else {
                let mut s = self.max_seq + 1;
                while s < seq {
                    let (w, m) = self.bit(s);
                    if m == 1 && seq - s >= 64 {
                        self.bits[w] = 0;
                        s += 64;
                        continue;
                    }
                    self.bits[w] &= !m;
                    s += 1;
                }
            }
            let (w, m) = self.bit(seq);
            self.bits[w] |= m;
            self.max_seq = seq;
        } else if self.max_seq - seq < WINDOW {
            let (w, m) = self.bit(seq);
            if self.bits[w] & m != 0 {
                self.duplicated += 1;
            } else {
                self.bits[w] |= m;
                self.reordered += 1;
            }
        } else {
            self.reordered += 1;
            self.late += 1;
        }
        self.last_rx_ns = rx_ns;
        match latency_ns {
            Some(l) => {
                self.hist.saturating_record(l.max(1));
                self.lat_sum += l as u128;
                // RFC 3550 6.4.1: J += (|D| - J) / 16 with D the change in transit time.
                let t = l as i64;
                if let Some(prev) = self.last_transit {
                    let d = (t - prev).unsigned_abs() as f64;
                    self.jitter += (d - self.jitter) / 16.0;
                }
                self.last_transit = Some(t);
            }
            None => self.negative_latency += 1,
        }
    }

    /// Packets counted once each.
    pub fn unique(&self) -> u64 {
        self.received - self.duplicated
    }

    /// Sequence numbers in [0, max_seq] that never arrived (senders start at 0).
    pub fn lost(&self) -> u64 {
        if !self.started {
            return 0;
        }
        (self.max_seq + 1).saturating_sub(self.unique())
    }

    pub fn latency(&self) -> Latency {
        Latency::from_hist(&self.hist, self.lat_sum)
    }

    /// Fold another thread's view of the same stream into this one. Counts
    /// add up; cross-thread reordering and duplicates are not visible.
    pub fn merge(&mut self, o: &StreamStats) {
        if !o.started {
            return;
        }
        if !self.started {
            self.first_seq = o.first_seq;
            self.max_seq = o.max_seq;
            self.first_rx_ns = o.first_rx_ns;
            self.started = true;
        }
        let w_self = self.received as f64;
        let w_o = o.received as f64;
        self.jitter = if w_self + w_o > 0.0 {
            (self.jitter * w_self + o.jitter * w_o) / (w_self + w_o)
        } else {
            0.0
        };
        self.received += o.received;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.late += o.late;
        self.negative_latency += o.negative_latency;
        self.first_seq = self.first_seq.min(o.first_seq);
        self.max_seq = self.max_seq.max(o.max_seq);
        self.first_rx_ns = self.first_rx_ns.min(o.first_rx_ns);
        self.last_rx_ns = self.last_rx_ns.max(o.last_rx_ns);
        self.hist.add(&o.hist).expect("same histogram bounds");
        self.lat_sum += o.lat_sum;
    }

    pub fn report(&self) -> StreamReport {
        StreamReport {
            stream_id: self.stream,
            received: self.received,
            unique: self.unique(),
            lost: self.lost(),
            reordered: self.reordered,
            duplicated: self.duplicated,
            late: self.late,
            first_seq: self.first_seq,
            last_seq: self.max_seq,
            negative_latency: self.negative_latency,
            latency_ns: self.latency(),
            jitter_ns: self.jitter,
            rx_span_s: (self.last_rx_ns.saturating_sub(self.first_rx_ns)) as f64 / 1e9,
        }
    }

    pub fn hist(&self) -> &Histogram<u64> {
        &self.hist
    }
    pub fn lat_sum(&self) -> u128 {
        self.lat_sum
    }
    pub fn jitter(&self) -> f64 {
        self.jitter
    }
}

/// Latency summary [ns]; all zero when no sample.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Latency {
    pub samples: u64,
    pub min: u64,
    pub mean: f64,
    pub max: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
}

impl Latency {
    pub fn from_hist(h: &Histogram<u64>, sum: u128) -> Latency {
        let n = h.len();
        if n == 0 {
            return Latency {
                samples: 0,
                min: 0,
                mean: 0.0,
                max: 0,
                p50: 0,
                p90: 0,
                p99: 0,
                p999: 0,
            };
        }
        Latency {
            samples: n,
            min: h.min(),
            mean: sum as f64 / n as f64,
            max: h.max(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
        }
    }
}

/// JSON shape of one stream (see README).
#[derive(Debug, Clone, Serialize)]
pub struct StreamReport {
    pub stream_id: u16,
    pub received: u64,
    pub unique: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub late: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub negative_latency: u64,
    pub latency_ns: Latency,
    pub jitter_ns: f64,
    pub rx_span_s: f64,
}

/// All streams seen by one receiver thread, indexed by stream id.
pub struct RecvStats {
    streams: Vec<Option<Box<StreamStats>>>,
    /// Datagrams/frames without a valid test header.
    pub foreign: u64,
}

impl Default for RecvStats {
    fn default() -> Self {
        Self::new()
    }
}

impl RecvStats {
    pub fn new() -> RecvStats {
        RecvStats {
            streams: (0..=u16::MAX as usize).map(|_| None).collect(),
            foreign: 0,
        }
    }

    #[inline(always)]
    pub fn stream(&mut self, id: u16) -> &mut StreamStats {
        self.streams[id as usize].get_or_insert_with(|| Box::new(StreamStats::new(id)))
    }

    pub fn merge(&mut self, o: &RecvStats) {
        self.foreign += o.foreign;
        for s in o.streams.iter().flatten() {
            self.stream(s.stream).merge(s);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &StreamStats> {
        self.streams.iter().flatten().map(|b| b.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(seqs: &[u64]) -> StreamStats {
        let mut s = StreamStats::new(1);
        for (i, &q) in seqs.iter().enumerate() {
            s.record(q, false, Some(1000), i as u64);
        }
        s
    }

    #[test]
    fn in_order_no_loss() {
        let s = feed(&(0..1000).collect::<Vec<_>>());
        assert_eq!(
            (s.received, s.lost(), s.reordered, s.duplicated),
            (1000, 0, 0, 0)
        );
        assert_eq!((s.first_seq, s.max_seq), (0, 999));
    }

    #[test]
    fn loss_reorder_duplicate() {
        // 0 1 3 2 2 5 : 4 lost, 2 reordered, 2 duplicated once.
        let s = feed(&[0, 1, 3, 2, 2, 5]);
        assert_eq!(s.received, 6);
        assert_eq!(s.unique(), 5);
        assert_eq!(s.lost(), 1);
        assert_eq!(s.reordered, 1);
        assert_eq!(s.duplicated, 1);
    }

    #[test]
    fn head_loss_counts_from_zero_and_big_gaps_clear_window() {
        let mut seqs: Vec<u64> = (10..20).collect();
        seqs.push(10 + 3 * WINDOW); // jump far ahead: old bits must not look "seen"
        seqs.push(10 + 3 * WINDOW - 5); // reordered inside the new window, not a duplicate
        let s = feed(&seqs);
        assert_eq!(s.duplicated, 0);
        assert_eq!(s.reordered, 1);
        assert_eq!(s.lost(), 10 + 3 * WINDOW + 1 - 12);
        // A packet far behind the window is late, counted as unique.
        let s2 = feed(&[0, 1, 2 * WINDOW, 2]);
        assert_eq!((s2.late, s2.reordered, s2.duplicated), (1, 1, 0));
    }

    #[test]
    fn window_reuse_after_wrap_is_not_duplicate() {
        // Walk the window several times in order with random gaps.
        let seqs: Vec<u64> = (0..5 * WINDOW).filter(|x| x % 7 != 3).collect();
        let s = feed(&seqs);
        assert_eq!(s.duplicated, 0);
        assert_eq!(s.reordered, 0);
        assert_eq!(
            s.lost(),
            ((0..5 * WINDOW).filter(|x| x % 7 == 3).count() as u64)
        );
    }

    #[test]
    fn compact_seq_extends_over_wrap() {
        let mut s = StreamStats::new(3);
        let base = (1u64 << 32) - 3;
        for k in 0..6u64 {
            s.record((base + k) & 0xffff_ffff, true, Some(10), k);
        }
        assert_eq!(s.max_seq, base + 5);
        assert_eq!(s.first_seq, base);
        // a reordered packet from before the wrap
        s.record((base + 1) & 0xffff_ffff, true, Some(10), 7);
        assert_eq!(s.duplicated, 1);
    }

    #[test]
    fn latency_and_jitter() {
        let mut s = StreamStats::new(1);
        // transit alternates 1000/3000 ns: |D| = 2000 every time, J -> 2000
        for i in 0..2000u64 {
            s.record(i, false, Some(if i % 2 == 0 { 1000 } else { 3000 }), i);
        }
        let l = s.latency();
        assert_eq!(l.samples, 2000);
        assert_eq!(l.min, 1000);
        assert!((l.max as i64 - 3000).abs() <= 3);
        assert!((l.mean - 2000.0).abs() < 1.0);
        assert!((s.jitter - 2000.0).abs() < 1.0, "jitter {}", s.jitter);
        s.record(2000, false, None, 0);
        assert_eq!(s.negative_latency, 1);
    }

    #[test]
    fn hist_b64_round_trips_and_merges() {
        use hdrhistogram::serialization::Deserializer;
        let mut s = StreamStats::new(1);
        for i in 0..1000u64 {
            s.record(i, false, Some(1_000 + i * 1_000), i);
        }
        assert_eq!(hist_b64(StreamStats::new(2).hist()), None);
        let text = hist_b64(s.hist()).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&text)
            .unwrap();
        // V2 compressed cookie (word size 8), big-endian.
        assert_eq!(&bytes[..4], &[0x1c, 0x84, 0x93, 0x14]);
        let back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        assert_eq!(back.len(), 1000);
        assert_eq!(back.min(), s.hist().min());
        assert_eq!(back.max(), s.hist().max());
        for q in [0.5, 0.9, 0.99, 0.999] {
            assert_eq!(back.value_at_quantile(q), s.hist().value_at_quantile(q));
        }
        // Merging two decoded histograms equals recording both sample sets.
        let mut both = back.clone();
        both.add(&back).unwrap();
        assert_eq!(both.len(), 2000);
        assert_eq!(both.value_at_quantile(0.5), back.value_at_quantile(0.5));
    }

    #[test]
    fn merge_threads() {
        let mut a = RecvStats::new();
        let mut b = RecvStats::new();
        for q in (0..100).step_by(2) {
            a.stream(1).record(q, false, Some(5), q);
        }
        for q in (1..100).step_by(2) {
            b.stream(1).record(q, false, Some(7), q);
        }
        b.stream(2).record(0, false, Some(9), 0);
        a.merge(&b);
        let s1 = a.iter().find(|s| s.stream == 1).unwrap();
        assert_eq!((s1.received, s1.lost(), s1.max_seq), (100, 0, 99));
        assert_eq!(a.iter().count(), 2);
    }
}
