//! Tree multicast in the simulated fabric: how a group's copies find their way, for
//! PEEL's static prefix replication (PEEL §3.2), its programmable-core refinement
//! (§3.3), and per-group tree state (Orca once its controller has installed the
//! rules; the bandwidth-optimal baseline of PEEL §4).
//!
//! A [`GroupForwarding`] turns a group's [`MulticastTree`] and its [`PeelPlan`] into
//! *labels*. Every copy in the fabric carries one label, and a switch reads it in this
//! order ([`PeelFabric::step`], which the engine's `Engine::labelled_receive` calls):
//!
//! 1. **Explicit hops.** The label names this switch: copy out of the listed ports,
//!    each copy with the listed label. These are the source's single-copy upward path
//!    (PEEL: "from the source host up to the spine, only a single packet copy exists";
//!    a source-routed label stack on a real NIC), a programmable core's per-group rule,
//!    and, for per-group trees, every branch point.
//! 2. **Static prefix rule.** The label is a PEEL packet and this switch is its plane:
//!    the core's [`PeelSwitch`] with the prefix role — the engine `rocast switch`
//!    runs — matches the shim's (prefix value, length) against its k − 1 static rules
//!    (`PrefixLayout::rules`, shared by every group) and copies to the block's racks.
//! 3. **Member delivery.** Below the prefix tier (ToR, and a GPU server's NIC) the
//!    `PeelSwitch` with the rack role copies a copy from above toward the group's
//!    members: the per-port membership every commodity ToR keeps by IGMP snooping, and
//!    the NIC's own attachment list ([`PeelFabric::install`] from the group's
//!    `member_ports`).
//! 4. Otherwise the copy reached a rack the cover over-covers: the ToR discards it
//!    and counts it (PEEL §3.3, "redundant packets that the ToRs later discard").
//!
//! Memory: per group, one map entry per (label, switch on its explicit hops), 8 bytes
//! per hop, plus 4 bytes per member port below the prefix tier; a 512-GPU group on
//! the 8-ary fat-tree holds about 3 KB.

use std::collections::{BTreeMap, BTreeSet};

use rocast_core::fabric::peel::{PeelAction, PeelRole, PeelStats, PeelSwitch, PrefixRules};
use rocast_core::plan::multicast_tree::{MulticastTree, TreeArc};
use rocast_core::plan::prefix::{PeelPacket, PeelPlan, PrefixLayout};
use rocast_core::plan::topology::NodeId;
use rocast_core::plan::{NodeRole, Topology};
use rocast_core::wire::peel::PeelHeader;
use rocast_core::wire::Ipv4Address;

/// Why a group's labelled forwarding or the PEEL switches cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreeMulticastError {
    #[error("{0:?}: expected \"single\" or \"remote-pods\"")]
    UnknownCoreCopy(String),
    #[error("link {link} is not at node {node}")]
    LinkNotAtNode { link: u32, node: NodeId },
    #[error("agent {agent} has no port on link {link}")]
    AgentWithoutPort { agent: NodeId, link: u32 },
    #[error("a ToR without a rule")]
    TorWithoutRule,
    #[error("plane {0} is not on the tree")]
    PlaneNotOnTree(NodeId),
    #[error("a core at the source")]
    CoreAtSource,
    #[error("link {link} is not at core {core}")]
    LinkNotAtCore { link: u32, core: NodeId },
    #[error("more than 65,535 pods")]
    TooManyPods,
    #[error("more than 65,535 planes")]
    TooManyPlanes,
    #[error("tree arc {parent}→{child} hangs off no label")]
    ArcWithoutLabel { parent: NodeId, child: NodeId },
    #[error("tree arc {parent}→{child} hangs below a plane outside its prefix")]
    ArcOutsidePrefix { parent: NodeId, child: NodeId },
}

