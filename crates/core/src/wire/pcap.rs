//! Classic libpcap files (the format of tcpdump `-w`): reading captures and writing
//! them. Microsecond and nanosecond variants, either byte order. The streaming reader
//! also reads pcapng (Wireshark's default; RFC draft-ietf-opsawg-pcapng): section
//! headers in either byte order, interface descriptions with their timestamp
//! resolution, enhanced and simple packet blocks; other blocks are skipped. This is a
//! container format, not protocol logic; it lives in `wire` because every driver and
//! tool needs it.

use std::io::{self, Write};

/// Link type for Ethernet (DLT_EN10MB).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type for raw IPv4/IPv6 (DLT_RAW as written by libpcap: 101).
pub const LINKTYPE_RAW: u32 = 101;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PcapError {
    #[error("not a pcap file (magic {0:#010x})")]
    BadMagic(u32),
    #[error("pcap file header truncated")]
    TruncatedHeader,
    #[error("record {index} truncated at byte offset {offset}")]
    TruncatedRecord { index: usize, offset: usize },
    #[error("pcapng: {what} at byte offset {offset}")]
    MalformedBlock { what: &'static str, offset: usize },
    #[error("record {index} claims {len} bytes, over the 262144-byte record limit (snap length {snaplen})")]
    OversizedRecord {
        index: usize,
        len: u32,
        snaplen: u32,
    },
}

/// One captured frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapRecord<'a> {
    /// Capture time in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Length on the wire (may exceed `data.len()` if the capture was snapped).
    pub orig_len: u32,
    pub data: &'a [u8],
}

/// Reads records from an in-memory pcap file.
#[derive(Debug)]
pub struct PcapReader<'a> {
    buf: &'a [u8],
    at: usize,
    index: usize,
    header: FileHeader,
    pub linktype: u32,
    pub snaplen: u32,
    failed: bool,
}

/// The file header's fields: byte order, timestamp unit, snap length, link type.
#[derive(Clone, Copy, Debug)]
struct FileHeader {
    big_endian: bool,
    nanos: bool,
    snaplen: u32,
    linktype: u32,
}

/// A 32-bit field in the file's byte order.
fn u32_in(b: &[u8], big_endian: bool) -> u32 {
    let b: [u8; 4] = b[..4].try_into().unwrap();
    if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

impl FileHeader {
    fn parse(h: &[u8]) -> Result<Self, PcapError> {
        if h.len() < 24 {
            return Err(PcapError::TruncatedHeader);
        }
        let magic_le = u32::from_le_bytes(h[0..4].try_into().unwrap());
        let (big_endian, nanos) = match magic_le {
            0xa1b2c3d4 => (false, false),
            0xa1b23c4d => (false, true),
            0xd4c3b2a1 => (true, false),
            0x4d3cb2a1 => (true, true),
            m => return Err(PcapError::BadMagic(m)),
        };
        let mut f = FileHeader {
            big_endian,
            nanos,
            snaplen: 0,
            linktype: 0,
        };
        f.snaplen = f.u32_of(&h[16..20]);
        f.linktype = f.u32_of(&h[20..24]) & 0x0fff_ffff;
        Ok(f)
    }
    fn u32_of(&self, b: &[u8]) -> u32 {
        u32_in(b, self.big_endian)
    }
    /// A record header: (timestamp ns, captured length, original length), the
    /// captured length checked against the snap length before anything is read.
    fn record(&self, h: &[u8], index: usize) -> Result<(u64, u32, u32), PcapError> {
        let (sec, frac, incl, orig) = (
            self.u32_of(&h[0..4]),
            self.u32_of(&h[4..8]),
            self.u32_of(&h[8..12]),
            self.u32_of(&h[12..16]),
        );
        // Records up to 256 KiB are allowed even if the header's snaplen is smaller
        // (some writers lie), and none larger whatever it says: the snaplen comes from
        // the file, and a record is read into memory whole.
        if incl > MAX_RECORD {
            return Err(PcapError::OversizedRecord {
                index,
                len: incl,
                snaplen: self.snaplen,
            });
        }
        let ts_ns = sec as u64 * 1_000_000_000
            + if self.nanos {
                frac as u64
            } else {
                frac as u64 * 1000
            };
        Ok((ts_ns, incl, orig))
    }
}

/// The largest record accepted, whatever the snap length says: 256 KiB, libpcap's
/// `MAXIMUM_SNAPLEN` (a fuzzed header claiming a 2.5 GB snaplen made the reader
/// allocate that much before this cap).
const MAX_RECORD: u32 = 262_144;

impl<'a> PcapReader<'a> {
    pub fn new(buf: &'a [u8]) -> Result<Self, PcapError> {
        let h = FileHeader::parse(buf)?;
        Ok(PcapReader {
            buf,
            at: 24,
            index: 0,
            header: h,
            linktype: h.linktype,
            snaplen: h.snaplen,
            failed: false,
        })
    }
}

impl<'a> Iterator for PcapReader<'a> {
    type Item = Result<PcapRecord<'a>, PcapError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at == self.buf.len() {
            return None;
        }
        let index = self.index;
        let truncated = PcapError::TruncatedRecord {
            index,
            offset: self.at,
        };
        let r = if self.buf.len() - self.at < 16 {
            Err(truncated)
        } else {
            self.header
                .record(&self.buf[self.at..self.at + 16], index)
                .and_then(|(ts_ns, incl, orig)| {
                    let start = self.at + 16;
                    let end = start + incl as usize;
                    if end > self.buf.len() {
                        return Err(truncated);
                    }
                    Ok((ts_ns, orig, start, end))
                })
        };
        match r {
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
            Ok((ts_ns, orig_len, start, end)) => {
                self.at = end;
                self.index += 1;
                Some(Ok(PcapRecord {
                    ts_ns,
                    orig_len,
                    data: &self.buf[start..end],
                }))
            }
        }
    }
}

