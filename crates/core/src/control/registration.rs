//! MFT registration (Cepheus §III-C): the leader host's controller sends the group's
//! members to the McstID in MRP packets, every switch on the way fills its multicast
//! forwarding table, and each member that finds itself in an MRP packet confirms to the
//! controller over the out-of-band channel. Multicast may start once every member has
//! confirmed.
//!
//! Three pieces, all sans-IO:
//! - [`GroupSpec`]: a validated group (McstID, leader, members);
//! - [`RegistrationController`] on the leader: sends the MRP packets, collects
//!   [`Confirmation`]s and [`SwitchReport`]s, resends on timeout, and ends in exactly one
//!   [`RegistrationEvent`]: `Registered` or `Failed`. It never hangs: without answers the
//!   last timeout fails the registration with the members that stayed silent;
//! - [`MemberAgent`] on every host: answers an MRP packet that lists it.
//!
//! The MRP member list includes the leader itself (as the first record). The paper's
//! controller sends only the other hosts' states, but with the leader in the list the
//! switch next to the leader learns the leader's QPN (to rewrite feedback when another
//! member becomes the source, §III-E) and any member can later be the source without a
//! second registration. The leader counts as confirmed from the start.

use crate::time::{Duration, Instant};
use crate::wire::mrp::{MrpMember, MrpRepr};
use crate::wire::GroupAddressSpace;
use crate::wire::{Error as WireError, Ipv4Address};
use std::collections::{BTreeMap, VecDeque};

/// The largest QPN (24 bits).
const QPN_MAX: u32 = 0xff_ffff;

/// Why a group cannot be registered. Checked once, in [`GroupSpec::new`], so that the
/// controller never starts a registration a switch would have to reject half-way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("McstID {0} is not in the group address space (224.0.0.0/4 unless configured)")]
    NotMulticast(Ipv4Address),
    #[error("the group has no members besides the leader")]
    Empty,
    #[error("member {0} is listed more than once")]
    DuplicateMember(Ipv4Address),
    /// A member address that cannot name one host: unspecified, broadcast or multicast.
    #[error("member address {0} is not a unicast host address")]
    BadMemberAddress(Ipv4Address),
    /// Some members carry a WRITE region (VA, RKey) and some do not; an MRP packet
    /// describes one kind of group.
    #[error("some members carry an RDMA WRITE region and some do not")]
    MixedRegions,
    #[error("QPN {qpn:#x} of member {ip} does not fit 24 bits")]
    QpnTooLarge { ip: Ipv4Address, qpn: u32 },
    /// More members than 255 MRP packets carry.
    #[error("{members} members exceed MRP's 255 packets ({max} members)")]
    TooLarge { members: usize, max: usize },
}

/// A multicast group as the leader registers it: its McstID, the leader's own QP, and
/// every other member's QP. Built only through [`GroupSpec::new`], so a value is valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    mcst_id: Ipv4Address,
    leader: MrpMember,
    members: Vec<MrpMember>,
}

impl GroupSpec {
    /// Validates a group. `members` are the hosts other than the leader, in the order
    /// they will appear in MRP packets (after the leader).
    pub fn new(
        mcst_id: Ipv4Address,
        leader: MrpMember,
        members: Vec<MrpMember>,
    ) -> Result<Self, GroupError> {
        Self::in_space(GroupAddressSpace::MULTICAST, mcst_id, leader, members)
    }

    /// Like [`new`](Self::new), with McstIDs drawn from `space` (the real-time
    /// runtime's unicast block; see [`GroupAddressSpace`]). Members may be in neither
    /// 224.0.0.0/4 nor `space`.
    pub fn in_space(
        space: GroupAddressSpace,
        mcst_id: Ipv4Address,
        leader: MrpMember,
        members: Vec<MrpMember>,
    ) -> Result<Self, GroupError> {
        if !space.contains(mcst_id) {
            return Err(GroupError::NotMulticast(mcst_id));
        }
        if members.is_empty() {
            return Err(GroupError::Empty);
        }
        let write = leader.region.is_some();
        let mut seen = std::collections::BTreeSet::new();
        for m in std::iter::once(&leader).chain(&members) {
            if m.ip == Ipv4Address::UNSPECIFIED
                || m.ip == Ipv4Address::new(255, 255, 255, 255)
                || m.ip.is_multicast()
                || space.contains(m.ip)
            {
                return Err(GroupError::BadMemberAddress(m.ip));
            }
            if !seen.insert(m.ip) {
                return Err(GroupError::DuplicateMember(m.ip));
            }
            if m.qpn > QPN_MAX {
                return Err(GroupError::QpnTooLarge {
                    ip: m.ip,
                    qpn: m.qpn,
                });
            }
            if m.region.is_some() != write {
                return Err(GroupError::MixedRegions);
            }
        }
        let max = MrpRepr::capacity(write) * u8::MAX as usize;
        let total = members.len() + 1;
        if total > max {
            return Err(GroupError::TooLarge {
                members: total,
                max,
            });
        }
        Ok(GroupSpec {
            mcst_id,
            leader,
            members,
        })
    }

