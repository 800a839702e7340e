//! ARP for Ethernet and IPv4 (RFC 826), the 28-byte form a software switch needs to
//! learn hosts and answer for the addresses it owns (proxy ARP for group addresses).
//!
//! Parsing is strict: hardware type 1, protocol 0x0800, lengths 6 and 4, operation 1
//! (request) or 2 (reply); anything else is an error, never a panic. Bytes after the
//! 28 (Ethernet padding) are ignored.

use super::{Error, EthernetAddress, Ipv4Address, Result};

pub const ARP_LEN: usize = 28;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpOperation {
    Request,
    Reply,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpRepr {
    pub operation: ArpOperation,
    pub sender_mac: EthernetAddress,
    pub sender_ip: Ipv4Address,
    pub target_mac: EthernetAddress,
    pub target_ip: Ipv4Address,
}

impl ArpRepr {
    pub fn parse(b: &[u8]) -> Result<ArpRepr> {
        let b = b.get(..ARP_LEN).ok_or(Error::Truncated("arp"))?;
        if b[0..2] != [0, 1] || b[2..4] != [8, 0] || b[4] != 6 || b[5] != 4 {
            return Err(Error::Unsupported("arp hardware or protocol"));
        }
        let operation = match [b[6], b[7]] {
            [0, 1] => ArpOperation::Request,
            [0, 2] => ArpOperation::Reply,
            _ => return Err(Error::Malformed("arp operation")),
        };
        let mac =
            |i: usize| EthernetAddress([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5]]);
        let ip = |i: usize| Ipv4Address([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(ArpRepr {
            operation,
            sender_mac: mac(8),
            sender_ip: ip(14),
            target_mac: mac(18),
            target_ip: ip(24),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        ARP_LEN
    }

    /// Writes the 28 bytes into the start of `buf` (which must hold them).
    pub fn emit(&self, buf: &mut [u8]) {
        let b = &mut buf[..ARP_LEN];
        b[0..8].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 0]);
        b[7] = match self.operation {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
        };
        b[8..14].copy_from_slice(&self.sender_mac.0);
        b[14..18].copy_from_slice(&self.sender_ip.0);
        b[18..24].copy_from_slice(&self.target_mac.0);
        b[24..28].copy_from_slice(&self.target_ip.0);
    }

    /// The reply that says `mac` has `self.target_ip`, to this request's sender.
    pub fn reply_from(&self, mac: EthernetAddress) -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::Reply,
            sender_mac: mac,
            sender_ip: self.target_ip,
            target_mac: self.sender_mac,
            target_ip: self.sender_ip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A request "who has 10.77.0.2, tell 10.77.0.1" as Linux sends it.
    const REQUEST: [u8; 28] = [
        0, 1, 8, 0, 6, 4, 0, 1, 2, 0x72, 0x63, 0, 0, 1, 10, 77, 0, 1, 0, 0, 0, 0, 0, 0, 10, 77, 0,
        2,
    ];

    #[test]
    fn parses_and_reemits_a_request() {
        let r = ArpRepr::parse(&REQUEST).unwrap();
        assert_eq!(r.operation, ArpOperation::Request);
        assert_eq!(r.sender_ip, Ipv4Address::new(10, 77, 0, 1));
        assert_eq!(r.target_ip, Ipv4Address::new(10, 77, 0, 2));
        let mut b = [0u8; 28];
        r.emit(&mut b);
        assert_eq!(b, REQUEST);
        let reply = r.reply_from(EthernetAddress([2, 0x72, 0x63, 0xfe, 0, 0]));
        assert_eq!(reply.target_mac, r.sender_mac);
        assert_eq!(reply.sender_ip, r.target_ip);
        assert_eq!(reply.operation, ArpOperation::Reply);
    }

    #[test]
    fn rejects_what_is_not_ethernet_ipv4_arp() {
        assert!(ArpRepr::parse(&REQUEST[..27]).is_err());
        for (i, v) in [(1, 6u8), (3, 0xdd), (4, 8), (5, 16), (7, 3)] {
            let mut b = REQUEST;
            b[i] = v;
            assert!(ArpRepr::parse(&b).is_err(), "byte {i} = {v}");
        }
        // Ethernet padding after the 28 bytes is fine.
        let mut padded = REQUEST.to_vec();
        padded.extend([0; 18]);
        assert!(ArpRepr::parse(&padded).is_ok());
    }
}
