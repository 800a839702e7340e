//! A switch's shared-buffer memory management unit with PFC (IEEE 802.1Qbb), after the
//! HPCC simulator's `SwitchMmu`.
//!
//! Bytes are charged to the (ingress port, priority) they arrived on. Each port has a
//! small reserve; beyond it, bytes come from a shared pool whose per-queue limit is a
//! *dynamic threshold* — a fraction `2^-shift` of what is still free (Choudhury & Hahne).
//! In lossless mode a queue over its threshold pauses its upstream, and what arrives in
//! the round-trip before the pause takes effect lands in the port's *headroom*; a
//! packet is dropped only if the headroom overflows (which correct sizing prevents, and
//! which is counted). In lossy mode there is no PFC and no headroom: a packet is
//! dropped (drop-tail) when its egress queue is over the dynamic threshold or the
//! buffer is full.
//!
//! Memory: 25 bytes per (port, priority): 200 bytes per port.

/// Number of priorities (IEEE 802.1p classes).
pub const PRIORITIES: usize = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct MmuConfig {
    pub buffer_bytes: u64,
    /// Bytes every ingress (port, priority) may hold before drawing on the shared pool.
    pub reserve_bytes: u64,
    /// A paused queue resumes once it is this far below its threshold.
    pub resume_offset_bytes: u64,
    /// Per port: headroom for bytes in flight after a PAUSE (lossless mode only).
    pub headroom_bytes: Vec<u64>,
    /// Per port: the dynamic threshold is free buffer >> shift (3 means 1/8).
    pub alpha_shift: Vec<u8>,
    /// PFC on (lossless) or off (lossy, drop-tail).
    pub lossless: bool,
}

/// Outcome of offering a packet to the MMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Admit,
    /// Lossless mode: the headroom of the ingress queue overflowed.
    DropHeadroomFull,
    /// Lossy mode: the egress queue is over its dynamic threshold.
    DropEgressThreshold,
    /// Lossy mode: the buffer is full.
    DropBufferFull,
}

#[derive(Clone, Debug)]
pub struct SharedBufferMmu {
    cfg: MmuConfig,
    ingress: Vec<u64>,
    headroom_used: Vec<u64>,
    egress: Vec<u64>,
    paused: Vec<bool>,
    shared_used: u64,
    total_used: u64,
    total_headroom: u64,
    total_reserve: u64,
}

impl SharedBufferMmu {
    pub fn new(cfg: MmuConfig) -> Self {
        let n = cfg.headroom_bytes.len();
        assert_eq!(
            n,
            cfg.alpha_shift.len(),
            "one headroom and one shift per port"
        );
        let total_headroom = if cfg.lossless {
            cfg.headroom_bytes.iter().sum()
        } else {
            0
        };
        SharedBufferMmu {
            ingress: vec![0; n * PRIORITIES],
            headroom_used: vec![0; n * PRIORITIES],
            egress: vec![0; n * PRIORITIES],
            paused: vec![false; n * PRIORITIES],
            shared_used: 0,
            total_used: 0,
            total_headroom,
            total_reserve: cfg.reserve_bytes * n as u64,
            cfg,
        }
    }

    pub fn config(&self) -> &MmuConfig {
        &self.cfg
    }

    /// The dynamic threshold of a queue on `port`.
    pub fn threshold(&self, port: usize) -> u64 {
        self.cfg
            .buffer_bytes
            .saturating_sub(self.total_headroom + self.total_reserve + self.shared_used)
            >> self.cfg.alpha_shift[port]
    }

    fn shared(&self, i: usize) -> u64 {
        self.ingress[i].saturating_sub(self.cfg.reserve_bytes)
    }

    /// Whether a packet of `size` bytes arriving on `in_port` for `out_port` at
    /// priority `prio` may be stored. Does not charge it: call [`enqueue`](Self::enqueue).
    pub fn admit(&self, in_port: usize, out_port: usize, prio: usize, size: u64) -> Admission {
        let i = in_port * PRIORITIES + prio;
        if self.cfg.lossless {
            let t = self.threshold(in_port);
            if size + self.headroom_used[i] > self.cfg.headroom_bytes[in_port]
                && size + self.shared(i) > t
            {
                return Admission::DropHeadroomFull;
            }
            Admission::Admit
        } else {
            if self.total_used + size > self.cfg.buffer_bytes {
                return Admission::DropBufferFull;
            }
            let e = out_port * PRIORITIES + prio;
            if self.egress[e] + size > self.cfg.reserve_bytes + self.threshold(out_port) {
                return Admission::DropEgressThreshold;
            }
            Admission::Admit
        }
    }

    /// Charges an admitted packet.
    pub fn enqueue(&mut self, in_port: usize, out_port: usize, prio: usize, size: u64) {
        let i = in_port * PRIORITIES + prio;
        let new = self.ingress[i] + size;
        let reserve = self.cfg.reserve_bytes;
        if new <= reserve {
            self.ingress[i] = new;
        } else if self.cfg.lossless && new - reserve > self.threshold(in_port) {
            self.headroom_used[i] += size;
        } else {
            self.ingress[i] = new;
            self.shared_used += size.min(new - reserve);
        }
        self.egress[out_port * PRIORITIES + prio] += size;
        self.total_used += size;
    }

    /// A further copy of a replicated packet whose cell is already stored (and
    /// charged to its ingress by the first copy): whether its egress queue takes it.
    /// Lossless switches always do; lossy ones apply the egress threshold.
    pub fn admit_copy(&self, out_port: usize, prio: usize, size: u64) -> Admission {
        let e = out_port * PRIORITIES + prio;
        if !self.cfg.lossless
            && self.egress[e] + size > self.cfg.reserve_bytes + self.threshold(out_port)
        {
            return Admission::DropEgressThreshold;
        }
        Admission::Admit
    }