    pub fn mcst_id(&self) -> Ipv4Address {
        self.mcst_id
    }
    pub fn leader(&self) -> &MrpMember {
        &self.leader
    }
    /// The members other than the leader.
    pub fn members(&self) -> &[MrpMember] {
        &self.members
    }
    /// Every member, leader first: the order of the MRP records.
    pub fn all_members(&self) -> impl Iterator<Item = &MrpMember> {
        std::iter::once(&self.leader).chain(&self.members)
    }
    /// Members carry RDMA WRITE regions.
    pub fn is_write(&self) -> bool {
        self.leader.region.is_some()
    }
    /// The MRP packets that register this group, leader included.
    pub fn mrp_packets(&self) -> Vec<MrpRepr> {
        self.mrp_packets_within(crate::wire::mrp::MRP_MAX_PAYLOAD)
    }

    /// [`mrp_packets`](Self::mrp_packets) of at most `payload_limit` bytes each (room
    /// left for an authentication trailer).
    pub fn mrp_packets_within(&self, payload_limit: usize) -> Vec<MrpRepr> {
        let all: Vec<MrpMember> = self.all_members().copied().collect();
        // `new` checked everything `split` checks (at the full payload; a smaller
        // limit can only need more packets), so this fails only past 255 packets; an
        // empty list surfaces as a registration that times out, never as a panic.
        MrpRepr::split_within(self.mcst_id, &all, payload_limit).unwrap_or_default()
    }
}

/// Timers of a registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistrationConfig {
    /// How long to wait for the missing confirmations after each (re)transmission.
    pub timeout: Duration,
    /// How many times to resend the MRP packets before failing. MRP rides on UDP and a
    /// switch's control plane may drop it under load; registration is idempotent (a
    /// switch that already holds the entries finds them unchanged), so resending the
    /// whole registration is safe.
    pub retries: u8,
}

impl Default for RegistrationConfig {
    /// 10 ms per attempt, 3 resends: 40 ms at most before an explicit failure. A switch
    /// control plane answers in well under a millisecond; the margin is for slow hosts.
    fn default() -> Self {
        RegistrationConfig {
            timeout: Duration::from_ms(10),
            retries: 3,
        }
    }
}

/// Why a switch refused a registration. The switch side constructs these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwitchRejection {
    /// No room for another group in the switch's MFT.
    TableFull,
    /// The switch received an MRP packet for a member it cannot route toward.
    NotInTree,
    /// The McstID is already registered with a different membership or leader.
    Conflict,
    /// The MRP packet did not parse.
    Malformed,
    /// The McstID is not allocated to this leader: the switch allocates group
    /// addresses ([`MrpAllocate`](crate::wire::mrp::MrpAllocate)) and either requires
    /// an allocation or holds this address for another host.
    NotAllocated,
}

/// A switch telling the leader that registration failed there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwitchReport {
    /// The switch's node id.
    pub switch: u32,
    pub mcst_id: Ipv4Address,
    pub reason: SwitchRejection,
}

impl SwitchRejection {
    fn code(self) -> u8 {
        match self {
            SwitchRejection::TableFull => 1,
            SwitchRejection::NotInTree => 2,
            SwitchRejection::Conflict => 3,
            SwitchRejection::Malformed => 4,
            SwitchRejection::NotAllocated => 5,
        }
    }
    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            1 => SwitchRejection::TableFull,
            2 => SwitchRejection::NotInTree,
            3 => SwitchRejection::Conflict,
            4 => SwitchRejection::Malformed,
            5 => SwitchRejection::NotAllocated,
            _ => return None,
        })
    }
}

/// Bytes of an encoded [`SwitchReport`].
pub const SWITCH_REPORT_LEN: usize = 13;
const SWITCH_REPORT_MAGIC: [u8; 4] = *b"RCRJ";

impl SwitchReport {
    /// On a real network a switch sends the report in a UDP datagram to the MRP
    /// packet's source (the leader), port `MRP_UDP_PORT`; 13 bytes, big-endian:
    /// `"RCRJ" | McstID (4) | switch id (4) | reason (1)`. The magic keeps it apart
    /// from MRP packets on the same port.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let Some(out) = buf.get_mut(..SWITCH_REPORT_LEN) else {
            return Err(WireError::Truncated("switch report buffer"));
        };
        out[0..4].copy_from_slice(&SWITCH_REPORT_MAGIC);
        out[4..8].copy_from_slice(&self.mcst_id.0);
        out[8..12].copy_from_slice(&self.switch.to_be_bytes());
        out[12] = self.reason.code();
        Ok(SWITCH_REPORT_LEN)
    }

    /// Parses exactly 13 bytes with the magic and a known reason.
    pub fn parse(b: &[u8]) -> Result<SwitchReport, WireError> {
        if b.len() < SWITCH_REPORT_LEN {
            return Err(WireError::Truncated("switch report"));
        }
        if b.len() > SWITCH_REPORT_LEN || b[0..4] != SWITCH_REPORT_MAGIC {
            return Err(WireError::Malformed("switch report"));
        }
        Ok(SwitchReport {
            mcst_id: Ipv4Address([b[4], b[5], b[6], b[7]]),
            switch: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            reason: SwitchRejection::from_code(b[12])
                .ok_or(WireError::Malformed("switch report reason"))?,
        })
    }
}

