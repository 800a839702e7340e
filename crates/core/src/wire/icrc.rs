//! The RoCEv2 Invariant CRC (IBTA Annex A17.3.3).
//!
//! CRC-32 (IEEE 802.3, as zlib computes it) over: 8 bytes of 0xFF standing for the
//! absent LRH; the IPv4 header with TOS, TTL and header checksum set to all ones
//! (fields routers may change); the UDP header with its checksum set to all ones; the
//! BTH with byte 4 (FECN/BECN and reserved bits) set to 0xFF; then the rest of the
//! packet up to the ICRC. The result is stored little-endian in the last 4 bytes.

use super::{Error, Result, BTH_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN};

/// Computes the ICRC of an IPv4 RoCEv2 packet. `ip_packet` runs from the first byte of
/// the IPv4 header up to (not including) the ICRC. Fails if it is too short to hold
/// IPv4 (with its options), UDP and BTH headers.
pub fn compute(ip_packet: &[u8]) -> Result<u32> {
    let ihl = match ip_packet.first() {
        Some(b) => (b & 0x0f) as usize * 4,
        None => return Err(Error::Truncated("ipv4 header")),
    };
    if ihl < IPV4_HEADER_LEN {
        return Err(Error::Malformed("ipv4 header length"));
    }
    if ip_packet.len() < ihl + UDP_HEADER_LEN + BTH_LEN {
        return Err(Error::Truncated("roce headers"));
    }
    // One masked prefix (8 x 0xFF, IP, UDP, BTH) hashed in a single call: short
    // separate updates fall to crc32fast's scalar path.
    let mut prefix = [0u8; 8 + 60 + UDP_HEADER_LEN + BTH_LEN];
    prefix[..8].fill(0xff);
    let hdrs = ihl + UDP_HEADER_LEN + BTH_LEN;
    prefix[8..8 + hdrs].copy_from_slice(&ip_packet[..hdrs]);
    let ip = 8;
    prefix[ip + 1] = 0xff; // TOS (DSCP and ECN)
    prefix[ip + 8] = 0xff; // TTL
    prefix[ip + 10] = 0xff; // header checksum
    prefix[ip + 11] = 0xff;
    let udp = ip + ihl;
    prefix[udp + 6] = 0xff; // UDP checksum
    prefix[udp + 7] = 0xff;
    prefix[udp + UDP_HEADER_LEN + 4] = 0xff; // BTH resv8a (FECN/BECN)
    let mut h = crc32fast::Hasher::new();
    h.update(&prefix[..8 + hdrs]);
    h.update(&ip_packet[ihl + UDP_HEADER_LEN + BTH_LEN..]);
    Ok(h.finalize())
}

/// Whether the last 4 bytes of `ip_packet` (IPv4 header through ICRC) are its valid ICRC.
pub fn verify(ip_packet: &[u8]) -> Result<bool> {
    if ip_packet.len() < 4 {
        return Err(Error::Truncated("icrc"));
    }
    let (body, tail) = ip_packet.split_at(ip_packet.len() - 4);
    Ok(compute(body)? == u32::from_le_bytes(tail.try_into().unwrap()))
}

/// Computes the ICRC over `ip_packet[..len - 4]` and stores it in the last 4 bytes.
pub fn fill(ip_packet: &mut [u8]) -> Result<()> {
    if ip_packet.len() < 4 {
        return Err(Error::Truncated("icrc"));
    }
    let n = ip_packet.len() - 4;
    let c = compute(&ip_packet[..n])?;
    ip_packet[n..].copy_from_slice(&c.to_le_bytes());
    Ok(())
}

/// The reflected CRC-32 polynomial (IEEE 802.3) that the ICRC uses.
pub const POLY: u32 = 0xedb8_8320;

/// CRC-32 of `bytes` with no initial value and no final inversion: the linear part of
/// the ICRC. For two messages of one length, `ICRC(a) ^ ICRC(b) == crc0(a ^ b)`, so a
/// rewrite of a few header bytes changes the ICRC by `crc0` of the changed bits alone
/// (the incremental update a fast path makes).
pub fn crc0(bytes: &[u8]) -> u32 {
    let mut c = 0u32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
        }
    }
    c
}

/// `a * b mod P` in the reflected representation (zlib's `multmodp`).
pub fn multmodp(a: u32, mut b: u32) -> u32 {
    let mut p = 0u32;
    for k in (0..32).rev() {
        if a & (1 << k) != 0 {
            p ^= b;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// `x^(8n) mod P`: the operator that appends `n` zero bytes to a [`crc0`]:
/// `crc0(d ++ [0; n]) == multmodp(zeros_op(n), crc0(d))`.
pub fn zeros_op(n: usize) -> u32 {
    // x^0 in the reflected representation is the top bit; x^8 is multiplied in n times
    // by squaring.
    let mut result = 1u32 << 31;
    let mut square = 1u32 << 23; // x^8
    let mut n = n;
    while n > 0 {
        if n & 1 != 0 {
            result = multmodp(square, result);
        }
        square = multmodp(square, square);
        n >>= 1;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_corruption_but_not_masked_fields() {
        // A synthetic packet: IPv4 + UDP + BTH + 8 bytes payload + ICRC.
        let mut p = vec![0u8; 20 + 8 + 12 + 8 + 4];
        crate::wire::Ipv4Repr {
            src_addr: crate::wire::Ipv4Address::new(10, 0, 0, 1),
            dst_addr: crate::wire::Ipv4Address::new(10, 0, 0, 2),
            dscp: 0,
            ecn: crate::wire::Ecn::Ect0,
            ident: 7,
            dont_frag: true,
            ttl: 64,
            protocol: 17,
            payload_len: 32,
        }
        .emit(&mut p);
        p[20..22].copy_from_slice(&49152u16.to_be_bytes());
        p[22..24].copy_from_slice(&4791u16.to_be_bytes());
        p[24..26].copy_from_slice(&32u16.to_be_bytes());
        p[28] = 0x04;
        fill(&mut p).unwrap();
        assert!(verify(&p).unwrap());
        // Masked: TOS/ECN, TTL, IP checksum, UDP checksum, FECN/BECN.
        for (i, v) in [(1usize, 0x03u8), (8, 1), (10, 0), (26, 0x12), (32, 0x40)] {
            let mut q = p.clone();
            q[i] = v;
            assert!(verify(&q).unwrap(), "byte {i} should be masked");
        }
        // Covered: everything else.
        for i in [3usize, 4, 12, 20, 24, 28, 33, 40, 47] {
            let mut q = p.clone();
            q[i] ^= 0x01;
            assert!(!verify(&q).unwrap(), "byte {i} should be covered");
        }
        assert_eq!(
            compute(&p[..30]).unwrap_err(),
            Error::Truncated("roce headers")
        );
        assert_eq!(verify(&[]).unwrap_err(), Error::Truncated("icrc"));
    }

    #[test]
    fn the_linear_part_appends_zeros_and_predicts_a_rewrite() {
        let d = [0x12u8, 0x34, 0x56, 0x00, 0xff];
        for n in [0usize, 1, 7, 64, 1000, 9000] {
            let mut z = d.to_vec();
            z.resize(d.len() + n, 0);
            assert_eq!(multmodp(zeros_op(n), crc0(&d)), crc0(&z), "n={n}");
        }
        // Same length: the CRCs of two messages differ by crc0 of their difference.
        let a: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let mut b = a.clone();
        b[3] ^= 0x5a;
        b[40] ^= 0x01;
        let diff: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
        assert_eq!(crc32fast::hash(&a) ^ crc32fast::hash(&b), crc0(&diff));
    }
}