/// Bytes of a Bloom filter holding `n` elements at false-positive ratio `p`
/// (m = −n·ln p / ln²2 bits, rounded up to whole bytes).
pub fn bloom_bytes(n: usize, p: f64) -> u64 {
    bloom_bits(n, p).div_ceil(8)
}

/// Bits of a Bloom filter holding `n` elements at false-positive ratio `p`.
pub fn bloom_bits(n: usize, p: f64) -> u64 {
    (-(n as f64) * p.ln() / std::f64::consts::LN_2.powi(2)).ceil() as u64
}

/// PEEL's shim on the wire.
const PEEL_SHIM: u8 = crate::packet::PEEL_SHIM_LEN as u8;

/// Out of this port, carrying this label.
pub type Hop = (u16, u16);

/// What the source sends once PEEL's programmable cores hold a group's rule (§3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CoreCopy {
    /// "From that moment on, the source transmits a *single* copy of each packet
    /// through the core; the programmable core duplicates the packet on the fly,
    /// appending the appropriate ⟨prefix, len⟩ tuple before forwarding it to the
    /// correct aggregates" (PEEL §3.3): one copy per core the tree turns at, and the
    /// core also sends the source pod's prefixes back down to its plane.
    Single,
    /// rocast's earlier reading: one copy per core for the remote pods, while the
    /// source pod's prefixes stay separate copies from the source.
    RemotePods,
}

impl CoreCopy {
    pub fn parse(s: &str) -> Result<Self, TreeMulticastError> {
        match s {
            "single" => Ok(CoreCopy::Single),
            "remote-pods" => Ok(CoreCopy::RemotePods),
            _ => Err(TreeMulticastError::UnknownCoreCopy(s.to_string())),
        }
    }
}

/// One label: what a copy carrying it does at the switches it names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Label {
    /// The PEEL packet (prefix, plane) the copy carries in its shim, if any.
    pub peel: Option<PeelPacket>,
    pub hops: BTreeMap<NodeId, Vec<Hop>>,
    /// Header bytes a copy with this label carries on the wire (PEEL's shim, Orca's
    /// Bloom filter).
    pub header: u8,
}

/// A group's forwarding: its labels, which the source emits, and member ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupForwarding {
    pub labels: Vec<Label>,
    /// Labels of one first transmission with static state only.
    pub static_send: Vec<u16>,
    /// Labels of one first transmission once the programmable cores hold the group's
    /// rule (empty: no core refinement for this group).
    pub core_send: Vec<u16>,
    /// Switches below the prefix tier on the tree: their ports toward members.
    pub member_ports: BTreeMap<NodeId, Vec<u16>>,
}

fn tier(topo: &Topology, n: NodeId) -> Option<u8> {
    match topo.roles[n as usize] {
        NodeRole::Switch { tier } => Some(tier),
        NodeRole::Host => None,
    }
}

fn port(topo: &Topology, a: &TreeArc) -> Result<u16, TreeMulticastError> {
    topo.port_of(a.parent, a.link)
        .ok_or(TreeMulticastError::LinkNotAtNode {
            link: a.link,
            node: a.parent,
        })
}

impl GroupForwarding {
    /// Per-group state on every switch of `tree`: one label, the whole tree.
    pub fn group_tree(topo: &Topology, tree: &MulticastTree) -> Result<Self, TreeMulticastError> {
        let mut hops: BTreeMap<NodeId, Vec<Hop>> = BTreeMap::new();
        for a in &tree.arcs {
            hops.entry(a.parent).or_default().push((port(topo, a)?, 0));
        }
        Ok(GroupForwarding {
            labels: vec![Label {
                peel: None,
                hops,
                header: 0,
            }],
            static_send: vec![0],
            core_send: Vec::new(),
            member_ports: BTreeMap::new(),
        })
    }

