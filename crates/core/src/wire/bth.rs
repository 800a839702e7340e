//! The Base Transport Header (IBTA vol. 1 §9.2) and the opcode table (§9.2.1, Table 35)
//! that says which extended headers follow it.

use super::ext::ExtLayout;
use super::{be, put_be, Error, Psn, Result};
use core::fmt;

pub const BTH_LEN: usize = 12;

/// A BTH opcode. Opcodes rocast does not model are kept as `Unknown` so the frame can
/// still be ICRC-checked and reported.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

#[allow(missing_docs)]
impl Opcode {
    // Reliable Connection (0x00-0x1f).
    pub const RC_SEND_FIRST: Opcode = Opcode(0x00);
    pub const RC_SEND_MIDDLE: Opcode = Opcode(0x01);
    pub const RC_SEND_LAST: Opcode = Opcode(0x02);
    pub const RC_SEND_LAST_IMM: Opcode = Opcode(0x03);
    pub const RC_SEND_ONLY: Opcode = Opcode(0x04);
    pub const RC_SEND_ONLY_IMM: Opcode = Opcode(0x05);
    pub const RC_WRITE_FIRST: Opcode = Opcode(0x06);
    pub const RC_WRITE_MIDDLE: Opcode = Opcode(0x07);
    pub const RC_WRITE_LAST: Opcode = Opcode(0x08);
    pub const RC_WRITE_LAST_IMM: Opcode = Opcode(0x09);
    pub const RC_WRITE_ONLY: Opcode = Opcode(0x0a);
    pub const RC_WRITE_ONLY_IMM: Opcode = Opcode(0x0b);
    pub const RC_READ_REQUEST: Opcode = Opcode(0x0c);
    pub const RC_READ_RESPONSE_FIRST: Opcode = Opcode(0x0d);
    pub const RC_READ_RESPONSE_MIDDLE: Opcode = Opcode(0x0e);
    pub const RC_READ_RESPONSE_LAST: Opcode = Opcode(0x0f);
    pub const RC_READ_RESPONSE_ONLY: Opcode = Opcode(0x10);
    pub const RC_ACKNOWLEDGE: Opcode = Opcode(0x11);
    pub const RC_ATOMIC_ACKNOWLEDGE: Opcode = Opcode(0x12);
    pub const RC_COMPARE_SWAP: Opcode = Opcode(0x13);
    pub const RC_FETCH_ADD: Opcode = Opcode(0x14);
    pub const RC_SEND_LAST_INV: Opcode = Opcode(0x16);
    pub const RC_SEND_ONLY_INV: Opcode = Opcode(0x17);
    // Unreliable Datagram (0x60-0x7f).
    pub const UD_SEND_ONLY: Opcode = Opcode(0x64);
    pub const UD_SEND_ONLY_IMM: Opcode = Opcode(0x65);
    /// RoCEv2 Congestion Notification Packet (Annex A17.9.3).
    pub const CNP: Opcode = Opcode(0x81);

    /// Transport service bits (top 3 bits): 0 RC, 1 UC, 2 RD, 3 UD, 4 CNP.
    pub const fn transport(self) -> u8 {
        self.0 >> 5
    }
    /// The operation within the transport (low 5 bits); UC uses RC's numbering.
    const fn op(self) -> u8 {
        self.0 & 0x1f
    }

    /// The extended headers that follow the BTH, or `None` if rocast does not model this opcode.
    pub(crate) const fn layout(self) -> Option<ExtLayout> {
        let l = ExtLayout::NONE;
        match self.transport() {
            // RC and UC share the opcode table for SEND and WRITE.
            0 | 1 => {
                let uc = self.transport() == 1;
                Some(match self.op() {
                    0x00..=0x02 | 0x07 | 0x08 => l,
                    0x03 | 0x09 => l.imm(),
                    0x04 => l,
                    0x05 => l.imm(),
                    0x06 | 0x0a => l.reth(),
                    0x0b => l.reth().imm(),
                    0x0c if !uc => l.reth(),
                    0x0d | 0x0f | 0x10 | 0x11 if !uc => l.aeth(),
                    0x0e if !uc => l,
                    0x12 if !uc => l.aeth().atomic_ack(),
                    0x13 | 0x14 if !uc => l.atomic(),
                    0x16 | 0x17 if !uc => l.ieth(),
                    _ => return None,
                })
            }
            3 => match self.op() {
                0x04 => Some(l.deth()),
                0x05 => Some(l.deth().imm()),
                _ => None,
            },
            4 if self.0 == 0x81 => Some(l.cnp()),
            _ => None,
        }
    }
    pub fn is_known(self) -> bool {
        self.layout().is_some()
    }

