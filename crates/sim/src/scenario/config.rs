//! Scenario files: TOML, every key optional with a documented default (see
//! `crates/sim/scenarios/annotated.toml`), overridable by `--set key=value`, and
//! checked before a run so a bad value gets an error naming its key.

use rocast_core::units::UnitError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use crate::scenario::checks::{check_gbps, invalid, one_of, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    /// Simulated time limit in milliseconds; the run also ends when every flow is done.
    pub stop_ms: f64,
    pub topology: TopologyConfig,
    pub switch: SwitchConfig,
    pub nic: NicConfig,
    pub workload: WorkloadConfig,
    pub output: OutputConfig,
    /// Link failures and recoveries during the run.
    pub link_events: Vec<LinkEvent>,
    /// A multicast experiment to run instead of the workload (the Cepheus
    /// evaluation presets).
    pub multicast: MulticastConfig,
    /// `[experiment.NAME]`: the one experiment to run and its own keys, which the
    /// experiment's config type in `rocast-eval` reads (the simulator only carries
    /// the table).
    pub experiment: BTreeMap<String, toml::Table>,
    /// The `--set` overrides applied on top of the TOML (not a TOML key): reports
    /// say which of the preset's readings a run replaced.
    #[serde(skip)]
    pub overrides: Vec<String>,
}

/// A multicast experiment (Cepheus §V): which one, and its knobs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MulticastConfig {
    /// "" (none: run the workload), Cepheus' "testbed", "large-scale", "loss",
    /// "iops" or "fairness", or PEEL's "peel-rules" or "peel-approx".
    pub experiment: String,
    /// Group size (source included).
    pub group: u32,
    /// Group sizes, for experiments that sweep them.
    pub groups: Vec<u32>,
    /// Message sizes: "64:512M" (powers of two) or a list "64,4K,1M".
    pub sizes: String,
    /// Schemes to compare: cepheus, tree, chain, pipeline, sequential, ring.
    pub schemes: Vec<String>,
    /// Chain slices per message (0: blocks of `block`).
    pub chain_slices: u32,
    /// Chain slices = the group's ranks (the paper's testbed rule, Cepheus §V-A);
    /// overrides `chain_slices`.
    pub chain_slices_per_rank: bool,
    /// The smallest chain slice: a message is cut into fewer slices rather than into
    /// slices below this size ("0": no floor).
    pub chain_min_slice: String,
    /// Block size of the pipelined overlay schemes.
    pub block: String,
    /// Per-post host software overhead of every scheme, microseconds.
    pub overhead_us: f64,
    /// Which hosts the group's ranks sit on: "spread" (rank r on host r·⌊hosts/group⌋,
    /// across the whole fabric) or "contiguous" (rank r on host r). The papers do not
    /// say; rocast's assumption is "spread" (`cepheus-fig12-ablation` shows its effect).
    pub placement: String,
    /// Overlay baselines wait for the receiver's ready-for-block before each transfer
    /// (RDMC's flow control; MPI's rendezvous for large messages).
    pub flow_control: bool,
    /// With `flow_control`, transfers of at most this many bytes go eagerly, without
    /// the ready-for-block (MPI's eager protocol below its rendezvous threshold;
    /// "0": every transfer waits for the ready).
    pub eager_limit: String,
    /// Binomial tree: sends a rank keeps outstanding to its children. 1 (rocast's
    /// default): each child after the previous one completed; 0: all children at once
    /// (Open MPI's unsegmented binomial `MPI_Bcast`: an isend per child, then waitall).
    pub tree_window: u32,
    /// The safeguard's threshold (fraction of the source's line rate) and window of
    /// busy time (`cepheus-safeguard`, and `transfer` in the simulator and the lab).
    pub safeguard_threshold: f64,
    pub safeguard_window_ms: f64,
    /// `transfer`: watch the group with the safeguard, expecting this many times the
    /// links' rate (each side its own: the simulated hosts' `topology.host_gbps`, the
    /// lab's 1 Gbit/s); above 1 / `safeguard_threshold` the switch path can never
    /// satisfy it, so the group reroutes to the overlay mid-stream within one window
    /// (the shared fallback scenario). 0: no safeguard.
    pub safeguard_expected_ratio: f64,
    /// `transfer`: rank `kill_rank` (0: none) dies once the switch has taken in
    /// `kill_after_packets` of the group's data packets (its process ends: its QP goes,
    /// its control connection resets); the leader evicts it and the others go on (the
    /// shared eviction scenario).
    pub kill_rank: u32,
    pub kill_after_packets: u64,
    /// `transfer`: the source's switch restarts — its tables lost, as a crashed switch
    /// daemon loses them — once it has taken in this many of the group's data packets
    /// (0: never); the group continues once the leader's next registration refresh
    /// (`refresh_ms`) has taught the new switch its tree (the shared switch-restart
    /// scenario).
    pub restart_switch_after_packets: u64,
    /// `transfer`: the leader refreshes its registration every this many ms, a quarter
    /// of it while a buffer goes through the switch (`rocast mcast lead --refresh-ms`).
    /// 0: no refresh in the simulator, whose switches keep their entries for the run,
    /// and `rocast mcast`'s default (1 s) in the lab.
    pub refresh_ms: u64,
    /// The message of single-size experiments.
    pub message: String,
    /// Worker threads (0: all cores).
    pub threads: u32,
    /// `transfer` (the sim/lab conformance scenario): messages of `message` bytes
    /// from host 0 to hosts 1..group.
    pub messages: u32,
    /// `transfer`: "write" (RDMA WRITE with immediate) or "send" (SEND with immediate).
    pub op: String,
    /// `transfer`: drop this fraction of the frames toward member `loss_rank` (the
    /// switch's port to it, as `rocast lab up --loss P --loss-host R` does).
    pub loss: f64,
    pub loss_rank: u32,
    /// `transfer`: also print each member's message completion order and the
    /// switches' multicast counters (what the conformance test compares).
    pub conformance: bool,
}

