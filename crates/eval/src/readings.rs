//! Readings as data: every choice a paper leaves open, or that rocast had to make, for
//! the Cepheus (HPCA 2024, §V), broadcast-select (APSIPA 2019, §II–III), PEEL (HotNets
//! 2025, §3–§4) and TMCF (poster, §II–III) presets.
//! Each [`Reading`] names the scenario key, the paper's words (quoted with the section)
//! or "not stated", the value rocast runs (the primary reading), the source that
//! decided it, and the alternatives with the sentence that rules each out.
//!
//! The rule that picks the primary (DEVELOPERS.md, "Readings"): the paper's text first;
//! then what it cites or the tool it ran (ns-3's RDMA model as HPCC's simulator ships
//! it, Open MPI 4.1 and UCX 1.11, the ConnectX-5's documented defaults); then
//! consistency with the paper's other numbers; never which value matches the figure.
//! `rocast sim` prints a preset's readings above its verdicts, `rocast repro
//! --readings [cepheus|peel]` writes a paper's table (`docs/<paper>/readings.md`), and a test pins
//! every primary value against its preset's TOML.

use std::fmt::Write as _;

/// A value rocast did not choose, with how to run it and why it is not the primary.
#[derive(Debug)]
pub struct Alternative {
    /// The value, in words.
    pub value: &'static str,
    /// `--set` overrides on the preset that run it.
    pub sets: &'static [&'static str],
    /// The sentence (or source) that rules it out as the primary reading.
    pub ruled_out: &'static str,
}

impl Alternative {
    /// " (--set a --set b)", with each set in backticks for Markdown; empty without sets.
    fn sets_text(&self, markdown: bool) -> String {
        if self.sets.is_empty() {
            return String::new();
        }
        let q = if markdown { "`" } else { "" };
        format!(" ({q}--set {}{q})", self.sets.join(" --set "))
    }
}

/// One open choice of a preset.
#[derive(Debug)]
pub struct Reading {
    /// The scenario keys it sets (as `--set` takes them).
    pub key: &'static str,
    /// What the choice is about.
    pub what: &'static str,
    /// The paper's words, quoted with the section, or "not stated".
    pub paper: &'static str,
    /// The primary reading: `key=value` pairs exactly as the preset sets them (the
    /// test compares them with the preset).
    pub primary: &'static [&'static str],
    /// What decided the primary, by the rule's order: "paper", "cited tool" or
    /// "consistency", with the citation.
    pub source: &'static str,
    pub alternatives: &'static [Alternative],
}

/// A preset's readings: the preset and the `multicast.experiment` its reports come from.
#[derive(Debug)]
pub struct PresetReadings {
    pub preset: &'static str,
    pub figure: &'static str,
    pub readings: &'static [&'static Reading],
}

// The NIC, shared by every simulated Cepheus figure (§V-C).
const DCQCN_SET: Reading = Reading {
    key: "nic.dcqcn_preset",
    what: "the NIC's DCQCN reaction-point parameters",
    paper: "§V-C: \"The retransmission and CC are go-back-N and DCQCN, same as Mellanox ConnectX-5 RNIC.\"",
    primary: &["nic.dcqcn_preset=\"cx5\""],
    source: "paper, then the NIC's vendor: ConnectX-5 firmware defaults (NVIDIA DOCA \"DCQCN CC Parameters\": dce_tcp_g 1019/1024, dce_tcp_rtt 1 us, rate_reduce_monitor_period 4 us, rpg_min_dec_fac 50%, rpg_min_rate 1 Mb/s; the rate-increase knobs from a ConnectX-5 Ex mlxconfig dump, fw 16.27, xdp-newbies 2020-06-22: rpg_time_reset 300 us, rpg_byte_reset 32767 B, rpg_threshold 1, rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s, clamp_tgt_rate 0; units from linux/dcbnl.h)",
    alternatives: &[
        Alternative {
            value: "HPCC's ns-3 set (run.py --cc dcqcn: AI/HAI scaled per 25 Gb/s, min rate 1 Gb/s, no byte counter)",
            sets: &["nic.dcqcn_preset=\"hpcc\""],
            ruled_out: "the paper names the NIC (\"same as Mellanox ConnectX-5\"), not HPCC's scaled set; the simulator ns-3 is the tool, but its DCQCN knobs are the NIC's",
        },
        Alternative {
            value: "the DCQCN paper's set (K = T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mb/s)",
            sets: &["nic.dcqcn_preset=\"paper\""],
            ruled_out: "the paper names the ConnectX-5, whose shipped defaults differ from the 2015 paper's",
        },
    ],
};

const CNP_SPACING: Reading = Reading {
    key: "nic.cnp_interval_us",
    what: "the receiver NIC's minimum time between CNPs per QP (notification point)",
    paper: "not stated (the receivers are ConnectX-5s, §V-C)",
    primary: &["nic.cnp_interval_us=2"],
    source: "the NIC's vendor: MIN_TIME_BETWEEN_CNPS = 2 in a ConnectX-5 Ex mlxconfig dump (fw 16.27); the unit (us) is not confirmed by NVIDIA's page, so the value is swept",
    alternatives: &[
        Alternative {
            value: "4 us (a secondary table of ConnectX defaults)",
            sets: &["nic.cnp_interval_us=4"],
            ruled_out: "not a vendor source",
        },
        Alternative {
            value: "50 us (the DCQCN paper's N)",
            sets: &["nic.cnp_interval_us=50"],
            ruled_out: "the paper names the ConnectX-5, not the 2015 DCQCN paper's NP",
        },
    ],
};

const IN_FLIGHT: Reading = Reading {
    key: "nic.window",
    what: "packets a QP may have unacknowledged",
    paper: "not stated; ConnectX-5 RC has no such cap below the PSN space",
    primary: &["nic.window=4194303"],
    source: "cited tool: HPCC's ns-3 runs DCQCN with no window (run.py --cc dcqcn: has_win=0); 2^22 - 1 is the PSN half-space, the only limit a go-back-N RC requester has",
    alternatives: &[Alternative {
        value: "256 packets (rocast's earlier cap)",
        sets: &["nic.window=256"],
        ruled_out: "a limit neither ConnectX-5 nor the ns-3 model has",
    }],
};

