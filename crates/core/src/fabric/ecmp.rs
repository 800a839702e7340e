//! ECMP: which of several equal-cost ports a flow takes. The key is the flow's
//! 5-tuple less the protocol (always UDP for RoCEv2): source and destination address
//! and the UDP ports, hashed with MurmurHash3 (x86, 32-bit) seeded per switch, as the
//! HPCC simulator's `SwitchNode::EcmpHash` does. Per-switch seeds keep consecutive
//! tiers from making correlated choices (hash polarisation).

#[inline]
fn mix(k: u32) -> u32 {
    k.wrapping_mul(0xcc9e_2d51)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593)
}

/// MurmurHash3_x86_32 of the 12-byte key `src, dst, sport | dport << 16` (three
/// little-endian words), with `seed` (the switch's id).
#[inline]
pub fn ecmp_hash(src: u32, dst: u32, sport: u16, dport: u16, seed: u32) -> u32 {
    let mut h = seed;
    for k in [src, dst, sport as u32 | (dport as u32) << 16] {
        h ^= mix(k);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    h ^= 12;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference MurmurHash3_x86_32 over bytes, to check the word-wise version.
    fn murmur3(data: &[u8], seed: u32) -> u32 {
        let mut h = seed;
        for c in data.chunks_exact(4) {
            h ^= mix(u32::from_le_bytes(c.try_into().unwrap()));
            h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
        }
        h ^= data.len() as u32;
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^ (h >> 16)
    }

    #[test]
    fn matches_murmur3_known_vectors_and_layout() {
        // Published MurmurHash3_x86_32 vectors.
        assert_eq!(murmur3(b"", 0), 0);
        assert_eq!(murmur3(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3(&[0xff, 0xff, 0xff, 0xff], 0), 0x7629_3b50);
        assert_eq!(murmur3(&[0x21, 0x43, 0x65, 0x87], 0), 0xf55b_516b);
        let mut key = Vec::new();
        key.extend_from_slice(&0x0b00_0001u32.to_le_bytes());
        key.extend_from_slice(&0x0b00_0101u32.to_le_bytes());
        key.extend_from_slice(&(10000u32 | 4791 << 16).to_le_bytes());
        assert_eq!(
            ecmp_hash(0x0b00_0001, 0x0b00_0101, 10000, 4791, 7),
            murmur3(&key, 7)
        );
    }

    #[test]
    fn spreads_source_ports_evenly() {
        let mut bins = [0u32; 4];
        for sport in 0..4000u16 {
            bins[(ecmp_hash(1, 2, 49152 + sport, 4791, 3) % 4) as usize] += 1;
        }
        assert!(bins.iter().all(|&b| (900..1100).contains(&b)), "{bins:?}");
    }
}
