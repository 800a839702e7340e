//! The interface for layers above the engine (the overlay multicast drivers):
//! persistent connections, posts scheduled at a time, and the [`AppEvent`]s they
//! produce.

use super::{Engine, EngineError, EvKind, QpOwner, SlotPool};
use rocast_core::control::SwitchReport;
use rocast_core::rnic::{Event, Payload, SendOp};
use rocast_core::time::Instant;
use std::collections::VecDeque;

/// Connections and posts of the layer above, and the events waiting for it.
#[derive(Default)]
pub(super) struct App {
    pub(super) conns: Vec<Connection>,
    pub(super) posts: SlotPool<PendingPost>,
    pub(super) events: VecDeque<(u64, AppEvent)>,
    /// Messages posted (or due to be) on connections and not yet completed.
    pub(super) outstanding: u64,
}

/// A persistent RC connection opened by a layer above the engine (the overlay
/// multicast drivers): the sender QP at `src`, the receiver QP at `dst`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Connection {
    pub(super) sq: u32,
    pub(super) rq: u32,
}

/// What the engine reports to the layer that posts messages on connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppEvent {
    /// A WRITE with immediate arrived whole at the connection's receiver.
    Delivered { conn: u32, imm: u32, len: usize },
    /// A posted message completed at the sender: acknowledged, or failed.
    SendDone { conn: u32, wr_id: u64, ok: bool },
    /// A WRITE with immediate arrived whole at an app QP ([`Engine::open_qp`]).
    QpDelivered { qpn: u32, imm: u32, len: usize },
    /// A WRITE posted on an app QP completed: acknowledged, or failed.
    QpSendDone { qpn: u32, wr_id: u64, ok: bool },
    /// A SEND with immediate arrived whole at an app QP (its bytes, when carried).
    QpReceived { qpn: u32, imm: u32, data: Vec<u8> },
    /// An MRP packet reached host `host` (its UDP payload).
    Mrp { host: u32, bytes: Vec<u8> },
    /// A control-channel message from host `from` reached host `to`.
    Control { from: u32, to: u32, bytes: Vec<u8> },
    /// A switch refused a registration; it reports to the group's controller over
    /// the control channel.
    SwitchReport(SwitchReport),
}

pub(super) struct PendingPost {
    pub(super) target: PostTarget,
    pub(super) remote_offset: u64,
    pub(super) data: Payload,
    pub(super) imm: u32,
    pub(super) wr_id: u64,
}

/// Where a post goes: a connection's sender, or an app QP with the remote key to use.
#[derive(Clone, Copy, Debug)]
pub(super) enum PostTarget {
    Conn(u32),
    Qp {
        qpn: u32,
        rkey: u32,
    },
    /// A SEND with immediate on an app QP.
    QpSend {
        qpn: u32,
    },
}

impl PostTarget {
    pub(super) fn endpoint(self) -> AppEndpoint {
        match self {
            PostTarget::Conn(c) => AppEndpoint::Conn(c),
            PostTarget::Qp { qpn, .. } | PostTarget::QpSend { qpn } => AppEndpoint::Qp(qpn),
        }
    }
}

/// What the layer above knows a QP by: its connection, or (app QPs) its QPN.
#[derive(Clone, Copy, Debug)]
pub(super) enum AppEndpoint {
    Conn(u32),
    Qp(u32),
}

impl AppEndpoint {
    pub(super) fn send_done(self, wr_id: u64, ok: bool) -> AppEvent {
        match self {
            AppEndpoint::Conn(conn) => AppEvent::SendDone { conn, wr_id, ok },
            AppEndpoint::Qp(qpn) => AppEvent::QpSendDone { qpn, wr_id, ok },
        }
    }
    pub(super) fn delivered(self, imm: u32, len: usize) -> AppEvent {
        match self {
            AppEndpoint::Conn(conn) => AppEvent::Delivered { conn, imm, len },
            AppEndpoint::Qp(qpn) => AppEvent::QpDelivered { qpn, imm, len },
        }
    }
    pub(super) fn received(self, imm: u32, data: &[u8]) -> AppEvent {
        match self {
            AppEndpoint::Conn(conn) => AppEvent::Delivered {
                conn,
                imm,
                len: data.len(),
            },
            AppEndpoint::Qp(qpn) => AppEvent::QpReceived {
                qpn,
                imm,
                data: data.to_vec(),
            },
        }
    }
}

impl Engine {
    pub fn poll_app_event(&mut self) -> Option<(Instant, AppEvent)> {
        self.app
            .events
            .pop_front()
            .map(|(t, e)| (Instant::from_ps(t), e))
    }

    /// Opens a persistent RC connection from host `src` to host `dst` whose receiver
    /// exposes `region_bytes` of memory (rkey 1, VA 0) to the sender's WRITEs: real
    /// bytes when `carry_payload`, else a null region. Returns its index.
    pub fn open_connection(
        &mut self,
        src: u32,
        dst: u32,
        region_bytes: u64,
    ) -> Result<u32, EngineError> {
        let hosts = self.fabric.topo.num_hosts() as u32;
        if src >= hosts || dst >= hosts || src == dst {
            return Err(EngineError::NotTwoHosts { src, dst, hosts });
        }
        let (sq, rq) = (self.hosts.next_qpn, self.hosts.next_qpn + 1);
        if rq > 0xff_ffff {
            return Err(EngineError::OutOfQpns);
        }
        self.hosts.next_qpn += 2;
        let id = self.app.conns.len() as u32;
        let real = self.cfg.carry_payload;
        self.open_qp_pair((src, sq), (dst, rq), QpOwner::Conn(id), region_bytes, real)?;
        self.app.conns.push(Connection { sq, rq });
        Ok(id)
    }