    pub fn is_send(self) -> bool {
        matches!(self.transport(), 0 | 1) && matches!(self.op(), 0x00..=0x05 | 0x16 | 0x17)
            || matches!(self.0, 0x64 | 0x65)
    }
    pub fn is_write(self) -> bool {
        matches!(self.transport(), 0 | 1) && matches!(self.op(), 0x06..=0x0b)
    }
    /// FIRST or ONLY: starts a message.
    pub fn is_first(self) -> bool {
        matches!(self.transport(), 0 | 1)
            && matches!(self.op(), 0x00 | 0x04 | 0x05 | 0x06 | 0x0a | 0x0b | 0x17)
            || matches!(self.0, 0x64 | 0x65)
    }
    /// LAST or ONLY: ends a message.
    pub fn is_last(self) -> bool {
        matches!(self.transport(), 0 | 1)
            && matches!(self.op(), 0x02..=0x05 | 0x08..=0x0b | 0x16 | 0x17)
            || matches!(self.0, 0x64 | 0x65)
    }
    pub fn has_imm(self) -> bool {
        self.layout().is_some_and(|l| l.has_imm)
    }

    pub fn name(self) -> &'static str {
        let rc = match self.op() {
            0x00 => "SEND_FIRST",
            0x01 => "SEND_MIDDLE",
            0x02 => "SEND_LAST",
            0x03 => "SEND_LAST_WITH_IMMEDIATE",
            0x04 => "SEND_ONLY",
            0x05 => "SEND_ONLY_WITH_IMMEDIATE",
            0x06 => "RDMA_WRITE_FIRST",
            0x07 => "RDMA_WRITE_MIDDLE",
            0x08 => "RDMA_WRITE_LAST",
            0x09 => "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            0x0a => "RDMA_WRITE_ONLY",
            0x0b => "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            0x0c => "RDMA_READ_REQUEST",
            0x0d => "RDMA_READ_RESPONSE_FIRST",
            0x0e => "RDMA_READ_RESPONSE_MIDDLE",
            0x0f => "RDMA_READ_RESPONSE_LAST",
            0x10 => "RDMA_READ_RESPONSE_ONLY",
            0x11 => "ACKNOWLEDGE",
            0x12 => "ATOMIC_ACKNOWLEDGE",
            0x13 => "COMPARE_SWAP",
            0x14 => "FETCH_ADD",
            0x16 => "SEND_LAST_WITH_INVALIDATE",
            0x17 => "SEND_ONLY_WITH_INVALIDATE",
            _ => "UNKNOWN",
        };
        match self.transport() {
            0 => rc,
            1 if self.is_known() => rc,
            3 if self.op() == 0x04 => "SEND_ONLY",
            3 if self.op() == 0x05 => "SEND_ONLY_WITH_IMMEDIATE",
            4 if self.0 == 0x81 => "CNP",
            _ => "UNKNOWN",
        }
    }
    pub fn transport_name(self) -> &'static str {
        match self.transport() {
            0 => "RC",
            1 => "UC",
            2 => "RD",
            3 => "UD",
            4 => "CNP",
            _ => "?",
        }
    }
}
impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}_{}(0x{:02x})",
            self.transport_name(),
            self.name(),
            self.0
        )
    }
}
impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0x81 {
            f.write_str("CNP")
        } else {
            write!(f, "{} {}", self.transport_name(), self.name())
        }
    }
}

/// A view of a BTH.
#[derive(Debug, Clone)]
pub struct BthPacket<T: AsRef<[u8]>> {
    buffer: T,
}
impl<T: AsRef<[u8]>> BthPacket<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        BthPacket { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < BTH_LEN {
            return Err(Error::Truncated("bth"));
        }
        Ok(BthPacket { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[0])
    }
    pub fn solicited(&self) -> bool {
        self.b()[1] & 0x80 != 0
    }
    pub fn mig_req(&self) -> bool {
        self.b()[1] & 0x40 != 0
    }
    pub fn pad_count(&self) -> u8 {
        (self.b()[1] >> 4) & 3
    }
    pub fn tver(&self) -> u8 {
        self.b()[1] & 0x0f
    }
    pub fn pkey(&self) -> u16 {
        be(self.b(), 2, 2) as u16
    }
    /// Byte 4: in RoCEv2 its top bits are FECN/BECN; the rest is reserved.
    pub fn resv8a(&self) -> u8 {
        self.b()[4]
    }
    pub fn fecn(&self) -> bool {
        self.b()[4] & 0x80 != 0
    }
    pub fn becn(&self) -> bool {
        self.b()[4] & 0x40 != 0
    }
    pub fn dest_qp(&self) -> u32 {
        be(self.b(), 5, 3) as u32
    }
    pub fn ack_req(&self) -> bool {
        self.b()[8] & 0x80 != 0
    }
    pub fn resv7(&self) -> u8 {
        self.b()[8] & 0x7f
    }
    pub fn psn(&self) -> Psn {
        Psn::new(be(self.b(), 9, 3) as u32)
    }
}
impl<T: AsRef<[u8]> + AsMut<[u8]>> BthPacket<T> {
    pub fn set_dest_qp(&mut self, qp: u32) {
        put_be(self.buffer.as_mut(), 5, 3, (qp & 0xff_ffff) as u64)
    }
    pub fn set_psn(&mut self, psn: Psn) {
        put_be(self.buffer.as_mut(), 9, 3, psn.value() as u64)
    }
    pub fn set_ack_req(&mut self, v: bool) {
        let b = &mut self.buffer.as_mut()[8];
        *b = (*b & 0x7f) | ((v as u8) << 7)
    }
}

