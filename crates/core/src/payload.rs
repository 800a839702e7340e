//! Deterministic application payloads, shared by the simulator and the real-time
//! runtime so that one scenario's delivered data can be compared across them (the
//! conformance test): message `i` of a run seeded `seed` is the same bytes wherever
//! it is generated.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// The `len` bytes of message `i` of a run seeded `seed`.
pub fn message_data(seed: u64, i: u32, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    ChaCha8Rng::seed_from_u64(seed ^ ((i as u64) << 32 | 0x5eed)).fill_bytes(&mut b);
    b
}

/// Messages `0..messages` of `len` bytes each, back to back.
pub fn transfer_data(seed: u64, messages: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len * messages as usize);
    for i in 0..messages {
        v.extend(message_data(seed, i, len));
    }
    v
}

/// SHA-256 of `b`: a group's buffer verdict. A member's bytes are intact
/// only if they hash to what the leader announced; unlike a CRC, no injected bytes can
/// be chosen to keep it.
pub fn sha256(b: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(b).into()
}

/// Lower-case hex of `b` (a digest in a report).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// CRC-32 (IEEE) of `b`: how the simulated runs and the UD streams compare what
/// receivers hold (a checksum against accidents, not a verdict against a stranger).
pub fn crc32(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

/// The CRC-32 of the bytes `crc` covered followed by `b` (`crc32_extend(0, b)` is
/// `crc32(b)`): a running CRC over messages as they are delivered.
pub fn crc32_extend(crc: u32, b: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(b);
    h.finalize()
}

/// SplitMix64's step: `x` advanced by the golden-ratio gamma, then finalised. One
/// call is a well-mixed 64-bit hash of `x`; `x, x + γ, x + 2γ, …` give the stream.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Message `i` of a UD multicast stream seeded `seed`, `size` bytes: a SplitMix64
/// stream per message, cheap enough for every receiver to regenerate and compare
/// every message even in a debug build (`rocast bench lab-ud` and the simulator's
/// UD transfer send these).
pub fn stream_message(seed: u64, i: u64, size: usize) -> Vec<u8> {
    let mut x = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed_0000_0000_0000;
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        out.extend_from_slice(&splitmix64(x).to_le_bytes());
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    }
    out.truncate(size);
    out
}

/// A receiver's account of a numbered message stream `0..count` (the UD multicast
/// runs, on real packets and in the simulator): each message exactly once, in order,
/// intact, and a running CRC-32 of the first deliveries in delivery order.
///
/// Memory: one byte per message of the stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamTally {
    /// Messages delivered (each counted once, whatever its order or content).
    pub delivered: u64,
    /// Deliveries of a message already delivered.
    pub duplicates: u64,
    /// Deliveries whose number was not the next expected one.
    pub out_of_order: u64,
    /// Deliveries with a number outside the stream, or bytes other than those sent.
    pub corrupt: u64,
    /// Messages reported lost for good.
    pub unrecoverable: u64,
    pub bytes: u64,
    pub crc32: u32,
    seen: Vec<bool>,
    next: u64,
}

impl StreamTally {
    pub fn new(count: u64) -> Self {
        StreamTally {
            seen: vec![false; count as usize],
            ..Self::default()
        }
    }

    /// Message `msg_seq` was delivered with `data`; `intact` says whether it is the
    /// bytes sent.
    pub fn record(&mut self, msg_seq: u64, data: &[u8], intact: bool) {
        if msg_seq != self.next {
            self.out_of_order += 1;
        }
        self.next = msg_seq + 1;
        match self.seen.get_mut(msg_seq as usize) {
            Some(true) => self.duplicates += 1,
            Some(s) => {
                *s = true;
                self.delivered += 1;
                self.bytes += data.len() as u64;
                self.crc32 = crc32_extend(self.crc32, data);
            }
            None => self.corrupt += 1,
        }
        if !intact {
            self.corrupt += 1;
        }
    }

    /// `n` messages were reported lost for good.
    pub fn lost(&mut self, n: u64) {
        self.unrecoverable += n;
    }