/// Reads records from a pcap stream (a file of any size) one at a time, holding one
/// record in memory (at most 256 KiB, or the snap length).
#[derive(Debug)]
pub struct PcapStreamReader<R: io::Read> {
    input: R,
    header: FileHeader,
    /// Some when the stream is pcapng: its section's byte order and interfaces.
    ng: Option<NgState>,
    pub linktype: u32,
    pub snaplen: u32,
    /// Bytes consumed so far (for error offsets).
    at: usize,
    index: usize,
    buf: Vec<u8>,
    failed: bool,
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full<R: io::Read>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The pcapng section being read: its byte order and, per interface, the link type
/// and the timestamp unit in picoseconds... as a (multiplier, divisor) to nanoseconds.
#[derive(Debug, Clone)]
struct NgState {
    big_endian: bool,
    /// Per interface: (link type, ns = ticks * mul / div).
    interfaces: Vec<(u32, u64, u64)>,
}

/// pcapng block types rocast reads.
const NG_SHB: u32 = 0x0A0D_0D0A;
const NG_IDB: u32 = 1;
const NG_SPB: u32 = 3;
const NG_EPB: u32 = 6;
/// A block bigger than this is refused before it is read: a record's limit plus room
/// for its options.
const NG_MAX_BLOCK: u32 = MAX_RECORD + 65_536;

impl NgState {
    fn u32_of(&self, b: &[u8]) -> u32 {
        u32_in(b, self.big_endian)
    }
    fn u16_of(&self, b: &[u8]) -> u16 {
        let b: [u8; 2] = b[..2].try_into().unwrap();
        if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }
    /// An interface description's body: link type, and `if_tsresol` among its options
    /// (default microseconds).
    fn add_interface(&mut self, body: &[u8], offset: usize) -> Result<(), PcapError> {
        if body.len() < 8 {
            return Err(PcapError::MalformedBlock {
                what: "interface description shorter than 8 bytes",
                offset,
            });
        }
        let linktype = self.u16_of(&body[0..2]) as u32;
        let (mut mul, mut div) = (1_000u64, 1u64);
        let mut o = 8;
        while o + 4 <= body.len() {
            let (code, len) = (
                self.u16_of(&body[o..]),
                self.u16_of(&body[o + 2..]) as usize,
            );
            if code == 0 {
                break;
            }
            let v = body
                .get(o + 4..o + 4 + len)
                .ok_or(PcapError::MalformedBlock {
                    what: "interface option runs past its block",
                    offset,
                })?;
            if code == 9 && len >= 1 {
                let r = v[0];
                // 10^-r or 2^-r seconds per tick, as ns = ticks * mul / div.
                (mul, div) = if r & 0x80 == 0 {
                    let r = (r as u32).min(18);
                    if r <= 9 {
                        (10u64.pow(9 - r), 1)
                    } else {
                        (1, 10u64.pow(r - 9))
                    }
                } else {
                    (1_000_000_000, 1u64 << (r & 0x7f).min(62))
                };
            }
            o += 4 + len.div_ceil(4) * 4;
        }
        self.interfaces.push((linktype, mul, div));
        Ok(())
    }
}

impl<R: io::Read> PcapStreamReader<R> {
    /// Reads the file header (pcap), or the section header and the first interface
    /// description (pcapng). `Err(Ok(e))`: not a usable capture; `Err(Err(e))`: I/O.
    pub fn new(mut input: R) -> Result<Self, Result<PcapError, io::Error>> {
        let mut h = [0u8; 24];
        let n = read_full(&mut input, &mut h[..4]).map_err(Err)?;
        if n == 4 && u32::from_le_bytes(h[0..4].try_into().unwrap()) == NG_SHB {
            let mut r = PcapStreamReader {
                input,
                header: FileHeader {
                    big_endian: false,
                    nanos: true,
                    snaplen: MAX_RECORD,
                    linktype: 0,
                },
                ng: Some(NgState {
                    big_endian: false,
                    interfaces: Vec::new(),
                }),
                linktype: 0,
                snaplen: MAX_RECORD,
                at: 0,
                index: 0,
                buf: Vec::new(),
                failed: false,
            };
            r.ng_section_header(4)?;
            // Blocks until the first interface: the link type every record has.
            loop {
                match r.ng_block()? {
                    Some((NG_IDB, _)) => break,
                    Some(_) => {}
                    None => {
                        return Err(Ok(PcapError::MalformedBlock {
                            what: "no interface description block",
                            offset: r.at,
                        }))
                    }
                }
            }
            r.linktype = r.ng.as_ref().map_or(0, |n| n.interfaces[0].0);
            return Ok(r);
        }
        let m = read_full(&mut input, &mut h[4..]).map_err(Err)?;
        let header = FileHeader::parse(&h[..n + m]).map_err(Ok)?;
        Ok(PcapStreamReader {
            input,
            header,
            ng: None,
            linktype: header.linktype,
            snaplen: header.snaplen,
            at: 24,
            index: 0,
            buf: Vec::new(),
            failed: false,
        })
    }