const SIM_MTU: Reading = Reading {
    key: "nic.mtu",
    what: "the simulated RoCE MTU",
    paper: "not stated for the simulation (§III-B's MRP mentions \"MTU limitation (usually 1500 Bytes)\")",
    primary: &["nic.mtu=1024"],
    source: "cited tool: HPCC's ns-3 RDMA model sends PACKET_PAYLOAD_SIZE 1000-byte payloads (config.txt, run.py template); 1024 is the RoCE path MTU nearest to it",
    alternatives: &[Alternative {
        value: "4096 (rocast's earlier choice, the largest RoCE MTU)",
        sets: &["nic.mtu=4096"],
        ruled_out: "the ns-3 model the paper ran sends 1000-byte payloads; 4 KiB is not what it simulated",
    }],
};

const FABRIC: Reading = Reading {
    key: "topology.k, topology.pods, topology.edges_per_pod",
    what: "the simulated fabric",
    paper: "§V-C: \"a large-scale 3-layer fat-tree topology with 1024 servers and a 1:1 oversubscription ratio. Each server is equipped with one 100Gbps RNIC, and each switch has 64 100Gbps ports.\"",
    primary: &["topology.k=64", "topology.pods=2", "topology.edges_per_pod=16"],
    source: "paper: 64-port switches at 1:1 give 32 servers and 32 uplinks per ToR, so 1024 servers are 32 ToRs; a third layer carries traffic only between pods, and 2 pods of 16 ToRs is the fewest that has one (aggregation: 16 down, 16 up; 512 cores with a port per pod)",
    alternatives: &[
        Alternative {
            value: "k=16 classic fat-tree (16-port switches, 8 servers per ToR: 1024 = k^3/4)",
            sets: &["topology.k=16", "topology.pods=0", "topology.edges_per_pod=0"],
            ruled_out: "\"each switch has 64 100Gbps ports\"; §V-D's \"4394 in a standard 1:1 oversubscription 3-layer fat-tree\" (= 26^3/4) shows the paper's k^3/4 formula, but for a 25-port fan-out, not for these switches",
        },
        Alternative {
            value: "k=64 with 4 pods of 8 ToRs",
            sets: &["topology.k=64", "topology.pods=4", "topology.edges_per_pod=8"],
            ruled_out: "not ruled out by the text: the pod count is not stated; rocast takes the fewest pods that make three layers",
        },
    ],
};

const CHAIN_SLICES: Reading = Reading {
    key: "multicast.chain_slices_per_rank",
    what: "how the chain cuts a message",
    paper: "§V-A: \"we set the number of slices to four, which is equal to the number of hosts, a common configuration in real-world use cases\"; §V-C: \"Results shown in Fig. 12 are consistent with results in §V-A\"",
    primary: &["multicast.chain_slices_per_rank=true"],
    source: "paper: slices = hosts (the §V-A rule, which §V-C does not change)",
    alternatives: &[Alternative {
        value: "1 MiB blocks (RDMC's default; rocast's earlier Fig. 12)",
        sets: &["multicast.chain_slices_per_rank=false", "multicast.chain_slices=0"],
        ruled_out: "\"we set the number of slices to four, which is equal to the number of hosts\"",
    }],
};

const MIN_SLICE: Reading = Reading {
    key: "multicast.chain_min_slice",
    what: "the smallest chain slice (a small message is cut into fewer slices)",
    paper: "§V-A: \"it is not feasible to slice data into extremely small portions because each intermediate host must process every slice\"; no size is stated",
    primary: &["multicast.chain_min_slice=\"8K\""],
    source: "cited tool: Open MPI's smallest pipeline segment in its fixed broadcast rules, \"Pipeline with 8KB segments\" (coll_tuned_decision_fixed.c, v4.0.7; 4.1's rules do not segment at all, segsize 0)",
    alternatives: &[
        Alternative {
            value: "no floor: slices = ranks at every size (a 64 B message to 512 ranks in 1-byte slices)",
            sets: &["multicast.chain_min_slice=\"0\""],
            ruled_out: "\"it is not feasible to slice data into extremely small portions\"",
        },
        Alternative {
            value: "1 KiB (Open MPI 4.0's split binary tree segment)",
            sets: &["multicast.chain_min_slice=\"1K\""],
            ruled_out: "that segment is the split binary tree's, not the chain's (pipeline) in the same rules",
        },
    ],
};

const EAGER: Reading = Reading {
    key: "multicast.eager_limit",
    what: "the baselines' eager/rendezvous threshold: transfers at most this size skip the ready-for-block",
    paper: "§IV: \"we add a new MPI-Bcast implementation in OpenMPI (v4.1.1) and modify UCX (v1.11.2)\"; §V-A: \"two OpenMPI AMcast algorithms, BT and Chain\"; the threshold is not stated",
    primary: &["multicast.eager_limit=\"8K\""],
    source: "cited tool: UCX 1.11's UCX_RNDV_THRESH defaults to \"auto\" (src/ucp/core/ucp_context.c), computed per endpoint with the interface's max_bcopy as its floor (ucp_ep.c: ucs_max(numerator / denumerator, max_bcopy)), 8192 B on IB/RoCE (UCX_IB_SEG_SIZE, ib_iface.c); the computed value on the paper's NICs is not documented, so rocast takes the floor and sweeps",
    alternatives: &[
        Alternative {
            value: "0: every transfer waits for a ready (rocast's earlier baselines)",
            sets: &["multicast.eager_limit=\"0\""],
            ruled_out: "Open MPI over UCX sends below its rendezvous threshold eagerly",
        },
        Alternative {
            value: "12 KiB (Open MPI 4.x openib BTL's btl_eager_limit)",
            sets: &["multicast.eager_limit=\"12K\""],
            ruled_out: "the paper runs Open MPI over UCX (\"modify UCX (v1.11.2)\"), not the openib BTL",
        },
        Alternative {
            value: "256 KiB (UCX's RNDV_SEND_NBR_THRESH)",
            sets: &["multicast.eager_limit=\"256K\""],
            ruled_out: "that threshold is for blocking sends (ucp_tag_send_nbr, openucx/ucx#4430); Open MPI's collectives post isends, which take the computed threshold",
        },
    ],
};