    /// Every message of the stream exactly once, in order, intact.
    pub fn exactly_once(&self) -> bool {
        self.delivered == self.seen.len() as u64
            && self.duplicates == 0
            && self.out_of_order == 0
            && self.corrupt == 0
            && self.unrecoverable == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_differ_by_index_and_seed_and_are_stable() {
        assert_eq!(message_data(1, 0, 16), message_data(1, 0, 16));
        assert_ne!(message_data(1, 0, 16), message_data(1, 1, 16));
        assert_ne!(message_data(1, 0, 16), message_data(2, 0, 16));
        let t = transfer_data(3, 3, 5);
        assert_eq!(&t[5..10], &message_data(3, 1, 5)[..]);
        // Pinned: the bytes must never change, or sim and lab runs of old scenarios
        // would stop agreeing with recorded results.
        assert_eq!(message_data(7, 0, 4), vec![0x1d, 0xcd, 0x0b, 0xd9]);
    }

    #[test]
    fn stream_messages_are_stable_and_a_running_crc_equals_the_whole() {
        assert_eq!(stream_message(1, 2, 13).len(), 13);
        assert_ne!(stream_message(1, 2, 8), stream_message(1, 3, 8));
        assert_ne!(stream_message(1, 2, 8), stream_message(2, 2, 8));
        let a = stream_message(5, 0, 100);
        let b = stream_message(5, 1, 77);
        let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
        assert_eq!(crc32_extend(crc32_extend(0, &a), &b), crc32(&whole));
        assert_eq!(crc32_extend(0, &[]), 0);
    }

    /// The attack on the old CRC-32 verdict: a stranger overwrites 1 KiB of a buffer and
    /// fixes 4 more bytes so the CRC-32 is unchanged (CRC is linear over GF(2): solve
    /// for the 32 bits whose CRC difference cancels the overwrite's). The CRC verdict
    /// would say "ok"; the SHA-256 one does not.
    #[test]
    fn a_stranger_can_keep_the_crc_32_but_not_the_sha_256() {
        let good = message_data(45, 0, 120 << 10);
        let len = good.len();
        // The CRC difference a change `x` (same length) makes: linear in `x`.
        let zeros = vec![0u8; len];
        let diff = |x: &[u8]| crc32(x) ^ crc32(&zeros);
        let mut change = vec![0u8; len];
        change[..1024].iter_mut().for_each(|b| *b = 0xee);
        let want = diff(&change);
        // The CRC difference of each of the 32 bits at bytes 1024..1028, then Gaussian
        // elimination over GF(2) for the bits that reproduce `want`.
        let mut rows: Vec<(u32, u32)> = (0..32)
            .map(|bit| {
                let mut e = vec![0u8; len];
                e[1024 + bit / 8] = 1 << (bit % 8);
                (diff(&e), 1u32 << bit)
            })
            .collect();
        let (mut target, mut pick) = (want, 0u32);
        for col in (0..32).rev() {
            let Some(i) = rows.iter().position(|r| r.0 >> col & 1 == 1) else {
                continue;
            };
            let pivot = rows.remove(i);
            for r in rows.iter_mut().filter(|r| r.0 >> col & 1 == 1) {
                *r = (r.0 ^ pivot.0, r.1 ^ pivot.1);
            }
            if target >> col & 1 == 1 {
                target ^= pivot.0;
                pick ^= pivot.1;
            }
        }
        assert_eq!(target, 0, "the 32 bits span every CRC difference");
        for bit in 0..32 {
            if pick >> bit & 1 == 1 {
                change[1024 + bit / 8] ^= 1 << (bit % 8);
            }
        }
        let forged: Vec<u8> = good.iter().zip(&change).map(|(a, b)| a ^ b).collect();
        assert_ne!(forged, good);
        assert_eq!(crc32(&forged), crc32(&good), "the CRC-32 verdict is fooled");
        assert_ne!(sha256(&forged), sha256(&good), "the SHA-256 verdict is not");
    }

    #[test]
    fn sha256_is_fips_180_4() {
        // FIPS 180-4's example "abc".
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_stream_tally_counts_each_fault_once() {
        let mut t = StreamTally::new(3);
        t.record(0, b"a", true);
        t.record(2, b"c", true); // skipped 1
        t.record(2, b"c", true); // again, and not the next
        t.record(1, b"b", false); // late and damaged
        t.record(9, b"x", true); // outside the stream
        assert_eq!(
            (
                t.delivered,
                t.duplicates,
                t.out_of_order,
                t.corrupt,
                t.bytes
            ),
            (3, 1, 4, 2, 3)
        );
        assert_eq!(t.crc32, crc32(b"acb"));
        assert!(!t.exactly_once());
        let mut ok = StreamTally::new(2);
        ok.record(0, b"a", true);
        ok.record(1, b"b", true);
        assert!(ok.exactly_once());
        ok.lost(1);
        assert!(!ok.exactly_once());
    }
}
