//! Extended transport headers (IBTA vol. 1 §9.3, §9.7.5): RETH, AETH, DETH, ImmDt,
//! IETH, AtomicETH, AtomicAckETH, and the 16 reserved bytes of the RoCEv2 CNP
//! (Annex A17.9.3). They follow the BTH in this fixed order:
//! DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH.

use super::{be, put_be, Error, Result};
use crate::time::Duration;

pub const RETH_LEN: usize = 16;
pub const AETH_LEN: usize = 4;
pub const DETH_LEN: usize = 8;
pub const IMMDT_LEN: usize = 4;
pub const IETH_LEN: usize = 4;
pub const ATOMIC_ETH_LEN: usize = 28;
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
pub const CNP_RESERVED_LEN: usize = 16;

/// Which extended headers an opcode carries (from the opcode table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct ExtLayout {
    pub has_deth: bool,
    pub has_reth: bool,
    pub has_atomic: bool,
    pub has_aeth: bool,
    pub has_atomic_ack: bool,
    pub has_imm: bool,
    pub has_ieth: bool,
    pub has_cnp: bool,
}
impl ExtLayout {
    pub const NONE: ExtLayout = ExtLayout {
        has_deth: false,
        has_reth: false,
        has_atomic: false,
        has_aeth: false,
        has_atomic_ack: false,
        has_imm: false,
        has_ieth: false,
        has_cnp: false,
    };
    pub const fn deth(mut self) -> Self {
        self.has_deth = true;
        self
    }
    pub const fn reth(mut self) -> Self {
        self.has_reth = true;
        self
    }
    pub const fn atomic(mut self) -> Self {
        self.has_atomic = true;
        self
    }
    pub const fn aeth(mut self) -> Self {
        self.has_aeth = true;
        self
    }
    pub const fn atomic_ack(mut self) -> Self {
        self.has_atomic_ack = true;
        self
    }
    pub const fn imm(mut self) -> Self {
        self.has_imm = true;
        self
    }
    pub const fn ieth(mut self) -> Self {
        self.has_ieth = true;
        self
    }
    pub const fn cnp(mut self) -> Self {
        self.has_cnp = true;
        self
    }
}

/// RDMA Extended Transport Header: where a WRITE or READ goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}
impl RethRepr {
    pub fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < RETH_LEN {
            return Err(Error::Truncated("reth"));
        }
        Ok(RethRepr {
            va: be(b, 0, 8),
            rkey: be(b, 8, 4) as u32,
            dma_len: be(b, 12, 4) as u32,
        })
    }
    pub fn emit(&self, b: &mut [u8]) {
        put_be(b, 0, 8, self.va);
        put_be(b, 8, 4, self.rkey as u64);
        put_be(b, 12, 4, self.dma_len as u64);
    }
}

/// NAK codes (IBTA Table 44).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakCode {
    PsnSequenceError,
    InvalidRequest,
    RemoteAccessError,
    RemoteOperationalError,
    InvalidRdRequest,
    /// A reserved code, kept so the frame re-emits unchanged.
    Reserved(u8),
}
impl NakCode {
    pub const fn from_code(c: u8) -> Self {
        match c {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            o => NakCode::Reserved(o & 0x1f),
        }
    }
    pub const fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & 0x1f,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            NakCode::PsnSequenceError => "PSN sequence error",
            NakCode::InvalidRequest => "invalid request",
            NakCode::RemoteAccessError => "remote access error",
            NakCode::RemoteOperationalError => "remote operational error",
            NakCode::InvalidRdRequest => "invalid RD request",
            NakCode::Reserved(_) => "reserved",
        }
    }
}

/// The AETH syndrome byte (IBTA §9.7.5.1, Table 42): bits 6-5 select ACK, RNR NAK or NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckSyndrome {
    /// ACK with the encoded credit count (Table 45; 31 = "invalid", i.e. no end-to-end flow control).
    Ack {
        credits: u8,
    },
    /// Receiver not ready; `timer` is the encoded minimum wait (Table 46).
    RnrNak {
        timer: u8,
    },
    Nak(NakCode),
    /// A syndrome with a reserved type or bit 7 set, kept raw.
    Reserved(u8),
}
impl AckSyndrome {
    /// Credit count encoding meaning "credits not valid".
    pub const CREDITS_INVALID: u8 = 31;

