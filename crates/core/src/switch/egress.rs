//! A switch's egress queues: one FIFO per (port, traffic class), admitted by the
//! shared-buffer MMU with PFC ([`SharedBufferMmu`]) and ECN-marked by RED at dequeue
//! ([`EcnRed`]). The simulator's switches queue slab indices in it and `rocast switch`
//! queues frames in it, so both make the same admission, pause, resume and marking
//! decisions; the driver owns the link (serialisation, a shaper's rate, PFC frames on
//! the wire) and the randomness.
//!
//! Rules, after the HPCC simulator (`switch-node.cc`, `switch-mmu.cc`):
//! - The **control class** (MRP, CNPs, ACKs when the driver puts them there) bypasses
//!   the MMU: it is never dropped for buffer, never pauses, and is served first.
//! - A **further copy of a replicated packet** ([`Ingress::SharedCell`]) is charged to
//!   its egress queue only: the switch stores one cell, so ingress accounting and PFC see
//!   the packet once (Cepheus §III-B and PEEL §3.2 replicate in the switch buffer).
//! - The next class to send is the control class, then data classes from high to low,
//!   skipping the ones the peer paused.
//! - RED marks against the bytes *left behind* the departing packet, as HPCC does.
//!
//! Memory: 16 bytes per queued entry (with a 4-byte item) plus the MMU's 200 bytes per
//! port; 8 bytes of queue length per (port, class).

use crate::fabric::mmu::{Admission, MmuConfig, SharedBufferMmu, PRIORITIES};
use crate::fabric::EcnRed;
use std::collections::VecDeque;

// `EgressQueues::occupied` keeps one bit per class in a byte.
const _: () = assert!(PRIORITIES == 8);

/// Where a queued packet's buffer is charged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ingress {
    /// Arrived on this port (charged to it; may pause it).
    Port(u16),
    /// A further copy of a packet whose cell the first copy holds.
    SharedCell,
}

/// A packet leaving a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departure<T> {
    pub item: T,
    pub class: u8,
    pub bytes: u64,
    /// The ingress port whose paused class may now resume (the driver sends RESUME).
    pub resume: Option<u16>,
}

#[derive(Clone, Copy, Debug)]
struct Entry<T> {
    item: T,
    /// The ingress port, or `u16::MAX` for a shared cell.
    ingress: u16,
    bytes: u32,
}

const SHARED: u16 = u16::MAX;

/// How an [`EgressQueues`] is set up.
#[derive(Clone, Debug, PartialEq)]
pub struct EgressConfig {
    pub mmu: MmuConfig,
    pub red: Option<EcnRed>,
    /// The class that bypasses the MMU and is served first (None: every class is data).
    pub control_class: Option<u8>,
}

impl EgressConfig {
    /// A lossy switch whose every port holds at most `queue_bytes` (a static per-port
    /// limit: the MMU's per-port reserve with no shared pool to draw on). This is
    /// `rocast switch`'s shaping queue.
    pub fn per_port_limit(ports: u16, queue_bytes: u64, red: Option<EcnRed>) -> Self {
        EgressConfig {
            mmu: MmuConfig {
                buffer_bytes: queue_bytes * ports as u64,
                reserve_bytes: queue_bytes,
                resume_offset_bytes: 0,
                headroom_bytes: vec![0; ports as usize],
                // A shift of 63 makes the dynamic threshold 0: the reserve is the limit.
                alpha_shift: vec![63; ports as usize],
                lossless: false,
            },
            red,
            control_class: None,
        }
    }
}

/// One switch's egress queues (see the module docs).
#[derive(Clone, Debug)]
pub struct EgressQueues<T> {
    queues: Vec<VecDeque<Entry<T>>>,
    /// Per port, bit `c` set while class `c`'s queue is not empty: the scheduler reads
    /// one byte instead of eight queue headers (four cache lines) per departure.
    occupied: Vec<u8>,
    bytes: Vec<u64>,
    mmu: SharedBufferMmu,
    red: Option<EcnRed>,
    control: usize,
}

impl<T> EgressQueues<T> {
    /// Queues for as many ports as the MMU configuration has.
    pub fn new(cfg: EgressConfig) -> Self {
        let ports = cfg.mmu.headroom_bytes.len();
        EgressQueues {
            queues: (0..ports * PRIORITIES).map(|_| VecDeque::new()).collect(),
            occupied: vec![0; ports],
            bytes: vec![0; ports * PRIORITIES],
            mmu: SharedBufferMmu::new(cfg.mmu),
            red: cfg.red,
            control: cfg.control_class.map_or(usize::MAX, usize::from),
        }
    }

