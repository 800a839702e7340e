//! MRP authentication (rocast's addition to Cepheus §III-C): a trailer on
//! every MRP datagram (registration, release, prune, and a switch's refusal report)
//! that proves it comes from a holder of the fabric key — the controllers (group
//! leaders) and the switches — and is not a replay.
//!
//! ```text
//!  payload (as before) | "RMA1" (4) | counter (8, BE) | tag (16)
//!  tag = HMAC-SHA256(key, source IPv4 (4) | counter (8) | payload)[..16]
//! ```
//!
//! - The **source address** is in the MAC, so a captured registration cannot be
//!   replayed from another host (the switch takes the arrival port of a registration
//!   as the group's source direction).
//! - The **counter** is the sender's: strictly increasing per sender (a leader starts
//!   it at the wall clock in nanoseconds, so a restarted leader goes on above its old
//!   values). A receiver keeps, per (arrival port, source address), the highest counter
//!   it accepted and refuses anything not above it ([`ReplayGuard`]). A restarted
//!   switch forgets those: a packet captured earlier is accepted once more only until
//!   the leader's next refresh raises the bar, and it can only restate what that leader
//!   said (its contents are under the MAC).
//! - The tag is HMAC-SHA256 truncated to 128 bits (RFC 2104; truncation as RFC 4868
//!   does for IPsec), compared in constant time.
//!
//! Members do not hold the key: a switch delivers member records without a trailer, and
//! a member's confirmation is checked by its leader over the control channel.
//!
//! Memory: the key (32 B); a [`ReplayGuard`] holds 16 B per authenticated sender plus
//! map nodes, at most `max_senders` of them (only packets whose tag verified add one).

use super::{Error, Ipv4Address, Result};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::BTreeMap;

/// The trailer's first bytes.
pub const MRP_AUTH_MAGIC: [u8; 4] = *b"RMA1";
/// Bytes of the truncated HMAC-SHA256 tag.
pub const MRP_AUTH_TAG_LEN: usize = 16;
/// Bytes the trailer adds to an MRP datagram: senders leave this much room under the
/// MTU.
pub const MRP_AUTH_TRAILER_LEN: usize = 4 + 8 + MRP_AUTH_TAG_LEN;

/// The fabric key: 32 bytes held by the controllers and the switches. Its `Debug`
/// never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct FabricKey([u8; 32]);

impl std::fmt::Debug for FabricKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FabricKey(..)")
    }
}

impl FabricKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        FabricKey(bytes)
    }

    /// A key file's text: 64 hexadecimal digits (whitespace around them is ignored).
    pub fn from_hex(text: &str) -> Result<FabricKey> {
        secret_from_hex(text).map(FabricKey)
    }

    fn tag(&self, src: Ipv4Address, counter: u64, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(&src.0);
        mac.update(&counter.to_be_bytes());
        mac.update(payload);
        mac
    }

    /// `payload` followed by its trailer, as sent from `src` with `counter`.
    pub fn seal(&self, src: Ipv4Address, counter: u64, payload: &[u8]) -> Vec<u8> {
        let tag = self.tag(src, counter, payload).finalize().into_bytes();
        let mut out = Vec::with_capacity(payload.len() + MRP_AUTH_TRAILER_LEN);
        out.extend_from_slice(payload);
        out.extend_from_slice(&MRP_AUTH_MAGIC);
        out.extend_from_slice(&counter.to_be_bytes());
        out.extend_from_slice(&tag[..MRP_AUTH_TAG_LEN]);
        out
    }

    /// The payload and counter of a datagram from `src` whose trailer verifies; an
    /// error when there is no trailer or the tag does not match (any byte changed,
    /// another key, another source address).
    pub fn open<'a>(&self, src: Ipv4Address, datagram: &'a [u8]) -> Result<(&'a [u8], u64)> {
        let Some(at) = datagram.len().checked_sub(MRP_AUTH_TRAILER_LEN) else {
            return Err(Error::Truncated("mrp authentication trailer"));
        };
        let (payload, trailer) = datagram.split_at(at);
        if trailer[..4] != MRP_AUTH_MAGIC {
            return Err(Error::Malformed("mrp authentication trailer"));
        }
        let counter = u64::from_be_bytes(trailer[4..12].try_into().expect("8 bytes"));
        self.tag(src, counter, payload)
            .verify_truncated_left(&trailer[12..])
            .map_err(|_| Error::Malformed("mrp authentication tag"))?;
        Ok((payload, counter))
    }
}

/// A 32-byte secret from a key file's text: 64 hexadecimal digits (whitespace around
/// them is ignored). The fabric key and the leaders' invitation keys are written so.
pub fn secret_from_hex(text: &str) -> Result<[u8; 32]> {
    let t = text.trim();
    if t.len() != 64 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::Malformed(
            "key file: expected 64 hexadecimal digits (32 bytes)",
        ));
    }
    let mut k = [0u8; 32];
    for (i, byte) in k.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&t[2 * i..2 * i + 2], 16)
            .map_err(|_| Error::Malformed("key file digit"))?;
    }
    Ok(k)
}

/// A sender's counter source: strictly increasing, starting where the caller says (a
/// leader: the wall clock in nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrpCounter(u64);

impl MrpCounter {
    pub fn starting_at(first: u64) -> Self {
        MrpCounter(first)
    }
    pub fn next_value(&mut self) -> u64 {
        let v = self.0;
        self.0 = self.0.saturating_add(1);
        v
    }
}