impl Default for MulticastConfig {
    fn default() -> Self {
        MulticastConfig {
            experiment: String::new(),
            group: 4,
            groups: vec![64, 512],
            sizes: "64:512M".into(),
            schemes: vec![
                "cepheus".into(),
                "tree".into(),
                "chain".into(),
                "pipeline".into(),
            ],
            chain_slices: 4,
            chain_slices_per_rank: false,
            chain_min_slice: "0".into(),
            block: "1M".into(),
            overhead_us: 2.0,
            placement: "spread".into(),
            flow_control: true,
            eager_limit: "0".into(),
            tree_window: 1,
            safeguard_threshold: 0.5,
            safeguard_window_ms: 10.0,
            safeguard_expected_ratio: 0.0,
            kill_rank: 0,
            kill_after_packets: 200,
            restart_switch_after_packets: 0,
            refresh_ms: 0,
            message: "128M".into(),
            threads: 0,
            messages: 1,
            op: "write".into(),
            loss: 0.0,
            loss_rank: 0,
            conformance: false,
        }
    }
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            name: "unnamed".into(),
            seed: 1,
            stop_ms: 100.0,
            topology: TopologyConfig::default(),
            switch: SwitchConfig::default(),
            nic: NicConfig::default(),
            workload: WorkloadConfig::default(),
            output: OutputConfig::default(),
            link_events: Vec::new(),
            multicast: MulticastConfig::default(),
            experiment: BTreeMap::new(),
            overrides: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopologyConfig {
    /// "fat-tree", "leaf-spine" or "file".
    pub kind: String,
    pub k: u32,
    pub oversubscription: u32,
    /// Fat-tree: pods built (0: all k) and edge switches per pod (0: all k/2), for a
    /// fabric of k-port switches with fewer servers than k³/4 (Cepheus §V-C's 1024
    /// servers on 64-port switches: k = 64, pods = 2, edges_per_pod = 16).
    pub pods: u32,
    pub edges_per_pod: u32,
    pub spines: u32,
    pub leaves: u32,
    pub hosts_per_leaf: u32,
    pub gpus_per_host: u32,
    pub host_gbps: f64,
    pub fabric_gbps: f64,
    pub core_gbps: f64,
    pub gpu_gbps: f64,
    pub host_delay_ns: u64,
    pub fabric_delay_ns: u64,
    pub core_delay_ns: u64,
    pub gpu_delay_ns: u64,
    /// HPCC-format topology file for kind = "file".
    pub file: String,
    /// Per-link random loss probability on every link.
    pub link_loss: f64,
    /// Fraction of switch-to-switch links failed from the start (seeded).
    pub fail_fraction: f64,
    /// Links failed from the start, as [node, node] pairs.
    pub fail_links: Vec<[u32; 2]>,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            kind: "fat-tree".into(),
            k: 4,
            oversubscription: 1,
            pods: 0,
            edges_per_pod: 0,
            spines: 4,
            leaves: 8,
            hosts_per_leaf: 8,
            gpus_per_host: 0,
            host_gbps: 100.0,
            fabric_gbps: 100.0,
            core_gbps: 100.0,
            gpu_gbps: 400.0,
            host_delay_ns: 1000,
            fabric_delay_ns: 1000,
            core_delay_ns: 1000,
            gpu_delay_ns: 100,
            file: String::new(),
            link_loss: 0.0,
            fail_fraction: 0.0,
            fail_links: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchConfig {
    /// PFC on: lossless. Off: drop-tail.
    pub lossless: bool,
    pub buffer_mb: f64,
    #[serde(deserialize_with = "bytes")]
    pub reserve_bytes: u64,
    #[serde(deserialize_with = "bytes")]
    pub resume_offset_bytes: u64,
    /// Per-port PFC headroom; 0 means 3 × the port's bandwidth-delay product, as the
    /// HPCC simulator sizes it.
    #[serde(deserialize_with = "bytes")]
    pub headroom_bytes: u64,
    /// Dynamic threshold = free buffer >> alpha_shift.
    pub alpha_shift: u8,
    pub ecn: bool,
    pub kmin_kb: f64,
    pub kmax_kb: f64,
    pub pmax: f64,
    /// Which CNPs a switch's multicast engine passes toward the source: "cepheus"
    /// (per-path counters, aged every window), "tmcf" (the previous slot's busiest
    /// interface) or "forward-all" (MC-RDMA).
    pub cnp_filter: String,
    /// The Cepheus window or TMCF slot, µs.
    pub cnp_window_us: u64,
    /// rocast's damped TMCF ("tmcf-damped", not a paper's): by how many standard
    /// deviations another interface's windowed CNP count must exceed the chosen one's
    /// to take over (rocast's assumption; `tmcf-robustness` shows the sensitivity).
    pub tmcf_damped_z: f64,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        // The HPCC paper's DCQCN settings at 100 Gb/s (run.py: buffer 32 MB,
        // Kmin 400 KB, Kmax 1600 KB, Pmax 0.2; switch-mmu.cc: reserve 4 KB, resume 3 KB,
        // alpha shift 3).
        SwitchConfig {
            lossless: true,
            buffer_mb: 32.0,
            reserve_bytes: 4096,
            resume_offset_bytes: 3072,
            headroom_bytes: 0,
            alpha_shift: 3,
            ecn: true,
            kmin_kb: 400.0,
            kmax_kb: 1600.0,
            pmax: 0.2,
            cnp_filter: "cepheus".into(),
            cnp_window_us: 50,
            tmcf_damped_z: rocast_core::fabric::cepheus::DampedTmcfCnpFilter::DEFAULT_Z,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicConfig {
    /// RoCE path MTU: 256, 512, 1024, 2048 or 4096.
    pub mtu: usize,
    /// "dcqcn" or "none".
    pub cc: String,
    /// DCQCN parameter preset: "hpcc" (HPCC's ns-3 `run.py`), "paper" (the DCQCN
    /// paper's) or "cx5" (NVIDIA ConnectX-5's firmware defaults).
    pub dcqcn_preset: String,
    /// Most unacknowledged packets per QP.
    pub window: u32,
    /// "go-back-n" or "selective-repeat".
    pub retransmission: String,
    pub rto_us: u64,
    pub ack_every: u32,
    /// CNP spacing per QP at the notification point (DCQCN: 50 µs).
    pub cnp_interval_us: u64,
    /// Sender-side guard: at most one DCQCN rate cut per this many µs (PEEL §4's
    /// 50 µs guard timer for multicast, where one mark fans out into many CNPs);
    /// 0 keeps the preset's.
    pub cnp_guard_us: u64,
}

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            mtu: 1024,
            cc: "dcqcn".into(),
            dcqcn_preset: "hpcc".into(),
            window: 256,
            retransmission: "go-back-n".into(),
            rto_us: 1000,
            ack_every: 16,
            cnp_interval_us: 50,
            cnp_guard_us: 0,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkloadConfig {
    /// "permutation", "incast", "all-to-all", "poisson", "flow-file" or "flows".
    pub kind: String,
    #[serde(deserialize_with = "bytes")]
    pub size_bytes: u64,
    pub start_us: f64,
    /// incast: number of senders (hosts other than the receiver, lowest ids first).
    pub senders: u32,
    pub receiver: u32,
    /// poisson: offered load as a fraction of the host link rate.
    pub load: f64,
    /// poisson: "websearch", "hadoop" or a CDF file path (`size_bytes cum_percent`).
    pub cdf: String,
    /// poisson: arrivals stop after this long.
    pub duration_ms: f64,
    /// flow-file: an HPCC flow file (`src dst pg dport size start_s`).
    pub flow_file: String,
    /// flows: an explicit list, with dependencies.
    pub flows: Vec<FlowEntry>,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            kind: "permutation".into(),
            size_bytes: 1_000_000,
            start_us: 0.0,
            senders: 2,
            receiver: 0,
            load: 0.3,
            cdf: "websearch".into(),
            duration_ms: 1.0,
            flow_file: String::new(),
            flows: Vec::new(),
        }
    }
}

/// One explicit flow. With `after`, it starts `after_delay_us` after flow number
/// `after` (0-based, in this list) has been fully received.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    pub src: u32,
    pub dst: u32,
    #[serde(deserialize_with = "bytes")]
    pub size_bytes: u64,
    #[serde(default)]
    pub start_us: f64,
    #[serde(default)]
    pub after: Option<u32>,
    #[serde(default)]
    pub after_delay_us: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputConfig {
    pub fct: bool,
    pub pfc_log: bool,
    /// Sample every egress queue this often (0: off) into qlen.txt.
    pub qlen_interval_us: f64,
    /// Links to capture into capture.pcap, as [node, node] pairs (both directions).
    pub capture_links: Vec<[u32; 2]>,
    pub capture_max_packets: u64,
    /// Rewrite summary.json this often in simulated time.
    pub summary_interval_ms: f64,
    pub progress: bool,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            fct: true,
            pfc_log: false,
            qlen_interval_us: 0.0,
            capture_links: Vec::new(),
            capture_max_packets: 100_000,
            summary_interval_ms: 1.0,
            progress: true,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkEvent {
    pub at_us: f64,
    pub link: [u32; 2],
    /// false: the link fails; true: it recovers.
    pub up: bool,
}

/// A scenario's byte count: a TOML integer, or a size with its unit as a string
/// (`size_bytes = "10M"`, `--set workload.size_bytes=10MB`), read by
/// [`rocast_core::units::parse_bytes`].
fn bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct Bytes;
    impl serde::de::Visitor<'_> for Bytes {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte count: an integer, or a size such as \"4K\", \"10MiB\" or \"10MB\"")
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
            parse_bytes(v).map_err(E::custom)
        }
    }
    d.deserialize_any(Bytes)
}