/// A BTH. Reserved bits are kept so that captured frames re-emit byte-identical.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BthRepr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    pub pad_count: u8,
    pub tver: u8,
    pub pkey: u16,
    /// Byte 4 whole: FECN (0x80), BECN (0x40) and six reserved bits.
    pub resv8a: u8,
    pub dest_qp: u32,
    pub ack_req: bool,
    pub resv7: u8,
    pub psn: Psn,
}
impl BthRepr {
    /// A BTH with the usual defaults: default P_Key 0xffff, TVer 0, nothing set.
    pub fn new(opcode: Opcode, dest_qp: u32, psn: Psn) -> Self {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xffff,
            resv8a: 0,
            dest_qp,
            ack_req: false,
            resv7: 0,
            psn,
        }
    }
    pub fn parse<T: AsRef<[u8]>>(p: &BthPacket<T>) -> Result<Self> {
        Ok(BthRepr {
            opcode: p.opcode(),
            solicited: p.solicited(),
            mig_req: p.mig_req(),
            pad_count: p.pad_count(),
            tver: p.tver(),
            pkey: p.pkey(),
            resv8a: p.resv8a(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            resv7: p.resv7(),
            psn: p.psn(),
        })
    }
    pub fn becn(&self) -> bool {
        self.resv8a & 0x40 != 0
    }
    pub const fn buffer_len(&self) -> usize {
        BTH_LEN
    }
    pub fn emit(&self, b: &mut [u8]) {
        b[0] = self.opcode.0;
        b[1] = ((self.solicited as u8) << 7)
            | ((self.mig_req as u8) << 6)
            | ((self.pad_count & 3) << 4)
            | (self.tver & 0x0f);
        put_be(b, 2, 2, self.pkey as u64);
        b[4] = self.resv8a;
        put_be(b, 5, 3, (self.dest_qp & 0xff_ffff) as u64);
        b[8] = ((self.ack_req as u8) << 7) | (self.resv7 & 0x7f);
        put_be(b, 9, 3, self.psn.value() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // BTH of rxe-golden.pcap's first WRITE_FIRST: QP 18, PSN 10088615.
    static BTH: [u8; 12] = [
        0x06, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x00, 0x99, 0xf0, 0xa7,
    ];

    #[test]
    fn test_deconstruct() {
        let p = BthPacket::new_checked(&BTH[..]).unwrap();
        assert_eq!(p.opcode(), Opcode::RC_WRITE_FIRST);
        assert_eq!(p.dest_qp(), 18);
        assert_eq!(p.psn(), Psn::new(10088615));
        assert_eq!(p.pkey(), 0xffff);
        assert!(!p.ack_req());
    }
    #[test]
    fn test_construct() {
        let r = BthRepr::new(Opcode::RC_WRITE_FIRST, 18, Psn::new(10088615));
        let mut b = [0u8; 12];
        r.emit(&mut b);
        assert_eq!(b, BTH);
        assert_eq!(
            BthRepr::parse(&BthPacket::new_checked(&b[..]).unwrap()).unwrap(),
            r
        );
    }
    #[test]
    fn opcode_table() {
        assert!(Opcode::RC_SEND_ONLY.is_first() && Opcode::RC_SEND_ONLY.is_last());
        assert!(Opcode::RC_WRITE_MIDDLE.is_write() && !Opcode::RC_WRITE_MIDDLE.is_first());
        assert!(Opcode::RC_WRITE_LAST_IMM.has_imm());
        assert!(Opcode::UD_SEND_ONLY.is_send());
        assert!(!Opcode(0x15).is_known());
        assert!(!Opcode(0x2c).is_known(), "UC has no READ");
        assert!(Opcode(0x24).is_known(), "UC SEND_ONLY");
        assert_eq!(Opcode::CNP.to_string(), "CNP");
        assert_eq!(Opcode::RC_ACKNOWLEDGE.to_string(), "RC ACKNOWLEDGE");
        for op in 0..=255u8 {
            let _ = (Opcode(op).name(), Opcode(op).layout()); // total over all bytes
        }
    }
}
