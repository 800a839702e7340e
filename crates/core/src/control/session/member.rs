//! [`MemberSession`]: a member's side of a group session (see the parent module for the
//! lifecycle). It answers MRP with its [`MemberAgent`] (Cepheus §III-C, last step) and
//! mirrors the leader:
//!
//! ```text
//! AwaitingParams ──Params──▶ OpeningQp ──qp ready / Join──▶ Joined ◀────────────────┐
//!                                                            │ Overlay    │ Announce │
//!                                                            ▼            ▼          │
//!                                                      OverlaySetup    Posting       │
//!                                                            │ ready      │ posted   │
//!                                                            └─▶ Joined   ▼          │
//!                                                                      Receiving ────┘
//!                                                                        (received / Result)
//! any state ──Close──▶ Closed          any state ──error──▶ Failed
//! ```
//!
//! Waits on the leader have deadlines (`Params`, and the next instruction while
//! joined); waits on the driver (opening the QP, the overlay's connections, posting
//! receives, the data) do not: the data path reports.

use super::{transmit_from, Outgoing, OverlayPlan, SessionDest, SessionError};
use crate::control::registration::MemberAgent;
use crate::overlay::Scheme;
use crate::time::{Duration, Instant};
use crate::transmit::Transmit;
use crate::wire::group_control::{
    BufferResult, Holding, Join, Message, Overlay, Params, StreamDecoder, GROUP_CONTROL_VERSION,
};
use crate::wire::mrp::MrpRepr;
use crate::wire::GroupAddressSpace;
use crate::wire::{Error as WireError, Ipv4Address};
use std::collections::VecDeque;

/// The largest QPN (24 bits).
const QPN_MAX: u32 = 0xff_ffff;

/// What a member session needs to know.
#[derive(Clone, Debug)]
pub struct MemberSessionConfig {
    pub local: Ipv4Address,
    pub mcst_id: Ipv4Address,
    pub group_space: GroupAddressSpace,
    /// The largest capacity this member accepts (its memory for one buffer).
    pub max_capacity: u64,
    /// From the session's start until `Params`.
    pub params_timeout: Duration,
    /// While joined: from the last instruction until the next (`Overlay`, `Announce`
    /// or `Close`).
    pub idle_timeout: Duration,
    /// The invitation token to present before the Join (`control::invitation`).
    pub invitation: Option<[u8; crate::control::invitation::INVITATION_LEN]>,
}

/// Where a member session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberPhase {
    AwaitingParams,
    OpeningQp,
    Joined,
    OverlaySetup,
    /// The overlay is up mid-buffer; the leader's `Resume` comes next.
    AwaitingResume,
    Posting,
    Receiving,
    Closed,
    Failed,
}

/// This member's part in an overlay broadcast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlayRole {
    pub plan: OverlayPlan,
    /// Every rank's address, the leader (rank 0) first.
    pub roster: Vec<Ipv4Address>,
    /// This member's rank (≥ 1).
    pub rank: usize,
}

/// What the member's driver must do, and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberEvent {
    /// Open the switch QP (and the WRITE region) these parameters need, then call
    /// [`MemberSession::handle_qp_ready`].
    OpenQp(Params),
    /// Data goes through an overlay: drop the switch QP, set up this rank's
    /// connections, then call [`MemberSession::handle_overlay_ready`].
    UseOverlay(OverlayRole),
    /// Buffer `seq` of `bytes` bytes comes next: post receives (or ready the region),
    /// then call [`MemberSession::handle_receives_posted`].
    PostReceives {
        seq: u32,
        bytes: u64,
        sha256: [u8; 32],
    },
    /// The safeguard moved buffer `seq` to the overlay mid-transfer: the member keeps
    /// its bytes below `offset` (the switch delivered them to every member), posts
    /// receives for the rest on the overlay, then calls
    /// [`MemberSession::handle_receives_posted`] and, holding the whole buffer,
    /// [`MemberSession::handle_received`].
    ///
    /// With `held`, the member already held the whole buffer (its verdict crossed the
    /// reroute): it takes part in the overlay for the others, keeps nothing it receives,
    /// then calls [`MemberSession::handle_relayed`].
    ResumeReceive {
        seq: u32,
        offset: u64,
        /// The buffer's size.
        bytes: u64,
        held: bool,
    },
    /// WRITE through the switch: the leader says the region holds buffer `seq`.
    WriteDone {
        seq: u32,
    },
    /// The member's verdict on buffer `seq` went to the leader.
    Received {
        seq: u32,
        ok: bool,
        sha256: [u8; 32],
    },
    /// The leader evicted this other member; the group goes on without it.
    PeerEvicted {
        ip: Ipv4Address,
    },
    /// The leader ended the group with this outcome (seen by all).
    Closed {
        ok: bool,
    },
    Failed(SessionError),
}

