//! The two-tier PEEL fabric (PEEL §3.2), described once for the two places rocast
//! builds it: the namespace lab (`rocast lab up --tors N`, one `rocast switch` daemon
//! per switch, `rocast_net::lab`) and the simulator's byte-level fabric
//! (`rocast_sim::frames`). Both take their switches from [`TwoTierFabric::switches`],
//! so the lab and the simulator run the same [`FrameSwitch`] configuration by
//! construction, and the source's PEEL headers from [`TwoTierFabric::source_headers`].
//!
//! The shape: `tors` rack switches (ToRs) under one aggregation switch, `hosts /
//! tors` hosts per rack, host `i` under ToR `i / per` on its port `i % per`; the
//! ToR's port `per` is its uplink; the aggregation switch's port `t` goes to ToR `t`,
//! and rack id `t` is ToR `t` (one pod, one plane). The aggregation switch holds the
//! k − 1 static prefix rules of its racks; each ToR holds its hosts and, per group,
//! its member ports (what IGMP snooping keeps on a commodity ToR). The aggregation
//! switch pins every host behind its ToR's port; a ToR pins its own hosts and learns
//! the rest (layer 2, toward the uplink).
//!
//! Host `i` has address `subnet.(i+1)` and MAC `02:72:63:00:00:(i+1)`.
//!
//! Memory: per switch its [`FrameSwitch`] (see there); the description itself holds
//! one entry per group member.

use super::frame::{FrameSwitch, FrameSwitchConfig, FrameSwitchError};
use crate::fabric::cepheus::{CnpFilterError, CnpFilterPolicy};
use crate::fabric::peel::{PeelRole, PrefixRules};
use crate::plan::prefix::{exact_cover, id_bits};
use crate::wire::peel::PeelHeader;
use crate::wire::{EthernetAddress, Ipv4Address};

/// What one switch of the fabric is set up with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchSetup {
    /// `agg`, `tor0`, `tor1`, …: the lab's daemon names.
    pub name: String,
    pub ports: u16,
    /// Pinned hosts: (IP, port, MAC).
    pub hosts: Vec<(Ipv4Address, u16, EthernetAddress)>,
    /// Ports toward other switches ([`FrameSwitchConfig::switch_ports`]): every port
    /// of the aggregation switch, a ToR's uplink. A Cepheus group's tree crosses them
    /// as switch hops.
    pub switch_ports: Vec<u16>,
    pub role: SetupRole,
}

/// A switch's PEEL role, in the terms its configuration is given in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupRole {
    /// The aggregation switch: rack id `i` is behind port `racks[i]`.
    Prefix { racks: Vec<u16> },
    /// A ToR: its uplink, and per group its member ports.
    Rack {
        uplink: u16,
        members: Vec<(Ipv4Address, Vec<u16>)>,
    },
}

impl SwitchSetup {
    /// The PEEL role [`FrameSwitch`] runs.
    pub fn peel_role(&self) -> PeelRole {
        match &self.role {
            SetupRole::Prefix { racks } => PeelRole::Prefix {
                pod: 0,
                plane: 0,
                rules: PrefixRules::for_racks(racks),
            },
            SetupRole::Rack { uplink, .. } => PeelRole::Rack {
                uplinks: vec![*uplink],
            },
        }
    }

    /// The switch, as `rocast switch` builds it from the same setup with its default
    /// options ([`FrameSwitchConfig::new`], the Cepheus CNP filter with its default
    /// window).
    pub fn frame_switch(&self) -> Result<FrameSwitch, TwoTierError> {
        let mut cfg = FrameSwitchConfig::new(self.ports);
        cfg.peel = Some(self.peel_role());
        cfg.switch_ports = self.switch_ports.clone();
        let cnp = CnpFilterPolicy::from_name(
            super::frame::DEFAULT_CNP_FILTER,
            crate::time::Duration::from_us(super::frame::DEFAULT_CNP_WINDOW_US),
        )?;
        let mut sw = FrameSwitch::new(cfg, cnp.build());
        for &(ip, port, mac) in &self.hosts {
            sw.add_host(ip, port, mac)?;
        }
        if let SetupRole::Rack { members, .. } = &self.role {
            for (g, ports) in members {
                for &p in ports {
                    sw.add_peel_member(*g, p)?;
                }
            }
        }
        Ok(sw)
    }
}

/// A fabric [`TwoTierFabric::new`] cannot build, or a switch of it that does not
/// configure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TwoTierError {
    #[error(
        "a two-tier fabric needs 2 or more ToRs dividing the hosts ({hosts} hosts, {tors} ToRs)"
    )]
    UnevenRacks { hosts: usize, tors: usize },
    #[error("{hosts} hosts: at most 254 in one /24")]
    TooManyHosts { hosts: usize },
    #[error("{0} is not an IPv4 multicast group")]
    NotMulticast(Ipv4Address),
    #[error("group {group}: no host {host}")]
    NoSuchMember { group: Ipv4Address, host: usize },
    #[error(transparent)]
    Switch(#[from] FrameSwitchError),
    #[error(transparent)]
    CnpFilter(#[from] CnpFilterError),
}

/// The fabric (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TwoTierFabric {
    hosts: usize,
    tors: usize,
    subnet: [u8; 3],
    groups: Vec<(Ipv4Address, Vec<usize>)>,
}

