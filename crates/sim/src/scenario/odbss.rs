//! The `[multicast.odbss]` and `[multicast.ud_loss]` keys: plain settings of the
//! optical broadcast-select studies (Leong, Li and Liu, APSIPA Trans. 2019), checked
//! when a scenario is read. `rocast_eval::odbss` interprets them.

use crate::scenario::checks::{check_gbps, invalid, ConfigError};
use rocast_core::nack_multicast::packet::DATA_HEADER_LEN;
use serde::Deserialize;

/// The protocol's DATA header in front of every fragment.
const DATA_HEADER: u32 = DATA_HEADER_LEN as u32;

/// The columns of the paper's Fig. 4 (perftest latency by message size): the values
/// `multicast.odbss.fig4_column` accepts.
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

/// `[multicast.odbss]`: the broadcast-select fabric and the latency model.
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
                "multicast.odbss.ports",
                format!("must be 2 to 1024, got {}", self.ports),
            ));
        }
        if !(1..=4096).contains(&self.racks) {
            return Err(invalid(
                "multicast.odbss.racks",
                format!("must be 1 to 4096, got {}", self.racks),
            ));
        }
        check_gbps(&[
            ("multicast.odbss.gbps", self.gbps),
            ("multicast.odbss.host_gbps", self.host_gbps),
        ])?;
        if self.rx_frames == 0 || self.oeo_frames == 0 {
            return Err(invalid(
                "multicast.odbss.rx_frames/oeo_frames",
                "must be at least 1",
            ));
        }
        if !(0.0..1.0).contains(&self.ber) {
            return Err(invalid(
                "multicast.odbss.ber",
                format!("must be in [0, 1), got {}", self.ber),
            ));
        }
        if !(0.0..=1.0).contains(&self.tail_prob) {
            return Err(invalid(
                "multicast.odbss.tail_prob",
                format!("must be in [0, 1], got {}", self.tail_prob),
            ));
        }
        for (key, v) in [
            ("multicast.odbss.jitter_us", self.jitter_us),
            ("multicast.odbss.tail_us", self.tail_us),
            ("multicast.odbss.rx_jitter_us", self.rx_jitter_us),
        ] {
            if !(0.0..=1e6).contains(&v) {
                return Err(invalid(key, format!("must be 0 to 1e6 µs, got {v}")));
            }
        }
        if !matches!(self.hop_model.as_str(), "fig4" | "lab") {
            return Err(invalid(
                "multicast.odbss.hop_model",
                format!("{:?}: \"fig4\" or \"lab\"", self.hop_model),
            ));
        }
        if fig4_column(&self.fig4_column).is_none() {
            return Err(invalid(
                "multicast.odbss.fig4_column",
                format!(
                    "{:?} is not one of {}",
                    self.fig4_column,
                    FIG4_COLUMNS.join(", ")
                ),
            ));
        }
        if !(1..=1_000_000).contains(&self.trials) {
            return Err(invalid(
                "multicast.odbss.trials",
                format!("must be 1 to 1000000, got {}", self.trials),
            ));
        }
        if self.prop_ns > 1_000_000_000
            || self.oeo_ns > 1_000_000_000
            || self.host_ns > 1_000_000_000
        {
            return Err(invalid(
                "multicast.odbss.prop_ns/oeo_ns/host_ns",
                "must be at most 1 s",
            ));
        }
        if self.frame_overhead > 1 << 16 {
            return Err(invalid(
                "multicast.odbss.frame_overhead",
                "must be at most 65536 bytes",
            ));
        }
        Ok(())
    }
}

/// `[multicast.ud_loss]`: the fabric, the hosts' receive path, the protocol and the
/// run lengths of the `ud-loss` preset.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UdLossConfig {
    /// Receivers (the paper's test-bed: 4 nodes).
    pub receivers: u32,
    /// DATA packets (= messages, one packet each) of the main run.
    pub packets: u64,
    /// Message size of the main run, bytes (at most `mtu` − 32).
    pub msg_bytes: u32,
    /// UD path MTU: `max_payload` = mtu − 32.
    pub mtu: u32,
    /// Line rate per wavelength (the paper's DWDM SFP+: 10 Gb/s), propagation, and
    /// wire bytes beyond the UD payload (RoCEv2 UD headers, preamble and gap).
    pub gbps: f64,
    pub prop_ns: u64,
    pub frame_overhead: u32,
    /// Per-port transmit queue, frames.
    pub tx_frames: u32,
    /// NIC packet buffer per port, frames, drained by DMA at dma_ns + bytes/dma_gbps.
    pub nic_frames: u32,
    pub dma_ns: u64,
    pub dma_gbps: f64,
    /// Posted UD receive buffers per host (the receive queue).
    pub rq_depth: u32,
    /// Host CPU per received packet: cpu_ns + U[0, cpu_jitter_ns].
    pub cpu_ns: u64,
    pub cpu_jitter_ns: u64,
    /// Probability per received packet of an OS-scheduling stall, and its mean
    /// (exponential), µs. Receivers only; the sender's host is dedicated.
    pub stall_prob: f64,
    pub stall_us: f64,
    /// Bit-error rate of every transmit and receive fibre, per bit.
    pub ber: f64,
    /// Sender retransmission window and receivers' window, packets.
    pub window: u32,
    pub rx_window: u32,
    /// Protocol timers, µs.
    pub heartbeat_us: u64,
    pub nack_backoff_us: u64,
    pub nack_holdoff_us: u64,
    pub status_us: u64,
    pub repair_linger_us: u64,
    /// The sweep's injected per-packet drop rates at every receiver port.
    pub sweep: Vec<f64>,
    /// Messages per sweep point, and their largest size (sizes are 8..=max, seeded).
    pub sweep_messages: u64,
    pub sweep_max_bytes: u32,
}