const TREE_SENDS: Reading = Reading {
    key: "multicast.tree_window",
    what: "how a binomial-tree rank sends to its children",
    paper: "§V-A: \"two OpenMPI AMcast algorithms, BT and Chain\"",
    primary: &["multicast.tree_window=0"],
    source: "cited tool: Open MPI 4.1's ompi_coll_base_bcast_intra_generic posts an isend to every child, then ompi_request_wait_all (coll_base_bcast.c)",
    alternatives: &[Alternative {
        value: "one child after another, each after the previous completed (rocast's earlier tree)",
        sets: &["multicast.tree_window=1"],
        ruled_out: "Open MPI's generic tree broadcast posts all children's sends at once",
    }],
};

const OVERHEAD: Reading = Reading {
    key: "multicast.overhead_us",
    what: "host software cost per posted transfer",
    paper: "not stated (§V-A names CPU overhead: \"each intermediate host must process every slice\")",
    primary: &["multicast.overhead_us=2.0"],
    source: "consistency: RDMC's measured per-block cost (RDMC Table 1), the one published figure for an RDMA broadcast's host step; ns-3 itself has no host software model",
    alternatives: &[Alternative {
        value: "0 (the ns-3 model has no host software)",
        sets: &["multicast.overhead_us=0"],
        ruled_out: "§V-A says intermediate hosts pay per slice (\"substantial CPU overhead\"); run beside the primary in cepheus-fig12-ablation",
    }],
};

const PLACEMENT: Reading = Reading {
    key: "multicast.placement",
    what: "which hosts the group's ranks sit on",
    paper: "not stated (§V-C: \"a group size of 512\" on 1024 servers)",
    primary: &["multicast.placement=\"spread\""],
    source: "not stated anywhere the paper cites: rocast spreads the ranks evenly (rank r on host 2r), and shows contiguous beside it",
    alternatives: &[Alternative {
        value: "contiguous (ranks on hosts 0..511)",
        sets: &["multicast.placement=\"contiguous\""],
        ruled_out: "not ruled out by the text; run beside the primary in cepheus-fig12-ablation",
    }],
};

const SIZE_WINDOWS: Reading = Reading {
    key: "(verdict windows)",
    what: "which sizes are \"short\" and \"large\" flows in Fig. 12's \"up to\" claims",
    paper: "§V-C: \"For short flows … up to 164x and 4.5x\", \"For large flows … up to 2.1x and 8.9x\"; the figure's axis (64 B - 1024 MB) is not in the text",
    primary: &["short <= 64 KiB, large >= 1 MiB"],
    source: "consistency: the testbed's split between Fig. 8 (latency, small) and Fig. 9 (throughput, large) messages",
    alternatives: &[],
};

const TESTBED_FABRIC: Reading = Reading {
    key: "topology (one switch, 4 hosts)",
    what: "the testbed",
    paper: "§V-A: \"We connect four commodity Dell servers to the Ethernet switch\" … \"a ConnectX-5 RNIC with a 100Gbps interface\"",
    primary: &["topology.kind=\"leaf-spine\"", "topology.hosts_per_leaf=4"],
    source: "paper",
    alternatives: &[],
};

const TESTBED_MTU: Reading = Reading {
    key: "nic.mtu",
    what: "the testbed's RoCE MTU",
    paper: "not stated for the testbed; §III-B: \"Due to the MTU limitation (usually 1500 Bytes)\"",
    primary: &["nic.mtu=1024"],
    source: "paper (consistency): a 1500-byte Ethernet MTU carries RoCE path MTU 1024, the largest that fits",
    alternatives: &[Alternative {
        value: "4096 (a jumbo-frame fabric)",
        sets: &["nic.mtu=4096"],
        ruled_out: "\"MTU limitation (usually 1500 Bytes)\"",
    }],
};

const TESTBED_SLICES: Reading = Reading {
    key: "multicast.chain_slices",
    what: "how the chain cuts a message on the testbed",
    paper: "§V-A: \"we set the number of slices to four, which is equal to the number of hosts\"",
    primary: &["multicast.chain_slices=4"],
    source: "paper",
    alternatives: &[Alternative {
        value: "Open MPI 4.1's fixed decision (no segmentation: one segment)",
        sets: &["multicast.chain_slices=1"],
        ruled_out: "the paper sets four slices",
    }],
};

const LOSS_PLACE: Reading = Reading {
    key: "experiment.loss_at",
    what: "where Fig. 13's random loss happens",
    paper: "§V-C: \"emulated via randomly discarding packets in the middle switches\"",
    primary: &["experiment.loss_at=\"middle-switches\""],
    source: "paper: every frame an aggregation switch (the middle of three tiers) sends drops with the rate, once per switch crossed",
    alternatives: &[Alternative {
        value: "every switch-to-switch link, either way (rocast's earlier reading; ns-3's per-device error model on those links)",
        sets: &["experiment.loss_at=\"switch-links\""],
        ruled_out: "\"in the middle switches\", not on every link",
    }],
};

const LOSS_LOSSLESS: Reading = Reading {
    key: "switch.lossless",
    what: "PFC under random loss",
    paper: "§V-C recommends PFC for deployment (\"we recommend deploying Cepheus in a lossless network with PFC\"); for Fig. 13 it is not stated",
    primary: &["switch.lossless=false"],
    source: "consistency: random discards are what the experiment measures; PFC prevents only congestion loss, so either setting drops the same random frames; rocast runs without PFC (the lossy fabric the recommendation contrasts)",
    alternatives: &[Alternative {
        value: "PFC on",
        sets: &["switch.lossless=true"],
        ruled_out: "not ruled out by the text",
    }],
};

const F14_ORDER: Reading = Reading {
    key: "experiment.overlap",
    what: "when f3 starts",
    paper: "§V-C: \"Three flows initiate sequentially as shown in Fig. 14\" … \"after f2 ends, Cepheus grabs total bandwidth again and quickly converges to a new fair sharing with f3\"",
    primary: &["experiment.overlap=false"],
    source: "paper: f3 after f2",
    alternatives: &[Alternative {
        value: "f3 halfway through f2 (two congested branches at once; rocast's earlier preset)",
        sets: &["experiment.overlap=true"],
        ruled_out: "\"after f2 ends, Cepheus grabs total bandwidth again\"",
    }],
};