/// A member's confirmation travels on the group control channel: its bytes are
/// `wire::group_control`'s (`Confirm`), re-exported here where the controller uses it.
pub use crate::wire::group_control::{Confirmation, CONFIRMATION_LEN};

/// How a registration failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistrationFailure {
    /// The last timeout passed with these members (ascending) unconfirmed.
    Timeout { missing: Vec<Ipv4Address> },
    /// A switch refused the group.
    Rejected(SwitchReport),
}

/// The one outcome of a registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistrationEvent {
    /// Every member confirmed; data-plane multicast may start.
    Registered { at: Instant },
    /// Registration failed; the group should fall back (Cepheus §V-D).
    Failed(RegistrationFailure),
}

/// Where a registration stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationPhase {
    /// [`RegistrationController::start`] not yet called.
    Idle,
    /// MRP sent; waiting for confirmations.
    Pending,
    Registered,
    Failed,
}

/// Counters of a registration. Every input that changed nothing is counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistrationStats {
    pub mrp_packets_sent: u64,
    /// Timeouts that led to a resend of the whole registration.
    pub resends: u64,
    /// Members confirmed (first valid confirmation of each).
    pub confirmations: u64,
    /// Valid confirmations of a member already confirmed (the leader counts as one).
    pub duplicate_confirmations: u64,
    /// Confirmations for another group, from a non-member, or with the wrong QPN.
    pub bad_confirmations: u64,
    /// Switch reports for another group.
    pub bad_switch_reports: u64,
    /// Input before `start` or after the outcome.
    pub ignored: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Pending { deadline: Instant, resends_left: u8 },
    Done { registered: bool },
}

/// The leader host's registration controller for one group (Cepheus §III-C).
///
/// Calling pattern (the house shape):
/// 1. [`start`](Self::start) queues the MRP packets and arms the timeout;
/// 2. drain [`poll_mrp`](Self::poll_mrp) and send each packet as UDP to
///    `mcst_id:`[`MRP_UDP_PORT`](crate::wire::mrp::MRP_UDP_PORT);
/// 3. feed [`handle_confirmation`](Self::handle_confirmation) and
///    [`handle_switch_report`](Self::handle_switch_report) as they arrive;
/// 4. at [`poll_timeout`](Self::poll_timeout) call
///    [`handle_timeout`](Self::handle_timeout), which queues the packets to resend
///    (all of them, or none), and drain `poll_mrp` again;
/// 5. drain [`poll_event`](Self::poll_event) after each call: it yields exactly one
///    [`RegistrationEvent`] over the controller's life.
///
/// The output is the typed [`MrpRepr`], not bytes written into a buffer
/// (`poll_transmit(now, buf)`): the simulator carries MRP packets as records
/// (`inject_mrp(&MrpRepr)`) and never serialises them, and the group session
/// (`control::session`) wraps each one in its own `Transmit` with the destination. A
/// byte-level `poll_transmit` here would make the simulator parse back what it just
/// emitted.
///
/// The queue holds at most one copy of the registration: a resend replaces packets
/// nobody took yet.
#[derive(Clone, Debug)]
pub struct RegistrationController {
    spec: GroupSpec,
    cfg: RegistrationConfig,
    packets: Vec<MrpRepr>,
    /// Every non-leader member: its QPN and whether it confirmed.
    members: BTreeMap<Ipv4Address, (u32, bool)>,
    unconfirmed: usize,
    state: State,
    /// MRP packets queued for [`poll_mrp`](Self::poll_mrp).
    outbox: VecDeque<MrpRepr>,
    events: VecDeque<RegistrationEvent>,
    stats: RegistrationStats,
}

impl RegistrationController {
    pub fn new(spec: GroupSpec, cfg: RegistrationConfig) -> Self {
        let members: BTreeMap<_, _> = spec
            .members
            .iter()
            .map(|m| (m.ip, (m.qpn, false)))
            .collect();
        RegistrationController {
            packets: Self::first_registration(spec.mrp_packets()),
            unconfirmed: members.len(),
            members,
            spec,
            cfg,
            state: State::Idle,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            stats: RegistrationStats::default(),
        }
    }

    /// The registration in packets of at most `payload_limit` bytes (a sender that
    /// seals MRP leaves room for the trailer). Call before [`start`](Self::start).
    pub fn with_payload_limit(mut self, payload_limit: usize) -> Self {
        self.packets = Self::first_registration(self.spec.mrp_packets_within(payload_limit));
        self
    }

    /// The registration this controller sends is a leader's first, marked as a new
    /// incarnation (switches start the group's acknowledgement state afresh); a
    /// running leader's refreshes ([`GroupSpec::mrp_packets`]) are not.
    fn first_registration(mut packets: Vec<MrpRepr>) -> Vec<MrpRepr> {
        for p in &mut packets {
            p.new_incarnation = true;
        }
        packets
    }