    /// Charges a further copy to its egress queue only (ECN and egress thresholds
    /// see it; ingress accounting and PFC do not: one cell, many queue entries).
    pub fn enqueue_copy(&mut self, out_port: usize, prio: usize, size: u64) {
        self.egress[out_port * PRIORITIES + prio] += size;
    }

    /// Releases a departing further copy.
    pub fn dequeue_copy(&mut self, out_port: usize, prio: usize, size: u64) {
        let e = out_port * PRIORITIES + prio;
        self.egress[e] -= size.min(self.egress[e]);
    }

    /// Releases a departing packet's bytes.
    pub fn dequeue(&mut self, in_port: usize, out_port: usize, prio: usize, size: u64) {
        let i = in_port * PRIORITIES + prio;
        let from_headroom = size.min(self.headroom_used[i]);
        self.headroom_used[i] -= from_headroom;
        let rest = size - from_headroom;
        let from_shared = rest.min(self.shared(i));
        self.shared_used -= from_shared;
        self.ingress[i] -= rest.min(self.ingress[i]);
        let e = out_port * PRIORITIES + prio;
        self.egress[e] -= size.min(self.egress[e]);
        self.total_used -= size.min(self.total_used);
    }

    /// Lossless mode: whether the ingress queue must now pause its upstream. Returns
    /// true once per pause (the queue is then marked paused).
    pub fn check_pause(&mut self, in_port: usize, prio: usize) -> bool {
        let i = in_port * PRIORITIES + prio;
        if !self.cfg.lossless || self.paused[i] {
            return false;
        }
        if self.headroom_used[i] > 0 || self.shared(i) >= self.threshold(in_port) {
            self.paused[i] = true;
            return true;
        }
        false
    }

    /// Lossless mode: whether a paused ingress queue may resume its upstream. Returns
    /// true once per resume.
    pub fn check_resume(&mut self, in_port: usize, prio: usize) -> bool {
        let i = in_port * PRIORITIES + prio;
        if !self.paused[i] || self.headroom_used[i] > 0 {
            return false;
        }
        let s = self.shared(i);
        if s == 0 || s + self.cfg.resume_offset_bytes <= self.threshold(in_port) {
            self.paused[i] = false;
            return true;
        }
        false
    }

    /// Bytes queued for `out_port` at `prio`.
    pub fn egress_bytes(&self, out_port: usize, prio: usize) -> u64 {
        self.egress[out_port * PRIORITIES + prio]
    }
    pub fn total_used(&self) -> u64 {
        self.total_used
    }
    pub fn headroom_used(&self, in_port: usize, prio: usize) -> u64 {
        self.headroom_used[in_port * PRIORITIES + prio]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmu(lossless: bool) -> SharedBufferMmu {
        SharedBufferMmu::new(MmuConfig {
            buffer_bytes: 100_000,
            reserve_bytes: 1_000,
            resume_offset_bytes: 500,
            headroom_bytes: vec![10_000; 2],
            alpha_shift: vec![1; 2],
            lossless,
        })
    }

    #[test]
    fn lossless_pauses_over_threshold_uses_headroom_and_resumes() {
        let mut m = mmu(true);
        // threshold = (100000 - 20000 - 2000 - shared) / 2 = 39000 at first
        assert_eq!(m.threshold(0), 39_000);
        let mut paused_at = None;
        for n in 0..100 {
            assert_eq!(m.admit(0, 1, 3, 1000), Admission::Admit);
            m.enqueue(0, 1, 3, 1000);
            if m.check_pause(0, 3) {
                paused_at = Some(n);
                break;
            }
        }
        // Pause when shared (ingress - reserve) reaches the shrinking threshold:
        // s >= (78000 - s) / 2  =>  s >= 26000, i.e. 27 packets.
        assert_eq!(paused_at, Some(26));
        assert!(!m.check_pause(0, 3), "pause is sent once");
        // In-flight packets land in headroom; beyond it they drop.
        let mut admitted = 0;
        while m.admit(0, 1, 3, 1000) == Admission::Admit {
            m.enqueue(0, 1, 3, 1000);
            admitted += 1;
        }
        assert_eq!(admitted, 10);
        assert_eq!(m.headroom_used(0, 3), 10_000);
        assert_eq!(m.admit(0, 1, 3, 1000), Admission::DropHeadroomFull);
        // Drain: no resume while headroom holds bytes.
        for _ in 0..10 {
            assert!(!m.check_resume(0, 3));
            m.dequeue(0, 1, 3, 1000);
        }
        let mut resumed = false;
        for _ in 0..27 {
            m.dequeue(0, 1, 3, 1000);
            if m.check_resume(0, 3) {
                resumed = true;
                break;
            }
        }
        assert!(resumed);
    }

    #[test]
    fn lossy_drops_tail_and_accounts_exactly() {
        let mut m = mmu(false);
        let mut n = 0u64;
        loop {
            match m.admit(0, 1, 3, 1000) {
                Admission::Admit => {
                    m.enqueue(0, 1, 3, 1000);
                    n += 1;
                }
                Admission::DropEgressThreshold => break,
                other => panic!("{other:?}"),
            }
        }
        assert!(!m.check_pause(0, 3), "no PFC in lossy mode");
        assert_eq!(m.total_used(), n * 1000);
        for _ in 0..n {
            m.dequeue(0, 1, 3, 1000);
        }
        assert_eq!(m.total_used(), 0);
        assert_eq!(m.egress_bytes(1, 3), 0);
        assert_eq!(m.threshold(0), (100_000 - 2000) >> 1);
    }
}