    /// The rest of a section header block whose type (`have` bytes) is read: its
    /// byte order; a new section forgets the interfaces of the last.
    fn ng_section_header(&mut self, have: usize) -> Result<(), Result<PcapError, io::Error>> {
        let offset = self.at;
        let mut h = [0u8; 8];
        if read_full(&mut self.input, &mut h).map_err(Err)? < 8 {
            return Err(Ok(PcapError::TruncatedHeader));
        }
        let big_endian = match u32::from_le_bytes(h[4..8].try_into().unwrap()) {
            0x1A2B_3C4D => false,
            0x4D3C_2B1A => true,
            m => return Err(Ok(PcapError::BadMagic(m))),
        };
        let ng = NgState {
            big_endian,
            interfaces: Vec::new(),
        };
        let total = ng.u32_of(&h[0..4]);
        if total < 28 || total % 4 != 0 || total > NG_MAX_BLOCK {
            return Err(Ok(PcapError::MalformedBlock {
                what: "section header length",
                offset,
            }));
        }
        self.ng = Some(ng);
        // Skip the rest (version, section length, options, trailing length).
        let rest = total as usize - have - 8;
        self.buf.resize(rest, 0);
        if read_full(&mut self.input, &mut self.buf).map_err(Err)? < rest {
            return Err(Ok(PcapError::TruncatedHeader));
        }
        self.at += total as usize;
        Ok(())
    }

