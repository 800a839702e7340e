//! The NACK multicast's packet authentication: with a group key, every
//! DATA, heartbeat, NACK and STATUS carries a tag that only holders of the key can make.
//!
//! ```text
//!  packet (as before, flags |= FLAG_AUTH) | tag (16)
//!  tag = HMAC-SHA256(key, "rocast-nm" | packet with the REPAIR flag cleared)[..16]
//! ```
//!
//! - The tag covers the whole packet: the stream id and the sequence numbers are in
//!   it, so a packet cannot be moved to another stream (a restarted sender's stream has
//!   a fresh random id) or renumbered. Within its stream a replayed packet is a
//!   duplicate DATA, a repeated heartbeat or a stale STATUS/NACK, which the state
//!   machines already treat as harmless (positions only move forward, repairs linger).
//! - The REPAIR flag is left out of the tag: a retransmission sets it on the stored,
//!   already sealed bytes ([`mark_repair`](super::packet::mark_repair)).
//! - The tag is HMAC-SHA256 truncated to 128 bits (RFC 2104, truncation as RFC 4868),
//!   compared in constant time; the group key is a 32-byte secret every sender and
//!   receiver of the group holds (the same house style as the MRP key,
//!   [`crate::wire::mrp_auth`]).
//!
//! Without a key nothing is added and the wire is as before.

pub use super::packet::AUTH_TAG_LEN;
use super::packet::{COMMON_LEN, FLAG_AUTH, FLAG_REPAIR};
use hmac::{Hmac, Mac};
use sha2::Sha256;
const LABEL: &[u8] = b"rocast-nm";

/// The group's 32-byte secret. Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct GroupKey([u8; 32]);

impl std::fmt::Debug for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GroupKey(..)")
    }
}

impl GroupKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        GroupKey(bytes)
    }

    /// A key's text: 64 hexadecimal digits (whitespace around them is ignored).
    pub fn from_hex(text: &str) -> crate::wire::Result<GroupKey> {
        crate::wire::mrp_auth::secret_from_hex(text).map(GroupKey)
    }

    fn mac(&self, packet: &[u8]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(LABEL);
        m.update(&packet[..3]);
        m.update(&[packet[3] & !FLAG_REPAIR]);
        m.update(&packet[4..]);
        m
    }

    /// Marks the emitted `packet` as authenticated and appends its tag.
    pub fn seal(&self, packet: &mut Vec<u8>) {
        assert!(packet.len() >= COMMON_LEN, "seal an emitted packet");
        packet[3] |= FLAG_AUTH;
        let tag = self.mac(packet).finalize().into_bytes();
        packet.extend_from_slice(&tag[..AUTH_TAG_LEN]);
    }

    /// Whether `bytes` is a packet sealed with this key and unchanged since (but for
    /// the REPAIR flag). Unsealed packets and short byte strings are not.
    pub fn verify(&self, bytes: &[u8]) -> bool {
        if bytes.len() < COMMON_LEN + AUTH_TAG_LEN || bytes[3] & FLAG_AUTH == 0 {
            return false;
        }
        let (packet, tag) = bytes.split_at(bytes.len() - AUTH_TAG_LEN);
        self.mac(packet).verify_truncated_left(tag).is_ok()
    }
}
