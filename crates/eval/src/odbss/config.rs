//! `[experiment.ud-latency]`: the keys of the optical broadcast-select fabric (Leong,
//! Li and Liu, APSIPA Trans. 2019) and its latency model, read into [`OdbssConfig`] by
//! the `ud-latency` experiment (`crate::experiments::odbss_ud_latency`) and checked
//! before it runs; `crate::odbss::broadcast_select` interprets them. (The `ud-loss`
//! study's own keys are its experiment's, `[experiment.ud-loss]`, in
//! `crate::odbss::ud_loss_config`.)

use rocast_sim::scenario::checks::{check_gbps, invalid, ConfigError};
use serde::Deserialize;

/// The columns of the paper's Fig. 4 (perftest latency by message size): the values
/// `experiment.ud-latency.fig4_column` accepts.
/// The OCR of the paper spells the Mellanox columns "MInx"; both are accepted.
pub const FIG4_COLUMNS: [&str; 8] = [
    "Emulex_VT",
    "Ether_VT",
    "Mlnx_VT",
    "Emulex_Open",
    "Ether_Open",
    "Mlnx_Open",
    "Emulex_HW",
    "Mlnx_HW",
];

/// The index of a Fig. 4 column by name (case-insensitive; "MInx" = "Mlnx").
pub fn fig4_column(name: &str) -> Option<usize> {
    let n = name.replace("MInx", "Mlnx").to_ascii_lowercase();
    FIG4_COLUMNS
        .iter()
        .position(|c| c.to_ascii_lowercase() == n)
}

/// `[experiment.ud-latency]`: the broadcast-select fabric and the latency model.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OdbssConfig {
    /// Ports (wavelengths) per element; also the hosts per rack of the hybrid.
    pub ports: u32,
    /// Racks of the hybrid spine–leaf analysis.
    pub racks: u32,
    /// Line rate per wavelength (the paper's test-bed: 10 Gb/s DWDM SFP+).
    pub gbps: f64,
    pub prop_ns: u64,
    /// OEO conversion and filtering between dimensions.
    pub oeo_ns: u64,
    /// Wire bytes per frame beyond the payload.
    pub frame_overhead: u32,
    /// Receive buffer and OEO buffer bounds, frames.
    pub rx_frames: u32,
    pub oeo_frames: u32,
    /// Host service per received frame: fixed ns plus a copy at host_gbps.
    pub host_ns: u64,
    pub host_gbps: f64,
    /// Bit-error rate of every fibre.
    pub ber: f64,
    /// Where the per-hop unicast latency comes from: "fig4" (the paper's Fig. 4
    /// column `fig4_column` plus the seeded jitter and tail below) or "lab" (the
    /// one-way latencies measured on real packets in rocast's namespace lab,
    /// `crates/eval/data/lab-hop-1gbit.csv`, drawn as they were measured).
    pub hop_model: String,
    /// The Fig. 4 column giving the per-hop unicast latency L.
    pub fig4_column: String,
    /// Sender-side jitter mean, long-tail probability and size, receiver jitter.
    pub jitter_us: f64,
    pub tail_prob: f64,
    pub tail_us: f64,
    pub rx_jitter_us: f64,
    /// Seeded trials per (group size, message size) point.
    pub trials: u32,
    /// Rounds of the element throughput benchmark (0: skip it).
    pub bench_rounds: u32,
    /// Partial group sizes of the hybrid offload table.
    pub offload_groups: Vec<u32>,
}

impl Default for OdbssConfig {
    fn default() -> Self {
        OdbssConfig {
            ports: 32,
            racks: 32,
            gbps: 10.0,
            prop_ns: 50,
            oeo_ns: 500,
            frame_overhead: 90,
            rx_frames: 256,
            oeo_frames: 64,
            host_ns: 200,
            host_gbps: 40.0,
            ber: 0.0,
            hop_model: "fig4".into(),
            fig4_column: "Mlnx_HW".into(),
            jitter_us: 0.8,
            tail_prob: 0.002,
            tail_us: 35.0,
            rx_jitter_us: 0.5,
            trials: 2000,
            bench_rounds: 0,
            offload_groups: vec![64, 256],
        }
    }
}

impl OdbssConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(2..=1024).contains(&self.ports) {
            return Err(invalid(
                "experiment.ud-latency.ports",
                format!("must be 2 to 1024, got {}", self.ports),
            ));
        }
        if !(1..=4096).contains(&self.racks) {
            return Err(invalid(
                "experiment.ud-latency.racks",
                format!("must be 1 to 4096, got {}", self.racks),
            ));
        }
        check_gbps(&[
            ("experiment.ud-latency.gbps", self.gbps),
            ("experiment.ud-latency.host_gbps", self.host_gbps),
        ])?;
        if self.rx_frames == 0 || self.oeo_frames == 0 {
            return Err(invalid(
                "experiment.ud-latency.rx_frames/oeo_frames",
                "must be at least 1",
            ));
        }
        if !(0.0..1.0).contains(&self.ber) {
            return Err(invalid(
                "experiment.ud-latency.ber",
                format!("must be in [0, 1), got {}", self.ber),
            ));
        }
        if !(0.0..=1.0).contains(&self.tail_prob) {
            return Err(invalid(
                "experiment.ud-latency.tail_prob",
                format!("must be in [0, 1], got {}", self.tail_prob),
            ));
        }
        for (key, v) in [
            ("experiment.ud-latency.jitter_us", self.jitter_us),
            ("experiment.ud-latency.tail_us", self.tail_us),
            ("experiment.ud-latency.rx_jitter_us", self.rx_jitter_us),
        ] {
            if !(0.0..=1e6).contains(&v) {
                return Err(invalid(key, format!("must be 0 to 1e6 µs, got {v}")));
            }
        }
        if !matches!(self.hop_model.as_str(), "fig4" | "lab") {
            return Err(invalid(
                "experiment.ud-latency.hop_model",
                format!("{:?}: \"fig4\" or \"lab\"", self.hop_model),
            ));
        }
        if fig4_column(&self.fig4_column).is_none() {
            return Err(invalid(
                "experiment.ud-latency.fig4_column",
                format!(
                    "{:?} is not one of {}",
                    self.fig4_column,
                    FIG4_COLUMNS.join(", ")
                ),
            ));
        }
        if !(1..=1_000_000).contains(&self.trials) {
            return Err(invalid(
                "experiment.ud-latency.trials",
                format!("must be 1 to 1000000, got {}", self.trials),
            ));
        }
        if self.prop_ns > 1_000_000_000
            || self.oeo_ns > 1_000_000_000
            || self.host_ns > 1_000_000_000
        {
            return Err(invalid(
                "experiment.ud-latency.prop_ns/oeo_ns/host_ns",
                "must be at most 1 s",
            ));
        }
        if self.frame_overhead > 1 << 16 {
            return Err(invalid(
                "experiment.ud-latency.frame_overhead",
                "must be at most 65536 bytes",
            ));
        }
        Ok(())
    }
}