    /// Reads one pcapng block into `buf` (its body); returns its type and the offset of
    /// the block, `None` at a clean end. Section and interface blocks are applied.
    fn ng_block(&mut self) -> Result<Option<(u32, usize)>, Result<PcapError, io::Error>> {
        let offset = self.at;
        let mut t = [0u8; 4];
        match read_full(&mut self.input, &mut t).map_err(Err)? {
            0 => return Ok(None),
            4 => {}
            _ => {
                return Err(Ok(PcapError::TruncatedRecord {
                    index: self.index,
                    offset,
                }))
            }
        }
        if u32::from_le_bytes(t) == NG_SHB {
            self.ng_section_header(4)?;
            return Ok(Some((NG_SHB, offset)));
        }
        let ng = self.ng.as_ref().expect("pcapng state");
        let btype = ng.u32_of(&t);
        let mut l = [0u8; 4];
        if read_full(&mut self.input, &mut l).map_err(Err)? < 4 {
            return Err(Ok(PcapError::TruncatedRecord {
                index: self.index,
                offset,
            }));
        }
        let total = ng.u32_of(&l);
        if total < 12 || total % 4 != 0 {
            return Err(Ok(PcapError::MalformedBlock {
                what: "block length",
                offset,
            }));
        }
        if total > NG_MAX_BLOCK {
            return Err(Ok(PcapError::OversizedRecord {
                index: self.index,
                len: total,
                snaplen: self.snaplen,
            }));
        }
        self.buf.resize(total as usize - 8, 0);
        if read_full(&mut self.input, &mut self.buf).map_err(Err)? < self.buf.len() {
            return Err(Ok(PcapError::TruncatedRecord {
                index: self.index,
                offset,
            }));
        }
        let n = self.buf.len();
        if ng.u32_of(&self.buf[n - 4..]) != total {
            return Err(Ok(PcapError::MalformedBlock {
                what: "trailing block length differs",
                offset,
            }));
        }
        self.buf.truncate(n - 4);
        self.at += total as usize;
        if btype == NG_IDB {
            let body = std::mem::take(&mut self.buf);
            let r = self
                .ng
                .as_mut()
                .expect("pcapng state")
                .add_interface(&body, offset);
            self.buf = body;
            r.map_err(Ok)?;
        }
        Ok(Some((btype, offset)))
    }

    /// The next pcapng packet: enhanced or simple packet blocks, others skipped.
    fn ng_next(
        &mut self,
    ) -> Result<Option<(u64, u32, usize, usize)>, Result<PcapError, io::Error>> {
        loop {
            let Some((btype, offset)) = self.ng_block()? else {
                return Ok(None);
            };
            let ng = self.ng.as_ref().expect("pcapng state");
            let bad = |what| Err(Ok(PcapError::MalformedBlock { what, offset }));
            let (iface, ts, incl, orig, start) = match btype {
                NG_EPB => {
                    if self.buf.len() < 20 {
                        return bad("enhanced packet block shorter than 20 bytes");
                    }
                    let b = &self.buf;
                    let ts = (ng.u32_of(&b[4..8]) as u64) << 32 | ng.u32_of(&b[8..12]) as u64;
                    (
                        ng.u32_of(&b[0..4]),
                        ts,
                        ng.u32_of(&b[12..16]),
                        ng.u32_of(&b[16..20]),
                        20,
                    )
                }
                NG_SPB => {
                    if self.buf.len() < 4 {
                        return bad("simple packet block shorter than 4 bytes");
                    }
                    let orig = ng.u32_of(&self.buf[0..4]);
                    let incl = orig.min((self.buf.len() - 4) as u32);
                    (0, 0, incl, orig, 4)
                }
                _ => continue,
            };
            let Some(&(linktype, mul, div)) = ng.interfaces.get(iface as usize) else {
                return bad("packet of an interface not described");
            };
            if linktype != self.linktype {
                return bad("interfaces of different link types");
            }
            if incl > MAX_RECORD {
                return Err(Ok(PcapError::OversizedRecord {
                    index: self.index,
                    len: incl,
                    snaplen: self.snaplen,
                }));
            }
            if start + incl as usize > self.buf.len() {
                return bad("packet data runs past its block");
            }
            let ts_ns = (ts as u128 * mul as u128 / div as u128).min(u64::MAX as u128) as u64;
            return Ok(Some((ts_ns, orig, start, start + incl as usize)));
        }
    }

