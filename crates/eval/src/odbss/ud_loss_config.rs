//! `[experiment.ud-loss]`: the keys of the `ud-loss` study (Leong, Li and Liu, APSIPA
//! Trans. 2019, §III), read into [`UdLossConfig`] by its experiment
//! (`crate::experiments::odbss_ud_loss`) and checked before it runs.

use rocast_core::nack_multicast::packet::DATA_HEADER_LEN;
use rocast_sim::scenario::checks::{check_gbps, invalid, ConfigError};
use serde::Deserialize;

/// The protocol's DATA header in front of every fragment.
const DATA_HEADER: u32 = DATA_HEADER_LEN as u32;

/// `[experiment.ud-loss]`: the fabric, the hosts' receive path, the protocol and the
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
            return Err(invalid("experiment.ud-loss.receivers", "must be 1 to 1000"));
        }
        if self.packets == 0 {
            return Err(invalid("experiment.ud-loss.packets", "must be at least 1"));
        }
        if !(64..=65536).contains(&self.mtu) {
            return Err(invalid("experiment.ud-loss.mtu", "must be 64 to 65536"));
        }
        if !(8..=self.mtu - DATA_HEADER).contains(&self.msg_bytes) {
            return Err(invalid(
                "experiment.ud-loss.msg_bytes",
                "must be 8 to mtu - 32 (one packet)",
            ));
        }
        if self.sweep_max_bytes < 8
            || self.sweep_max_bytes as u64 > (self.mtu - DATA_HEADER) as u64 * 64
        {
            return Err(invalid(
                "experiment.ud-loss.sweep_max_bytes",
                "must be 8 to 64 packets",
            ));
        }
        check_gbps(&[
            ("experiment.ud-loss.gbps", self.gbps),
            ("experiment.ud-loss.dma_gbps", self.dma_gbps),
        ])?;
        if self.tx_frames == 0 || self.nic_frames == 0 || self.rq_depth == 0 {
            return Err(invalid(
                "experiment.ud-loss.tx_frames/nic_frames/rq_depth",
                "must be at least 1",
            ));
        }
        if self.tx_frames > 1 << 16 {
            return Err(invalid(
                "experiment.ud-loss.tx_frames",
                "must be at most 65536",
            ));
        }
        if self.window < 64
            || self.rx_window < 64
            || self.window > 1 << 22
            || self.rx_window > 1 << 22
        {
            return Err(invalid(
                "experiment.ud-loss.window/rx_window",
                "must be 64 to 4194304 packets",
            ));
        }
        if !(0.0..1.0).contains(&self.ber) {
            return Err(invalid("experiment.ud-loss.ber", "must be in [0, 1)"));
        }
        if !(0.0..=1.0).contains(&self.stall_prob) || !(0.0..=1e5).contains(&self.stall_us) {
            return Err(invalid(
                "experiment.ud-loss.stall_prob/stall_us",
                "probability in [0, 1], mean 0 to 1e5 us",
            ));
        }
        if self.sweep.iter().any(|&p| !(0.0..0.5).contains(&p)) {
            return Err(invalid(
                "experiment.ud-loss.sweep",
                "drop rates must be in [0, 0.5)",
            ));
        }
        if self.cpu_ns + self.dma_ns == 0 {
            return Err(invalid(
                "experiment.ud-loss.cpu_ns/dma_ns",
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
                "experiment.ud-loss timers",
                "heartbeat, back-off, hold-off and status must be at least 1 us",
            ));
        }
        Ok(())
    }
}
