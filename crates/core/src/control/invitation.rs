//! Invitations (rocast's addition): a group's leader admits only the members
//! it invited. An invitation is a 16-byte token bound to the group and to the member's
//! address, minted from a secret only the leader holds:
//!
//! ```text
//! token = HMAC-SHA256(secret, "rocast-invitation" | McstID (4) | member IPv4 (4))[..16]
//! ```
//!
//! The member presents it in an `Invitation` message before its `Join`; the leader
//! checks it against the address the connection came from (the address the `Join` must
//! name), in constant time. A token is useless from another address or for another
//! group, and the secret never leaves the leader (`rocast mcast invite` mints tokens).
//! Tokens do not expire: a new group (or a new secret) revokes them.

use crate::wire::Ipv4Address;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of an invitation token.
pub const INVITATION_LEN: usize = 16;
const LABEL: &[u8] = b"rocast-invitation";

/// The leader's invitation secret (32 bytes). Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct InvitationKey([u8; 32]);

impl std::fmt::Debug for InvitationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InvitationKey(..)")
    }
}

impl InvitationKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        InvitationKey(bytes)
    }

    fn mac(&self, group: Ipv4Address, member: Ipv4Address) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(LABEL);
        m.update(&group.0);
        m.update(&member.0);
        m
    }

    /// The token that admits `member` to `group`.
    pub fn token(&self, group: Ipv4Address, member: Ipv4Address) -> [u8; INVITATION_LEN] {
        let full = self.mac(group, member).finalize().into_bytes();
        let mut t = [0u8; INVITATION_LEN];
        t.copy_from_slice(&full[..INVITATION_LEN]);
        t
    }

    /// Whether `token` admits `member` to `group` (constant-time comparison).
    pub fn admits(&self, group: Ipv4Address, member: Ipv4Address, token: &[u8]) -> bool {
        token.len() == INVITATION_LEN
            && self.mac(group, member).verify_truncated_left(token).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_admits_one_member_to_one_group() {
        let k = InvitationKey::new([3; 32]);
        let g = Ipv4Address::new(10, 77, 0, 200);
        let m = Ipv4Address::new(10, 77, 0, 2);
        let t = k.token(g, m);
        assert!(k.admits(g, m, &t));
        assert!(
            !k.admits(g, Ipv4Address::new(10, 77, 0, 3), &t),
            "another address"
        );
        assert!(
            !k.admits(Ipv4Address::new(10, 77, 0, 201), m, &t),
            "another group"
        );
        assert!(
            !InvitationKey::new([4; 32]).admits(g, m, &t),
            "another secret"
        );
        let mut bad = t;
        bad[15] ^= 1;
        assert!(!k.admits(g, m, &bad));
        assert!(!k.admits(g, m, &t[..15]));
        assert_eq!(format!("{k:?}"), "InvitationKey(..)");
    }
}