    /// The next record, `None` at the end of the stream (or after an error).
    pub fn next_record(&mut self) -> Option<Result<PcapRecord<'_>, Result<PcapError, io::Error>>> {
        if self.failed {
            return None;
        }
        if self.ng.is_some() {
            return match self.ng_next() {
                Ok(None) => None,
                Err(e) => {
                    self.failed = true;
                    Some(Err(e))
                }
                Ok(Some((ts_ns, orig_len, a, b))) => {
                    self.index += 1;
                    Some(Ok(PcapRecord {
                        ts_ns,
                        orig_len,
                        data: &self.buf[a..b],
                    }))
                }
            };
        }
        let index = self.index;
        let offset = self.at;
        let truncated = || Ok(PcapError::TruncatedRecord { index, offset });
        let mut h = [0u8; 16];
        let r = match read_full(&mut self.input, &mut h) {
            Ok(0) => return None,
            Ok(16) => self.header.record(&h, index).map_err(Ok),
            Ok(_) => Err(truncated()),
            Err(e) => Err(Err(e)),
        };
        let r = r.and_then(|(ts_ns, incl, orig)| {
            self.buf.resize(incl as usize, 0);
            match read_full(&mut self.input, &mut self.buf) {
                Ok(n) if n == incl as usize => Ok((ts_ns, orig)),
                Ok(_) => Err(truncated()),
                Err(e) => Err(Err(e)),
            }
        });
        match r {
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
            Ok((ts_ns, orig_len)) => {
                self.at += 16 + self.buf.len();
                self.index += 1;
                Some(Ok(PcapRecord {
                    ts_ns,
                    orig_len,
                    data: &self.buf,
                }))
            }
        }
    }
}