/// Counters; every input that changed nothing is counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberStats {
    pub confirmations_sent: u64,
    /// MRP packets for another group or not listing this host.
    pub mrp_ignored: u64,
    /// A `Done` for another buffer.
    pub stale_done: u64,
    /// Driver calls out of turn, bytes after the end.
    pub unexpected: u64,
    pub unemittable: u64,
    /// Other members the leader evicted.
    pub peers_evicted: u64,
    /// MRP datagrams from an address other than the leader's (the switch delivers a
    /// member's record from the leader's address): dropped by the driver.
    pub mrp_foreign: u64,
}

#[derive(Clone, Copy, Debug)]
enum State {
    AwaitingParams {
        deadline: Instant,
    },
    OpeningQp,
    Joined {
        deadline: Instant,
    },
    /// Setting up the overlay; `resume`: mid-buffer (seq, SHA-256), the safeguard's
    /// reroute.
    OverlaySetup {
        resume: Option<(u32, [u8; 32])>,
    },
    /// The overlay is up mid-buffer; waiting for `Resume` until the idle deadline.
    AwaitingResume {
        seq: u32,
        sha256: [u8; 32],
        deadline: Instant,
    },
    /// This member held buffer `seq` before the leader rerouted it: it relays the
    /// rest through the overlay (its schedule has a place for every rank), then sends
    /// its verdict again.
    Relaying {
        seq: u32,
    },
    Posting {
        seq: u32,
        sha256: [u8; 32],
    },
    Receiving {
        seq: u32,
        sha256: [u8; 32],
    },
    Closed,
    Failed,
}

/// A member's group session (see the module docs).
#[derive(Debug)]
pub struct MemberSession {
    cfg: MemberSessionConfig,
    state: State,
    params: Option<Params>,
    agent: MemberAgent,
    decoder: StreamDecoder,
    last_seq: u32,
    /// The last buffer's size (from its `Announce`).
    last_bytes: u64,
    /// The verdict sent for the last buffer held: sent again when the leader reroutes
    /// that buffer after this member already held it (it relays the rest).
    last_verdict: Option<(u32, BufferResult)>,
    outbox: VecDeque<(SessionDest, Outgoing)>,
    events: VecDeque<MemberEvent>,
    stats: MemberStats,
}

impl MemberSession {
    /// A session whose control connection to the leader is up at `now`.
    pub fn new(cfg: MemberSessionConfig, now: Instant) -> Self {
        MemberSession {
            state: State::AwaitingParams {
                deadline: now + cfg.params_timeout,
            },
            agent: MemberAgent::new(cfg.local).with_group_space(cfg.group_space),
            cfg,
            params: None,
            decoder: StreamDecoder::new(),
            last_seq: 0,
            last_bytes: 0,
            last_verdict: None,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            stats: MemberStats::default(),
        }
    }

    pub fn stats(&self) -> &MemberStats {
        &self.stats
    }
    /// The leader's parameters, once they arrived.
    pub fn params(&self) -> Option<Params> {
        self.params
    }
    pub fn phase(&self) -> MemberPhase {
        match self.state {
            State::AwaitingParams { .. } => MemberPhase::AwaitingParams,
            State::OpeningQp => MemberPhase::OpeningQp,
            State::Joined { .. } => MemberPhase::Joined,
            State::OverlaySetup { .. } => MemberPhase::OverlaySetup,
            State::AwaitingResume { .. } => MemberPhase::AwaitingResume,
            State::Relaying { .. } => MemberPhase::Receiving,
            State::Posting { .. } => MemberPhase::Posting,
            State::Receiving { .. } => MemberPhase::Receiving,
            State::Closed => MemberPhase::Closed,
            State::Failed => MemberPhase::Failed,
        }
    }
    pub fn is_terminal(&self) -> bool {
        matches!(self.state, State::Closed | State::Failed)
    }

