//! Classic libpcap files (the format of tcpdump `-w`): reading captures and writing
//! them. Microsecond and nanosecond variants, either byte order. This is a container
//! format, not protocol logic; it lives in `wire` because every driver and tool needs it.

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
        let b: [u8; 4] = b[..4].try_into().unwrap();
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
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

impl<R: io::Read> PcapStreamReader<R> {
    /// Reads the file header. `Err(Ok(e))`: not a usable pcap; `Err(Err(e))`: I/O.
    pub fn new(mut input: R) -> Result<Self, Result<PcapError, io::Error>> {
        let mut h = [0u8; 24];
        let n = read_full(&mut input, &mut h).map_err(Err)?;
        let header = FileHeader::parse(&h[..n]).map_err(Ok)?;
        Ok(PcapStreamReader {
            input,
            header,
            linktype: header.linktype,
            snaplen: header.snaplen,
            at: 24,
            index: 0,
            buf: Vec::new(),
            failed: false,
        })
    }

    /// The next record, `None` at the end of the stream (or after an error).
    pub fn next_record(&mut self) -> Option<Result<PcapRecord<'_>, Result<PcapError, io::Error>>> {
        if self.failed {
            return None;
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