    /// Orca (Diab, Yassini and Hefeeda, NSDI '22, as PEEL §2 describes it): the
    /// controller's per-group rules on the tree's switches, a Bloom-filter header of
    /// `header` bytes on every copy in the fabric, and each rack's last-hop fan-out
    /// offloaded to a host-side agent. With `agent`, a ToR with several members below
    /// sends one copy to the rack's agent (its lowest-numbered member), and the agent's
    /// NIC sends one unicast copy per other member back through the ToR; without, the ToR
    /// copies to every member (the controller-only model, for the ablation).
    pub fn orca(
        topo: &Topology,
        tree: &MulticastTree,
        header: u8,
        agent: bool,
    ) -> Result<Self, TreeMulticastError> {
        let mut f = Self::group_tree(topo, tree)?;
        f.labels[0].header = header;
        if !agent {
            return Ok(f);
        }
        // Member hosts per ToR, lowest first (arcs are sorted).
        let mut racks: BTreeMap<NodeId, Vec<&TreeArc>> = BTreeMap::new();
        for a in &tree.arcs {
            if topo.is_host(a.child) && !topo.is_host(a.parent) {
                racks.entry(a.parent).or_default().push(a);
            }
        }
        for (tor, members) in racks {
            let [first, others @ ..] = members.as_slice() else {
                continue;
            };
            if others.is_empty() {
                continue;
            }
            // Labels: one to the agent, then one per other member, each a unicast
            // the ToR forwards to that member alone (the ToR holds no fan-out).
            let to_agent = f.labels.len() as u16;
            let agent_port = topo.port_of(first.child, first.link).ok_or(
                TreeMulticastError::AgentWithoutPort {
                    agent: first.child,
                    link: first.link,
                },
            )?;
            let mut relay = Vec::with_capacity(others.len());
            let mut unicasts = Vec::with_capacity(others.len());
            let mut drop = Vec::with_capacity(others.len());
            for (n, a) in others.iter().enumerate() {
                let l = to_agent + 1 + n as u16;
                let p = port(topo, a)?;
                relay.push((agent_port, l));
                drop.push(p);
                unicasts.push(Label {
                    peel: None,
                    hops: BTreeMap::from([(tor, vec![(p, l)])]),
                    header,
                });
            }
            // The ToR's own rule now reaches only the agent.
            let keep = port(topo, first)?;
            let hops = f.labels[0]
                .hops
                .get_mut(&tor)
                .ok_or(TreeMulticastError::TorWithoutRule)?;
            hops.retain(|h| !drop.contains(&h.0));
            for h in hops.iter_mut().filter(|h| h.0 == keep) {
                h.1 = to_agent;
            }
            f.labels.push(Label {
                peel: None,
                hops: BTreeMap::from([(first.child, relay)]),
                header,
            });
            f.labels.extend(unicasts);
        }
        Ok(f)
    }

