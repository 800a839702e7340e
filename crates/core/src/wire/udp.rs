//! UDP (RFC 768). RoCEv2 uses destination port 4791 and the source port as ECMP entropy;
//! senders may leave the checksum zero (Linux rxe does), which rocast does too.

use super::{be, put_be, Error, Result};

pub const UDP_HEADER_LEN: usize = 8;

/// A view of a UDP datagram; `new_checked` guarantees the header and `length` bytes.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}
impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = UdpPacket { buffer };
        let len = p.buffer.as_ref().len();
        if len < UDP_HEADER_LEN {
            return Err(Error::Truncated("udp header"));
        }
        let l = p.len() as usize;
        if l < UDP_HEADER_LEN {
            return Err(Error::Malformed("udp length"));
        }
        if len < l {
            return Err(Error::Truncated("udp datagram"));
        }
        Ok(p)
    }
    pub fn src_port(&self) -> u16 {
        be(self.buffer.as_ref(), 0, 2) as u16
    }
    pub fn dst_port(&self) -> u16 {
        be(self.buffer.as_ref(), 2, 2) as u16
    }
    pub fn len(&self) -> u16 {
        be(self.buffer.as_ref(), 4, 2) as u16
    }
    pub fn is_empty(&self) -> bool {
        self.len() as usize == UDP_HEADER_LEN
    }
    pub fn checksum(&self) -> u16 {
        be(self.buffer.as_ref(), 6, 2) as u16
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[UDP_HEADER_LEN..self.len() as usize]
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put_be(self.buffer.as_mut(), 0, 2, v as u64)
    }
    pub fn set_dst_port(&mut self, v: u16) {
        put_be(self.buffer.as_mut(), 2, 2, v as u64)
    }
    pub fn set_checksum(&mut self, v: u16) {
        put_be(self.buffer.as_mut(), 6, 2, v as u64)
    }
}

/// A UDP header. The checksum is carried as found so that frames re-emit byte-identical;
/// rocast's own senders use 0 ("no checksum"), which RoCEv2 permits since the ICRC covers the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub checksum: u16,
    pub payload_len: usize,
}
impl UdpRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Result<Self> {
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            checksum: p.checksum(),
            payload_len: p.len() as usize - UDP_HEADER_LEN,
        })
    }
    pub const fn buffer_len(&self) -> usize {
        UDP_HEADER_LEN
    }
    pub fn emit(&self, buf: &mut [u8]) {
        put_be(buf, 0, 2, self.src_port as u64);
        put_be(buf, 2, 2, self.dst_port as u64);
        put_be(buf, 4, 2, (UDP_HEADER_LEN + self.payload_len) as u64);
        put_be(buf, 6, 2, self.checksum as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    static DGRAM: [u8; 10] = [0xc1, 0x21, 0x12, 0xb7, 0x00, 0x0a, 0x00, 0x00, 0xde, 0xad];
    #[test]
    fn test_parse_emit() {
        let p = UdpPacket::new_checked(&DGRAM[..]).unwrap();
        let r = UdpRepr::parse(&p).unwrap();
        assert_eq!((r.src_port, r.dst_port, r.payload_len), (49441, 4791, 2));
        assert_eq!(p.payload(), &[0xde, 0xad]);
        let mut out = [0u8; 10];
        r.emit(&mut out);
        out[8..].copy_from_slice(p.payload());
        assert_eq!(out, DGRAM);
    }
    #[test]
    fn test_bad_lengths() {
        let mut d = DGRAM;
        d[5] = 4;
        assert_eq!(
            UdpPacket::new_checked(&d[..]).unwrap_err(),
            Error::Malformed("udp length")
        );
        assert_eq!(
            UdpPacket::new_checked(&DGRAM[..9]).unwrap_err(),
            Error::Truncated("udp datagram")
        );
    }
}