    pub fn ports(&self) -> u16 {
        (self.queues.len() / PRIORITIES) as u16
    }
    pub fn mmu(&self) -> &SharedBufferMmu {
        &self.mmu
    }
    pub fn red(&self) -> Option<&EcnRed> {
        self.red.as_ref()
    }

    /// Offers `item` of `bytes` for port `out` at `class`. `Ok(Some(p))`: ingress port
    /// `p`'s class just crossed its PFC threshold, so the driver sends a PAUSE upstream
    /// on it. On a drop the item comes back to the driver in `Err`, with the MMU's
    /// reason (the driver counts it).
    pub fn enqueue(
        &mut self,
        ingress: Ingress,
        out: u16,
        class: u8,
        bytes: u64,
        item: T,
    ) -> Result<Option<u16>, (T, Admission)> {
        let (o, c) = (out as usize, class as usize & (PRIORITIES - 1));
        let mut pause = None;
        let ingress = match ingress {
            Ingress::Port(p) => p,
            Ingress::SharedCell => SHARED,
        };
        if c != self.control {
            let mmu = &mut self.mmu;
            if ingress == SHARED {
                match mmu.admit_copy(o, c, bytes) {
                    Admission::Admit => mmu.enqueue_copy(o, c, bytes),
                    a => return Err((item, a)),
                }
            } else {
                let i = ingress as usize;
                match mmu.admit(i, o, c, bytes) {
                    Admission::Admit => mmu.enqueue(i, o, c, bytes),
                    a => return Err((item, a)),
                }
                if mmu.check_pause(i, c) {
                    pause = Some(ingress);
                }
            }
        }
        let q = o * PRIORITIES + c;
        self.queues[q].push_back(Entry {
            item,
            ingress,
            bytes: bytes as u32,
        });
        self.occupied[o] |= 1 << c;
        self.bytes[q] += bytes;
        Ok(pause)
    }

    /// The class port `out` sends next: the control class first (never paused), then
    /// data classes from high to low, skipping those set in `paused` (bit per class).
    pub fn next_class(&self, out: u16, paused: u8) -> Option<u8> {
        let control = if self.control < PRIORITIES {
            1u8 << self.control
        } else {
            0
        };
        let ready = self.occupied[out as usize] & (!paused | control);
        (ready != 0).then(|| 7 - ready.leading_zeros() as u8)
    }

    /// Where the queue that `out` sends from next keeps its head pointer, and where its
    /// head entry lies: addresses for a driver's prefetch before it calls
    /// [`next_class`](Self::next_class) and [`dequeue`](Self::dequeue) (the simulator
    /// asks a few events ahead). Nothing is read through them.
    pub fn next_queue_hint(&self, out: u16, paused: u8) -> Option<(*const (), *const ())> {
        let c = self.next_class(out, paused)? as usize;
        let q = &self.queues[out as usize * PRIORITIES + c];
        let head = q
            .front()
            .map_or(std::ptr::null(), |e| e as *const Entry<T> as *const ());
        Some((q as *const VecDeque<Entry<T>> as *const (), head))
    }

    /// Takes the head of `out`'s `class` queue and releases its buffer.
    pub fn dequeue(&mut self, out: u16, class: u8) -> Option<Departure<T>> {
        let (o, c) = (out as usize, class as usize & (PRIORITIES - 1));
        let q = o * PRIORITIES + c;
        let e = self.queues[q].pop_front()?;
        if self.queues[q].is_empty() {
            self.occupied[o] &= !(1 << c);
        }
        let bytes = e.bytes as u64;
        self.bytes[q] -= bytes;
        let mut resume = None;
        if c != self.control {
            if e.ingress == SHARED {
                self.mmu.dequeue_copy(o, c, bytes);
            } else {
                let i = e.ingress as usize;
                self.mmu.dequeue(i, o, c, bytes);
                if self.mmu.check_resume(i, c) {
                    resume = Some(e.ingress);
                }
            }
        }
        Some(Departure {
            item: e.item,
            class,
            bytes,
            resume,
        })
    }

