//! The event queue every discrete-event model of the simulator runs on: the engine
//! (`Engine`) and the optical broadcast-select fabric of `rocast-eval`'s ODBSS
//! studies (its element and N^D fabric, and through them the `ud-loss` driver).
//!
//! Events pop in time order; events at the same time pop in the order they were
//! pushed (each push takes the next sequence number), so a run is a pure function of
//! its inputs. An entry is the (time, sequence) key as one `u128` beside the model's
//! event value.
//!
//! The queue is a calendar queue (Brown 1988) with a fixed slot width: time is cut into
//! 1.024 ns slots, the next 4096 slots (4.2 µs, beyond a link's propagation plus a
//! packet's serialisation) each have an unsorted bucket, and later events (timers) wait
//! in a binary heap until the window reaches them. When the current slot is used up,
//! the next non-empty bucket (found from an occupancy bitmap) is sorted and popped in
//! order; pushes into the current slot are inserted in order. std's binary heap before
//! it was a fifth of `permutation-1024`'s time (`docs/perf/`): the calendar queue runs
//! that preset about 20 % faster with the same memory and the same pop order. (A radix
//! heap cost 29 % more instructions, a 4-ary heap 33 %.) Buckets are lists of 7-event
//! chunks from one pool, so memory follows the events pending, not each bucket's
//! largest burst, and taking a crowded bucket follows one link per 7 events. An
//! event pushed into the past (a model bug) still pops first.

//! Every queue counts the events it handed out and adds them, when dropped, to one
//! process-wide total ([`events_total`]): what `rocast bench sim` reports as events
//! per second for runs of any model, without a hot-path atomic.
//!
//! Memory: 256-byte chunks of 7 pending events for the engine (37 bytes per event when
//! full; a partly filled chunk per occupied bucket, at most 4096 of them, 1 MiB), plus
//! 17 KiB of bucket heads and bitmap ([`EventQueue::heap_bytes`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

static EVENTS_TOTAL: AtomicU64 = AtomicU64::new(0);

/// Events popped by every dropped [`EventQueue`] of this process so far.
pub fn events_total() -> u64 {
    EVENTS_TOTAL.load(AtomicOrdering::Relaxed)
}

/// Width of a near-future slot: 2^10 ps (about 1 ns; a few events each on a busy fabric).
const SLOT_SHIFT: u32 = 10;
/// Near-future slots, one bucket each: 4096 × 1.024 ns, beyond a link's propagation and
/// serialisation; later events (timers) wait in a binary heap.
const SLOTS: u64 = 4096;
/// No node: the end of a bucket's list.
const NIL: u32 = u32::MAX;

/// Pending events of type `T`, earliest first, ties in insertion order.
#[derive(Debug)]
pub struct EventQueue<T> {
    /// The events of slot `cur_slot`, latest first (popped from the back).
    cur: Vec<Entry<T>>,
    cur_slot: u64,
    /// Slot `s` in `cur_slot + 1 .. cur_slot + SLOTS` lives in bucket `s % SLOTS` (the
    /// head of a list of chunks), so a bucket only ever holds one slot's events,
    /// unsorted until its slot comes. Chunks from one pool keep memory proportional to
    /// the events pending, not to every bucket's largest burst; a chunk holds up to
    /// [`CHUNK`] events side by side, so taking a bucket of n events follows n/CHUNK
    /// links instead of n (one cold load after another: with one event per node this
    /// walk was a third of the engine's time on a 65,536-host fabric).
    buckets: Vec<u32>,
    chunks: Vec<Chunk<T>>,
    free: Vec<u32>,
    /// Bit per bucket: not empty.
    occupied: Vec<u64>,
    /// Events at or beyond `cur_slot + SLOTS`, earliest on top.
    far: BinaryHeap<Entry<T>>,
    len: usize,
    /// Events pushed (the last sequence number); popped = pushed − pending.
    seq: u64,
}

impl<T> Drop for EventQueue<T> {
    fn drop(&mut self) {
        EVENTS_TOTAL.fetch_add(self.popped(), AtomicOrdering::Relaxed);
    }
}

/// Events per chunk of a bucket's list: with the engine's events a chunk is four
/// cache lines, the link and the first event in the first.
const CHUNK: usize = 7;