    /// PEEL: one label per packet of `plan`, climbing the tree's path to its plane;
    /// with `programmable_core`, also the labels of §3.3's refinement (one copy per
    /// core the tree turns at, which sends one copy per packet down to the planes; with
    /// [`CoreCopy::Single`] the source pod's packets ride the core copy too).
    pub fn peel(
        topo: &Topology,
        layout: &PrefixLayout,
        tree: &MulticastTree,
        plan: &PeelPlan,
        programmable_core: Option<CoreCopy>,
    ) -> Result<Self, TreeMulticastError> {
        if plan.packets.is_empty() {
            // Every member is in the source's own rack: the ToR's membership does it.
            return Self::group_tree(topo, tree);
        }
        let parents = tree.parents();
        let plane_tier = layout.rack_tier + 1;
        // Racks a plane serves, and every node below them: reached through rules 2–3.
        let served: BTreeSet<NodeId> = tree
            .arcs
            .iter()
            .filter(|a| tier(topo, a.parent) == Some(plane_tier) && layout.rack(a.child).is_some())
            .map(|a| a.child)
            .collect();
        let below_served = |mut n: NodeId| loop {
            if served.contains(&n) {
                return true;
            }
            match parents.get(&n) {
                Some(&(p, _)) => n = p,
                None => return false,
            }
        };
        let mut member_ports: BTreeMap<NodeId, Vec<u16>> = BTreeMap::new();
        let mut explicit: Vec<&TreeArc> = Vec::new();
        for a in &tree.arcs {
            if below_served(a.parent) {
                member_ports
                    .entry(a.parent)
                    .or_default()
                    .push(port(topo, a)?);
            } else if !served.contains(&a.child) {
                explicit.push(a);
            }
        }
        let path = |to: NodeId| -> Result<Vec<TreeArc>, TreeMulticastError> {
            tree.path_to(to)
                .ok_or(TreeMulticastError::PlaneNotOnTree(to))
        };
        let mut f = GroupForwarding {
            member_ports,
            ..Default::default()
        };
        // Static labels: one per packet, its path to the plane.
        let mut on_path: BTreeSet<(NodeId, NodeId)> = BTreeSet::new();
        for (j, p) in plan.packets.iter().enumerate() {
            let mut hops: BTreeMap<NodeId, Vec<Hop>> = BTreeMap::new();
            for a in path(p.plane)? {
                hops.entry(a.parent)
                    .or_default()
                    .push((port(topo, &a)?, j as u16));
                on_path.insert((a.parent, a.child));
            }
            f.labels.push(Label {
                peel: Some(*p),
                hops,
                header: PEEL_SHIM,
            });
        }
        f.static_send = (0..plan.packets.len() as u16).collect();
        let local: Vec<&TreeArc> = explicit
            .iter()
            .copied()
            .filter(|a| !on_path.contains(&(a.parent, a.child)))
            .collect();
        assign_local(
            topo,
            &parents,
            &local,
            &mut f.labels,
            &f.static_send.clone(),
        )?;
        let Some(core_copy) = programmable_core else {
            return Ok(f);
        };
        // §3.3: the cores hold a per-group rule. A packet whose path turns down at a
        // switch above the prefix tier is sent once per such core, and the core makes
        // one copy per packet, each carrying that packet's prefix.
        let mut core_label: BTreeMap<NodeId, u16> = BTreeMap::new();
        let mut direct: Vec<u16> = Vec::new();
        for (j, p) in plan.packets.iter().enumerate() {
            // A fresh copy of packet j's label without local deliveries, for use below
            // a core.
            let mut below: BTreeMap<NodeId, Vec<Hop>> = BTreeMap::new();
            let arcs = path(p.plane)?;
            let turn = arcs
                .iter()
                .rposition(|a| tier(topo, a.parent).is_some_and(|t| t > plane_tier));
            let Some(turn) = turn else {
                direct.push(j as u16);
                continue;
            };
            let core = arcs[turn].parent;
            let down_label = f.labels.len() as u16;
            for a in &arcs[turn + 1..] {
                below
                    .entry(a.parent)
                    .or_default()
                    .push((port(topo, a)?, down_label));
            }
            f.labels.push(Label {
                peel: Some(*p),
                hops: below,
                header: PEEL_SHIM,
            });
            let next = f.labels.len() as u16;
            let cl = *core_label.entry(core).or_insert_with(|| {
                f.labels.push(Label::default());
                next
            });
            let up = &mut f.labels[cl as usize].hops;
            for a in &arcs[..turn] {
                let h = (port(topo, a)?, cl);
                let v = up.entry(a.parent).or_default();
                if !v.contains(&h) {
                    v.push(h);
                }
            }
            up.entry(core)
                .or_default()
                .push((port(topo, &arcs[turn])?, down_label));
        }
        if core_label.is_empty() {
            return Ok(f); // no packet crosses a core: nothing to refine
        }
        if core_copy == CoreCopy::Single {
            // The source pod's packets ride the first core's copy: that core sends each
            // back down the link the copy climbed, to the packet's plane, which applies
            // its static prefix rule as before.
            let (&core, &cl) = core_label.iter().next().expect("not empty");
            let climb = path(core)?;
            let top = climb.last().ok_or(TreeMulticastError::CoreAtSource)?;
            let core_port =
                topo.port_of(core, top.link)
                    .ok_or(TreeMulticastError::LinkNotAtCore {
                        link: top.link,
                        core,
                    })?;
            let mut kept = Vec::new();
            for j in direct {
                let p = plan.packets[j as usize];
                if p.plane != top.parent {
                    kept.push(j); // the plane is not under this core's climb
                    continue;
                }
                let down = f.labels.len() as u16;
                f.labels.push(Label {
                    peel: Some(p),
                    hops: BTreeMap::new(),
                    header: PEEL_SHIM,
                });
                f.labels[cl as usize]
                    .hops
                    .entry(core)
                    .or_default()
                    .push((core_port, down));
            }
            direct = kept;
        }
        // Direct packets keep their own labels but need fresh copies: the local
        // deliveries are re-assigned among this mode's labels.
        let mut send: Vec<u16> = core_label.values().copied().collect();
        for j in direct {
            let mut l = f.labels[j as usize].clone();
            let me = f.labels.len() as u16;
            l.hops = path(plan.packets[j as usize].plane)?
                .iter()
                .map(|a| Ok((a.parent, vec![(port(topo, a)?, me)])))
                .collect::<Result<_, TreeMulticastError>>()?;
            f.labels.push(l);
            send.push(me);
        }
        assign_local(topo, &parents, &local, &mut f.labels, &send)?;
        f.core_send = send;
        Ok(f)
    }