    fn send(&mut self, m: Message) {
        self.outbox
            .push_back((SessionDest::Leader, Outgoing::Control(m)));
    }
    fn fail(&mut self, e: SessionError) {
        if self.is_terminal() {
            return;
        }
        self.state = State::Failed;
        self.events.push_back(MemberEvent::Failed(e));
    }
    fn protocol(&mut self, what: String) {
        self.fail(SessionError::Protocol(what));
    }

    /// The driver gives up (its data path failed).
    pub fn abort(&mut self, _now: Instant, e: SessionError) {
        self.fail(e);
    }

    /// Bytes from the leader's stream, decoded and handled in order. A frame that does
    /// not decode (another version included) fails the session.
    pub fn handle_stream(&mut self, now: Instant, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.is_terminal() {
            match self.decoder.feed(bytes) {
                Ok((n, m)) => {
                    bytes = &bytes[n..];
                    if let Some(m) = m {
                        self.handle_message(now, m);
                    }
                }
                Err(e) => {
                    let hint = if e == WireError::Unsupported("group control version") {
                        format!(" (this host speaks version {GROUP_CONTROL_VERSION})")
                    } else {
                        String::new()
                    };
                    return self.protocol(format!("control message from the leader: {e}{hint}"));
                }
            }
        }
    }

    /// The leader's connection closed or broke.
    pub fn handle_conn_error(&mut self, _now: Instant, reason: &str) {
        self.fail(SessionError::Connection(format!(
            "control: the leader: {reason}"
        )));
    }

    /// A whole message from the leader.
    pub fn handle_message(&mut self, now: Instant, msg: Message) {
        if self.is_terminal() {
            self.stats.unexpected += 1;
            return;
        }
        let name = msg.message_type().name();
        match (msg, self.state) {
            (Message::Close(c), _) => {
                self.state = State::Closed;
                self.events.push_back(MemberEvent::Closed { ok: c.ok });
            }
            (Message::Evicted(e), _) if e.ip == self.cfg.local => {
                self.fail(SessionError::Connection(
                    "the leader evicted this member".into(),
                ));
            }
            (Message::Evicted(e), _) => {
                self.stats.peers_evicted += 1;
                self.events.push_back(MemberEvent::PeerEvicted { ip: e.ip });
            }
            (Message::Params(p), State::AwaitingParams { .. }) => {
                if p.message_bytes == 0 || p.capacity == 0 || p.capacity > self.cfg.max_capacity {
                    return self.protocol(format!(
                        "sizes out of range: capacity {} (at most {}), messages of {} bytes",
                        p.capacity, self.cfg.max_capacity, p.message_bytes
                    ));
                }
                self.params = Some(p);
                self.state = State::OpeningQp;
                self.events.push_back(MemberEvent::OpenQp(p));
            }
            (Message::Overlay(o), State::Joined { .. }) => self.overlay(o, None),
            // The safeguard moved the buffer in flight to the overlay.
            (Message::Overlay(o), State::Receiving { seq, sha256 }) => {
                self.overlay(o, Some((seq, sha256)))
            }
            (Message::Resume(r), State::AwaitingResume { seq, sha256, .. }) if r.seq == seq => {
                self.state = State::Posting { seq, sha256 };
                self.events.push_back(MemberEvent::ResumeReceive {
                    seq,
                    offset: r.offset,
                    bytes: self.last_bytes,
                    held: false,
                });
            }
            // The reroute crossed this member's verdict: it holds the buffer already.
            (Message::Resume(r), State::Joined { .. })
                if self.last_verdict.is_some_and(|(s, _)| s == r.seq)
                    && r.offset < self.last_bytes =>
            {
                self.state = State::Relaying { seq: r.seq };
                self.events.push_back(MemberEvent::ResumeReceive {
                    seq: r.seq,
                    offset: r.offset,
                    bytes: self.last_bytes,
                    held: true,
                });
            }
            (Message::Announce(a), State::Joined { .. }) => {
                let capacity = self.params.map_or(0, |p| p.capacity);
                if a.bytes == 0 || a.bytes > capacity {
                    return self.protocol(format!(
                        "buffer {} of {} bytes: over the capacity of {capacity}",
                        a.seq, a.bytes
                    ));
                }
                if a.seq <= self.last_seq {
                    return self.protocol(format!(
                        "buffer {} announced after buffer {}",
                        a.seq, self.last_seq
                    ));
                }
                self.last_seq = a.seq;
                self.last_bytes = a.bytes;
                self.state = State::Posting {
                    seq: a.seq,
                    sha256: a.sha256,
                };
                self.events.push_back(MemberEvent::PostReceives {
                    seq: a.seq,
                    bytes: a.bytes,
                    sha256: a.sha256,
                });
            }
            (Message::Done(d), State::Receiving { seq, .. }) => {
                if d.seq == seq && self.params.is_some_and(|p| p.write) {
                    self.events.push_back(MemberEvent::WriteDone { seq });
                } else {
                    self.stats.stale_done += 1;
                }
            }
            (
                Message::Join(_)
                | Message::Confirm(_)
                | Message::Result(_)
                | Message::Ready
                | Message::Holding(_)
                | Message::Invitation(_),
                _,
            ) => self.protocol(format!("the leader sent {name}, which only a member sends")),
            (_, s) => self.protocol(format!("unexpected {name} from the leader while {s:?}")),
        }
        let _ = now;
    }