    pub const fn from_byte(b: u8) -> Self {
        if b & 0x80 != 0 {
            return AckSyndrome::Reserved(b);
        }
        match (b >> 5) & 3 {
            0 => AckSyndrome::Ack { credits: b & 0x1f },
            1 => AckSyndrome::RnrNak { timer: b & 0x1f },
            3 => AckSyndrome::Nak(NakCode::from_code(b & 0x1f)),
            _ => AckSyndrome::Reserved(b),
        }
    }
    pub const fn to_byte(self) -> u8 {
        match self {
            AckSyndrome::Ack { credits } => credits & 0x1f,
            AckSyndrome::RnrNak { timer } => 0x20 | (timer & 0x1f),
            AckSyndrome::Nak(c) => 0x60 | c.code(),
            AckSyndrome::Reserved(b) => b,
        }
    }
    pub const fn is_ack(self) -> bool {
        matches!(self, AckSyndrome::Ack { .. })
    }

    /// Number of receive credits an encoded count stands for, `None` for "invalid" (31).
    pub fn decode_credits(code: u8) -> Option<u32> {
        const T: [u32; 31] = [
            0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
            1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
        ];
        T.get(code as usize).copied()
    }
    /// The largest code whose credit count does not exceed `n`.
    pub fn encode_credits(n: u32) -> u8 {
        (0..31u8)
            .rev()
            .find(|&c| Self::decode_credits(c).unwrap() <= n)
            .unwrap_or(0)
    }
    /// The RNR NAK timer codes in microseconds (IBTA Table 46); code 0 is 655.36 ms.
    pub fn rnr_timer(code: u8) -> Duration {
        // Codes 1..=31 in units of 10 us (code 1 = 0.01 ms); code 0 is special.
        const TEN_US: [u64; 32] = [
            0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
            1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
        ];
        let code = (code & 0x1f) as usize;
        if code == 0 {
            Duration::from_us(655_360)
        } else {
            Duration::from_us(TEN_US[code] * 10)
        }
    }
    /// The smallest code whose wait is at least `d` (code 0, 655 ms, is not used for this).
    pub fn encode_rnr_timer(d: Duration) -> u8 {
        (1..32u8).find(|&c| Self::rnr_timer(c) >= d).unwrap_or(0)
    }
}

/// ACK Extended Transport Header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AethRepr {
    pub syndrome: AckSyndrome,
    /// Message sequence number (24 bits): messages completed by the responder.
    pub msn: u32,
}
impl AethRepr {
    pub fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < AETH_LEN {
            return Err(Error::Truncated("aeth"));
        }
        Ok(AethRepr {
            syndrome: AckSyndrome::from_byte(b[0]),
            msn: be(b, 1, 3) as u32,
        })
    }
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.syndrome.to_byte();
        put_be(b, 1, 3, (self.msn & 0xff_ffff) as u64);
    }
}

/// A checked view of an AETH, for in-place rewriting (e.g. by a switch).
#[derive(Debug, Clone)]
pub struct AethPacket<T: AsRef<[u8]>> {
    buffer: T,
}
impl<T: AsRef<[u8]>> AethPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < AETH_LEN {
            return Err(Error::Truncated("aeth"));
        }
        Ok(AethPacket { buffer })
    }
    pub fn syndrome(&self) -> AckSyndrome {
        AckSyndrome::from_byte(self.buffer.as_ref()[0])
    }
    pub fn msn(&self) -> u32 {
        be(self.buffer.as_ref(), 1, 3) as u32
    }
}