    /// Header bytes a copy carrying `label` occupies on the wire (0 for no label).
    pub fn header(&self, label: u16) -> u8 {
        self.labels.get(label as usize).map_or(0, |l| l.header)
    }

    /// Rule 1 at `node` for a copy carrying `label`: its explicit hops, if the label
    /// names the node (a host only ever relays by this rule).
    pub fn hops_at(&self, node: NodeId, label: u16) -> Option<&[Hop]> {
        self.labels
            .get(label as usize)?
            .hops
            .get(&node)
            .map(Vec::as_slice)
    }

    /// Bytes this group's state takes (see the module docs).
    pub fn memory_bytes(&self) -> usize {
        let hops: usize = self
            .labels
            .iter()
            .map(|l| l.hops.values().map(|v| 24 + 8 * v.len()).sum::<usize>())
            .sum();
        let members: usize = self.member_ports.values().map(|v| 24 + 4 * v.len()).sum();
        hops + members + 64 * self.labels.len()
    }
}

/// What a switch does with a labelled copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// Rule 1: explicit hops, each with its label.
    Hops(&'a [Hop]),
    /// Rules 2–3: the PEEL engine's copies (in the caller's buffer), each keeping its
    /// label: [`PeelAction::Forward`] by a static prefix rule toward a rack,
    /// [`PeelAction::Deliver`] toward a member.
    Peel,
    /// Rule 4: an over-covered rack, or a copy no rule here takes.
    Discard,
}

/// PEEL's switches in the simulated fabric: the core's [`PeelSwitch`] — the engine
/// `rocast switch` runs with a PEEL role — at every prefix-tier switch (its k − 1
/// static rules, PEEL §3.2, shared by all groups) and at every switch below the
/// prefix tier that leads to a group's members (the rack role, with the per-port
/// membership a commodity ToR keeps by IGMP snooping). The engine asks it rules 2–4
/// of the module docs; rule 1, the label's explicit hops, is the source's label stack.
///
/// Memory: per prefix-tier switch k − 1 rules (8 bytes plus 2 per port), per rack
/// switch 2 bytes per uplink and, per group with members below it, 8 bytes plus 2 per
/// member port ([`PeelSwitch::memory_bytes`]); 4 bytes per plane for the shim's
/// (pod, plane) numbers.
#[derive(Clone, Debug, Default)]
pub struct PeelFabric {
    /// By switch index (node − hosts); `None` where the switch has no PEEL role.
    switches: Vec<Option<PeelSwitch>>,
    hosts: NodeId,
    /// Prefix-tier switch → the (pod, plane) numbers its shims carry.
    planes: BTreeMap<NodeId, (u16, u16)>,
    actions: Vec<PeelAction>,
}