/// A link of a bucket's list: up to [`CHUNK`] events in place (a bucket of one event
/// costs one cold line, as a one-event node did) and the next chunk.
#[derive(Debug)]
#[repr(C, align(64))]
struct Chunk<T> {
    next: u32,
    len: u32,
    events: [Place<T>; CHUNK],
}

/// A place in a chunk: the key's two halves (no `u128` alignment) and the event
/// (`None` when empty or taken).
#[derive(Debug)]
struct Place<T> {
    time: u64,
    seq: u64,
    event: Option<T>,
}

impl<T> Chunk<T> {
    fn empty() -> Self {
        Chunk {
            next: NIL,
            len: 0,
            events: std::array::from_fn(|_| Place {
                time: 0,
                seq: 0,
                event: None,
            }),
        }
    }
}

/// One pending event: `time << 64 | seq`, and the event.
#[derive(Clone, Copy, Debug)]
struct Entry<T> {
    key: u128,
    event: T,
}

impl<T> Entry<T> {
    fn slot(&self) -> u64 {
        (self.key >> (64 + SLOT_SHIFT)) as u64
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Entry<T> {
    /// Reversed, so that the max-heap pops the earliest key.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.cmp(&self.key)
    }
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> EventQueue<T> {
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// `n`: a hint for the number of events pending at once.
    pub fn with_capacity(n: usize) -> Self {
        EventQueue {
            cur: Vec::new(),
            cur_slot: 0,
            buckets: vec![NIL; SLOTS as usize],
            chunks: Vec::with_capacity(n / CHUNK),
            free: Vec::new(),
            occupied: vec![0; (SLOTS / 64) as usize],
            far: BinaryHeap::with_capacity(n),
            len: 0,
            seq: 0,
        }
    }

    /// Adds `event` at `time`, after every event already queued for that time.
    #[inline]
    pub fn push(&mut self, time: u64, event: T) {
        self.seq += 1;
        self.len += 1;
        let e = Entry {
            key: (time as u128) << 64 | self.seq as u128,
            event,
        };
        let slot = e.slot();
        if slot <= self.cur_slot {
            // The current slot (or, from a model's bug, the past): keep `cur` sorted.
            // Ties and the sequence number put it behind every event already there.
            let at = self.cur.partition_point(|x| x.key > e.key);
            self.cur.insert(at, e);
        } else if slot < self.cur_slot + SLOTS {
            self.link(slot, e);
        } else {
            self.far.push(e);
        }
    }

    /// Puts `e` on the list of `slot`'s bucket.
    #[inline]
    fn link(&mut self, slot: u64, entry: Entry<T>) {
        let b = (slot % SLOTS) as usize;
        let head = self.buckets[b];
        let place = Place {
            time: (entry.key >> 64) as u64,
            seq: entry.key as u64,
            event: Some(entry.event),
        };
        if let Some(c) = self.chunks.get_mut(head as usize) {
            if (c.len as usize) < CHUNK {
                c.events[c.len as usize] = place;
                c.len += 1;
                return;
            }
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.chunks.push(Chunk::empty());
                (self.chunks.len() - 1) as u32
            }
        };
        let c = &mut self.chunks[i as usize];
        c.events[0] = place;
        c.len = 1;
        c.next = head;
        self.buckets[b] = i;
        self.occupied[b / 64] |= 1 << (b % 64);
    }

    /// The first occupied bucket's slot after `cur_slot`, if any.
    fn next_bucket_slot(&self) -> Option<u64> {
        let words = self.occupied.len();
        let start = ((self.cur_slot + 1) % SLOTS) as usize;
        let (w0, b0) = (start / 64, start % 64);
        // The first word from bit b0, then whole words, wrapping, then word w0 below b0.
        let first = self.occupied[w0] & (!0u64 << b0);
        let found = if first != 0 {
            Some(w0 * 64 + first.trailing_zeros() as usize)
        } else {
            (1..=words).find_map(|i| {
                let w = (w0 + i) % words;
                let mut bits = self.occupied[w];
                if i == words {
                    bits &= (1u64 << b0).wrapping_sub(1);
                }
                (bits != 0).then(|| w * 64 + bits.trailing_zeros() as usize)
            })
        }?;
        let ahead = (found as u64 + SLOTS - (self.cur_slot + 1) % SLOTS) % SLOTS;
        Some(self.cur_slot + 1 + ahead)
    }

    /// Moves to the next slot that has events; false when none is left.
    fn advance(&mut self) -> bool {
        let near = self.next_bucket_slot();
        let far = self.far.peek().map(Entry::slot);
        let next = match (near, far) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return false,
        };
        self.cur_slot = next;
        if near == Some(next) {
            let b = (next % SLOTS) as usize;
            let mut i = std::mem::replace(&mut self.buckets[b], NIL);
            while i != NIL {
                let c = &mut self.chunks[i as usize];
                for s in &mut c.events[..c.len as usize] {
                    self.cur.push(Entry {
                        key: (s.time as u128) << 64 | s.seq as u128,
                        event: s.event.take().expect("a chunk's first len places are full"),
                    });
                }
                c.len = 0;
                self.free.push(i);
                i = c.next;
            }
            self.occupied[b / 64] &= !(1 << (b % 64));
        }
        while self.far.peek().is_some_and(|e| e.slot() == next) {
            self.cur.push(self.far.pop().expect("peeked"));
        }
        // Far events that the window now reaches move into their buckets.
        while self.far.peek().is_some_and(|e| e.slot() < next + SLOTS) {
            let e = self.far.pop().expect("peeked");
            self.link(e.slot(), e);
        }
        self.cur.sort_unstable_by_key(|e| std::cmp::Reverse(e.key));
        true
    }