/// "64", "4K", "1M", "1G" (binary multiples): [`rocast_core::units::parse_bytes`].
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    rocast_core::units::parse_bytes(s)
}

/// A duration with its unit ("250ns", "10us", "1.5ms", "2s") in picoseconds:
/// [`rocast_core::units::parse_duration`].
pub fn parse_duration(s: &str) -> Result<u64, UnitError> {
    rocast_core::units::parse_duration(s)
}

/// A list or range of sizes [`parse_sizes`] cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizesError {
    #[error(transparent)]
    Size(#[from] UnitError),
    #[error("bad size range {0:?}: need 0 < MIN <= MAX")]
    Range(String),
    #[error("size range overflows")]
    RangeOverflow,
    #[error("bad sizes {0:?}: each must be 1 byte to 1 TiB")]
    OutOfRange(String),
}

/// "64:1G" → 64, 128, ..., 1 GiB; "1,100,1K" → that list.
pub fn parse_sizes(s: &str) -> Result<Vec<u64>, SizesError> {
    let v = if let Some((a, b)) = s.split_once(':') {
        let (lo, hi) = (parse_bytes(a)?, parse_bytes(b)?);
        if lo == 0 || lo > hi {
            return Err(SizesError::Range(s.to_string()));
        }
        let mut v = Vec::new();
        let mut x = lo;
        while x <= hi {
            v.push(x);
            x = x.checked_mul(2).ok_or(SizesError::RangeOverflow)?;
        }
        v
    } else {
        s.split(',')
            .map(parse_bytes)
            .collect::<Result<Vec<_>, _>>()?
    };
    if v.is_empty() || v.iter().any(|&x| x == 0 || x > 1 << 40) {
        return Err(SizesError::OutOfRange(s.to_string()));
    }
    Ok(v)
}