const F14_FILTER: Reading = Reading {
    key: "switch.cnp_filter",
    what: "the switches' CNP filter",
    paper: "§III-D: \"We then perform signal filtering to only pass through the CNPs from the most congested link\" with \"a periodic aging mechanism\"",
    primary: &["the cepheus policy of experiment.cnp_policies counts"],
    source: "paper",
    alternatives: &[Alternative {
        value: "forward-all, TMCF, PEEL's guard (every policy runs in the same report)",
        sets: &[],
        ruled_out: "not Cepheus' mechanism: shown for comparison, not counted",
    }],
};

const IO_STACK: Reading = Reading {
    key: "experiment.io_stack_us",
    what: "the client's storage stack cost per copy",
    paper: "§V-B: \"the throughput bottleneck of consistent 8KB writing lies in the storage protocol stack at end-host\"; 1-unicast: 1.188 M IOPS",
    primary: &["experiment.io_stack_us=0.842"],
    source: "calibrated: 1 / 1.188 M, the paper's own 1-unicast rate, so results that follow from it are reported as \"calibrated\"",
    alternatives: &[],
};

const ODBSS_HOP: Reading = Reading {
    key: "experiment.hop_model",
    what: "the per-hop unicast latency L the overlay sums",
    paper: "§III-B: the overlay's latency K·log2(N)·L; Fig. 4's Soft-RoCE and hardware latencies, \"35 us versus 3 us\" (tail against average)",
    primary: &["experiment.hop_model=\"fig4\""],
    source: "paper: its own Fig. 4 hardware column (Mlnx_HW) with its stated tail",
    alternatives: &[Alternative {
        value: "lab: the hop measured on rocast's namespace lab (1 Gbit/s software hops, millisecond tails)",
        sets: &["experiment.hop_model=\"lab\""],
        ruled_out: "it describes this VM, not the paper's fabric; printed as a sensitivity row",
    }],
};

/// Every preset with readings, in paper order.
pub const PRESETS: &[PresetReadings] = &[
    PresetReadings {
        preset: "cepheus-testbed",
        figure: "Cepheus Figs 8-9",
        readings: &[
            &TESTBED_FABRIC,
            &TESTBED_MTU,
            &DCQCN_SET,
            &CNP_SPACING,
            &IN_FLIGHT,
            &TESTBED_SLICES,
            &MIN_SLICE,
            &EAGER,
            &TREE_SENDS,
            &OVERHEAD,
        ],
    },
    PresetReadings {
        preset: "cepheus-fig10",
        figure: "Cepheus Fig. 10",
        readings: &[&TESTBED_FABRIC, &IO_STACK],
    },
    PresetReadings {
        preset: "cepheus-iops",
        figure: "Cepheus Table I",
        readings: &[&TESTBED_FABRIC, &IO_STACK],
    },
    PresetReadings {
        preset: "cepheus-fig12",
        figure: "Cepheus Fig. 12",
        readings: &[
            &FABRIC,
            &DCQCN_SET,
            &CNP_SPACING,
            &IN_FLIGHT,
            &SIM_MTU,
            &CHAIN_SLICES,
            &MIN_SLICE,
            &EAGER,
            &TREE_SENDS,
            &OVERHEAD,
            &PLACEMENT,
            &SIZE_WINDOWS,
        ],
    },
    PresetReadings {
        preset: "cepheus-loss",
        figure: "Cepheus Fig. 13",
        readings: &[
            &FABRIC,
            &DCQCN_SET,
            &CNP_SPACING,
            &IN_FLIGHT,
            &SIM_MTU,
            &LOSS_PLACE,
            &LOSS_LOSSLESS,
            &CHAIN_SLICES,
            &MIN_SLICE,
            &EAGER,
            &OVERHEAD,
            &PLACEMENT,
        ],
    },
    PresetReadings {
        preset: "cepheus-fairness",
        figure: "Cepheus Fig. 14",
        readings: &[
            &FABRIC,
            &DCQCN_SET,
            &CNP_SPACING,
            &IN_FLIGHT,
            &SIM_MTU,
            &F14_ORDER,
            &F14_FILTER,
        ],
    },
    PresetReadings {
        preset: "ud-latency",
        figure: "broadcast-select §III-B",
        readings: &[&ODBSS_HOP],
    },
    PresetReadings {
        preset: "odbss-scale-40",
        figure: "broadcast-select Fig. 5, §II-C (40-port elements)",
        readings: &[&ODBSS_HOP],
    },
    PresetReadings {
        preset: "odbss-scale-80",
        figure: "broadcast-select Fig. 5, §II-C (80-port elements)",
        readings: &[&ODBSS_HOP],
    },
    PresetReadings {
        preset: "peel-fig4",
        figure: "PEEL Fig. 4",
        readings: &[
            &PEEL_ORCA,
            &PEEL_ORCA_HEADER,
            &PEEL_SETUP,
            &PEEL_NIC_FAT_TREE,
            &PEEL_PLACEMENT,
            &PEEL_LOAD,
            &PEEL_UPWARD,
            &PEEL_DCQCN,
            &PEEL_GUARD,
            &PEEL_PFC,
        ],
    },
    PresetReadings {
        preset: "peel-fig5",
        figure: "PEEL Fig. 5",
        readings: PEEL_FAT_TREE_READINGS,
    },
    PresetReadings {
        preset: "peel-fig6",
        figure: "PEEL Fig. 6",
        readings: PEEL_FAT_TREE_READINGS,
    },
    PresetReadings {
        preset: "peel-fig7",
        figure: "PEEL Fig. 7",
        readings: &[
            &PEEL_FIG7_NICS,
            &PEEL_FIG7_REPEAT,
            &PEEL_OVERLAY,
            &PEEL_PLACEMENT,
            &PEEL_UPWARD,
            &PEEL_DCQCN,
            &PEEL_GUARD,
            &PEEL_PFC,
        ],
    },
    PresetReadings {
        preset: "peel-guard",
        figure: "PEEL §4's guard timer",
        readings: &[&PEEL_PLACEMENT, &PEEL_LOAD, &PEEL_PFC],
    },
    PresetReadings {
        preset: "tmcf-cpmp",
        figure: "TMCF Figs. 3-4",
        readings: &[&TMCF_RULE, &TMCF_SLOT, &TMCF_ECN],
    },
    PresetReadings {
        preset: "tmcf-moving",
        figure: "TMCF Figs. 5-6",
        readings: &[&TMCF_RULE, &TMCF_SLOT, &TMCF_ECN],
    },
];

