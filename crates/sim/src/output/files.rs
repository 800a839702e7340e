//! The run's other files: `ports.csv` (per-port counters), the `pfc.txt` / `qlen.txt`
//! logs and `capture.pcap` (RoCEv2 frames Wireshark decodes), each written so that a
//! reader never sees half a file.

use crate::engine::Engine;
use rocast_core::wire::pcap::{PcapWriter, LINKTYPE_ETHERNET};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// An output file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Creating, writing or renaming the file at `path`.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing the capture's records once its file is open.
    #[error(transparent)]
    Capture(std::io::Error),
}

impl OutputError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
        move |source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Writes `text` to a temporary file beside `path`, then renames it into place.
pub(crate) fn write_atomic(path: &Path, text: &str) -> Result<(), OutputError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).map_err(OutputError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(OutputError::io(path))
}

/// `ports.csv`: one row per port with its counters.
pub(crate) fn ports_csv(engine: &Engine) -> String {
    let mut csv = String::from("node,port,link,tx_packets,tx_bytes,rx_bytes,link_drops,queue_drops,ecn_marks,pauses_sent,pauses_received,paused_ns\n");
    for (node, port, link, c) in engine.port_counters() {
        let _ = writeln!(
            csv,
            "{node},{port},{link},{},{},{},{},{},{},{},{},{}",
            c.tx_packets,
            c.tx_bytes,
            c.rx_bytes,
            c.link_drops,
            c.queue_drops,
            c.ecn_marks,
            c.pauses_sent,
            c.pauses_received,
            c.paused_ps / 1000
        );
    }
    csv
}

/// A log file: its header line, then one line per entry.
pub(crate) fn event_log(head: &str, lines: &[String]) -> String {
    let mut s = String::from(head);
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// `capture.pcap`: the captured frames, `(time ps, bytes)`, stamped in nanoseconds.
pub fn capture_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) -> Result<(), OutputError> {
    let f = std::fs::File::create(path).map_err(OutputError::io(path))?;
    let mut w = PcapWriter::new(std::io::BufWriter::new(f), LINKTYPE_ETHERNET)
        .map_err(OutputError::Capture)?;
    for (t, frame) in frames {
        w.write_record(t / 1000, frame)
            .map_err(OutputError::Capture)?;
    }
    use std::io::Write as _;
    w.into_inner().flush().map_err(OutputError::Capture)
}
