//! Internet checksum (RFC 1071) helpers: one's-complement sums of 16-bit
//! big-endian words. Owns arithmetic only, never packet layout.

/// Add the 16-bit big-endian words of `data` to `acc` (an odd tail byte is
/// padded with zero). Callers keep regions 16-bit aligned relative to the
/// start of the checksummed area.
#[inline(always)]
pub fn sum16(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        acc += (*last as u64) << 8;
    }
    acc
}

/// Fold a wide sum into 16 bits (end-around carry).
#[inline(always)]
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum field value for a sum: the complement of the folded sum.
#[inline(always)]
pub fn finish(acc: u64) -> u16 {
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: words 0001 f203 f4f5 f6f7 sum to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum16(0, &d)), 0xddf2);
        assert_eq!(finish(sum16(0, &d)), !0xddf2);
    }

    #[test]
    fn odd_tail_and_split_sums_agree() {
        let d: Vec<u8> = (0..101u32).map(|i| (i * 37) as u8).collect();
        let whole = fold(sum16(0, &d));
        let split = fold(sum16(sum16(0, &d[..40]), &d[40..]));
        assert_eq!(whole, split);
    }
}