    /// The time of the earliest event.
    #[inline]
    pub fn peek_time(&mut self) -> Option<u64> {
        if self.cur.is_empty() && !self.advance() {
            return None;
        }
        self.cur.last().map(|e| (e.key >> 64) as u64)
    }

    /// Removes the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, T)> {
        if self.cur.is_empty() && !self.advance() {
            return None;
        }
        let e = self.cur.pop()?;
        self.len -= 1;
        Some(((e.key >> 64) as u64, e.event))
    }

    /// The event `n` places after the next one, if it is in the current slot: for a
    /// model that loads ahead what its coming events will touch (the engine's
    /// `prefetch_ahead`). (Looking into the next slot's bucket as well measured no
    /// gain on a sparse fabric, `docs/perf/`.)
    #[inline]
    pub fn peek_ahead(&self, n: usize) -> Option<&T> {
        let len = self.cur.len();
        (n < len).then(|| &self.cur[len - 1 - n].event)
    }

    /// Events popped so far.
    pub fn popped(&self) -> u64 {
        self.seq - self.len as u64
    }

    /// Removes the earliest event if it is due at or before `until`.
    #[inline]
    pub fn pop_until(&mut self, until: u64) -> Option<(u64, T)> {
        if self.peek_time()? > until {
            return None;
        }
        self.pop()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the queue's storage holds.
    pub fn heap_bytes(&self) -> usize {
        let e = std::mem::size_of::<Entry<T>>();
        (self.cur.capacity() + self.far.capacity()) * e
            + self.chunks.capacity() * std::mem::size_of::<Chunk<T>>()
            + (self.free.capacity() + self.buckets.len()) * 4
            + self.occupied.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_insertion_order() {
        let mut q = EventQueue::new();
        for (t, e) in [(5, 'a'), (1, 'b'), (5, 'c'), (0, 'd'), (1, 'e'), (5, 'f')] {
            q.push(t, e);
        }
        assert_eq!(q.len(), 6);
        assert_eq!(q.pop_until(0), Some((0, 'd')));
        assert_eq!(q.pop_until(0), None);
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, [(1, 'b'), (1, 'e'), (5, 'a'), (5, 'c'), (5, 'f')]);
        assert!(q.is_empty());
        assert_eq!(q.peek_time(), None);
        assert_eq!(q.popped(), 6);
        let before = events_total();
        drop(q);
        // Other tests' queues may drop meanwhile: at least ours were added.
        assert!(events_total() >= before + 6);
    }

    /// Random pushes (times `now + 0 ..= spread` ps), peeks and pops against std's
    /// binary heap ordered by (time, push order).
    fn against_a_reference_heap(seed: u64, spread: u64, steps: usize) {
        use rand_chacha::ChaCha8Rng;
        use rand_core::{RngCore, SeedableRng};
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut q = EventQueue::new();
        let mut reference = BinaryHeap::new();
        let (mut seq, mut now) = (0u64, 0u64);
        for _ in 0..steps {
            if rng.next_u32() % 4 == 0 {
                // A peek, then pushes between now and the peeked event.
                let want = reference.peek().map(|Reverse((t, _))| *t);
                assert_eq!(q.peek_time(), want);
            }
            if rng.next_u32() % 3 != 0 {
                let t = now + rng.next_u64() % (spread + 1);
                seq += 1;
                q.push(t, seq);
                reference.push(Reverse((t, seq)));
            } else {
                let want = reference.pop().map(|Reverse(x)| x);
                assert_eq!(q.pop(), want);
                if let Some((t, _)) = want {
                    now = t;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
        while let Some(Reverse(x)) = reference.pop() {
            assert_eq!(q.pop(), Some(x));
        }
        assert_eq!(q.pop(), None);
        assert_eq!(q.popped(), seq);
    }

    #[test]
    fn pops_in_the_order_of_a_reference_heap_under_random_pushes_and_pops() {
        // Many ties in one slot.
        against_a_reference_heap(3, 7, 200_000);
        // Across slots and the near-future window.
        against_a_reference_heap(4, 3_000_000, 200_000);
        // Mostly beyond the window (timers): through the far heap.
        against_a_reference_heap(5, 1_000_000_000, 100_000);
    }

    #[test]
    fn peek_ahead_sees_the_current_slots_coming_events_in_pop_order() {
        let mut q = EventQueue::new();
        // Three events in one 1.024 ns slot, one in a later slot.
        for (t, e) in [(100u64, 'a'), (50, 'b'), (100, 'c'), (900_000, 'd')] {
            q.push(t, e);
        }
        assert_eq!(q.pop(), Some((50, 'b')));
        assert_eq!(q.peek_ahead(0), Some(&'a'));
        assert_eq!(q.peek_ahead(1), Some(&'c'));
        // The later slot is not looked into.
        assert_eq!(q.peek_ahead(2), None);
        assert_eq!(q.pop(), Some((100, 'a')));
        assert_eq!(q.peek_ahead(0), Some(&'c'));
        assert_eq!(q.pop(), Some((100, 'c')));
        assert_eq!(q.peek_ahead(0), None);
        assert_eq!(q.pop(), Some((900_000, 'd')));
    }

    #[test]
    fn a_chunk_of_one_word_events_is_four_cache_lines() {
        // The engine's events are one u64: 7 to a chunk, 256 bytes.
        assert_eq!(std::mem::size_of::<Chunk<u64>>(), 256);
        assert_eq!(std::mem::align_of::<Chunk<u64>>(), 64);
    }

    #[test]
    fn a_crowded_slot_spans_chunks_and_pops_in_order() {
        let mut q = EventQueue::new();
        // 5 chunks' worth in one slot, pushed in reverse time order.
        let n = 5 * CHUNK as u64;
        for k in 0..n {
            q.push(2_000_000 + (n - k), k);
        }
        let popped: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(t, _)| t).collect();
        let want: Vec<_> = (1..=n).map(|d| 2_000_000 + d).collect();
        assert_eq!(popped, want);
        // The chunks went back to the pool, and are reused.
        let pooled = q.chunks.len();
        for k in 0..n {
            q.push(4_000_000 + k, k);
        }
        assert_eq!(q.chunks.len(), pooled);
        assert_eq!(q.len(), n as usize);
    }

    #[test]
    fn an_event_pushed_into_the_past_pops_before_everything_pending() {
        let mut q = EventQueue::new();
        for t in [10_000u64, 20_000_000, 30] {
            q.push(t, t);
        }
        assert_eq!(q.pop(), Some((30, 30)));
        assert_eq!(q.pop(), Some((10_000, 10_000)));
        q.push(5, 5); // before the event just run: a model bug, still ordered
        q.push(10_000, 11);
        assert_eq!(q.peek_time(), Some(5));
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, [(5, 5), (10_000, 11), (20_000_000, 20_000_000)]);
    }
}