impl PeelFabric {
    /// The prefix tier of `layout`'s fabric, each switch with its static rules.
    pub fn new(topo: &Topology, layout: &PrefixLayout) -> Result<Self, TreeMulticastError> {
        let mut f = PeelFabric::default();
        f.size_for(topo);
        for (pod_no, pod) in layout.pods.iter().enumerate() {
            for (plane_no, &plane) in pod.planes.iter().enumerate() {
                let (pod_no, plane_no) = (
                    u16::try_from(pod_no).map_err(|_| TreeMulticastError::TooManyPods)?,
                    u16::try_from(plane_no).map_err(|_| TreeMulticastError::TooManyPlanes)?,
                );
                f.planes.insert(plane, (pod_no, plane_no));
                let rules = PrefixRules::from_rules(layout.rules(topo, plane));
                f.switches[(plane - f.hosts) as usize] = Some(PeelSwitch::new(PeelRole::Prefix {
                    pod: pod_no,
                    plane: plane_no,
                    rules,
                }));
            }
        }
        Ok(f)
    }

    fn size_for(&mut self, topo: &Topology) {
        self.hosts = topo.num_hosts() as NodeId;
        let n = topo.num_nodes() - topo.num_hosts();
        if self.switches.len() < n {
            self.switches.resize(n, None);
        }
    }

    /// Static rules in all.
    pub fn rule_count(&self) -> usize {
        self.switches
            .iter()
            .flatten()
            .map(|s| match s.role() {
                PeelRole::Prefix { rules, .. } => rules.len(),
                PeelRole::Rack { .. } => 0,
            })
            .sum()
    }

    /// Bytes of every switch's PEEL state (see the type's docs).
    pub fn memory_bytes(&self) -> usize {
        let state: usize = self
            .switches
            .iter()
            .flatten()
            .map(PeelSwitch::memory_bytes)
            .sum();
        state + 4 * self.planes.len()
    }

    /// Adds `group`'s member ports below the prefix tier (`f.member_ports`) to those
    /// switches' memberships; a switch gets its rack role (uplinks: its ports toward a
    /// higher tier, in port order) on its first group.
    pub fn install(&mut self, topo: &Topology, group: Ipv4Address, f: &GroupForwarding) {
        if f.member_ports.is_empty() {
            return;
        }
        self.size_for(topo);
        for (&node, ports) in &f.member_ports {
            let sw = self.switches[(node - self.hosts) as usize].get_or_insert_with(|| {
                let mine = tier(topo, node);
                let uplinks = topo
                    .ports(node)
                    .iter()
                    .enumerate()
                    .filter(|(_, &(_, peer))| tier(topo, peer) > mine)
                    .map(|(p, _)| p as u16)
                    .collect();
                PeelSwitch::new(PeelRole::Rack { uplinks })
            });
            for &p in ports {
                sw.add_member(group, p);
            }
        }
    }

    /// Takes `group`'s member ports off again.
    pub fn remove(&mut self, group: Ipv4Address, f: &GroupForwarding) {
        for (&node, ports) in &f.member_ports {
            if let Some(Some(sw)) = self.switches.get_mut((node - self.hosts) as usize) {
                for &p in ports {
                    sw.remove_member(group, p);
                }
            }
        }
    }