    /// The receiver's memory region of a connection (empty unless `carry_payload`).
    pub fn connection_region(&self, conn: u32) -> Option<&[u8]> {
        let c = self.app.conns.get(conn as usize)?;
        let slot = self.hosts.qps.get(c.rq as usize)?.as_ref()?;
        slot.qp.mr(1).map(|m| m.data.as_slice())
    }

    /// Posts, at time `at` (not before now), an RDMA WRITE with immediate `imm` of
    /// `data` to offset `remote_offset` of the connection's receiver region.
    /// Completion comes back as [`AppEvent::SendDone`] with `wr_id`.
    pub fn post_message(
        &mut self,
        at: Instant,
        conn: u32,
        remote_offset: u64,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        if conn as usize >= self.app.conns.len() {
            return Err(EngineError::NoConnection(conn));
        }
        self.schedule_post(at, PostTarget::Conn(conn), remote_offset, data, imm, wr_id);
        Ok(())
    }

    pub(super) fn schedule_post(
        &mut self,
        at: Instant,
        target: PostTarget,
        remote_offset: u64,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) {
        let post = PendingPost {
            target,
            remote_offset,
            data,
            imm,
            wr_id,
        };
        let i = self.app.posts.insert(post);
        self.app.outstanding += 1;
        self.schedule(at.as_ps().max(self.now), EvKind::Post, i, 0);
    }

    pub(super) fn do_post(&mut self, i: u32) {
        let Some(p) = self.app.posts.take(i) else {
            return;
        };
        let (sq, ok) = match p.target {
            PostTarget::Conn(conn) => {
                let c = self.app.conns[conn as usize];
                let ok = self.post_write_imm((c.sq, c.rq), p.wr_id, p.remote_offset, p.imm, p.data);
                (c.sq, ok)
            }
            PostTarget::Qp { qpn, rkey } => {
                let op = SendOp::WriteImm {
                    remote_va: p.remote_offset,
                    rkey,
                    imm: p.imm,
                };
                (qpn, self.post_on(qpn, p.wr_id, op, p.data))
            }
            PostTarget::QpSend { qpn } => (
                qpn,
                self.post_on(qpn, p.wr_id, SendOp::SendImm(p.imm), p.data),
            ),
        };
        if ok.is_err() {
            self.app.outstanding -= 1;
            let ev = p.target.endpoint().send_done(p.wr_id, false);
            self.app.events.push_back((self.now, ev));
            return;
        }
        self.service_qp(sq);
    }

    /// A connection's or app QP's completions and deliveries, as app events.
    pub(super) fn app_events_of(&mut self, ep: AppEndpoint, events: &[Event]) {
        for ev in events {
            let app = match *ev {
                Event::SendComplete { wr_id, ref result } => {
                    self.app.outstanding = self.app.outstanding.saturating_sub(1);
                    ep.send_done(wr_id, result.is_ok())
                }
                Event::RecvWriteImm { imm, len, .. } => ep.delivered(imm, len),
                Event::Recv {
                    imm: Some(imm),
                    ref data,
                    ..
                } => ep.received(imm, data),
                _ => continue,
            };
            self.app.events.push_back((self.now, app));
        }
    }

    /// Posts, at `at`, a SEND with immediate of `data` on app QP `qpn` (the receivers
    /// need receives of its length). Completion: [`AppEvent::QpSendDone`].
    pub fn post_qp_send(
        &mut self,
        at: Instant,
        qpn: u32,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        self.post_app(at, PostTarget::QpSend { qpn }, 0, data, imm, wr_id)
    }

    /// Posts, at `at`, an RDMA WRITE with immediate of `data` at `remote_va` under
    /// `rkey` on app QP `qpn`. Completion: [`AppEvent::QpSendDone`].
    #[allow(clippy::too_many_arguments)]
    pub fn post_qp_write(
        &mut self,
        at: Instant,
        qpn: u32,
        remote_va: u64,
        rkey: u32,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        self.post_app(
            at,
            PostTarget::Qp { qpn, rkey },
            remote_va,
            data,
            imm,
            wr_id,
        )
    }

    /// Schedules a post on an app QP that exists.
    pub(super) fn post_app(
        &mut self,
        at: Instant,
        target: PostTarget,
        remote_va: u64,
        data: Payload,
        imm: u32,
        wr_id: u64,
    ) -> Result<(), EngineError> {
        let qpn = match target {
            PostTarget::Qp { qpn, .. } | PostTarget::QpSend { qpn } => qpn,
            PostTarget::Conn(_) => return Err(EngineError::NotAppQp),
        };
        if self.qp(qpn).is_none() {
            return Err(EngineError::NoQp(qpn));
        }
        self.schedule_post(at, target, remote_va, data, imm, wr_id);
        Ok(())
    }
}
