//! A stream of small messages on the engine, two ways (RDMC §4.6 "Small messages"):
//! the ring-buffer protocol of `rocast_core::overlay::small_message` (the sender
//! WRITEs each message into every receiver's ring slot; receivers return credit), and
//! RDMC itself, one binomial-pipeline broadcast after another with ready-for-block
//! ([`super::broadcast`]). Both pay the same per-post CPU cost at every rank
//! (`overhead`, posts of one rank serialised) and run on the same idle fabric, so the
//! ratio of their times is the protocol's, not the testbed's.
//!
//! Memory: the engine's, plus two connections per receiver and O(receivers) state;
//! the RDMC side opens each broadcast's connections afresh (O(n log n) per message).

use std::collections::BTreeMap;

use rocast_core::overlay::small_message::{
    ReceiverAction, SmallMessageConfig, SmallMessageError, SmallMessageReceiver, SmallMessageSender,
};
use rocast_core::overlay::Scheme;
use rocast_core::rnic::Payload;
use rocast_core::time::{Duration, Instant};

use super::broadcast::BroadcastError;
use super::broadcast::{bench_driver_config, broadcast_on, BroadcastSpec, DEFAULT_SUSPECT_AFTER};
use crate::engine::{AppEvent, Engine, EngineError};

/// Why a message stream could not run or did not finish.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Protocol(#[from] SmallMessageError),
    #[error(transparent)]
    Broadcast(#[from] BroadcastError),
    #[error("a stream needs a sender and at least one receiver")]
    TooFewHosts,
    #[error("receiver {receiver}: {source}")]
    Receiver {
        receiver: u32,
        #[source]
        source: SmallMessageError,
    },
    #[error("receiver {0}: a ring write or credit failed")]
    RingPostFailed(u32),
    #[error("ring stream stalled: a message never reached every receiver")]
    Stalled,
}

/// A stream of `messages` messages of `size` bytes from rank 0 to the other ranks.
#[derive(Clone, Debug)]
pub struct MessageStream {
    /// Rank → host; rank 0 sends.
    pub hosts: Vec<u32>,
    pub messages: u32,
    pub size: u64,
    pub overhead: Duration,
}

/// How a stream went.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamTiming {
    /// From the first submission until every receiver had message 0.
    pub first_ps: u64,
    /// From the first submission until every receiver had every message.
    pub total_ps: u64,
    pub events: u64,
}

impl StreamTiming {
    /// Messages per second over the whole stream.
    pub fn rate(&self, messages: u32) -> f64 {
        messages as f64 / (self.total_ps.max(1) as f64 * 1e-12)
    }
}

/// The ring-buffer protocol: all messages submitted at once at time 0.
pub fn run_ring_stream(
    engine: &mut Engine,
    stream: &MessageStream,
    cfg: SmallMessageConfig,
) -> Result<StreamTiming, StreamError> {
    let n = stream.hosts.len();
    if n < 2 {
        return Err(StreamError::TooFewHosts);
    }
    let receivers = (n - 1) as u32;
    let mut sender = SmallMessageSender::new(receivers, cfg)?;
    let mut rx: Vec<SmallMessageReceiver> = (0..receivers)
        .map(|_| SmallMessageReceiver::new(cfg))
        .collect::<Result<_, _>>()?;
    let ring_bytes = cfg.slots as u64 * cfg.slot_bytes as u64;
    // Connection id → (receiver, is the credit connection).
    let mut by_conn: BTreeMap<u32, (u32, bool)> = BTreeMap::new();
    let (mut data, mut credit) = (Vec::new(), Vec::new());
    for r in 0..receivers {
        let h = stream.hosts[r as usize + 1];
        let d = engine.open_connection(stream.hosts[0], h, ring_bytes)?;
        let c = engine.open_connection(h, stream.hosts[0], 0)?;
        by_conn.insert(d, (r, false));
        by_conn.insert(c, (r, true));
        data.push(d);
        credit.push(c);
    }
    let start = engine.now().as_ps();
    let events0 = engine.stats.totals.events;
    let over = stream.overhead.as_ps();
    // Each rank's CPU: free from this time on (rank 0 the sender, r + 1 receiver r).
    let mut cpu = vec![start; n];
    let mut post_at = |rank: usize, now: u64| {
        let at = now.max(cpu[rank]) + over;
        cpu[rank] = at;
        at
    };
    for _ in 0..stream.messages {
        sender.submit(stream.size)?;
    }
    let mut delivered_all = vec![0u32; stream.messages as usize];
    let (mut first, mut last) = (None, None);
    let mut now = start;
    let horizon = Instant::from_ps(u64::MAX / 2);
    loop {
        while let Some(w) = sender.poll_write() {
            let at = post_at(0, now);
            engine.post_message(
                Instant::from_ps(at),
                data[w.to as usize],
                w.slot as u64 * cfg.slot_bytes as u64,
                Payload::Zeros(w.len as usize),
                w.seq as u32,
                w.seq,
            )?;
        }
        let more = engine.run_until_app_event(horizon);
        let mut any = false;
        while let Some((t, ev)) = engine.poll_app_event() {
            any = true;
            now = t.as_ps();
            match ev {
                AppEvent::Delivered { conn, imm, len } => {
                    let Some(&(r, is_credit)) = by_conn.get(&conn) else {
                        continue;
                    };
                    if is_credit {
                        sender.handle_credit(r, imm as u64)?;
                        continue;
                    }
                    let rcv = &mut rx[r as usize];
                    // The immediate carries the low 32 bits of the sequence number.
                    let seq = (rcv.delivered() & !0xffff_ffff) | imm as u64;
                    rcv.handle_slot(cfg.slot_of(seq), seq, len as u64)
                        .map_err(|source| StreamError::Receiver {
                            receiver: r,
                            source,
                        })?;
                    while let Some(a) = rcv.poll_event() {
                        match a {
                            ReceiverAction::Deliver { seq, .. } => {
                                let k = &mut delivered_all[seq as usize];
                                *k += 1;
                                if *k == receivers {
                                    if seq == 0 {
                                        first = Some(now);
                                    }
                                    if seq + 1 == stream.messages as u64 {
                                        last = Some(now);
                                    }
                                }
                            }
                            ReceiverAction::ReturnCredit { count } => {
                                let at = post_at(r as usize + 1, now);
                                engine.post_message(
                                    Instant::from_ps(at),
                                    credit[r as usize],
                                    0,
                                    Payload::Zeros(0),
                                    count as u32,
                                    count,
                                )?;
                            }
                        }
                    }
                }
                AppEvent::SendDone { conn, wr_id, ok } => {
                    let Some(&(r, is_credit)) = by_conn.get(&conn) else {
                        continue;
                    };
                    if !ok {
                        return Err(StreamError::RingPostFailed(r));
                    }
                    if !is_credit {
                        sender.handle_write_complete(r, wr_id)?;
                    }
                }
                _ => {}
            }
        }
        if !more && !any {
            break;
        }
    }
    match (first, last, delivered_all.iter().all(|&k| k == receivers)) {
        (Some(f), Some(l), true) => Ok(StreamTiming {
            first_ps: f - start,
            total_ps: l - start,
            events: engine.stats.totals.events - events0,
        }),
        _ => Err(StreamError::Stalled),
    }
}