    /// Whether RED marks a packet of `class` leaving `out` now (call after
    /// [`dequeue`](Self::dequeue): against the bytes left behind it). `draw` gives a
    /// uniform number in [0, 1) and is called only when the probability is above zero
    /// ([`EcnRed::should_mark`]), so a driver's random stream advances only then.
    pub fn red_marks(&self, out: u16, class: u8, draw: impl FnOnce() -> f64) -> bool {
        let c = class as usize & (PRIORITIES - 1);
        match self.red {
            Some(red) if c != self.control => {
                red.should_mark(self.mmu.egress_bytes(out as usize, c), draw)
            }
            _ => false,
        }
    }

    /// Bytes queued at `out` for `class` (the control class included).
    pub fn queue_bytes(&self, out: u16, class: u8) -> u64 {
        self.bytes[out as usize * PRIORITIES + (class as usize & (PRIORITIES - 1))]
    }
    /// Bytes queued at `out`, all classes.
    pub fn port_bytes(&self, out: u16) -> u64 {
        let base = out as usize * PRIORITIES;
        self.bytes[base..base + PRIORITIES].iter().sum()
    }
    /// Entries queued at `out`, all classes.
    pub fn port_len(&self, out: u16) -> usize {
        let base = out as usize * PRIORITIES;
        self.queues[base..base + PRIORITIES]
            .iter()
            .map(VecDeque::len)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lossless(ports: u16) -> EgressQueues<u32> {
        EgressQueues::new(EgressConfig {
            mmu: MmuConfig {
                buffer_bytes: 20_000,
                reserve_bytes: 1_000,
                resume_offset_bytes: 500,
                headroom_bytes: vec![5_000; ports as usize],
                alpha_shift: vec![0; ports as usize],
                lossless: true,
            },
            red: Some(EcnRed {
                kmin_bytes: 1_000,
                kmax_bytes: 3_000,
                pmax: 1.0,
            }),
            control_class: Some(7),
        })
    }

    /// The occupancy bits pick what a scan of the queues would, under seeded random
    /// enqueues, departures and pause states.
    #[test]
    fn next_class_matches_a_scan_of_the_queues() {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{RngCore, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut q = lossless(3);
        let scan = |q: &EgressQueues<u32>, out: u16, paused: u8| {
            (0..PRIORITIES as u8).rev().find(|&c| {
                !q.queues[out as usize * PRIORITIES + c as usize].is_empty()
                    && (c == 7 || paused & (1 << c) == 0)
            })
        };
        let mut checked = 0;
        for i in 0..5_000u32 {
            let out = 1 + (rng.next_u32() % 2) as u16;
            let paused = rng.next_u32() as u8;
            if rng.next_u32() % 2 == 0 {
                let class = (rng.next_u32() % 8) as u8;
                let _ = q.enqueue(Ingress::Port(0), out, class, 10, i);
            } else if let Some(c) = q.next_class(out, paused) {
                q.dequeue(out, c).unwrap();
            }
            assert_eq!(q.next_class(out, paused), scan(&q, out, paused), "step {i}");
            checked += usize::from(q.port_len(out) > 0);
        }
        assert!(checked > 1000, "queues were rarely non-empty: {checked}");
    }

    #[test]
    fn the_prefetch_hint_points_at_the_entry_dequeue_takes() {
        let mut q = lossless(2);
        assert_eq!(q.next_queue_hint(1, 0), None);
        for (i, class) in [3u8, 3, 7].into_iter().enumerate() {
            q.enqueue(Ingress::Port(0), 1, class, 100, i as u32)
                .unwrap();
        }
        while let Some(c) = q.next_class(1, 0) {
            let (queue, head) = q.next_queue_hint(1, 0).expect("a class is ready");
            let qi = 1 * PRIORITIES + c as usize;
            assert_eq!(queue, &q.queues[qi] as *const _ as *const ());
            assert_eq!(head, q.queues[qi].front().unwrap() as *const _ as *const ());
            q.dequeue(1, c).unwrap();
        }
        // Paused data classes are not hinted, as next_class skips them.
        q.enqueue(Ingress::Port(0), 1, 3, 100, 9).unwrap();
        assert_eq!(q.next_queue_hint(1, 1 << 3), None);
    }

    #[test]
    fn fifo_per_class_and_control_first() {
        let mut q = lossless(2);
        for (i, class) in [3u8, 3, 7, 1].into_iter().enumerate() {
            q.enqueue(Ingress::Port(0), 1, class, 100, i as u32)
                .unwrap();
        }
        assert_eq!(q.port_bytes(1), 400);
        assert_eq!(q.port_len(1), 4);
        let mut order = Vec::new();
        while let Some(c) = q.next_class(1, 0) {
            order.push(q.dequeue(1, c).unwrap().item);
        }
        // Control (7) first, then 3 in arrival order, then 1.
        assert_eq!(order, [2, 0, 1, 3]);
        assert_eq!(q.port_bytes(1), 0);
        assert_eq!(q.mmu().total_used(), 0);
    }

    #[test]
    fn paused_classes_wait_but_control_does_not() {
        let mut q = lossless(2);
        q.enqueue(Ingress::Port(0), 1, 3, 100, 1).unwrap();
        q.enqueue(Ingress::Port(0), 1, 7, 100, 2).unwrap();
        assert_eq!(q.next_class(1, 1 << 3 | 1 << 7), Some(7));
        q.dequeue(1, 7).unwrap();
        assert_eq!(q.next_class(1, 1 << 3), None);
        assert_eq!(q.next_class(1, 0), Some(3));
    }

    #[test]
    fn ingress_over_threshold_pauses_once_and_resumes_on_drain() {
        let mut q = lossless(2);
        let mut pauses = 0;
        let mut n = 0;
        // Fill from port 0 toward port 1 until the ingress pauses.
        while pauses == 0 {
            if let Ok(Some(p)) = q.enqueue(Ingress::Port(0), 1, 3, 1_000, n) {
                assert_eq!(p, 0);
                pauses += 1;
            }
            n += 1;
            assert!(n < 100, "never paused");
        }
        // Already paused: no second PAUSE.
        assert_eq!(q.enqueue(Ingress::Port(0), 1, 3, 1_000, n), Ok(None));
        let mut resumes = Vec::new();
        while let Some(d) = q.dequeue(1, 3) {
            resumes.extend(d.resume);
        }
        assert_eq!(resumes, [0]);
    }

    #[test]
    fn shared_cells_skip_ingress_accounting() {
        let mut q = lossless(3);
        q.enqueue(Ingress::Port(0), 1, 3, 1_000, 1).unwrap();
        q.enqueue(Ingress::SharedCell, 2, 3, 1_000, 2).unwrap();
        assert_eq!(q.mmu().total_used(), 1_000);
        assert_eq!(q.mmu().egress_bytes(2, 3), 1_000);
        let d = q.dequeue(2, 3).unwrap();
        assert_eq!((d.item, d.resume), (2, None));
        assert_eq!(q.mmu().total_used(), 1_000);
    }

    #[test]
    fn per_port_limit_drops_beyond_the_limit_only() {
        let mut q: EgressQueues<u8> =
            EgressQueues::new(EgressConfig::per_port_limit(2, 3_000, None));
        assert!(q.enqueue(Ingress::Port(0), 1, 0, 1_500, 1).is_ok());
        assert!(q.enqueue(Ingress::Port(0), 1, 0, 1_500, 2).is_ok());
        let e = q.enqueue(Ingress::Port(0), 1, 0, 1, 3).unwrap_err();
        assert_eq!(e.0, 3);
        // The other port's limit is its own.
        assert!(q.enqueue(Ingress::Port(1), 0, 0, 3_000, 4).is_ok());
        q.dequeue(1, 0).unwrap();
        assert!(q.enqueue(Ingress::Port(0), 1, 0, 1_500, 5).is_ok());
    }

    #[test]
    fn red_marks_against_the_bytes_left_behind() {
        let mut q = lossless(2);
        for i in 0..4 {
            q.enqueue(Ingress::Port(0), 1, 3, 1_000, i).unwrap();
        }
        q.enqueue(Ingress::Port(0), 1, 7, 1_000, 9).unwrap();
        // 4000 bytes of class 3 queued: after one leaves, 3000 remain: probability 1.
        q.dequeue(1, 3).unwrap();
        assert!(q.red_marks(1, 3, || 0.999));
        // Control packets are never marked.
        assert!(!q.red_marks(1, 7, || 0.0));
        q.dequeue(1, 3).unwrap();
        q.dequeue(1, 3).unwrap();
        // 1000 left = kmin: never, and no draw.
        assert!(!q.red_marks(1, 3, || panic!("no draw below kmin")));
    }
}