/// Refuses replays: per (arrival port, source address) the highest counter accepted.
#[derive(Clone, Debug)]
pub struct ReplayGuard {
    last: BTreeMap<(u16, u32), u64>,
    max_senders: usize,
}

impl ReplayGuard {
    /// A guard remembering at most `max_senders` senders (past that, a new sender is
    /// refused: the table never grows with what the network sends).
    pub fn new(max_senders: usize) -> Self {
        ReplayGuard {
            last: BTreeMap::new(),
            max_senders,
        }
    }

    /// Accepts `counter` from (`port`, `src`) if it is above every counter accepted
    /// from there before, and remembers it. Call only for a packet whose tag verified.
    pub fn accept(&mut self, port: u16, src: Ipv4Address, counter: u64) -> bool {
        let key = (port, src.to_u32());
        if let Some(last) = self.last.get_mut(&key) {
            if counter <= *last {
                return false;
            }
            *last = counter;
            return true;
        }
        if self.last.len() >= self.max_senders {
            return false;
        }
        self.last.insert(key, counter);
        true
    }

    pub fn senders(&self) -> usize {
        self.last.len()
    }
}

/// `payload` as a sender with `key` (if any) puts it on the wire from `src`: sealed
/// with the counter's next value, or unchanged on an unkeyed fabric.
pub fn seal_if_keyed(
    key: Option<&FabricKey>,
    src: Ipv4Address,
    counter: &mut MrpCounter,
    payload: &[u8],
) -> Vec<u8> {
    match key {
        Some(k) => k.seal(src, counter.next_value(), payload),
        None => payload.to_vec(),
    }
}

/// The payload of a datagram from `src` as a receiver with `key` (if any) accepts it:
/// the trailer verified and removed, or the whole datagram on an unkeyed fabric;
/// `None` when the trailer does not verify. (Freshness is the caller's: a switch keeps a
/// [`ReplayGuard`].)
pub fn open_if_keyed<'a>(
    key: Option<&FabricKey>,
    src: Ipv4Address,
    datagram: &'a [u8],
) -> Option<&'a [u8]> {
    match key {
        None => Some(datagram),
        Some(k) => k.open(src, datagram).ok().map(|(p, _)| p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Address = Ipv4Address::new(10, 77, 0, 1);

    fn key(b: u8) -> FabricKey {
        FabricKey::new([b; 32])
    }

    #[test]
    fn a_sealed_datagram_opens_and_any_change_is_refused() {
        let k = key(7);
        let payload = b"mrp registration bytes";
        let sealed = k.seal(SRC, 42, payload);
        assert_eq!(sealed.len(), payload.len() + MRP_AUTH_TRAILER_LEN);
        assert_eq!(k.open(SRC, &sealed), Ok((&payload[..], 42)));
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x01;
            assert!(k.open(SRC, &bad).is_err(), "byte {i} flipped");
        }
        assert!(key(8).open(SRC, &sealed).is_err(), "another key");
        assert!(
            k.open(Ipv4Address::new(10, 77, 0, 9), &sealed).is_err(),
            "replayed from another host"
        );
        assert!(k.open(SRC, payload).is_err(), "no trailer");
        assert!(k.open(SRC, &sealed[..10]).is_err());
        assert!(k.open(SRC, &[]).is_err());
    }

    #[test]
    fn the_tag_is_hmac_sha256_of_source_counter_and_payload() {
        // RFC 4231 test case 2 ("Jefe"), whose message we split as source (4 bytes),
        // counter (8 bytes) and payload, checks the construction against the standard.
        let k = b"Jefe";
        let msg = b"what do ya want for nothing?";
        let mut mac = Hmac::<Sha256>::new_from_slice(k).unwrap();
        mac.update(msg);
        let want = mac.finalize().into_bytes();
        assert_eq!(
            want[..8],
            [0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e],
            "RFC 4231 §4.3"
        );
        let mut fk = [0u8; 32];
        fk[..4].copy_from_slice(k);
        // A 32-byte key that is "Jefe" padded with zeros is the same HMAC key (RFC
        // 2104 pads short keys with zeros to the block size).
        let src = Ipv4Address([msg[0], msg[1], msg[2], msg[3]]);
        let counter = u64::from_be_bytes(msg[4..12].try_into().unwrap());
        let sealed = FabricKey::new(fk).seal(src, counter, &msg[12..]);
        assert_eq!(sealed[sealed.len() - MRP_AUTH_TAG_LEN..], want[..16]);
    }

    #[test]
    fn replays_and_old_counters_are_refused_per_port_and_sender() {
        let mut g = ReplayGuard::new(2);
        assert!(g.accept(0, SRC, 10));
        assert!(!g.accept(0, SRC, 10), "the same packet again");
        assert!(!g.accept(0, SRC, 9), "an older one");
        assert!(g.accept(0, SRC, 11));
        assert!(g.accept(1, SRC, 5), "another port keeps its own bar");
        assert!(
            !g.accept(2, SRC, 100),
            "a third sender past the table's size is refused"
        );
        assert_eq!(g.senders(), 2);
    }

    #[test]
    fn key_files_are_64_hex_digits() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF\n";
        let k = FabricKey::from_hex(hex).unwrap();
        assert_eq!(k.0[1], 0x11);
        assert_eq!(k.0[31], 0xff);
        assert!(FabricKey::from_hex(&hex[..62]).is_err());
        assert!(FabricKey::from_hex(&hex.replace('0', "g")).is_err());
        assert_eq!(format!("{k:?}"), "FabricKey(..)", "the key never prints");
        let mut c = MrpCounter::starting_at(5);
        assert_eq!((c.next_value(), c.next_value()), (5, 6));
    }
}