/// Figs 5 and 6 share their fabric and schemes.
const PEEL_FAT_TREE_READINGS: &[&Reading] = &[
    &PEEL_ORCA,
    &PEEL_ORCA_HEADER,
    &PEEL_SETUP,
    &PEEL_CORE_COPY,
    &PEEL_COVER,
    &PEEL_NIC_FAT_TREE,
    &PEEL_OVERLAY,
    &PEEL_PLACEMENT,
    &PEEL_LOAD,
    &PEEL_UPWARD,
    &PEEL_DCQCN,
    &PEEL_GUARD,
    &PEEL_PFC,
];

/// Which paper's readings document a preset belongs to: "peel" (PEEL and TMCF,
/// `docs/peel/readings.md`) or "cepheus" (Cepheus and broadcast-select,
/// `docs/cepheus/readings.md`).
pub fn paper_of(preset: &str) -> &'static str {
    if preset.starts_with("peel") || preset.starts_with("tmcf") {
        "peel"
    } else {
        "cepheus"
    }
}

/// The readings documents: the name [`paper_of`] gives, the document's title and the
/// figures it covers.
pub const DOCUMENTS: [(&str, &str, &str); 2] = [
    (
        "cepheus",
        "Cepheus and the broadcast-select paper",
        "the Cepheus (HPCA 2024) and broadcast-select (APSIPA 2019) figures",
    ),
    (
        "peel",
        "PEEL and TMCF",
        "the PEEL (HotNets 2025) and TMCF (poster) figures",
    ),
];

// ---- PEEL (HotNets 2025, §3-§4) and TMCF (poster, §II-III) ----

const PEEL_ORCA: Reading = Reading {
    key: "experiment.orca_agent",
    what: "how Orca runs in the evaluation",
    paper: "§4: \"We model the controller's flow setup delay as a normal distribution (N(10 ms, 5 ms)) [16, 17] for both Orca and PEEL.\" §3.1 (Fig 4): \"It also reduces header size by offloading each ToR's last hop fan-out to a host-side agent\"",
    primary: &["experiment.orca_agent=false"],
    source: "paper: §4 and §3.1 both say how Orca is modelled, by its controller's set-up delay; the agent appears only in §3.1's description of Orca's design",
    alternatives: &[Alternative {
        value: "host-side agents relay each rack's fan-out (rocast's earlier model: a member's NIC re-sends every copy for its rack-mates)",
        sets: &["experiment.orca_agent=true"],
        ruled_out: "§4: \"We model the controller's flow setup delay …\": the model the paper states is the delay, not a relay through hosts",
    }],
};

const PEEL_ORCA_HEADER: Reading = Reading {
    key: "experiment.orca_fpr",
    what: "Orca's Bloom-filter header",
    paper: "§3.1: Orca \"relies on an SDN controller to push per-tree blacklist rules that mask Bloom-filter false positives\"; the false-positive ratio is not stated",
    primary: &["experiment.orca_fpr (default 0.01)"],
    source: "consistency: the smallest of Fig 3's false-positive ratios (1%), the cheapest header of the three it plots",
    alternatives: &[Alternative {
        value: "no header (the controller's tree only)",
        sets: &["experiment.orca_fpr=1.0"],
        ruled_out: "§3.1: Orca's packets carry a Bloom filter (its blacklist rules mask the filter's false positives)",
    }],
};

const PEEL_SETUP: Reading = Reading {
    key: "experiment.setup_ms, experiment.setup_sd_ms",
    what: "the controller's set-up delay (Orca, and PEEL's programmable cores)",
    paper: "§4: \"N(10 ms, 5 ms) [16, 17] for both Orca and PEEL\"",
    primary: &["experiment.setup_ms=10.0", "experiment.setup_sd_ms=5.0"],
    source: "paper",
    alternatives: &[Alternative {
        value: "N(50, 25) ms (§5: \"flow setup delays can be as high as 50ms\")",
        sets: &["experiment.setup_ms=50", "experiment.setup_sd_ms=25"],
        ruled_out: "§4 states N(10 ms, 5 ms) for the evaluation; 50 ms is §5's worst case",
    }],
};

const PEEL_CORE_COPY: Reading = Reading {
    key: "experiment.core_copy",
    what: "what PEEL+cores' source sends once the cores hold the group's rule",
    paper: "§3.3: \"From that moment on, the source transmits a *single* copy of each packet through the core; the programmable core duplicates the packet on the fly, appending the appropriate ⟨prefix, len⟩ tuple before forwarding it to the correct aggregates.\"",
    primary: &["experiment.core_copy=\"single\""],
    source: "paper",
    alternatives: &[Alternative {
        value: "one copy per core for the remote pods, the source pod's prefixes still sent by the source (rocast's earlier reading)",
        sets: &["experiment.core_copy=\"remote-pods\""],
        ruled_out: "§3.3: \"the source transmits a *single* copy of each packet through the core\"",
    }],
};

const PEEL_COVER: Reading = Reading {
    key: "experiment.cover_max",
    what: "which prefixes static PEEL's source sends",
    paper: "§3.2: \"PEEL builds a small trie and selects the outermost complete sub-trees\" … \"The sender emits one packet for each selected prefix.\"",
    primary: &["experiment.cover_max=0"],
    source: "paper: exact covers, one packet per prefix (the literal reading; see \"the paper against itself\" in Fig 5's report)",
    alternatives: &[Alternative {
        value: "one prefix per plane, over-covering (ToRs discard the extra)",
        sets: &["experiment.cover_max=1"],
        ruled_out: "§3.2's example sends two packets (1** and 01*) for six racks rather than one over-covering prefix; over-covering is §3.3's cost of coarse prefixes, not the static scheme's choice",
    }],
};