/// RDMC: each message a binomial-pipeline broadcast (blocks of `block` bytes, with
/// ready-for-block), the next one started when the previous one has completed.
pub fn run_rdmc_stream(
    engine: &mut Engine,
    stream: &MessageStream,
    block: u64,
) -> Result<StreamTiming, StreamError> {
    let n = stream.hosts.len() as u32;
    let start = engine.now().as_ps();
    let events0 = engine.stats.totals.events;
    let spec = BroadcastSpec {
        scheme: Scheme::BinomialPipeline,
        hosts: stream.hosts.clone(),
        root: 0,
        driver: bench_driver_config(
            Scheme::BinomialPipeline,
            n,
            stream.size,
            block.min(stream.size).max(1),
            1,
            true,
        ),
        overhead: stream.overhead,
        verify_data: false,
        seed: 1,
        failures: Vec::new(),
        suspect_after: DEFAULT_SUSPECT_AFTER,
    };
    let mut t = start;
    let mut first = None;
    for _ in 0..stream.messages {
        let (out, _) = broadcast_on(engine, &spec, t, None)?;
        first.get_or_insert(t + out.latency_ps - start);
        // The next message goes once this one's last completion is in (the engine
        // ran until nothing was outstanding): RDMC sends a group's messages one at a
        // time (rocast's reading of RDMC §3; no overlap between messages).
        t = (t + out.latency_ps).max(engine.now().as_ps());
    }
    Ok(StreamTiming {
        first_ps: first.unwrap_or(0),
        total_ps: t - start,
        events: engine.stats.totals.events - events0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::topology::{build_topology, engine_config};
    use crate::Scenario;

    fn engine(hosts: u32) -> Engine {
        let sets = [
            "topology.kind=\"leaf-spine\"".to_string(),
            "topology.spines=1".into(),
            "topology.leaves=1".into(),
            format!("topology.hosts_per_leaf={hosts}"),
        ];
        let sc = Scenario::from_toml("", &sets).unwrap();
        let topo = build_topology(&sc, std::path::Path::new("")).unwrap();
        let cfg = engine_config(&sc, &topo).unwrap();
        Engine::new(topo, cfg, Vec::new()).unwrap()
    }

    #[test]
    fn a_one_slot_ring_waits_a_credit_round_trip_per_message() {
        let stream = MessageStream {
            hosts: vec![0, 1, 2, 3],
            messages: 50,
            size: 4096,
            overhead: Duration::from_us(2),
        };
        let one = run_ring_stream(
            &mut engine(4),
            &stream,
            SmallMessageConfig::new(1, 4096).unwrap(),
        )
        .unwrap();
        let eight = run_ring_stream(
            &mut engine(4),
            &stream,
            SmallMessageConfig::new(8, 4096).unwrap(),
        )
        .unwrap();
        // Same first message; the one-slot ring waits for each receiver's credit
        // before the next write to it (partly hidden behind the posts to the others).
        assert_eq!(one.first_ps, eight.first_ps);
        assert!(one.total_ps > eight.total_ps, "{one:?} {eight:?}");
        // Eight slots: the sender's CPU (3 posts of 2 µs per message) is the bound.
        let per_msg = eight.total_ps as f64 / 50.0 / 1e6;
        assert!((6.0..6.5).contains(&per_msg), "{per_msg} us per message");
    }

    #[test]
    fn oversized_messages_and_lone_senders_are_errors() {
        let mut stream = MessageStream {
            hosts: vec![0, 1],
            messages: 1,
            size: 5000,
            overhead: Duration::from_us(2),
        };
        let c = SmallMessageConfig::new(4, 4096).unwrap();
        assert!(run_ring_stream(&mut engine(2), &stream, c).is_err());
        stream.hosts = vec![0];
        stream.size = 64;
        assert!(run_ring_stream(&mut engine(2), &stream, c).is_err());
    }
}