/// Datagram Extended Transport Header (UD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DethRepr {
    pub qkey: u32,
    pub reserved: u8,
    pub src_qp: u32,
}
impl DethRepr {
    pub fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < DETH_LEN {
            return Err(Error::Truncated("deth"));
        }
        Ok(DethRepr {
            qkey: be(b, 0, 4) as u32,
            reserved: b[4],
            src_qp: be(b, 5, 3) as u32,
        })
    }
    pub fn emit(&self, b: &mut [u8]) {
        put_be(b, 0, 4, self.qkey as u64);
        b[4] = self.reserved;
        put_be(b, 5, 3, (self.src_qp & 0xff_ffff) as u64);
    }
}

/// Atomic Extended Transport Header (compare-and-swap, fetch-and-add).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}
impl AtomicEthRepr {
    pub fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < ATOMIC_ETH_LEN {
            return Err(Error::Truncated("atomiceth"));
        }
        Ok(AtomicEthRepr {
            va: be(b, 0, 8),
            rkey: be(b, 8, 4) as u32,
            swap_add: be(b, 12, 8),
            compare: be(b, 20, 8),
        })
    }
    pub fn emit(&self, b: &mut [u8]) {
        put_be(b, 0, 8, self.va);
        put_be(b, 8, 4, self.rkey as u64);
        put_be(b, 12, 8, self.swap_add);
        put_be(b, 20, 8, self.compare);
    }
}

/// Atomic ACK Extended Transport Header: the original remote value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicAckEthRepr {
    pub orig_data: u64,
}

/// All extended headers of one packet, in wire order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ExtHeaders {
    pub deth: Option<DethRepr>,
    pub reth: Option<RethRepr>,
    pub atomic_eth: Option<AtomicEthRepr>,
    pub aeth: Option<AethRepr>,
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    pub imm: Option<u32>,
    pub ieth: Option<u32>,
    /// The 16 reserved bytes of a CNP, kept as found.
    pub cnp_reserved: Option<[u8; CNP_RESERVED_LEN]>,
}