/// Built-in scenarios, by name.
/// The simulator's own presets: workloads on a fabric, no experiment. The papers'
/// experiments and their presets live in `rocast-eval`'s registry, which lists these
/// first.
pub const WORKLOAD_PRESETS: &[(&str, &str)] = &[
    ("default", include_str!("../../scenarios/default.toml")),
    (
        "permutation-1024",
        include_str!("../../scenarios/permutation-1024.toml"),
    ),
    ("incast", include_str!("../../scenarios/incast.toml")),
    ("websearch", include_str!("../../scenarios/websearch.toml")),
];

impl Scenario {
    /// Every experiment the scenario names: `[experiment.NAME]` tables, then
    /// `multicast.experiment` (validation allows one).
    fn experiments_named(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.experiment.keys().map(String::as_str).collect();
        if !self.multicast.experiment.is_empty() && !v.contains(&self.multicast.experiment.as_str())
        {
            v.push(&self.multicast.experiment);
        }
        v
    }

    /// The experiment the scenario runs (`None`: its workload runs in the engine).
    pub fn experiment_name(&self) -> Option<&str> {
        self.experiments_named().first().copied()
    }

    /// The scenario's name as reports print it: under `--set` overrides the name's
    /// description (a preset's "k=8 fat-tree") no longer holds, so the overrides
    /// follow it: `default: k=8 fat-tree, … [--set topology.k=4]`. The seed is left
    /// out: every report prints it beside the title.
    pub fn title(&self) -> String {
        let shown: Vec<&str> = self
            .overrides
            .iter()
            .map(String::as_str)
            .filter(|s| s.split('=').next().map(str::trim) != Some("seed"))
            .collect();
        if shown.is_empty() {
            self.name.clone()
        } else {
            format!("{} [--set {}]", self.name, shown.join(" --set "))
        }
    }