const PEEL_PLACEMENT: Reading = Reading {
    key: "experiment.job_placement",
    what: "which servers a job's GPUs occupy",
    paper: "§4: \"GPU selections honor job locality [3]\"; §3.2: \"Because AI collectives are bin-packed, i.e., job placements are localized [3], their receivers tend to cluster in a handful of racks within the same pod\"",
    primary: &["experiment.job_placement=\"bin-packed\""],
    source: "paper: the fewest racks, then the fewest pods",
    alternatives: &[
        Alternative {
            value: "consecutive servers from a random one, blind to racks",
            sets: &["experiment.job_placement=\"consecutive\""],
            ruled_out: "§3.2: \"AI collectives are bin-packed\"",
        },
        Alternative {
            value: "bin-packed windows only at power-of-two offsets (a buddy allocator)",
            sets: &["experiment.job_placement=\"aligned\""],
            ruled_out: "not stated; the paper's §3.4 names fragmented placements as an open problem, so it did not assume aligned ones",
        },
    ],
};

const PEEL_LOAD: Reading = Reading {
    key: "experiment.load",
    what: "offered load of the Poisson Broadcasts",
    paper: "§4: \"We set the collective arrival rates in a way that the average network offered load in every scenario is 30%.\"",
    primary: &["experiment.load=0.3"],
    source: "paper",
    alternatives: &[Alternative {
        value: "10% (a low-load row: how near the idle fabric the paper's 2 MB numbers imply)",
        sets: &["experiment.load=0.1"],
        ruled_out: "§4: \"… offered load in every scenario is 30%\"",
    }],
};

const PEEL_UPWARD: Reading = Reading {
    key: "experiment.upward",
    what: "which core a tree's single upward copy climbs to",
    paper: "not stated",
    primary: &["experiment.upward=\"ecmp\""],
    source: "consistency: a Clos fabric spreads flows by ECMP's hash; one salt per job also breaks ties of the layer-peeling greedy on failed fabrics",
    alternatives: &[Alternative {
        value: "every group through the lowest-numbered switches",
        sets: &["experiment.upward=\"lowest\""],
        ruled_out: "not how a datacenter's ECMP places flows; it piles every group onto the same cores",
    }],
};

const PEEL_DCQCN: Reading = Reading {
    key: "nic.dcqcn_preset",
    what: "DCQCN's reaction-point parameters",
    paper: "§4: \"All schemes run atop DCQCN+PFC configured as in prior work: 12MB switch buffers, ECN marks between 5kB and 200kB (1% marking probability), and PFC Stop/Resume at 11% free buffer space with a 5-MTU hysteresis [27, 34]\"",
    primary: &["nic.dcqcn_preset=\"hpcc\""],
    source: "cited tool, not decided by the text: [27] is HPCC, whose ns-3 simulator ships the DCQCN model with these knobs; [34] is the DCQCN paper (its 5-200 KB, 1% marking are the ECN numbers the sentence gives). rocast keeps the simulator's reaction point and runs the DCQCN paper's as the alternative",
    alternatives: &[Alternative {
        value: "the DCQCN paper's reaction point (K = T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mb/s)",
        sets: &["nic.dcqcn_preset=\"paper\""],
        ruled_out: "nothing in the text rules it out: both [27] and [34] are cited for the configuration; see the alternatives' results",
    }],
};

const PEEL_GUARD: Reading = Reading {
    key: "nic.cnp_interval_us, nic.cnp_guard_us",
    what: "how a source reacts to CNPs",
    paper: "§4: \"Multicast makes a single ECN mark fan out into many CNPs, so PEEL replaces DCQCN's receiver-side rate limiter with a sender-side guard timer (one reaction every 50μs).\"",
    primary: &["nic.cnp_interval_us=0", "nic.cnp_guard_us=50"],
    source: "paper: \"replaces\": no receiver-side spacing, a 50 us guard at the sender (every scheme's NICs, as the sentence's \"All schemes run atop DCQCN+PFC\")",
    alternatives: &[Alternative {
        value: "the receivers' 50 us CNP spacing kept beside the guard (rocast's earlier model)",
        sets: &["nic.cnp_interval_us=50"],
        ruled_out: "§4: the guard \"replaces\" the receiver-side limiter",
    }],
};

const PEEL_PFC: Reading = Reading {
    key: "switch.resume_offset_bytes",
    what: "PFC's resume hysteresis",
    paper: "§4: \"PFC Stop/Resume at 11% free buffer space with a 5-MTU hysteresis\"",
    primary: &["switch.resume_offset_bytes=20480"],
    source: "paper: 5 MTUs of 4096 B; the pause threshold stays rocast's buffer/8 (12.5% free, the ns-3 model's shift), 1.5 points from the paper's 11%",
    alternatives: &[Alternative {
        value: "3 KB (rocast's earlier default)",
        sets: &["switch.resume_offset_bytes=3072"],
        ruled_out: "§4: \"a 5-MTU hysteresis\"",
    }],
};

const PEEL_NIC_FAT_TREE: Reading = Reading {
    key: "experiment.nics_per_server",
    what: "RDMA NICs per server on Figs 4-6's fat-tree",
    paper: "§4: \"We simulate an 8-ary fat-tree with 4 servers per ToR; each server hosts 8 GPUs attached to a dedicated NIC\"",
    primary: &["experiment.nics_per_server=1"],
    source: "paper: an 8-ary fat-tree's ToR has 4 host ports and the sentence puts 4 servers on it, so each server has one NIC (the GPUs reach each other over NVLink/NVSwitch)",
    alternatives: &[],
};

const PEEL_OVERLAY: Reading = Reading {
    key: "experiment.chunks, experiment.tree_algorithm",
    what: "how Ring and Binary Tree run",
    paper: "§4: \"When distributing data among nodes using Ring or Binary Tree topologies—similar to existing libraries such as NCCL [4]—we divide messages into chunks to enable pipelined forwarding … each message is divided into eight chunks.\" ([3] is NCCL's \"Double Binary Tree Documentation\".)",
    primary: &["experiment.chunks=8", "experiment.tree_algorithm=\"double\""],
    source: "paper for the chunks; NCCL for the rest: its rings are topology-aware (one network hop per server, the GPUs of a server chained over NVLink), which is rocast's ring over servers plus the NVLink hops; its tree is the double binary tree (two complementary binary trees, each rank interior in at most one, the blocks alternating between them)",
    alternatives: &[Alternative {
        value: "one pipelined binary tree (rank v's children 2v+1 and 2v+2; interior ranks forward every block twice; rocast's earlier model)",
        sets: &["experiment.tree_algorithm=\"single\""],
        ruled_out: "§4: \"similar to existing libraries such as NCCL\": NCCL's tree is the double binary tree ([3])",
    }],
};