/// Writes a nanosecond-resolution little-endian pcap stream.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}
impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, linktype: u32) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b23c4du32.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&262_144u32.to_le_bytes());
        h[20..24].copy_from_slice(&linktype.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }
    pub fn write_record(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(data.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)
    }
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_truncation() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        w.write_record(1_500_000_123, &[1, 2, 3]).unwrap();
        w.write_record(2_000_000_000, &[4; 70]).unwrap();
        let bytes = w.into_inner();
        let r = PcapReader::new(&bytes).unwrap();
        assert_eq!(r.linktype, LINKTYPE_ETHERNET);
        let recs: Vec<_> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].ts_ns, 1_500_000_123);
        assert_eq!(recs[1].data, &[4; 70]);
        let cut = &bytes[..bytes.len() - 5];
        let out: Vec<_> = PcapReader::new(cut).unwrap().collect();
        assert_eq!(out.len(), 2);
        assert!(matches!(
            out[1],
            Err(PcapError::TruncatedRecord { index: 1, .. })
        ));
        assert_eq!(
            PcapReader::new(&bytes[..10]).unwrap_err(),
            PcapError::TruncatedHeader
        );
        assert_eq!(
            PcapReader::new(&[0u8; 24]).unwrap_err(),
            PcapError::BadMagic(0)
        );
    }

    /// The streaming reader gives the same records and errors as the in-memory one,
    /// on every prefix of a file (each cut is a truncation somewhere).
    #[test]
    fn streaming_matches_in_memory_on_every_cut() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        for i in 0..4u8 {
            w.write_record(1_000 * i as u64, &vec![i; 10 + i as usize])
                .unwrap();
        }
        let bytes = w.into_inner();
        for cut in 0..=bytes.len() {
            let part = &bytes[..cut];
            let mem = PcapReader::new(part).map(|r| {
                r.map(|x| x.map(|x| (x.ts_ns, x.orig_len, x.data.to_vec())))
                    .collect::<Vec<_>>()
            });
            let stream = PcapStreamReader::new(part).map(|mut r| {
                let mut v = Vec::new();
                while let Some(x) = r.next_record() {
                    v.push(
                        x.map(|x| (x.ts_ns, x.orig_len, x.data.to_vec()))
                            .map_err(|e| e.expect("no I/O error on a slice")),
                    );
                }
                v
            });
            match (mem, stream) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "cut {cut}"),
                (Err(a), Err(b)) => assert_eq!(Ok(a), b.map_err(|_| ()), "cut {cut}"),
                (a, b) => panic!("cut {cut}: {a:?} vs {:?}", b.is_ok()),
            }
        }
    }

    /// A pcapng file as Wireshark writes it (little-endian; nanosecond interface via
    /// if_tsresol 9; an unknown block between packets) and big-endian with the default
    /// microseconds and a simple packet block.
    fn pcapng(big: bool, tsresol: Option<u8>, packets: &[(u64, &[u8])]) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let block = |t: u32, body: &[u8]| {
            let mut body = body.to_vec();
            while body.len() % 4 != 0 {
                body.push(0);
            }
            let total = 12 + body.len() as u32;
            let mut b = Vec::new();
            b.extend(w32(t));
            b.extend(w32(total));
            b.extend(body);
            b.extend(w32(total));
            b
        };
        let mut shb = Vec::new();
        shb.extend(w32(0x1A2B_3C4D));
        shb.extend(w16(1));
        shb.extend(w16(0));
        shb.extend([0xff; 8]);
        let mut f = block(NG_SHB, &shb);
        let mut idb = Vec::new();
        idb.extend(w16(1));
        idb.extend(w16(0));
        idb.extend(w32(262_144));
        if let Some(r) = tsresol {
            idb.extend(w16(9));
            idb.extend(w16(1));
            idb.extend([r, 0, 0, 0]);
            idb.extend(w16(0));
            idb.extend(w16(0));
        }
        f.extend(block(NG_IDB, &idb));
        for (i, (ts, data)) in packets.iter().enumerate() {
            let mut epb = Vec::new();
            epb.extend(w32(0));
            epb.extend(w32((ts >> 32) as u32));
            epb.extend(w32(*ts as u32));
            epb.extend(w32(data.len() as u32));
            epb.extend(w32(data.len() as u32));
            epb.extend(*data);
            f.extend(block(NG_EPB, &epb));
            if i == 0 {
                f.extend(block(0x0000_0005, &[1, 2, 3, 4])); // interface statistics
            }
        }
        f
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, PcapError> {
        let mut r = PcapStreamReader::new(bytes).map_err(|e| e.unwrap())?;
        let mut v = Vec::new();
        while let Some(x) = r.next_record() {
            let x = x.map_err(|e| e.unwrap())?;
            v.push((x.ts_ns, x.data.to_vec()));
        }
        Ok(v)
    }

    #[test]
    fn pcapng_in_either_byte_order_and_resolution() {
        let pk: [(u64, &[u8]); 2] = [
            (1_700_000_000_123_456_789, &[1, 2, 3]),
            (1_700_000_001_000_000_000, &[9; 61]),
        ];
        let le = pcapng(false, Some(9), &pk);
        let r = PcapStreamReader::new(&le[..]).unwrap();
        assert_eq!(r.linktype, LINKTYPE_ETHERNET);
        assert_eq!(
            read_all(&le).unwrap(),
            vec![(pk[0].0, vec![1, 2, 3]), (pk[1].0, vec![9; 61])]
        );
        // Microseconds by default; big-endian.
        let be = pcapng(true, None, &[(5_000_001, &[7; 5])]);
        assert_eq!(read_all(&be).unwrap(), vec![(5_000_001_000, vec![7; 5])]);
        // Every cut is an error or a shorter list, never a panic or a wrong record.
        for cut in 0..le.len() {
            if let Ok(v) = read_all(&le[..cut]) {
                assert!(
                    v.len() < 2 && v.iter().all(|r| r.1 == vec![1, 2, 3]),
                    "cut {cut}"
                );
            }
        }
        // A packet of an interface nobody described, a lying trailer.
        let mut bad = le.clone();
        let epb_at = le.len() - (12 + 20 + 64) - (12 + 20 + 4) - 16;
        bad[epb_at + 8] = 3;
        assert!(read_all(&bad).is_err());
        let mut bad = le.clone();
        let n = bad.len();
        bad[n - 4] ^= 0x04;
        assert!(matches!(
            read_all(&bad),
            Err(PcapError::MalformedBlock { .. })
        ));
    }

    #[test]
    fn an_oversized_record_is_refused_before_it_is_read() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        w.write_record(0, &[1, 2, 3]).unwrap();
        let mut bytes = w.into_inner();
        // Claim 2^31 bytes in the record header: no allocation of that size happens.
        bytes[24 + 8..24 + 12].copy_from_slice(&(1u32 << 31).to_le_bytes());
        let mut r = PcapStreamReader::new(&bytes[..]).unwrap();
        assert!(matches!(
            r.next_record(),
            Some(Err(Ok(PcapError::OversizedRecord { index: 0, .. })))
        ));
        assert!(r.next_record().is_none());
        // A header whose snap length claims 2.5 GB does not lift the limit (the fuzz
        // target's out-of-memory input): a 16 MiB record is refused just the same.
        bytes[16..20].copy_from_slice(&0x9595_9595u32.to_le_bytes());
        bytes[24 + 8..24 + 12].copy_from_slice(&(16u32 << 20).to_le_bytes());
        let mut r = PcapStreamReader::new(&bytes[..]).unwrap();
        assert!(matches!(
            r.next_record(),
            Some(Err(Ok(PcapError::OversizedRecord { index: 0, .. })))
        ));
    }
}