    /// The driver dropped an MRP datagram that did not come from the leader's address.
    pub fn note_foreign_mrp(&mut self) {
        self.stats.mrp_foreign += 1;
    }

    /// An MRP packet arrived: if it lists this host for this group, its confirmation
    /// goes to the leader (every copy is answered: the previous answer may be lost).
    pub fn handle_mrp(&mut self, _now: Instant, mrp: &MrpRepr) {
        if self.is_terminal() || mrp.mcst_id != self.cfg.mcst_id {
            self.stats.mrp_ignored += 1;
            return;
        }
        match self.agent.handle_mrp(mrp) {
            Some(c) => {
                self.stats.confirmations_sent += 1;
                self.send(Message::Confirm(c));
            }
            None => self.stats.mrp_ignored += 1,
        }
    }

    /// `Overlay` from the leader: this member's rank, then the driver's setup.
    fn overlay(&mut self, o: Overlay, resume: Option<(u32, [u8; 32])>) {
        let Some(scheme) = Scheme::from_code(o.scheme) else {
            return self.protocol(format!("unknown overlay scheme code {}", o.scheme));
        };
        let Some(rank) = o
            .roster
            .iter()
            .position(|&ip| ip == self.cfg.local)
            .filter(|&r| r > 0)
        else {
            return self.protocol("this host is not in the roster".into());
        };
        self.state = State::OverlaySetup { resume };
        self.events.push_back(MemberEvent::UseOverlay(OverlayRole {
            plan: OverlayPlan {
                scheme,
                block_bytes: o.block_bytes,
                rate_mbps: o.rate_mbps,
                window: o.window,
            },
            roster: o.roster,
            rank,
        }));
    }

    /// The driver opened the switch QP (`qpn`, 24 bits) and the WRITE region (`va`,
    /// `rkey`; ignored for SEND): the `Join` goes to the leader.
    pub fn handle_qp_ready(&mut self, now: Instant, qpn: u32, va: u64, rkey: u32) {
        if !matches!(self.state, State::OpeningQp) {
            self.stats.unexpected += 1;
            return;
        }
        if qpn > QPN_MAX {
            return self.fail(SessionError::Protocol(format!(
                "QPN {qpn:#x} does not fit 24 bits"
            )));
        }
        if let Some(t) = self.cfg.invitation {
            self.send(Message::Invitation(t));
        }
        self.send(Message::Join(Join {
            ip: self.cfg.local,
            qpn,
            va,
            rkey,
        }));
        self.joined(now);
    }