const PEEL_FIG7_NICS: Reading = Reading {
    key: "experiment.nics_per_server, topology.hosts_per_leaf",
    what: "NICs per server on Fig 7's leaf-spine",
    paper: "§4: \"a two-tier leaf–spine with 16 spines, 48 leafs, two servers per leaf, and eight GPUs per server; every NIC and link runs at 100 Gbps [14]\"",
    primary: &["experiment.nics_per_server=8", "topology.hosts_per_leaf=16"],
    source: "cited paper: [14] (Gangidi et al., RDMA over Ethernet for Distributed Training at Meta Scale) builds training servers with one RDMA NIC per GPU, so a leaf has 16 NICs against 16 spine uplinks (1:1); every scheme then runs one channel per NIC as NCCL spreads channels over a server's NICs",
    alternatives: &[Alternative {
        value: "one NIC per server (rocast's earlier model: 2 NICs per leaf against 16 uplinks, 8:1 headroom)",
        sets: &["experiment.nics_per_server=1", "topology.hosts_per_leaf=2"],
        ruled_out: "[14]: one NIC per GPU, and \"every NIC … runs at 100 Gbps\" speaks of the servers' NICs in the plural",
    }],
};

const PEEL_FIG7_REPEAT: Reading = Reading {
    key: "experiment.concurrent_jobs, experiment.instances",
    what: "how many Broadcasts share a trial's failed fabric, and how many trials",
    paper: "§4: \"A 64-GPU Broadcast of 8 MB messages is repeated while 1–10% of spine–to-leaf links are randomly failed.\"",
    primary: &["experiment.concurrent_jobs=1", "experiment.instances=100"],
    source: "paper: one Broadcast at a time, repeated; 100 trials per rate so that p99 is a percentile of 100 CCTs, not a maximum",
    alternatives: &[Alternative {
        value: "8 Broadcasts sharing each trial's fabric at Fig 5's 30% load (rocast's earlier model)",
        sets: &["experiment.concurrent_jobs=8", "experiment.instances=25"],
        ruled_out: "§4: \"A 64-GPU Broadcast … is repeated\": one at a time",
    }],
};

const TMCF_SLOT: Reading = Reading {
    key: "switch.cnp_window_us",
    what: "TMCF's time slot",
    paper: "Table I: slot 50 us",
    primary: &["switch.cnp_window_us=50"],
    source: "paper",
    alternatives: &[],
};

const TMCF_RULE: Reading = Reading {
    key: "experiment.cnp_policies",
    what: "which CNPs a branching switch forwards under TMCF",
    paper: "§II: \"A switch selects the interface with the largest number of CNPs as the worst congested interface and forwards all CNPs from this selected interface in the next time slot. In Figure 1, CNPs from the selected interface, IF_A, in time slot T1 are forwarded to the sender in time slot T2.\"",
    primary: &["experiment.cnp_policies (tmcf: the previous slot's busiest interface has its CNPs of the current slot forwarded on arrival)"],
    source: "paper, its rule's sentence (\"forwards all CNPs from this selected interface in the next time slot\"); tmcf-damped is rocast's own policy (a margin before the choice moves), not the poster's, and is reported as such",
    alternatives: &[Alternative {
        value: "a buffered release: the switch holds slot T1's CNPs and sends the busiest interface's toward the source in T2, each one slot after it came (the tmcf-buffered column of the same report)",
        sets: &[],
        ruled_out: "the rule's sentence forwards the selected interface's CNPs of the next slot; Fig 1's caption-like sentence alone would also fit a release of T1's CNPs in T2, so both run side by side",
    }],
};

const TMCF_ECN: Reading = Reading {
    key: "switch.kmin_kb, switch.kmax_kb, switch.pmax",
    what: "ECN marking",
    paper: "Table I: Kmin 50 KB, Kmax 200 KB, Pmax 0.01",
    primary: &[
        "switch.kmin_kb=50.0",
        "switch.kmax_kb=200.0",
        "switch.pmax=0.01",
    ],
    source: "paper",
    alternatives: &[],
};

/// The readings of the preset named `preset`.
pub fn by_preset(preset: &str) -> Option<&'static PresetReadings> {
    PRESETS.iter().find(|p| p.preset == preset)
}

/// The readings of the preset whose scenario `name` starts with `preset:`.
pub fn for_scenario(name: &str) -> Option<&'static PresetReadings> {
    PRESETS
        .iter()
        .find(|p| name.split(':').next().map(str::trim) == Some(p.preset))
}

impl PresetReadings {
    /// The scenario keys its readings set.
    fn keys(&self) -> Vec<&'static str> {
        let mut k = Vec::new();
        for r in self.readings {
            for kv in r
                .primary
                .iter()
                .chain(r.alternatives.iter().flat_map(|a| a.sets.iter()))
            {
                if let Some((key, _)) = kv.split_once('=') {
                    if key.contains('.') && !key.contains(' ') && !k.contains(&key) {
                        k.push(key);
                    }
                }
            }
        }
        k
    }

    /// The `--set`s among `overrides` that replace one of these readings: the run is
    /// then not under the primary readings.
    pub fn replaced<'a>(&self, overrides: &'a [String]) -> Vec<&'a str> {
        let keys = self.keys();
        overrides
            .iter()
            .filter(|s| {
                s.split_once('=')
                    .is_some_and(|(k, _)| keys.contains(&reading_key(k.trim()).as_str()))
            })
            .map(String::as_str)
            .collect()
    }
}

/// How a reading names a `--set` key: `experiment.NAME.KEY` is `experiment.KEY` (the
/// running experiment's table, as `--set` takes it on every preset).
fn reading_key(key: &str) -> String {
    match key.split('.').collect::<Vec<_>>().as_slice() {
        ["experiment", _, field] => format!("experiment.{field}"),
        _ => key.to_string(),
    }
}

