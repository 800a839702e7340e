//! What a workload run writes and reports: `fct.txt` ([`fct`]), `summary.json` and the
//! printed summary ([`summary`]), `ports.csv`, the PFC and queue logs and the pcap
//! capture ([`files`]), and the percentile definitions every output uses ([`stats`]).

pub mod fct;
pub mod files;
pub mod stats;
pub mod summary;