    /// Parses TOML text, applies `--set` overrides, and validates.
    pub fn from_toml(text: &str, sets: &[String]) -> Result<Self, ConfigError> {
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| ConfigError::Toml(e.to_string()))?;
        for s in sets {
            apply_set(&mut table, s)?;
        }
        // Which of [multicast] and [workload] the run reads: keys in the other would be
        // silently ignored.
        let keys_of = |name: &str| -> Vec<String> {
            table
                .get(name)
                .and_then(toml::Value::as_table)
                .map(|t| t.keys().map(|k| format!("{name}.{k}")).collect())
                .unwrap_or_default()
        };
        let (multicast_keys, workload_keys) = (keys_of("multicast"), keys_of("workload"));
        let mut sc: Scenario = Scenario::deserialize(toml::Value::Table(table))
            .map_err(|e| ConfigError::Toml(e.to_string()))?;
        sc.validate()?;
        match sc.experiment_name() {
            None if !multicast_keys.is_empty() => {
                return Err(invalid(
                    "multicast",
                    format!(
                        "{} does not apply: this scenario runs its [workload] in the engine, and [multicast] is read only by an experiment (multicast.experiment, or a preset from `rocast sim --list`)",
                        multicast_keys.join(", ")
                    ),
                ));
            }
            Some(name) if !workload_keys.is_empty() => {
                return Err(invalid(
                    "workload",
                    format!(
                        "{} does not apply: experiment {name} makes its own traffic ([multicast] and [experiment.{name}] set it)",
                        workload_keys.join(", ")
                    ),
                ));
            }
            _ => {}
        }
        sc.overrides = sets.to_vec();
        Ok(sc)
    }

    /// Reads a scenario file with `--set` overrides; its relative file names resolve
    /// against its own directory, returned beside it. The error names the file.
    pub fn from_file(path: &Path, sets: &[String]) -> Result<(Self, PathBuf), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let sc = Self::from_toml(&text, sets).map_err(|e| format!("{}: {e}", path.display()))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok((sc, base))
    }

    pub fn preset(name: &str, sets: &[String]) -> Result<Self, ConfigError> {
        let text = WORKLOAD_PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                let names: Vec<&str> = WORKLOAD_PRESETS.iter().map(|(n, _)| *n).collect();
                ConfigError::UnknownPreset(name.into(), names.join(", "))
            })?;
        Self::from_toml(text, sets)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let m = &self.multicast;
        one_of("multicast.op", &m.op, &["write", "send"])?;
        if !(m.safeguard_expected_ratio.is_finite() && m.safeguard_expected_ratio >= 0.0) {
            return Err(invalid(
                "multicast.safeguard_expected_ratio",
                format!("{} is not a ratio of 0 or more", m.safeguard_expected_ratio),
            ));
        }
        if m.restart_switch_after_packets > 0 && m.kill_rank > 0 {
            return Err(invalid(
                "multicast.restart_switch_after_packets",
                "one mid-stream fault at a time: not with multicast.kill_rank".to_string(),
            ));
        }
        if m.restart_switch_after_packets > 0 && m.refresh_ms == 0 {
            return Err(invalid(
                "multicast.restart_switch_after_packets",
                "a restarted switch learns the group back only from the leader's refresh: \
                 set multicast.refresh_ms too"
                    .to_string(),
            ));
        }
        for (key, value) in [
            ("multicast.chain_min_slice", &m.chain_min_slice),
            ("multicast.eager_limit", &m.eager_limit),
        ] {
            if parse_bytes(value).is_err() {
                return Err(invalid(
                    key,
                    format!("{value:?} is not a size (e.g. \"8K\", or \"0\")"),
                ));
            }
        }
        one_of(
            "multicast.placement",
            &m.placement,
            &["spread", "contiguous"],
        )?;
        if !(m.overhead_us.is_finite() && m.overhead_us >= 0.0) {
            return Err(invalid(
                "multicast.overhead_us",
                "must be a non-negative number",
            ));
        }
        if !(0.0..1.0).contains(&m.loss) {
            return Err(invalid("multicast.loss", "must be in [0, 1)"));
        }
        if m.loss > 0.0 && !(1..m.group.max(1)).contains(&m.loss_rank) {
            return Err(invalid(
                "multicast.loss_rank",
                format!("must name a member, 1..{}", m.group.saturating_sub(1)),
            ));
        }
        let t = &self.topology;
        if !(self.stop_ms > 0.0 && self.stop_ms.is_finite()) {
            return Err(invalid(
                "stop_ms",
                "must be a positive number of milliseconds",
            ));
        }
        match t.kind.as_str() {
            "fat-tree" => {
                // The topology builder's range (`Topology::fat_tree`), the same in
                // `rocast tree`, `rocast bench fat-tree` and the simulator.
                if t.k < 2 || t.k % 2 != 0 || t.k > 128 {
                    return Err(invalid(
                        "topology.k",
                        format!("must be even, 2 to 128; got {}", t.k),
                    ));
                }
                if t.oversubscription == 0 {
                    return Err(invalid("topology.oversubscription", "must be at least 1"));
                }
                if t.pods > t.k {
                    return Err(invalid(
                        "topology.pods",
                        format!("a k={} fat-tree has 1 to {} pods (0: all)", t.k, t.k),
                    ));
                }
                if t.edges_per_pod > t.k / 2 {
                    return Err(invalid(
                        "topology.edges_per_pod",
                        format!("a k={} pod has 1 to {} edges (0: all)", t.k, t.k / 2),
                    ));
                }
            }
            "leaf-spine" => {
                if t.spines == 0 || t.leaves == 0 || t.hosts_per_leaf == 0 {
                    return Err(invalid(
                        "topology.spines/leaves/hosts_per_leaf",
                        "must all be at least 1",
                    ));
                }
            }
            "file" => {
                if t.file.is_empty() {
                    return Err(invalid(
                        "topology.file",
                        "kind = \"file\" needs a file path",
                    ));
                }
            }
            other => {
                return Err(invalid(
                    "topology.kind",
                    format!("expected \"fat-tree\", \"leaf-spine\" or \"file\", got {other:?}"),
                ))
            }
        }
        check_gbps(&[
            ("topology.host_gbps", t.host_gbps),
            ("topology.fabric_gbps", t.fabric_gbps),
            ("topology.core_gbps", t.core_gbps),
            ("topology.gpu_gbps", t.gpu_gbps),
        ])?;
        for (key, v) in [
            ("topology.link_loss", t.link_loss),
            ("topology.fail_fraction", t.fail_fraction),
            ("switch.pmax", self.switch.pmax),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(invalid(
                    key,
                    format!("must be a fraction in [0, 1], got {v}"),
                ));
            }
        }
        let s = &self.switch;
        if !(s.buffer_mb > 0.0 && s.buffer_mb < 1e6) {
            return Err(invalid("switch.buffer_mb", "must be positive"));
        }
        if s.kmin_kb < 0.0 || s.kmax_kb < s.kmin_kb {
            return Err(invalid(
                "switch.kmax_kb",
                "must be at least kmin_kb (both >= 0)",
            ));
        }
        if s.alpha_shift > 16 {
            return Err(invalid("switch.alpha_shift", "must be 0 to 16"));
        }
        let n = &self.nic;
        if !matches!(n.mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(invalid(
                "nic.mtu",
                format!("must be 256, 512, 1024, 2048 or 4096, got {}", n.mtu),
            ));
        }
        one_of("nic.cc", &n.cc, &["dcqcn", "none"])?;
        let window = rocast_core::time::Duration::from_us(self.switch.cnp_window_us);
        if rocast_core::fabric::cepheus::CnpFilterPolicy::from_name(&self.switch.cnp_filter, window)
            .is_err()
        {
            return Err(invalid(
                "switch.cnp_filter",
                format!(
                    "expected one of {}, got {:?}",
                    rocast_core::fabric::cepheus::CnpFilterPolicy::NAMES.join(", "),
                    self.switch.cnp_filter
                ),
            ));
        }
        if !(0.0..=100.0).contains(&self.switch.tmcf_damped_z) {
            return Err(invalid(
                "switch.tmcf_damped_z",
                "must be between 0 and 100 standard deviations",
            ));
        }
        if self.switch.cnp_window_us == 0 {
            return Err(invalid("switch.cnp_window_us", "must be at least 1"));
        }
        one_of(
            "nic.dcqcn_preset",
            &n.dcqcn_preset,
            &["hpcc", "paper", "cx5"],
        )?;
        one_of(
            "nic.retransmission",
            &n.retransmission,
            &["go-back-n", "selective-repeat"],
        )?;
        if n.window == 0 || n.window > 1 << 22 {
            return Err(invalid("nic.window", "must be 1 to 4194304 packets"));
        }
        if n.retransmission == "selective-repeat" && n.window > 256 {
            return Err(invalid("nic.window", "selective repeat allows at most 256"));
        }
        if n.ack_every == 0 || n.rto_us == 0 {
            return Err(invalid("nic.ack_every/rto_us", "must be at least 1"));
        }
        let w = &self.workload;
        if !matches!(
            w.kind.as_str(),
            "permutation" | "incast" | "all-to-all" | "poisson" | "flow-file" | "flows"
        ) {
            return Err(invalid("workload.kind", format!("expected permutation, incast, all-to-all, poisson, flow-file or flows; got {:?}", w.kind)));
        }
        if w.size_bytes == 0 && matches!(w.kind.as_str(), "permutation" | "incast" | "all-to-all") {
            return Err(invalid("workload.size_bytes", "must be at least 1"));
        }
        if w.kind == "poisson" && !(w.load > 0.0 && w.load <= 1.0) {
            return Err(invalid(
                "workload.load",
                format!("must be in (0, 1], got {}", w.load),
            ));
        }
        if !(w.duration_ms.is_finite() && w.duration_ms > 0.0) {
            return Err(invalid(
                "workload.duration_ms",
                format!("must be a positive number of ms, got {}", w.duration_ms),
            ));
        }
        let o = &self.output;
        if !(o.qlen_interval_us == 0.0
            || (o.qlen_interval_us >= 0.1 && o.qlen_interval_us.is_finite()))
        {
            return Err(invalid(
                "output.qlen_interval_us",
                format!(
                    "must be 0 (off) or at least 0.1 us, got {}",
                    o.qlen_interval_us
                ),
            ));
        }
        if !(o.summary_interval_ms >= 0.001 && o.summary_interval_ms.is_finite()) {
            return Err(invalid(
                "output.summary_interval_ms",
                format!("must be at least 0.001 ms, got {}", o.summary_interval_ms),
            ));
        }
        if self.topology.gpus_per_host > MAX_GPUS_PER_HOST {
            return Err(invalid(
                "topology.gpus_per_host",
                format!(
                    "at most {MAX_GPUS_PER_HOST}, got {}",
                    self.topology.gpus_per_host
                ),
            ));
        }
        let named = self.experiments_named();
        if named.len() > 1 {
            return Err(invalid(
                "experiment",
                format!(
                    "a scenario runs one experiment; this one names {}",
                    named.join(", ")
                ),
            ));
        }
        if let (false, Some(e)) = (self.link_events.is_empty(), self.experiment_name()) {
            return Err(invalid(
                "link_events",
                format!(
                    "the {e} experiment does not apply [[link_events]] (only flow-level runs do); remove them or use a run without multicast.experiment",
                ),
            ));
        }
        if w.start_us < 0.0 || !w.start_us.is_finite() {
            return Err(invalid("workload.start_us", "must be >= 0"));
        }
        for (i, f) in w.flows.iter().enumerate() {
            if let Some(a) = f.after {
                if a as usize >= i {
                    return Err(invalid(
                        "workload.flows.after",
                        format!("flow {i} waits for flow {a}, which must come earlier in the list"),
                    ));
                }
            }
            if f.src == f.dst {
                return Err(invalid(
                    "workload.flows",
                    format!("flow {i} has src == dst"),
                ));
            }
        }
        Ok(())
    }
}