    pub fn spec(&self) -> &GroupSpec {
        &self.spec
    }
    pub fn config(&self) -> &RegistrationConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &RegistrationStats {
        &self.stats
    }
    pub fn phase(&self) -> RegistrationPhase {
        match self.state {
            State::Idle => RegistrationPhase::Idle,
            State::Pending { .. } => RegistrationPhase::Pending,
            State::Done { registered: true } => RegistrationPhase::Registered,
            State::Done { registered: false } => RegistrationPhase::Failed,
        }
    }
    /// Non-leader members that have not confirmed, ascending.
    pub fn missing(&self) -> Vec<Ipv4Address> {
        self.members
            .iter()
            .filter(|(_, (_, ok))| !ok)
            .map(|(ip, _)| *ip)
            .collect()
    }

    /// Starts the registration: queues the MRP packets to send toward the McstID (see
    /// [`poll_mrp`](Self::poll_mrp)) and arms the timeout. A second call queues nothing
    /// (counted as ignored).
    pub fn start(&mut self, now: Instant) {
        if self.state != State::Idle {
            self.stats.ignored += 1;
        } else {
            self.state = State::Pending {
                deadline: now + self.cfg.timeout,
                resends_left: self.cfg.retries,
            };
            self.transmit();
        }
    }

    fn transmit(&mut self) {
        self.stats.mrp_packets_sent += self.packets.len() as u64;
        self.outbox.clear();
        self.outbox.extend(self.packets.iter().cloned());
    }

    /// MRP packets queued for [`poll_mrp`](Self::poll_mrp).
    pub fn pending_mrp(&self) -> usize {
        self.outbox.len()
    }

    /// The next MRP packet to send, as UDP to `mcst_id:`[`MRP_UDP_PORT`](crate::wire::mrp::MRP_UDP_PORT).
    pub fn poll_mrp(&mut self) -> Option<MrpRepr> {
        self.outbox.pop_front()
    }

    fn is_pending(&mut self) -> bool {
        let pending = matches!(self.state, State::Pending { .. });
        if !pending {
            self.stats.ignored += 1;
        }
        pending
    }

    fn finish(&mut self, event: RegistrationEvent) {
        // Packets not sent yet are moot once the outcome is known.
        self.outbox.clear();
        self.state = State::Done {
            registered: matches!(event, RegistrationEvent::Registered { .. }),
        };
        self.events.push_back(event);
    }

    /// A member's confirmation. Only one that names this group, a member, and the QPN
    /// the controller registered for it counts; duplicates (resends make them normal)
    /// change nothing. The last missing one completes the registration.
    pub fn handle_confirmation(&mut self, now: Instant, c: &Confirmation) {
        if !self.is_pending() {
            return;
        }
        if c.mcst_id != self.spec.mcst_id {
            self.stats.bad_confirmations += 1;
            return;
        }
        if c.ip == self.spec.leader.ip {
            if c.qpn == self.spec.leader.qpn {
                self.stats.duplicate_confirmations += 1;
            } else {
                self.stats.bad_confirmations += 1;
            }
            return;
        }
        match self.members.get_mut(&c.ip) {
            Some((qpn, _)) if *qpn != c.qpn => self.stats.bad_confirmations += 1,
            Some((_, true)) => self.stats.duplicate_confirmations += 1,
            Some((_, ok)) => {
                *ok = true;
                self.unconfirmed -= 1;
                self.stats.confirmations += 1;
                if self.unconfirmed == 0 {
                    self.finish(RegistrationEvent::Registered { at: now });
                }
            }
            None => self.stats.bad_confirmations += 1,
        }
    }

    /// A switch refused the group: the registration fails at once. Retrying would meet
    /// the same full table or conflict, and the fallback (§V-D) should not wait for it.
    pub fn handle_switch_report(&mut self, _now: Instant, report: SwitchReport) {
        if !self.is_pending() {
            return;
        }
        if report.mcst_id != self.spec.mcst_id {
            self.stats.bad_switch_reports += 1;
            return;
        }
        self.finish(RegistrationEvent::Failed(RegistrationFailure::Rejected(
            report,
        )));
    }

    /// Lets the timer fire. Queues the MRP packets to resend if an attempt timed out
    /// with resends left; after the last attempt the registration fails with the
    /// members still missing. Before the deadline (or when not pending) queues nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        let State::Pending {
            deadline,
            resends_left,
        } = self.state
        else {
            return;
        };
        if now < deadline {
            return;
        }
        if resends_left == 0 {
            let missing = self.missing();
            self.finish(RegistrationEvent::Failed(RegistrationFailure::Timeout {
                missing,
            }));
            return;
        }
        self.state = State::Pending {
            deadline: now + self.cfg.timeout,
            resends_left: resends_left - 1,
        };
        self.stats.resends += 1;
        self.transmit();
    }

    /// When to call [`handle_timeout`](Self::handle_timeout); `None` unless pending.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Pending { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    pub fn poll_event(&mut self) -> Option<RegistrationEvent> {
        self.events.pop_front()
    }
}

/// Counters of a member agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberAgentStats {
    pub mrp_received: u64,
    pub confirmations_sent: u64,
    /// MRP packets that do not list this host, or whose McstID is not multicast.
    pub ignored: u64,
}