impl Default for UdLossConfig {
    fn default() -> Self {
        UdLossConfig {
            receivers: 4,
            packets: 100_000_000,
            msg_bytes: 64,
            mtu: 1024,
            gbps: 10.0,
            prop_ns: 50,
            frame_overhead: 90,
            tx_frames: 64,
            nic_frames: 256,
            dma_ns: 40,
            dma_gbps: 64.0,
            rq_depth: 1024,
            cpu_ns: 80,
            cpu_jitter_ns: 40,
            stall_prob: 1e-5,
            stall_us: 25.0,
            ber: 1e-11,
            window: 4096,
            rx_window: 4096,
            heartbeat_us: 100,
            nack_backoff_us: 20,
            nack_holdoff_us: 60,
            status_us: 100,
            repair_linger_us: 50,
            sweep: vec![0.0, 0.001, 0.01, 0.02, 0.05],
            sweep_messages: 100_000,
            sweep_max_bytes: 3000,
        }
    }
}

impl UdLossConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1000).contains(&self.receivers) {
            return Err(invalid("multicast.ud_loss.receivers", "must be 1 to 1000"));
        }
        if self.packets == 0 {
            return Err(invalid("multicast.ud_loss.packets", "must be at least 1"));
        }
        if !(64..=65536).contains(&self.mtu) {
            return Err(invalid("multicast.ud_loss.mtu", "must be 64 to 65536"));
        }
        if !(8..=self.mtu - DATA_HEADER).contains(&self.msg_bytes) {
            return Err(invalid(
                "multicast.ud_loss.msg_bytes",
                "must be 8 to mtu - 32 (one packet)",
            ));
        }
        if self.sweep_max_bytes < 8
            || self.sweep_max_bytes as u64 > (self.mtu - DATA_HEADER) as u64 * 64
        {
            return Err(invalid(
                "multicast.ud_loss.sweep_max_bytes",
                "must be 8 to 64 packets",
            ));
        }
        check_gbps(&[
            ("multicast.ud_loss.gbps", self.gbps),
            ("multicast.ud_loss.dma_gbps", self.dma_gbps),
        ])?;
        if self.tx_frames == 0 || self.nic_frames == 0 || self.rq_depth == 0 {
            return Err(invalid(
                "multicast.ud_loss.tx_frames/nic_frames/rq_depth",
                "must be at least 1",
            ));
        }
        if self.tx_frames > 1 << 16 {
            return Err(invalid(
                "multicast.ud_loss.tx_frames",
                "must be at most 65536",
            ));
        }
        if self.window < 64
            || self.rx_window < 64
            || self.window > 1 << 22
            || self.rx_window > 1 << 22
        {
            return Err(invalid(
                "multicast.ud_loss.window/rx_window",
                "must be 64 to 4194304 packets",
            ));
        }
        if !(0.0..1.0).contains(&self.ber) {
            return Err(invalid("multicast.ud_loss.ber", "must be in [0, 1)"));
        }
        if !(0.0..=1.0).contains(&self.stall_prob) || !(0.0..=1e5).contains(&self.stall_us) {
            return Err(invalid(
                "multicast.ud_loss.stall_prob/stall_us",
                "probability in [0, 1], mean 0 to 1e5 us",
            ));
        }
        if self.sweep.iter().any(|&p| !(0.0..0.5).contains(&p)) {
            return Err(invalid(
                "multicast.ud_loss.sweep",
                "drop rates must be in [0, 0.5)",
            ));
        }
        if self.cpu_ns + self.dma_ns == 0 {
            return Err(invalid(
                "multicast.ud_loss.cpu_ns/dma_ns",
                "the receive path needs a non-zero latency",
            ));
        }
        if [
            self.heartbeat_us,
            self.nack_backoff_us,
            self.nack_holdoff_us,
            self.status_us,
        ]
        .contains(&0)
        {
            return Err(invalid(
                "multicast.ud_loss timers",
                "heartbeat, back-off, hold-off and status must be at least 1 us",
            ));
        }
        Ok(())
    }
}