/// The most GPUs per host `topology.gpus_per_host` takes (servers carry 8; 64 leaves
/// room without letting a typo allocate millions of endpoints).
pub const MAX_GPUS_PER_HOST: u32 = 64;

/// The experiment a scenario's (unparsed) table runs: its one `[experiment.NAME]`
/// table, else `multicast.experiment`.
fn configured_experiment(table: &toml::Table) -> Option<String> {
    if let Some(toml::Value::Table(e)) = table.get("experiment") {
        if e.len() == 1 {
            return e.keys().next().cloned();
        }
    }
    table
        .get("multicast")
        .and_then(|m| m.get("experiment"))
        .and_then(toml::Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// Applies `a.b.c=value` to a TOML table. The value is read as TOML (numbers, bools,
/// arrays, quoted strings); anything that is not valid TOML is taken as a string.
fn apply_set(table: &mut toml::Table, s: &str) -> Result<(), ConfigError> {
    let (key, raw) = s
        .split_once('=')
        .ok_or_else(|| ConfigError::SetSyntax(s.into()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(ConfigError::SetSyntax(s.into()));
    }
    let value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").expect("parsed key"),
        Err(_) => toml::Value::String(raw.trim().to_string()),
    };
    let explicit: Vec<&str> = key.split('.').collect();
    let named;
    let parts: Vec<&str> = match explicit.as_slice() {
        // `experiment.KEY=scalar` sets KEY of the experiment the scenario runs, so a
        // reading's alternative reads the same on every preset of a paper.
        ["experiment", field] if !value.is_table() => {
            named = configured_experiment(table).ok_or_else(|| ConfigError::SetPath {
                key: key.into(),
                msg: "the scenario runs no experiment; name it: experiment.NAME.KEY".into(),
            })?;
            vec!["experiment", named.as_str(), field]
        }
        _ => explicit,
    };
    let mut t = table;
    for p in &parts[..parts.len() - 1] {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry.as_table_mut().ok_or_else(|| ConfigError::SetPath {
            key: key.into(),
            msg: format!("{p} is not a table"),
        })?;
    }
    t.insert(parts[parts.len() - 1].to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_of_says_what_it_expected() {
        assert!(one_of("k", "b", &["a", "b"]).is_ok());
        assert_eq!(
            one_of("k", "x", &["a", "b", "c"]).unwrap_err().to_string(),
            "k: expected \"a\", \"b\" or \"c\", got \"x\""
        );
        assert_eq!(
            one_of("k", "x", &["a", "b"]).unwrap_err().to_string(),
            "k: expected \"a\" or \"b\", got \"x\""
        );
    }

    #[test]
    fn fat_tree_arity_is_the_builders_range() {
        for (k, ok) in [
            (2, true),
            (64, true),
            (128, true),
            (130, false),
            (7, false),
            (0, false),
        ] {
            let r = Scenario::preset("default", &[format!("topology.k={k}")]);
            assert_eq!(r.is_ok(), ok, "k={k}: {:?}", r.err());
        }
    }

    #[test]
    fn experiment_key_sets_the_running_experiments_table() {
        let both = [
            "[experiment.memory]\ngroups = 4\n",
            "[multicast]\nexperiment = \"memory\"\n",
        ];
        for text in both {
            let sc = Scenario::from_toml(text, &["experiment.groups=9".into()]).unwrap();
            assert_eq!(sc.experiment_name(), Some("memory"));
            assert_eq!(sc.experiment["memory"]["groups"].as_integer(), Some(9));
        }
        let explicit = Scenario::from_toml(both[0], &["experiment.memory.ports=2".into()]).unwrap();
        assert_eq!(explicit.experiment["memory"]["ports"].as_integer(), Some(2));
        let err = Scenario::from_toml("", &["experiment.groups=9".into()]).unwrap_err();
        assert!(err.to_string().contains("runs no experiment"), "{err}");
    }

    #[test]
    fn a_scenario_names_one_experiment() {
        let one = Scenario::from_toml("[experiment.memory]\ngroups = 4\n", &[]).unwrap();
        assert_eq!(one.experiment_name(), Some("memory"));
        assert_eq!(one.experiment["memory"]["groups"].as_integer(), Some(4));
        let old = Scenario::from_toml("[multicast]\nexperiment = \"iops\"\n", &[]).unwrap();
        assert_eq!(old.experiment_name(), Some("iops"));
        assert_eq!(Scenario::default().experiment_name(), None);
        let two = Scenario::from_toml(
            "[experiment.memory]\n[multicast]\nexperiment = \"iops\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(two.contains("names memory, iops"), "{two}");
        let set = Scenario::from_toml("", &["experiment.peel-fig3.fprs=[0.1]".into()]).unwrap();
        assert_eq!(set.experiment_name(), Some("peel-fig3"));
    }

    #[test]
    fn durations_carry_their_unit() {
        assert_eq!(parse_duration("250ns"), Ok(250_000));
        assert_eq!(parse_duration("10us"), Ok(10_000_000));
        assert_eq!(parse_duration("10µs"), Ok(10_000_000));
        assert_eq!(parse_duration(" 1.5ms"), Ok(1_500_000_000));
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000_000));
        for bad in ["10", "", "us", "-1us", "1e30s", "5min", "1.2.3ms", "NaNus"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_preset_parses_and_validates() {
        for (name, _) in WORKLOAD_PRESETS {
            Scenario::preset(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let annotated =
            Scenario::from_toml(include_str!("../../scenarios/annotated.toml"), &[]).unwrap();
        let defaults = Scenario::default();
        // The annotated example spells out the defaults: keep them in step.
        assert_eq!(
            format!("{:?}", annotated.switch),
            format!("{:?}", defaults.switch)
        );
        assert_eq!(
            format!("{:?}", annotated.nic),
            format!("{:?}", defaults.nic)
        );
        assert_eq!(
            format!("{:?}", annotated.topology),
            format!("{:?}", defaults.topology)
        );
    }

    #[test]
    fn set_overrides_and_errors_name_the_key() {
        let s =
            Scenario::preset("default", &["topology.k=8".into(), "nic.cc=none".into()]).unwrap();
        assert_eq!(s.topology.k, 8);
        assert_eq!(s.nic.cc, "none");
        for (sets, want) in [
            (vec!["topology.k=5"], "topology.k"),
            (vec!["topology.kk=5"], "kk"),
            (vec!["nic.mtu=1000"], "nic.mtu"),
            (vec!["topology.k=\"x\""], "topology"),
            (vec!["switch.pmax=2"], "switch.pmax"),
            (vec!["workload.kind=zipf"], "workload.kind"),
            (vec!["nonsense"], "key=value"),
            // Values that would loop, exhaust memory or be silently ignored.
            (
                vec!["output.qlen_interval_us=1e-12"],
                "output.qlen_interval_us",
            ),
            (
                vec!["output.summary_interval_ms=0"],
                "output.summary_interval_ms",
            ),
            (vec!["workload.duration_ms=-1"], "workload.duration_ms"),
            (
                vec!["topology.gpus_per_host=1000000"],
                "topology.gpus_per_host",
            ),
            (vec!["switch.cnp_filter=\"x\""], "tmcf-damped"),
            (vec!["switch.tmcf_damped_z=-1"], "switch.tmcf_damped_z"),
            // PEEL's keys are its experiments' (`[experiment.peel-figN]`, rocast-eval).
            (
                vec!["multicast.upward=\"lowest\""],
                "unknown field `upward`",
            ),
        ] {
            let sets: Vec<String> = sets.into_iter().map(String::from).collect();
            let e = Scenario::preset("default", &sets).unwrap_err().to_string();
            assert!(e.contains(want), "{sets:?}: {e}");
        }
        // The experiments' presets live in rocast-eval; this check is the
        // simulator's, so the default preset with the experiment named shows it.
        for (sets, want) in [
            (
                vec![
                    "multicast.experiment=\"tmcf-cpmp\"",
                    "link_events=[{at_us = 1.0, link = [0, 7], up = false}]",
                ],
                "link_events",
            ),
            (
                vec![
                    "experiment.tmcf-cpmp.x=1",
                    "link_events=[{at_us = 1.0, link = [0, 7], up = false}]",
                ],
                "the tmcf-cpmp experiment does not apply",
            ),
        ] {
            let sets: Vec<String> = sets.into_iter().map(String::from).collect();
            let e = Scenario::preset("default", &sets).unwrap_err().to_string();
            assert!(e.contains(want), "{sets:?}: {e}");
        }
        assert!(Scenario::preset("nope", &[])
            .unwrap_err()
            .to_string()
            .contains("default"));
    }
}