/// The agent on every host (Cepheus §III-C, last step): answers an MRP packet that
/// lists this host's IP with a [`Confirmation`] for the leader's controller. Every copy
/// is answered, resends included, because the previous confirmation may have been lost;
/// the controller drops duplicates. The agent also remembers the record it was
/// registered with, per group.
#[derive(Clone, Debug)]
pub struct MemberAgent {
    ip: Ipv4Address,
    groups: BTreeMap<Ipv4Address, MrpMember>,
    space: GroupAddressSpace,
    stats: MemberAgentStats,
}

impl MemberAgent {
    pub fn new(ip: Ipv4Address) -> Self {
        MemberAgent {
            ip,
            groups: BTreeMap::new(),
            space: GroupAddressSpace::MULTICAST,
            stats: MemberAgentStats::default(),
        }
    }
    /// The same agent answering MRP for McstIDs in `space`.
    pub fn with_group_space(mut self, space: GroupAddressSpace) -> Self {
        self.space = space;
        self
    }
    pub fn ip(&self) -> Ipv4Address {
        self.ip
    }
    pub fn stats(&self) -> &MemberAgentStats {
        &self.stats
    }
    /// The record this host was registered with in group `mcst_id`, once an MRP packet
    /// listing it arrived.
    pub fn membership(&self, mcst_id: Ipv4Address) -> Option<&MrpMember> {
        self.groups.get(&mcst_id)
    }