/// A preset's readings as the report prints them: a block per reading.
pub fn table(p: &PresetReadings) -> String {
    let mut t = format!(
        "\nreadings ({}; rocast sim --preset {} --set KEY=VALUE runs an alternative):\n",
        p.figure, p.preset
    );
    for r in p.readings {
        let _ = writeln!(t, "  {}  [{}]", r.primary.join(", "), r.what);
        let _ = writeln!(t, "      paper: {}", r.paper);
        let _ = writeln!(t, "      source: {}", r.source);
        for a in r.alternatives {
            let _ = writeln!(
                t,
                "      alternative: {}{}; ruled out: {}",
                a.value,
                a.sets_text(false),
                a.ruled_out
            );
        }
    }
    t
}

/// The table of `paper`'s presets ([`paper_of`]) as Markdown
/// (`docs/<paper>/readings.md`).
pub fn markdown(paper: &str) -> String {
    let mut t = String::new();
    for p in PRESETS.iter().filter(|p| paper_of(p.preset) == paper) {
        let _ = writeln!(t, "\n## {} (`{}`)\n", p.figure, p.preset);
        let _ = writeln!(
            t,
            "| key | primary | the paper | decided by | alternatives (and what rules each out) |"
        );
        let _ = writeln!(t, "|---|---|---|---|---|");
        for r in p.readings {
            let alts: Vec<String> = r
                .alternatives
                .iter()
                .map(|a| format!("{}{}: {}", a.value, a.sets_text(true), a.ruled_out))
                .collect();
            let _ = writeln!(
                t,
                "| `{}` | `{}` | {} | {} | {} |",
                r.key,
                r.primary.join("`, `"),
                r.paper.replace('|', "/"),
                r.source.replace('|', "/"),
                if alts.is_empty() {
                    "-".to_string()
                } else {
                    alts.join("<br>").replace('|', "/")
                }
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value a dotted key has in a preset after parsing (so TOML layout does not
    /// matter), as TOML text.
    fn preset_value(preset: &str, key: &str) -> Option<String> {
        let text = crate::experiments::preset_toml(preset)?;
        let mut section = String::new();
        let mut found = None;
        for line in text.lines() {
            let l = line.split('#').next().unwrap_or("").trim();
            if l.starts_with('[') {
                section = l.trim_matches(|c| c == '[' || c == ']').to_string();
                continue;
            }
            if let Some((k, v)) = l.split_once('=') {
                let full = if section.is_empty() {
                    k.trim().to_string()
                } else {
                    format!("{section}.{}", k.trim())
                };
                if reading_key(&full) == key {
                    found = Some(v.trim().to_string());
                }
            }
        }
        found
    }

    /// Every primary `key=value` of a preset's readings is what the preset's TOML sets:
    /// a change of a reading must change both, deliberately.
    #[test]
    fn every_primary_reading_is_pinned_in_its_preset() {
        let mut checked = 0;
        for p in PRESETS {
            crate::experiments::scenario(p.preset, &[])
                .unwrap_or_else(|e| panic!("{}: {e}", p.preset));
            for r in p.readings {
                for kv in r.primary {
                    let Some((k, v)) = kv.split_once('=') else {
                        continue;
                    };
                    if k.contains(' ') || !k.contains('.') {
                        // Not a scenario key (the verdict windows).
                        continue;
                    }
                    if k.starts_with("topology.kind") || k.starts_with("topology.hosts") {
                        // The testbed's one switch: checked through the parsed scenario below.
                        continue;
                    }
                    let v = v.split(" (").next().unwrap_or(v).trim();
                    assert_eq!(
                        preset_value(p.preset, k).as_deref(),
                        Some(v),
                        "{}: reading {k} says {v}",
                        p.preset
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 40, "only {checked} primaries checked");
        let tb = crate::experiments::scenario("cepheus-testbed", &[]).unwrap();
        assert_eq!(
            (tb.topology.kind.as_str(), tb.topology.hosts_per_leaf),
            ("leaf-spine", 4)
        );
    }

    /// Every alternative's `--set`s parse on its preset and pass its experiment's check,
    /// so `rocast sim --preset P --set …` runs it.
    #[test]
    fn every_alternative_runs_on_its_preset() {
        for p in PRESETS {
            for r in p.readings {
                for a in r.alternatives {
                    let sets: Vec<String> = a.sets.iter().map(|s| s.to_string()).collect();
                    let sc = crate::experiments::scenario(p.preset, &sets)
                        .unwrap_or_else(|e| panic!("{} {:?}: {e}", p.preset, a.sets));
                    // The experiment's own keys are its check's.
                    let registry = crate::experiments::registry();
                    if let Some(e) = sc.experiment_name().and_then(|n| registry.experiment(n)) {
                        e.check(&sc)
                            .unwrap_or_else(|e| panic!("{} {:?}: {e}", p.preset, a.sets));
                    }
                }
            }
        }
    }

    #[test]
    fn overrides_of_a_reading_are_named_and_others_are_not() {
        let p = for_scenario("cepheus-fig12: x").unwrap();
        let sets = vec![
            "multicast.sizes=\"64\"".to_string(),
            "nic.mtu=4096".to_string(),
            "topology.k=16".to_string(),
            "seed=3".to_string(),
        ];
        assert_eq!(p.replaced(&sets), vec!["nic.mtu=4096", "topology.k=16"]);
        assert_eq!(
            reading_key("experiment.peel-fig6.orca_agent"),
            "experiment.orca_agent"
        );
        assert_eq!(reading_key("multicast.orca_agent"), "multicast.orca_agent");
        assert!(p.replaced(&sets[..1]).is_empty());
    }

    #[test]
    fn scenarios_find_their_readings() {
        assert_eq!(
            for_scenario("cepheus-fig12: a fabric").map(|p| p.preset),
            Some("cepheus-fig12")
        );
        assert!(for_scenario("default").is_none());
        let md = markdown("cepheus");
        assert!(md.contains("ConnectX-5") && md.contains("| `experiment.loss_at` |"));
        assert!(!md.contains("## PEEL"));
        for p in PRESETS {
            let paper = paper_of(p.preset);
            assert!(
                DOCUMENTS.iter().any(|d| d.0 == paper),
                "{}: {paper}",
                p.preset
            );
        }
        let peel = markdown("peel");
        assert!(peel.contains("| `experiment.core_copy` |") && peel.contains("TMCF"));
        assert!(!peel.contains("ConnectX-5"));
    }
}