    fn joined(&mut self, now: Instant) {
        self.state = State::Joined {
            deadline: now + self.cfg.idle_timeout,
        };
    }

    /// The overlay's connections are up: `Ready` goes to the leader.
    pub fn handle_overlay_ready(&mut self, now: Instant) {
        self.handle_overlay_ready_holding(now, 0)
    }

    /// The overlay's connections are up, and this member holds the first `held`
    /// bytes of the buffer the safeguard moved to the overlay mid-transfer (what its
    /// QP completed before the switch path was cut; ignored when no buffer was in
    /// flight): `Holding`, then `Ready`, go to the leader, so the overlay resends only
    /// what some member lacks.
    pub fn handle_overlay_ready_holding(&mut self, now: Instant, held: u64) {
        let State::OverlaySetup { resume } = self.state else {
            self.stats.unexpected += 1;
            return;
        };
        if let (Some((seq, _)), true) = (resume, held > 0) {
            self.send(Message::Holding(Holding {
                seq,
                bytes: held.min(self.last_bytes),
            }));
        }
        self.send(Message::Ready);
        match resume {
            Some((seq, sha256)) => {
                self.state = State::AwaitingResume {
                    seq,
                    sha256,
                    deadline: now + self.cfg.idle_timeout,
                }
            }
            None => self.joined(now),
        }
    }

    /// The receives for the announced buffer are posted: `Ready` goes to the leader.
    pub fn handle_receives_posted(&mut self, _now: Instant) {
        if let State::Relaying { .. } = self.state {
            self.send(Message::Ready);
            return;
        }
        let State::Posting { seq, sha256 } = self.state else {
            self.stats.unexpected += 1;
            return;
        };
        self.send(Message::Ready);
        self.state = State::Receiving { seq, sha256 };
    }

    /// The member holds the whole buffer: its SHA-256 and when it held it
    /// (CLOCK_MONOTONIC ns). The verdict goes to the leader.
    pub fn handle_received(&mut self, now: Instant, sha256: [u8; 32], held_ns: u64) {
        let State::Receiving { seq, sha256: want } = self.state else {
            self.stats.unexpected += 1;
            return;
        };
        let ok = sha256 == want;
        let verdict = BufferResult {
            ok,
            sha256,
            held_ns,
        };
        self.last_verdict = Some((seq, verdict));
        self.send(Message::Result(verdict));
        self.events
            .push_back(MemberEvent::Received { seq, ok, sha256 });
        self.joined(now);
    }

    /// After a `ResumeReceive { held: true }`: the member relayed the rest of the
    /// buffer it already held; its verdict goes to the leader again.
    pub fn handle_relayed(&mut self, now: Instant) {
        let (State::Relaying { seq }, Some((s, verdict))) = (self.state, self.last_verdict) else {
            self.stats.unexpected += 1;
            return;
        };
        if s == seq {
            self.send(Message::Result(verdict));
        }
        self.joined(now);
    }

    /// The next deadline: `Params`, or the leader's next instruction while joined.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::AwaitingParams { deadline }
            | State::Joined { deadline }
            | State::AwaitingResume { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::AwaitingParams { deadline } if now >= deadline => self.fail(
                SessionError::Timeout("no parameters from the leader".into()),
            ),
            State::Joined { deadline } if now >= deadline => {
                self.fail(SessionError::Timeout("nothing from the leader".into()))
            }
            State::AwaitingResume { deadline, .. } if now >= deadline => self.fail(
                SessionError::Timeout("the leader never said where to resume".into()),
            ),
            _ => {}
        }
    }

    /// The next control frame for the leader (`buf` should hold
    /// [`MAX_TRANSMIT_LEN`](super::MAX_TRANSMIT_LEN)).
    pub fn poll_transmit(
        &mut self,
        _now: Instant,
        buf: &mut [u8],
    ) -> Option<Transmit<SessionDest>> {
        transmit_from(&mut self.outbox, buf, &mut self.stats.unemittable)
    }

    pub fn poll_event(&mut self) -> Option<MemberEvent> {
        self.events.pop_front()
    }

    /// Whether [`Self::poll_event`] has something: a driver skips its wait for input
    /// then (what the last input decided is acted on at once, not after the wait).
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }
}
