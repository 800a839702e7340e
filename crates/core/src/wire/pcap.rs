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
    #[error("record {index} claims {len} bytes, over the snap length {snaplen}")]
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
    big_endian: bool,
    nanos: bool,
    pub linktype: u32,
    pub snaplen: u32,
    failed: bool,
}

impl<'a> PcapReader<'a> {
    pub fn new(buf: &'a [u8]) -> Result<Self, PcapError> {
        if buf.len() < 24 {
            return Err(PcapError::TruncatedHeader);
        }
        let magic_le = u32::from_le_bytes(buf[0..4].try_into().unwrap());
        let (big_endian, nanos) = match magic_le {
            0xa1b2c3d4 => (false, false),
            0xa1b23c4d => (false, true),
            0xd4c3b2a1 => (true, false),
            0x4d3cb2a1 => (true, true),
            m => return Err(PcapError::BadMagic(m)),
        };
        let mut r = PcapReader {
            buf,
            at: 24,
            index: 0,
            big_endian,
            nanos,
            linktype: 0,
            snaplen: 0,
            failed: false,
        };
        r.snaplen = r.u32_at(16);
        r.linktype = r.u32_at(20) & 0x0fff_ffff;
        Ok(r)
    }
    fn u32_at(&self, at: usize) -> u32 {
        let b: [u8; 4] = self.buf[at..at + 4].try_into().unwrap();
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }
}

impl<'a> Iterator for PcapReader<'a> {
    type Item = Result<PcapRecord<'a>, PcapError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at == self.buf.len() {
            return None;
        }
        let index = self.index;
        let fail = |s: &mut Self, e| {
            s.failed = true;
            Some(Err(e))
        };
        if self.buf.len() - self.at < 16 {
            return fail(
                self,
                PcapError::TruncatedRecord {
                    index,
                    offset: self.at,
                },
            );
        }
        let (sec, frac, incl, orig) = (
            self.u32_at(self.at),
            self.u32_at(self.at + 4),
            self.u32_at(self.at + 8),
            self.u32_at(self.at + 12),
        );
        // Allow records up to 256 KiB even if the header's snaplen is smaller (some writers lie).
        if incl > self.snaplen.max(262_144) {
            return fail(
                self,
                PcapError::OversizedRecord {
                    index,
                    len: incl,
                    snaplen: self.snaplen,
                },
            );
        }
        let start = self.at + 16;
        let end = start + incl as usize;
        if end > self.buf.len() {
            return fail(
                self,
                PcapError::TruncatedRecord {
                    index,
                    offset: self.at,
                },
            );
        }
        self.at = end;
        self.index += 1;
        let ts_ns = sec as u64 * 1_000_000_000
            + if self.nanos {
                frac as u64
            } else {
                frac as u64 * 1000
            };
        Some(Ok(PcapRecord {
            ts_ns,
            orig_len: orig,
            data: &self.buf[start..end],
        }))
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
}