impl ExtHeaders {
    /// Parses the headers `layout` calls for from the start of `b`.
    pub(crate) fn parse(layout: ExtLayout, b: &[u8]) -> Result<(Self, usize)> {
        let mut at = 0;
        let mut e = ExtHeaders::default();
        let mut take = |n: usize, what: &'static str| -> Result<&[u8]> {
            let s = b.get(at..at + n).ok_or(Error::Truncated(what))?;
            at += n;
            Ok(s)
        };
        if layout.has_deth {
            e.deth = Some(DethRepr::parse(take(DETH_LEN, "deth")?)?);
        }
        if layout.has_reth {
            e.reth = Some(RethRepr::parse(take(RETH_LEN, "reth")?)?);
        }
        if layout.has_atomic {
            e.atomic_eth = Some(AtomicEthRepr::parse(take(ATOMIC_ETH_LEN, "atomiceth")?)?);
        }
        if layout.has_aeth {
            e.aeth = Some(AethRepr::parse(take(AETH_LEN, "aeth")?)?);
        }
        if layout.has_atomic_ack {
            e.atomic_ack_eth = Some(AtomicAckEthRepr {
                orig_data: be(take(ATOMIC_ACK_ETH_LEN, "atomicacketh")?, 0, 8),
            });
        }
        if layout.has_imm {
            e.imm = Some(be(take(IMMDT_LEN, "immdt")?, 0, 4) as u32);
        }
        if layout.has_ieth {
            e.ieth = Some(be(take(IETH_LEN, "ieth")?, 0, 4) as u32);
        }
        if layout.has_cnp {
            e.cnp_reserved = Some(take(CNP_RESERVED_LEN, "cnp reserved")?.try_into().unwrap());
        }
        Ok((e, at))
    }

    pub fn buffer_len(&self) -> usize {
        self.deth.map_or(0, |_| DETH_LEN)
            + self.reth.map_or(0, |_| RETH_LEN)
            + self.atomic_eth.map_or(0, |_| ATOMIC_ETH_LEN)
            + self.aeth.map_or(0, |_| AETH_LEN)
            + self.atomic_ack_eth.map_or(0, |_| ATOMIC_ACK_ETH_LEN)
            + self.imm.map_or(0, |_| IMMDT_LEN)
            + self.ieth.map_or(0, |_| IETH_LEN)
            + self.cnp_reserved.map_or(0, |_| CNP_RESERVED_LEN)
    }

    /// Writes the present headers in wire order; returns the bytes written.
    pub fn emit(&self, b: &mut [u8]) -> usize {
        let mut at = 0;
        if let Some(d) = self.deth {
            d.emit(&mut b[at..]);
            at += DETH_LEN;
        }
        if let Some(r) = self.reth {
            r.emit(&mut b[at..]);
            at += RETH_LEN;
        }
        if let Some(a) = self.atomic_eth {
            a.emit(&mut b[at..]);
            at += ATOMIC_ETH_LEN;
        }
        if let Some(a) = self.aeth {
            a.emit(&mut b[at..]);
            at += AETH_LEN;
        }
        if let Some(a) = self.atomic_ack_eth {
            put_be(b, at, 8, a.orig_data);
            at += ATOMIC_ACK_ETH_LEN;
        }
        if let Some(i) = self.imm {
            put_be(b, at, 4, i as u64);
            at += IMMDT_LEN;
        }
        if let Some(i) = self.ieth {
            put_be(b, at, 4, i as u64);
            at += IETH_LEN;
        }
        if let Some(r) = self.cnp_reserved {
            b[at..at + CNP_RESERVED_LEN].copy_from_slice(&r);
            at += CNP_RESERVED_LEN;
        }
        at
    }

    /// Whether these headers are exactly the ones `layout` calls for.
    #[cfg(test)]
    pub(crate) fn matches(&self, l: ExtLayout) -> bool {
        self.deth.is_some() == l.has_deth
            && self.reth.is_some() == l.has_reth
            && self.atomic_eth.is_some() == l.has_atomic
            && self.aeth.is_some() == l.has_aeth
            && self.atomic_ack_eth.is_some() == l.has_atomic_ack
            && self.imm.is_some() == l.has_imm
            && self.ieth.is_some() == l.has_ieth
            && self.cnp_reserved.is_some() == l.has_cnp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndrome_byte_roundtrip_all_values() {
        for b in 0..=255u8 {
            assert_eq!(AckSyndrome::from_byte(b).to_byte(), b);
        }
        assert_eq!(
            AckSyndrome::from_byte(0x1f),
            AckSyndrome::Ack { credits: 31 }
        );
        assert_eq!(
            AckSyndrome::from_byte(0x60),
            AckSyndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x61),
            AckSyndrome::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x62),
            AckSyndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x63),
            AckSyndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            AckSyndrome::from_byte(0x2e),
            AckSyndrome::RnrNak { timer: 14 }
        );
    }
    #[test]
    fn credits_and_rnr_tables() {
        assert_eq!(AckSyndrome::decode_credits(31), None);
        assert_eq!(AckSyndrome::decode_credits(8), Some(16));
        assert_eq!(AckSyndrome::encode_credits(20), 8);
        assert_eq!(AckSyndrome::encode_credits(100_000), 30);
        assert_eq!(AckSyndrome::rnr_timer(1), Duration::from_us(10));
        assert_eq!(AckSyndrome::rnr_timer(14), Duration::from_us(1280));
        assert_eq!(
            AckSyndrome::rnr_timer(0),
            Duration::from_ms(655) + Duration::from_us(360)
        );
        assert_eq!(AckSyndrome::encode_rnr_timer(Duration::from_us(100)), 7);
    }
    #[test]
    fn ext_headers_roundtrip() {
        let e = ExtHeaders {
            reth: Some(RethRepr {
                va: 0x1122334455667788,
                rkey: 0xabcd,
                dma_len: 4096,
            }),
            imm: Some(0xdeadbeef),
            ..Default::default()
        };
        let l = ExtLayout::NONE.reth().imm();
        assert!(e.matches(l));
        let mut b = [0u8; 20];
        assert_eq!(e.emit(&mut b), 20);
        assert_eq!(ExtHeaders::parse(l, &b).unwrap(), (e, 20));
        assert_eq!(
            ExtHeaders::parse(l, &b[..19]).unwrap_err(),
            Error::Truncated("immdt")
        );
    }
}