impl TwoTierFabric {
    /// `hosts` split evenly under `tors` ≥ 2 ToRs; per multicast group its member
    /// hosts.
    pub fn new(
        hosts: usize,
        tors: usize,
        subnet: [u8; 3],
        groups: Vec<(Ipv4Address, Vec<usize>)>,
    ) -> Result<Self, TwoTierError> {
        if tors < 2 || hosts == 0 || !hosts.is_multiple_of(tors) {
            return Err(TwoTierError::UnevenRacks { hosts, tors });
        }
        if hosts > 254 || tors > u16::MAX as usize {
            return Err(TwoTierError::TooManyHosts { hosts });
        }
        for (g, members) in &groups {
            if !g.is_multicast() {
                return Err(TwoTierError::NotMulticast(*g));
            }
            if let Some(&h) = members.iter().find(|&&h| h >= hosts) {
                return Err(TwoTierError::NoSuchMember { group: *g, host: h });
            }
        }
        Ok(TwoTierFabric {
            hosts,
            tors,
            subnet,
            groups,
        })
    }

    pub fn hosts(&self) -> usize {
        self.hosts
    }
    pub fn tors(&self) -> usize {
        self.tors
    }
    /// Hosts per rack.
    pub fn per_rack(&self) -> usize {
        self.hosts / self.tors
    }

    pub fn host_ip(&self, i: usize) -> Ipv4Address {
        let [a, b, c] = self.subnet;
        Ipv4Address::new(a, b, c, (i + 1) as u8)
    }

    pub fn host_mac(i: usize) -> EthernetAddress {
        EthernetAddress([0x02, 0x72, 0x63, 0, 0, (i + 1) as u8])
    }

    /// Host `i`'s ToR and its port there.
    pub fn rack_of(&self, i: usize) -> (usize, u16) {
        (i / self.per_rack(), (i % self.per_rack()) as u16)
    }

    /// The aggregation switch first, then ToR 0, 1, ….
    pub fn switches(&self) -> Vec<SwitchSetup> {
        let per = self.per_rack();
        let mut v = vec![SwitchSetup {
            name: "agg".into(),
            ports: self.tors as u16,
            hosts: (0..self.hosts)
                .map(|i| (self.host_ip(i), (i / per) as u16, Self::host_mac(i)))
                .collect(),
            switch_ports: (0..self.tors as u16).collect(),
            role: SetupRole::Prefix {
                racks: (0..self.tors as u16).collect(),
            },
        }];
        for t in 0..self.tors {
            let members = self
                .groups
                .iter()
                .filter_map(|(g, m)| {
                    let ports: Vec<u16> = m
                        .iter()
                        .filter(|&&i| i / per == t)
                        .map(|&i| (i % per) as u16)
                        .collect();
                    (!ports.is_empty()).then_some((*g, ports))
                })
                .collect();
            v.push(SwitchSetup {
                name: format!("tor{t}"),
                ports: per as u16 + 1,
                hosts: (t * per..(t + 1) * per)
                    .map(|i| (self.host_ip(i), (i % per) as u16, Self::host_mac(i)))
                    .collect(),
                switch_ports: vec![per as u16],
                role: SetupRole::Rack {
                    uplink: per as u16,
                    members,
                },
            });
        }
        v
    }