    /// An MRP packet arrived: the confirmation to send to the leader, if it lists us.
    pub fn handle_mrp(&mut self, mrp: &MrpRepr) -> Option<Confirmation> {
        self.stats.mrp_received += 1;
        let me = mrp
            .members
            .iter()
            .find(|m| m.ip == self.ip)
            .filter(|_| self.space.contains(mrp.mcst_id));
        let Some(me) = me else {
            self.stats.ignored += 1;
            return None;
        };
        self.groups.insert(mrp.mcst_id, *me);
        self.stats.confirmations_sent += 1;
        Some(Confirmation {
            mcst_id: mrp.mcst_id,
            ip: self.ip,
            qpn: me.qpn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fires the timer and takes what it queued.
    fn timeout_mrp(c: &mut RegistrationController, at: Instant) -> Vec<MrpRepr> {
        c.handle_timeout(at);
        std::iter::from_fn(|| c.poll_mrp()).collect()
    }

    #[test]
    fn switch_reports_round_trip_and_reject_garbage() {
        for reason in [
            SwitchRejection::TableFull,
            SwitchRejection::NotInTree,
            SwitchRejection::Conflict,
            SwitchRejection::Malformed,
        ] {
            let r = SwitchReport {
                switch: 7,
                mcst_id: Ipv4Address::new(10, 77, 0, 200),
                reason,
            };
            let mut b = [0u8; SWITCH_REPORT_LEN];
            assert_eq!(r.emit(&mut b), Ok(SWITCH_REPORT_LEN));
            assert_eq!(SwitchReport::parse(&b), Ok(r));
            let mut bad = b;
            bad[12] = 9;
            assert!(SwitchReport::parse(&bad).is_err());
            bad = b;
            bad[0] = b'X';
            assert!(SwitchReport::parse(&bad).is_err());
            assert!(SwitchReport::parse(&b[..12]).is_err());
        }
        assert!(SwitchReport {
            switch: 0,
            mcst_id: Ipv4Address::UNSPECIFIED,
            reason: SwitchRejection::Conflict
        }
        .emit(&mut [0u8; 4])
        .is_err());
    }
    use proptest::prelude::*;

    const MCST: Ipv4Address = Ipv4Address::new(239, 1, 0, 7);
    const T0: Instant = Instant::from_us(100);

    fn member(i: u32) -> MrpMember {
        MrpMember {
            ip: Ipv4Address::from_u32(0x0a00_0001 + i),
            qpn: 0x100 + i,
            region: None,
        }
    }
    /// Leader is member 0; others 1..=n.
    fn spec(n: u32) -> GroupSpec {
        GroupSpec::new(MCST, member(0), (1..=n).map(member).collect()).unwrap()
    }
    fn confirm(i: u32) -> Confirmation {
        Confirmation {
            mcst_id: MCST,
            ip: member(i).ip,
            qpn: member(i).qpn,
        }
    }
    fn events(c: &mut RegistrationController) -> Vec<RegistrationEvent> {
        std::iter::from_fn(|| c.poll_event()).collect()
    }
    fn cfg() -> RegistrationConfig {
        RegistrationConfig {
            timeout: Duration::from_ms(1),
            retries: 2,
        }
    }

    #[test]
    fn group_spec_is_validated() {
        let ok = |ms: Vec<MrpMember>| GroupSpec::new(MCST, member(0), ms);
        assert!(ok(vec![member(1)]).is_ok());
        assert_eq!(
            GroupSpec::new(Ipv4Address::new(10, 0, 0, 1), member(0), vec![member(1)]),
            Err(GroupError::NotMulticast(Ipv4Address::new(10, 0, 0, 1)))
        );
        assert_eq!(
            GroupSpec::new(Ipv4Address::new(240, 0, 0, 1), member(0), vec![member(1)]).unwrap_err(),
            GroupError::NotMulticast(Ipv4Address::new(240, 0, 0, 1))
        );
        assert!(GroupSpec::new(Ipv4Address::new(224, 0, 0, 0), member(0), vec![member(1)]).is_ok());
        assert_eq!(ok(vec![]), Err(GroupError::Empty));
        assert_eq!(
            ok(vec![member(1), member(2), member(1)]),
            Err(GroupError::DuplicateMember(member(1).ip))
        );
        assert_eq!(
            ok(vec![member(1), member(0)]),
            Err(GroupError::DuplicateMember(member(0).ip)),
            "the leader is a member too"
        );
        let mut w = member(2);
        w.region = Some((0x1000, 7));
        assert_eq!(ok(vec![member(1), w]), Err(GroupError::MixedRegions));
        let mut big = member(3);
        big.qpn = 0x100_0000;
        assert_eq!(
            ok(vec![big]),
            Err(GroupError::QpnTooLarge {
                ip: big.ip,
                qpn: 0x100_0000
            })
        );
        for bad in [
            Ipv4Address::UNSPECIFIED,
            Ipv4Address::new(255, 255, 255, 255),
            Ipv4Address::new(239, 0, 0, 1),
        ] {
            let mut m = member(1);
            m.ip = bad;
            assert_eq!(ok(vec![m]), Err(GroupError::BadMemberAddress(bad)));
        }
        let huge: Vec<_> = (1..=255 * 183).map(member).collect();
        assert_eq!(
            ok(huge),
            Err(GroupError::TooLarge {
                members: 255 * 183 + 1,
                max: 255 * 183
            })
        );
        let fits: Vec<_> = (1..255 * 183).map(member).collect();
        assert_eq!(ok(fits).unwrap().mrp_packets().len(), 255);
    }

    #[test]
    fn mrp_lists_the_leader_first_and_every_member_once() {
        let s = spec(200);
        let ps = s.mrp_packets();
        assert_eq!(ps.len(), 2, "201 records at 183 per packet");
        let listed: Vec<MrpMember> = ps.iter().flat_map(|p| p.members.clone()).collect();
        assert_eq!(listed[0], member(0));
        assert_eq!(listed, (0..=200).map(member).collect::<Vec<_>>());
        assert!(ps
            .iter()
            .all(|p| p.mcst_id == MCST && !p.write && p.total == 2));

        let mut w0 = member(0);
        w0.region = Some((0x7000, 1));
        let mut w1 = member(1);
        w1.region = Some((0x8000, 2));
        let ws = GroupSpec::new(MCST, w0, vec![w1]).unwrap();
        assert!(ws.is_write());
        let p = &ws.mrp_packets()[0];
        assert!(p.write);
        assert_eq!(p.members, vec![w0, w1]);
    }

    #[test]
    fn registered_once_every_member_confirmed() {
        let mut c = RegistrationController::new(spec(3), cfg());
        assert_eq!(c.phase(), RegistrationPhase::Idle);
        assert_eq!(c.poll_timeout(), None);
        // A confirmation before start is ignored.
        c.handle_confirmation(T0, &confirm(1));
        assert_eq!(c.stats().ignored, 1);

        c.start(T0);
        let sent: Vec<MrpRepr> = std::iter::from_fn(|| c.poll_mrp()).collect();
        // A leader's first registration is a new incarnation; refreshes
        // (`GroupSpec::mrp_packets`) are not.
        let mut first = spec(3).mrp_packets();
        assert!(first.iter().all(|p| !p.new_incarnation));
        first.iter_mut().for_each(|p| p.new_incarnation = true);
        assert_eq!(sent, first);
        assert_eq!(c.phase(), RegistrationPhase::Pending);
        assert_eq!(c.poll_timeout(), Some(T0 + Duration::from_ms(1)));
        c.start(T0);
        assert_eq!(c.poll_mrp(), None, "start is once");
        assert_eq!(c.poll_mrp(), None, "start took them all");

        c.handle_confirmation(T0, &confirm(2));
        c.handle_confirmation(T0, &confirm(0)); // the leader's own agent: not needed
        c.handle_confirmation(T0, &confirm(2));
        let mut wrong_qpn = confirm(1);
        wrong_qpn.qpn += 1;
        c.handle_confirmation(T0, &wrong_qpn);
        c.handle_confirmation(T0, &confirm(9)); // not a member
        let mut other_group = confirm(1);
        other_group.mcst_id = Ipv4Address::new(239, 9, 9, 9);
        c.handle_confirmation(T0, &other_group);
        c.handle_confirmation(T0, &confirm(1));
        assert_eq!(c.missing(), vec![member(3).ip]);
        assert!(events(&mut c).is_empty());

        let at = T0 + Duration::from_us(5);
        c.handle_confirmation(at, &confirm(3));
        assert_eq!(events(&mut c), vec![RegistrationEvent::Registered { at }]);
        assert_eq!(c.phase(), RegistrationPhase::Registered);
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(
            *c.stats(),
            RegistrationStats {
                mrp_packets_sent: 1,
                resends: 0,
                confirmations: 3,
                duplicate_confirmations: 2,
                bad_confirmations: 3,
                bad_switch_reports: 0,
                ignored: 2,
            }
        );
        // After the outcome everything is ignored and nothing more is reported.
        c.handle_confirmation(at, &confirm(3));
        c.handle_switch_report(
            at,
            SwitchReport {
                switch: 1,
                mcst_id: MCST,
                reason: SwitchRejection::TableFull,
            },
        );
        assert_eq!(timeout_mrp(&mut c, at + Duration::from_ms(100)).len(), 0);
        assert!(events(&mut c).is_empty());
        assert_eq!(c.stats().ignored, 4);
    }

    #[test]
    fn silence_resends_then_fails_with_the_missing_members() {
        let mut c = RegistrationController::new(spec(4), cfg());
        c.start(T0);
        let first: Vec<MrpRepr> = std::iter::from_fn(|| c.poll_mrp()).collect();
        c.handle_confirmation(T0, &confirm(2));
        // Before the deadline nothing happens.
        let d1 = T0 + Duration::from_ms(1);
        assert_eq!(
            timeout_mrp(&mut c, Instant::from_ps(d1.as_ps() - 1)).len(),
            0
        );
        // Each timeout resends everything and re-arms.
        // Left queued: the resend replaces it, and poll_mrp yields one copy.
        assert_eq!(
            {
                c.handle_timeout(d1);
                c.pending_mrp()
            },
            first.len()
        );
        assert_eq!(
            {
                c.handle_timeout(d1);
                c.pending_mrp()
            },
            first.len(),
            "not due again"
        );
        assert_eq!(
            std::iter::from_fn(|| c.poll_mrp()).collect::<Vec<_>>(),
            first
        );
        let d2 = d1 + Duration::from_ms(1);
        assert_eq!(c.poll_timeout(), Some(d2));
        c.handle_confirmation(d1, &confirm(4));
        // A late timer call re-arms from when it ran.
        let late = d2 + Duration::from_us(300);
        assert_eq!(timeout_mrp(&mut c, late), first);
        let d3 = late + Duration::from_ms(1);
        assert_eq!(c.poll_timeout(), Some(d3));
        assert!(events(&mut c).is_empty());
        // Out of resends: an explicit failure, never a hang.
        assert_eq!(timeout_mrp(&mut c, d3).len(), 0);
        assert_eq!(
            events(&mut c),
            vec![RegistrationEvent::Failed(RegistrationFailure::Timeout {
                missing: vec![member(1).ip, member(3).ip]
            })]
        );
        assert_eq!(c.phase(), RegistrationPhase::Failed);
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(c.stats().resends, 2);
        assert_eq!(c.stats().mrp_packets_sent, 3);
        // A confirmation arriving after failure is too late.
        c.handle_confirmation(d3, &confirm(1));
        assert!(events(&mut c).is_empty());
    }

    #[test]
    fn zero_retries_fail_at_the_first_timeout() {
        let mut c = RegistrationController::new(
            spec(1),
            RegistrationConfig {
                timeout: Duration::from_us(10),
                retries: 0,
            },
        );
        c.start(T0);
        assert_eq!(timeout_mrp(&mut c, T0 + Duration::from_us(10)).len(), 0);
        assert!(matches!(
            events(&mut c)[..],
            [RegistrationEvent::Failed(
                RegistrationFailure::Timeout { .. }
            )]
        ));
    }

    #[test]
    fn a_switch_rejection_fails_at_once() {
        let mut c = RegistrationController::new(spec(2), cfg());
        c.start(T0);
        let other = SwitchReport {
            switch: 4,
            mcst_id: Ipv4Address::new(239, 0, 0, 1),
            reason: SwitchRejection::Conflict,
        };
        c.handle_switch_report(T0, other);
        assert_eq!(c.stats().bad_switch_reports, 1);
        assert_eq!(c.phase(), RegistrationPhase::Pending);
        let full = SwitchReport {
            switch: 7,
            mcst_id: MCST,
            reason: SwitchRejection::TableFull,
        };
        c.handle_switch_report(T0, full);
        assert_eq!(
            events(&mut c),
            vec![RegistrationEvent::Failed(RegistrationFailure::Rejected(
                full
            ))]
        );
        assert_eq!(c.poll_timeout(), None);
        c.handle_confirmation(T0, &confirm(1));
        c.handle_confirmation(T0, &confirm(2));
        assert!(events(&mut c).is_empty(), "no Registered after Failed");
    }

    #[test]
    fn member_agents_confirm_what_lists_them() {
        let s = spec(300);
        let mut c = RegistrationController::new(s.clone(), RegistrationConfig::default());
        c.start(T0);
        let mrp: Vec<MrpRepr> = std::iter::from_fn(|| c.poll_mrp()).collect();
        assert_eq!(mrp.len(), 2);
        let mut agents: Vec<MemberAgent> =
            (0..=300).map(|i| MemberAgent::new(member(i).ip)).collect();
        // Every host sees every packet here (a real switch forwards each host only the
        // records behind its port): each confirms exactly once, from the packet listing it.
        for (i, a) in agents.iter_mut().enumerate() {
            let answers: Vec<Confirmation> = mrp.iter().filter_map(|p| a.handle_mrp(p)).collect();
            assert_eq!(answers, vec![confirm(i as u32)]);
            assert_eq!(a.stats().ignored, 1);
            assert_eq!(a.membership(MCST), Some(&member(i as u32)));
            // Over the wire and back, as the runtime carries it.
            let mut b = [0u8; CONFIRMATION_LEN];
            answers[0].emit(&mut b).unwrap();
            c.handle_confirmation(T0, &Confirmation::parse(&b).unwrap());
        }
        assert_eq!(
            events(&mut c),
            vec![RegistrationEvent::Registered { at: T0 }]
        );
        assert_eq!(c.stats().duplicate_confirmations, 1, "the leader's");

        let mut stranger = MemberAgent::new(Ipv4Address::new(10, 9, 9, 9));
        assert_eq!(stranger.handle_mrp(&mrp[0]), None);
        let mut unicast_id = mrp[0].clone();
        unicast_id.mcst_id = Ipv4Address::new(10, 0, 0, 0);
        assert_eq!(agents[1].handle_mrp(&unicast_id), None);
        assert_eq!(stranger.membership(MCST), None);
    }

    #[test]
    fn confirmation_wire_format_is_the_documented_one() {
        let c = Confirmation {
            mcst_id: Ipv4Address::new(239, 1, 2, 3),
            ip: Ipv4Address::new(10, 0, 0, 5),
            qpn: 0x12_3456,
        };
        let mut b = [0xffu8; 14];
        assert_eq!(c.emit(&mut b), Ok(12));
        assert_eq!(
            b,
            [239, 1, 2, 3, 10, 0, 0, 5, 0, 0x12, 0x34, 0x56, 0xff, 0xff]
        );
        assert_eq!(Confirmation::parse(&b[..12]), Ok(c));
        assert_eq!(
            Confirmation::parse(&b[..11]),
            Err(WireError::Truncated("confirmation"))
        );
        assert_eq!(
            Confirmation::parse(&b[..13]),
            Err(WireError::Malformed("confirmation length"))
        );
        assert_eq!(
            Confirmation::parse(&[]),
            Err(WireError::Truncated("confirmation"))
        );
        let mut high = b;
        high[8] = 1;
        assert_eq!(
            Confirmation::parse(&high[..12]),
            Err(WireError::Malformed("confirmation qpn"))
        );
        assert_eq!(
            c.emit(&mut [0u8; 11]),
            Err(WireError::Truncated("confirmation buffer"))
        );
        let bad = Confirmation {
            qpn: 0x100_0000,
            ..c
        };
        let mut z = [0u8; 12];
        assert_eq!(
            bad.emit(&mut z),
            Err(WireError::Malformed("confirmation qpn"))
        );
        assert_eq!(z, [0; 12], "nothing written on error");
    }

    proptest! {
        #[test]
        fn confirmation_parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(c) = Confirmation::parse(&b) {
                let mut out = [0u8; CONFIRMATION_LEN];
                prop_assert_eq!(c.emit(&mut out), Ok(CONFIRMATION_LEN));
                prop_assert_eq!(&out[..], &b[..]);
            }
        }

        #[test]
        fn confirmation_round_trips(m in any::<u32>(), ip in any::<u32>(), qpn in 0u32..=QPN_MAX) {
            let c = Confirmation { mcst_id: Ipv4Address::from_u32(m), ip: Ipv4Address::from_u32(ip), qpn };
            let mut b = [0u8; CONFIRMATION_LEN];
            c.emit(&mut b).unwrap();
            prop_assert_eq!(Confirmation::parse(&b), Ok(c));
        }

        /// Whatever arrives, in whatever order, the controller reports at most one
        /// outcome, and exactly one once the deadline has passed enough times.
        #[test]
        fn exactly_one_outcome(inputs in proptest::collection::vec((0u8..4, 0u32..6, 0u64..5_000), 0..40)) {
            let mut c = RegistrationController::new(spec(4), cfg());
            c.start(Instant::ZERO);
            let mut outcomes = 0;
            let mut now = Instant::ZERO;
            for (kind, who, dt) in inputs {
                now += Duration::from_us(dt);
                match kind {
                    0 => c.handle_confirmation(now, &confirm(who)),
                    1 => { c.handle_timeout(now); }
                    2 => c.handle_switch_report(now, SwitchReport { switch: who, mcst_id: MCST, reason: SwitchRejection::NotInTree }),
                    _ => { let mut x = confirm(who); x.qpn ^= 1; c.handle_confirmation(now, &x) }
                }
                outcomes += events(&mut c).len();
                prop_assert!(outcomes <= 1);
            }
            while let Some(t) = c.poll_timeout() {
                c.handle_timeout(t);
            }
            outcomes += events(&mut c).len();
            prop_assert_eq!(outcomes, 1);
        }
    }
}