    /// The PEEL engine's decisions so far, in all switches.
    pub fn stats(&self) -> PeelStats {
        let mut t = PeelStats::default();
        for s in self.switches.iter().flatten() {
            let s = &s.stats;
            t.packets += s.packets;
            t.forwarded += s.forwarded;
            t.delivered += s.delivered;
            t.over_covered += s.over_covered;
            t.no_rule += s.no_rule;
            t.misrouted += s.misrouted;
            t.no_uplink += s.no_uplink;
        }
        t
    }

    /// What switch `node` does with a copy of `group` carrying `label` of `f`, arrived
    /// on `in_port` (rules 1–4 of the module docs). For [`Step::Peel`], the copies are
    /// in [`Self::actions`].
    pub fn step<'a>(
        &mut self,
        f: &'a GroupForwarding,
        node: NodeId,
        in_port: u16,
        group: Ipv4Address,
        label: u16,
    ) -> Step<'a> {
        let Some(l) = f.labels.get(label as usize) else {
            return Step::Discard;
        };
        if let Some(h) = l.hops.get(&node) {
            return Step::Hops(h);
        }
        let Some(Some(sw)) = self
            .switches
            .get_mut(node.wrapping_sub(self.hosts) as usize)
        else {
            return Step::Discard;
        };
        // The shim the copy carries: its packet's (pod, plane, prefix). A rack reads
        // only where the copy came from (a copy from above carries some plane's shim).
        let shim = match (l.peel, sw.role()) {
            (Some(p), _) => match (self.planes.get(&p.plane), u16::try_from(p.prefix.value)) {
                (Some(&(pod, plane)), Ok(prefix_value)) => PeelHeader {
                    flags: 0,
                    prefix_len: p.prefix.len,
                    pod,
                    prefix_value,
                    plane,
                },
                _ => return Step::Discard,
            },
            (None, PeelRole::Rack { .. }) => PeelHeader {
                flags: 0,
                prefix_len: 0,
                pod: 0,
                prefix_value: 0,
                plane: 0,
            },
            (None, PeelRole::Prefix { .. }) => return Step::Discard,
        };
        sw.handle_packet(in_port, group, &shim);
        self.actions.clear();
        self.actions
            .extend(std::iter::from_fn(|| sw.poll_transmit()));
        if self.actions.is_empty() {
            Step::Discard
        } else {
            Step::Peel
        }
    }

    /// The copies of the last [`Step::Peel`].
    pub fn actions(&self) -> &[PeelAction] {
        &self.actions
    }
}

/// Gives each tree arc that no label's path covers (deliveries on the way up, such as
/// the source rack's other members) to exactly one of `send`'s labels: the first whose
/// explicit hops reach the arc's nearest ancestor, extended down to the arc.
fn assign_local(
    topo: &Topology,
    parents: &BTreeMap<NodeId, (NodeId, u32)>,
    local: &[&TreeArc],
    labels: &mut [Label],
    send: &[u16],
) -> Result<(), TreeMulticastError> {
    for a in local {
        let mut chain = vec![**a];
        let mut at = a.parent;
        let owner = loop {
            if let Some(&l) = send
                .iter()
                .find(|&&l| labels[l as usize].hops.contains_key(&at))
            {
                break l;
            }
            let Some(&(p, link)) = parents.get(&at) else {
                return Err(TreeMulticastError::ArcWithoutLabel {
                    parent: a.parent,
                    child: a.child,
                });
            };
            chain.push(TreeArc {
                parent: p,
                child: at,
                link,
            });
            at = p;
        };
        let label = &mut labels[owner as usize];
        for c in chain.iter().rev() {
            let h = (port(topo, c)?, owner);
            if label.peel.is_some_and(|p| p.plane == c.parent) {
                return Err(TreeMulticastError::ArcOutsidePrefix {
                    parent: c.parent,
                    child: c.child,
                });
            }
            let v = label.hops.entry(c.parent).or_default();
            if !v.contains(&h) {
                v.push(h);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