    /// The PEEL headers `source` sends every packet to `members` with: the exact
    /// cover of the members' racks other than its own (ids `⌈log2 tors⌉` bits). The
    /// first carries `SOURCE_RACK` when the source's rack has members (its ToR serves
    /// them on the way up); when only the source's rack has members, one copy with the
    /// rack's own full-length prefix serves them (the aggregation switch sends it
    /// nowhere: never back down the port it came from).
    pub fn source_headers(&self, source: usize, members: &[usize]) -> Vec<PeelHeader> {
        let per = self.per_rack();
        let own = (source / per) as u32;
        let mut remote: Vec<u32> = members
            .iter()
            .map(|&i| (i / per) as u32)
            .filter(|&r| r != own)
            .collect();
        remote.sort_unstable();
        remote.dedup();
        let bits = id_bits(self.tors as u32);
        let mut v: Vec<PeelHeader> = exact_cover(&remote, self.tors as u32, bits)
            .into_iter()
            .map(|p| PeelHeader {
                flags: 0,
                prefix_len: p.len,
                pod: 0,
                prefix_value: p.value as u16,
                plane: 0,
            })
            .collect();
        let local = members
            .iter()
            .any(|&i| i != source && (i / per) as u32 == own);
        if local {
            if v.is_empty() {
                v.push(PeelHeader {
                    prefix_len: bits,
                    prefix_value: own as u16,
                    ..PeelHeader::default()
                });
            }
            v[0].flags |= PeelHeader::SOURCE_RACK;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fabric() -> TwoTierFabric {
        TwoTierFabric::new(
            6,
            3,
            [10, 77, 0],
            vec![(Ipv4Address::new(239, 77, 0, 1), vec![1, 2, 3, 4, 5])],
        )
        .unwrap()
    }

    #[test]
    fn switches_pin_every_host_and_tors_keep_their_members() {
        let s = fabric().switches();
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].name, "agg");
        assert_eq!(
            s[0].hosts[3],
            (
                Ipv4Address::new(10, 77, 0, 4),
                1,
                TwoTierFabric::host_mac(3)
            )
        );
        assert_eq!(
            s[0].role,
            SetupRole::Prefix {
                racks: vec![0, 1, 2]
            }
        );
        // ToR 1: its hosts 2 and 3 on ports 0 and 1; uplink 2.
        assert_eq!(s[2].ports, 3);
        let tor1: Vec<(Ipv4Address, u16)> = s[2].hosts.iter().map(|h| (h.0, h.1)).collect();
        assert_eq!(
            tor1,
            vec![
                (Ipv4Address::new(10, 77, 0, 3), 0),
                (Ipv4Address::new(10, 77, 0, 4), 1)
            ]
        );
        let g = Ipv4Address::new(239, 77, 0, 1);
        assert_eq!(
            s[1].role,
            SetupRole::Rack {
                uplink: 2,
                members: vec![(g, vec![1])]
            }
        );
        assert_eq!(
            s[3].role,
            SetupRole::Rack {
                uplink: 2,
                members: vec![(g, vec![0, 1])]
            }
        );
        for sw in &s {
            let f = sw.frame_switch().unwrap();
            assert_eq!(f.config().ports, sw.ports);
            assert_eq!(f.hosts().count(), if sw.name == "agg" { 6 } else { 2 });
        }
    }

    #[test]
    fn the_source_covers_the_other_racks_and_serves_its_own_on_the_way_up() {
        let f = fabric();
        let h = f.source_headers(0, &[1, 2, 3, 4, 5]);
        let shown: Vec<(u8, u16, bool)> = h
            .iter()
            .map(|h| {
                (
                    h.prefix_len,
                    h.prefix_value,
                    h.flags & PeelHeader::SOURCE_RACK != 0,
                )
            })
            .collect();
        // Racks 1 (01) and 2 of 3 in 2-bit ids: rack 2 goes as 1* (id 3 names no
        // rack, so the larger block costs nothing); h1 in rack 0 served on the way up.
        assert_eq!(shown, vec![(2, 1, true), (1, 1, false)]);
        // Only the source's rack: one copy of its own prefix, SOURCE_RACK.
        let h = f.source_headers(0, &[1]);
        assert_eq!(h.len(), 1);
        assert_eq!((h[0].prefix_len, h[0].prefix_value), (2, 0));
        assert!(h[0].flags & PeelHeader::SOURCE_RACK != 0);
        // No local member: no SOURCE_RACK.
        assert!(f.source_headers(0, &[2, 3]).iter().all(|h| h.flags == 0));
        let all = |hosts: usize, tors: usize| {
            let f = TwoTierFabric::new(hosts, tors, [10, 0, 0], vec![]).unwrap();
            let v: Vec<usize> = (1..hosts).collect();
            f.source_headers(0, &v)
                .iter()
                .map(|h| {
                    (
                        h.prefix_len,
                        h.prefix_value,
                        h.flags & PeelHeader::SOURCE_RACK != 0,
                    )
                })
                .collect::<Vec<_>>()
        };
        // 2 ToRs × 2: rack 1 = 1*; h1 shares h0's rack.
        assert_eq!(all(4, 2), [(1, 1, true)]);
        // 4 ToRs × 1: racks 1..3 = 01 and 1*; nobody else in h0's rack.
        assert_eq!(all(4, 4), [(2, 1, false), (1, 1, false)]);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert!(TwoTierFabric::new(6, 1, [10, 0, 0], vec![]).is_err());
        assert!(TwoTierFabric::new(7, 3, [10, 0, 0], vec![]).is_err());
        let g = Ipv4Address::new(239, 0, 0, 1);
        assert!(TwoTierFabric::new(6, 3, [10, 0, 0], vec![(g, vec![6])]).is_err());
        let u = Ipv4Address::new(10, 0, 0, 1);
        assert!(TwoTierFabric::new(6, 3, [10, 0, 0], vec![(u, vec![1])]).is_err());
    }
}
