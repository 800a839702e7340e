//! CNP filtering at a branch point of a multicast tree (Cepheus §III-D "Congestion
//! Control").
//!
//! A multicast sender runs the ordinary DCQCN of its RNIC, which cuts its rate on every
//! CNP. With many receivers behind a switch, passing every receiver's CNPs makes the
//! sender react to the *sum* of their congestion; Cepheus wants the single-rate scheme
//! instead, where the sender follows the most congested path. So each switch counts
//! CNPs per path over a time window, ages the counters periodically, and passes only
//! the CNPs of the path with the highest count.
//!
//! The filter is a trait so the policy is pluggable: [`ForwardAllCnp`] is MC-RDMA's
//! behaviour (no filtering), [`CounterCnpFilter`] is Cepheus', and [`TmcfCnpFilter`] is
//! TMCF's per-slot selection (TMCF §III: the congestion path multiplicity problem).
//! [`DampedTmcfCnpFilter`] is rocast's own variant of TMCF, not a paper's: the same
//! slots, but the choice moves only when another interface's windowed CNP count is
//! significantly larger.

use crate::time::{Duration, Instant};
use std::collections::BTreeMap;

/// Decides which CNPs arriving from a group's paths go on toward the source.
pub trait CnpFilter: std::fmt::Debug + Send {
    /// A CNP for group `group` arrived on the path of entry `entry` (of `entries` paths
    /// in the group's table). True: pass it toward the source.
    fn admit(&mut self, now: Instant, group: u32, entry: usize, entries: usize) -> bool;
    /// The group left the table (its state may go).
    fn forget(&mut self, group: u32);
    /// Held CNPs due by `now`: one group id pushed per CNP to send toward its source
    /// (a filter that decides on arrival holds none).
    fn release(&mut self, _now: Instant, _out: &mut Vec<u32>) {}
    /// When [`release`](Self::release) next has something to do, if ever.
    fn next_release(&self) -> Option<Instant> {
        None
    }
    /// Whether a CNP this filter does not pass on arrival may still be released later
    /// (the switch then keeps the headers to build it on).
    fn holds(&self) -> bool {
        false
    }
    /// Heap bytes of filter state.
    fn memory_bytes(&self) -> usize;
    /// A short name for tables and logs.
    fn name(&self) -> &'static str;
}

/// Which [`CnpFilter`] a switch runs: the one place a policy name becomes a filter, for
/// the simulator's switches and `rocast switch` alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnpFilterPolicy {
    /// Pass every CNP (MC-RDMA): [`ForwardAllCnp`].
    ForwardAll,
    /// Cepheus' per-path counters, aged every window: [`CounterCnpFilter`].
    Counter(Duration),
    /// TMCF: the previous slot's busiest interface: [`TmcfCnpFilter`].
    Tmcf(Duration),
    /// rocast's damped TMCF (not a paper's): [`DampedTmcfCnpFilter`], its slot and
    /// its margin z in hundredths of a standard deviation (an integer, so policies
    /// compare exactly).
    TmcfDamped(Duration, u32),
    /// The other reading of TMCF's rule, a buffered release: [`BufferedTmcfCnpFilter`].
    TmcfBuffered(Duration),
}

/// A CNP filter name [`CnpFilterPolicy::from_name`] does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CnpFilterError {
    #[error("CNP filter {0:?}: expected one of {names}", names = CnpFilterPolicy::NAMES.join(", "))]
    UnknownPolicy(String),
}

impl CnpFilterPolicy {
    /// The names configuration files and flags use, in [`Self::from_name`]'s order.
    pub const NAMES: [&'static str; 5] = [
        "cepheus",
        "tmcf",
        "tmcf-damped",
        "tmcf-buffered",
        "forward-all",
    ];

    /// The policy called `name` (one of [`Self::NAMES`]), with `window` as its counter
    /// age or slot length (unused by forward-all).
    pub fn from_name(name: &str, window: Duration) -> Result<Self, CnpFilterError> {
        match name {
            "cepheus" => Ok(Self::Counter(window)),
            "tmcf" => Ok(Self::Tmcf(window)),
            "tmcf-damped" => Ok(Self::TmcfDamped(
                window,
                (DampedTmcfCnpFilter::DEFAULT_Z * 100.0) as u32,
            )),
            "tmcf-buffered" => Ok(Self::TmcfBuffered(window)),
            "forward-all" => Ok(Self::ForwardAll),
            _ => Err(CnpFilterError::UnknownPolicy(name.to_string())),
        }
    }

    /// The policy's name, as [`Self::from_name`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Counter(_) => "cepheus",
            Self::Tmcf(_) => "tmcf",
            Self::TmcfDamped(..) => "tmcf-damped",
            Self::TmcfBuffered(_) => "tmcf-buffered",
            Self::ForwardAll => "forward-all",
        }
    }

    /// The same policy with the damped TMCF's margin `z` (standard deviations, ≥ 0,
    /// kept to hundredths; other policies have none and are returned as they are).
    pub fn with_damped_z(self, z: f64) -> Self {
        match self {
            Self::TmcfDamped(w, _) => {
                Self::TmcfDamped(w, (z.clamp(0.0, 1e6) * 100.0).round() as u32)
            }
            other => other,
        }
    }

    pub fn build(self) -> Box<dyn CnpFilter> {
        match self {
            Self::ForwardAll => Box::new(ForwardAllCnp),
            Self::Counter(w) => Box::new(CounterCnpFilter::new(w)),
            Self::Tmcf(w) => Box::new(TmcfCnpFilter::new(w)),
            Self::TmcfDamped(w, z) => Box::new(DampedTmcfCnpFilter::new(w, z as f64 / 100.0)),
            Self::TmcfBuffered(w) => Box::new(BufferedTmcfCnpFilter::new(w)),
        }
    }
}

/// MC-RDMA: every CNP reaches the sender.
#[derive(Clone, Copy, Debug, Default)]
pub struct ForwardAllCnp;

impl CnpFilter for ForwardAllCnp {
    fn admit(&mut self, _: Instant, _: u32, _: usize, _: usize) -> bool {
        true
    }
    fn forget(&mut self, _: u32) {}
    fn memory_bytes(&self) -> usize {
        0
    }
    fn name(&self) -> &'static str {
        "forward-all"
    }
}

/// Cepheus' filter: per-path CNP counters; a CNP passes when its path is the most
/// congested, the one with the highest count. Ties go to the path whose CNPs passed
/// last (else the CNP's own): "only the CNPs from the most congested link" pass, so
/// equally congested paths do not all speak — letting ties pass made this filter no
/// better than forward-all whenever the branches were equally loaded (`tmcf-cpmp`).
/// Every `window` the counters halve, so an old bottleneck stops dominating once its
/// CNPs stop (the paper's "periodic aging"; it gives no constants, and halving keeps
/// history without letting it outweigh a new bottleneck for more than a few windows).
#[derive(Clone, Debug)]
pub struct CounterCnpFilter {
    pub window: Duration,
    groups: BTreeMap<u32, CounterState>,
}

#[derive(Clone, Debug)]
struct CounterState {
    window_start: Instant,
    counters: Vec<u16>,
    /// The path whose CNP passed last.
    passing: Option<usize>,
}

impl CounterCnpFilter {
    pub fn new(window: Duration) -> Self {
        CounterCnpFilter {
            window,
            groups: BTreeMap::new(),
        }
    }
    /// The counters of a group, for inspection.
    pub fn counters(&self, group: u32) -> Option<&[u16]> {
        self.groups.get(&group).map(|s| s.counters.as_slice())
    }
}

impl CnpFilter for CounterCnpFilter {
    fn admit(&mut self, now: Instant, group: u32, entry: usize, entries: usize) -> bool {
        let st = self.groups.entry(group).or_insert_with(|| CounterState {
            window_start: now,
            counters: Vec::new(),
            passing: None,
        });
        if st.counters.len() < entries {
            st.counters.resize(entries, 0);
        }
        let w = self.window.as_ps().max(1);
        let elapsed = now.saturating_since(st.window_start).as_ps();
        if elapsed >= w {
            let windows = elapsed / w;
            let shift = windows.min(16) as u32;
            for c in &mut st.counters {
                *c = c.checked_shr(shift).unwrap_or(0);
            }
            st.window_start += Duration::from_ps(windows * w);
        }
        let Some(c) = st.counters.get_mut(entry) else {
            return false;
        };
        *c = c.saturating_add(1);
        let mine = *c;
        let max = st.counters.iter().copied().max().unwrap_or(0);
        let holder_tied = st
            .passing
            .is_some_and(|p| p != entry && st.counters.get(p) == Some(&max));
        let pass = mine == max && !holder_tied;
        if pass {
            st.passing = Some(entry);
        }
        pass
    }
    fn forget(&mut self, group: u32) {
        self.groups.remove(&group);
    }
    fn memory_bytes(&self) -> usize {
        self.groups
            .values()
            .map(|s| 64 + s.counters.capacity() * 2)
            .sum()
    }
    fn name(&self) -> &'static str {
        "cepheus-counter"
    }
}

/// Whether `now` is past the slot that began at `start`: how many slots ended (≥ 1),
/// with `start` moved to the current slot's beginning; `None` within the slot.
fn slots_passed(start: &mut Instant, now: Instant, slot: Duration) -> Option<u64> {
    let w = slot.as_ps().max(1);
    let slots = now.saturating_since(*start).as_ps() / w;
    if slots == 0 {
        return None;
    }
    *start += Duration::from_ps(slots * w);
    Some(slots)
}

/// Counts a CNP of `entry` in the current slot of either TMCF filter; it passes when
/// `entry` holds the choice, and a group's first CNP takes the choice at once. An
/// entry beyond the table counts nothing and passes nothing.
fn count_in_slot(counts: &mut [u32], chosen: &mut Option<usize>, entry: usize) -> bool {
    let Some(c) = counts.get_mut(entry) else {
        return false;
    };
    *c = c.saturating_add(1);
    match *chosen {
        Some(x) => x == entry,
        None => {
            *chosen = Some(entry);
            true
        }
    }
}

/// TMCF's filter: at a branching switch, CNPs are counted per downstream interface
/// in time slots (default 50 µs); during a slot only the CNPs of the interface that
/// counted most in the previous slot pass, so the sender follows the single worst
/// path instead of cutting once per congested branch.
///
/// Choices where the paper is silent:
/// - **Ties**: the interface chosen for the previous slot keeps the slot if it is
///   among the largest counts (no flapping between equally congested paths); else
///   the lowest-numbered of them.
/// - **Empty previous slot** (no CNPs, or more than one slot passed without any):
///   the choice stands. Under ECN's sparse marking (Pmax 1 %) most slots are empty;
///   forgetting the choice there would let the first CNP of any branch through in
///   the next slot, so with k congested branches the sender would again see about k
///   times one path's CNPs, which is the multiplicity problem TMCF exists to solve.
///   (Measured: with forgetting, TMCF held 12.8 Gb/s of a 20 Gb/s share with six
///   congested paths in `tmcf-cpmp`.) An interface loses the choice only to one that
///   counts more in a slot.
/// - **Nothing chosen yet** (a group's first CNP): the first interface heard is
///   chosen for the rest of that slot, so congestion onset is signalled at once.
#[derive(Clone, Debug)]
pub struct TmcfCnpFilter {
    pub slot: Duration,
    groups: BTreeMap<u32, TmcfState>,
}

#[derive(Clone, Debug)]
struct TmcfState {
    slot_start: Instant,
    /// CNPs per interface in the current slot.
    counts: Vec<u32>,
    /// The interface whose CNPs pass in the current slot.
    chosen: Option<usize>,
}

impl TmcfCnpFilter {
    pub fn new(slot: Duration) -> Self {
        TmcfCnpFilter {
            slot,
            groups: BTreeMap::new(),
        }
    }
    /// The interface whose CNPs pass in a group's current slot, for inspection.
    pub fn chosen(&self, group: u32) -> Option<usize> {
        self.groups.get(&group).and_then(|s| s.chosen)
    }
}

impl CnpFilter for TmcfCnpFilter {
    fn admit(&mut self, now: Instant, group: u32, entry: usize, entries: usize) -> bool {
        let st = self.groups.entry(group).or_insert_with(|| TmcfState {
            slot_start: now,
            counts: Vec::new(),
            chosen: None,
        });
        if st.counts.len() < entries {
            st.counts.resize(entries, 0);
        }
        if slots_passed(&mut st.slot_start, now, self.slot).is_some() {
            let max = st.counts.iter().copied().max().unwrap_or(0);
            // The counts are the last slot that heard any CNP, however long ago.
            st.chosen = if max == 0 || st.chosen.is_some_and(|c| st.counts.get(c) == Some(&max)) {
                st.chosen
            } else {
                st.counts.iter().position(|&c| c == max)
            };
            st.counts.iter_mut().for_each(|c| *c = 0);
        }
        count_in_slot(&mut st.counts, &mut st.chosen, entry)
    }
    fn forget(&mut self, group: u32) {
        self.groups.remove(&group);
    }
    fn memory_bytes(&self) -> usize {
        self.groups
            .values()
            .map(|s| 64 + s.counts.capacity() * 4)
            .sum()
    }
    fn name(&self) -> &'static str {
        "tmcf"
    }
}

/// TMCF's rule in its other grammatical reading (the poster, §II: "CNPs from … IF_A in
/// time slot T1 are forwarded … in T2"): a *buffered release*. The switch holds every
/// CNP of a slot; when the slot ends, the interface that sent the most CNPs in it
/// (ties: the one chosen for the slot before, else the lowest) has its held CNPs sent
/// toward the source one slot after each arrived, so the sender sees the worst path's
/// CNPs of T1, spaced as they came, during T2; the other interfaces' are dropped.
/// [`TmcfCnpFilter`] is the primary reading (the previous slot's busiest interface
/// passes its CNPs of the current slot at once); this one adds a slot of delay to
/// every reaction. At most [`Self::MAX_HELD`] CNPs are held per interface and slot
/// (more are counted but not held): a switch's memory is bounded by groups × entries.
#[derive(Clone, Debug)]
pub struct BufferedTmcfCnpFilter {
    pub slot: Duration,
    groups: BTreeMap<u32, BufferedState>,
}

#[derive(Clone, Debug)]
struct BufferedState {
    slot_start: Instant,
    /// Per interface: CNPs counted in the current slot and the arrival times held.
    counts: Vec<u32>,
    held: Vec<Vec<Instant>>,
    /// The interface released for the previous slot (the tie-break).
    chosen: Option<usize>,
    /// Release times, ascending.
    due: std::collections::VecDeque<Instant>,
}

impl BufferedTmcfCnpFilter {
    /// CNPs held per interface and slot: rocast's assumption (the poster gives none). A
    /// 50 µs slot of 4 KiB packets at 100 Gb/s carries about 150 packets per interface,
    /// so 64 is nearly every other packet marked, far above ECN's Pmax of 1 %; past it
    /// CNPs still count toward the choice but are not released.
    pub const MAX_HELD: usize = 64;

    pub fn new(slot: Duration) -> Self {
        BufferedTmcfCnpFilter {
            slot,
            groups: BTreeMap::new(),
        }
    }

    /// Ends the slot(s) of `st` that are over by `now`: the busiest interface's held
    /// CNPs become due one slot after each arrived.
    fn roll(st: &mut BufferedState, now: Instant, slot: Duration) {
        if slots_passed(&mut st.slot_start, now, slot).is_none() {
            return;
        }
        let max = st.counts.iter().copied().max().unwrap_or(0);
        if max > 0 {
            let pick = if st.chosen.is_some_and(|c| st.counts.get(c) == Some(&max)) {
                st.chosen
            } else {
                st.counts.iter().position(|&c| c == max)
            };
            if let Some(i) = pick {
                st.chosen = Some(i);
                st.due.extend(st.held[i].iter().map(|&t| t + slot));
            }
        }
        st.counts.iter_mut().for_each(|c| *c = 0);
        st.held.iter_mut().for_each(Vec::clear);
    }
}

impl CnpFilter for BufferedTmcfCnpFilter {
    fn admit(&mut self, now: Instant, group: u32, entry: usize, entries: usize) -> bool {
        let slot = self.slot;
        let st = self.groups.entry(group).or_insert_with(|| BufferedState {
            slot_start: now,
            counts: Vec::new(),
            held: Vec::new(),
            chosen: None,
            due: Default::default(),
        });
        Self::roll(st, now, slot);
        if st.counts.len() < entries {
            st.counts.resize(entries, 0);
            st.held.resize(entries, Vec::new());
        }
        if let Some(c) = st.counts.get_mut(entry) {
            *c = c.saturating_add(1);
            if st.held[entry].len() < Self::MAX_HELD {
                st.held[entry].push(now);
            }
        }
        false // every CNP waits for its slot to end
    }
    fn forget(&mut self, group: u32) {
        self.groups.remove(&group);
    }
    fn holds(&self) -> bool {
        true
    }
    fn release(&mut self, now: Instant, out: &mut Vec<u32>) {
        let slot = self.slot;
        for (&g, st) in self.groups.iter_mut() {
            Self::roll(st, now, slot);
            while st.due.front().is_some_and(|&t| t <= now) {
                st.due.pop_front();
                out.push(g);
            }
        }
    }
    fn next_release(&self) -> Option<Instant> {
        let w = self.slot.as_ps().max(1);
        self.groups
            .values()
            .filter_map(|st| {
                let slot_end = st
                    .counts
                    .iter()
                    .any(|&c| c > 0)
                    .then(|| st.slot_start + Duration::from_ps(w));
                match (st.due.front().copied(), slot_end) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min()
    }
    fn memory_bytes(&self) -> usize {
        self.groups
            .values()
            .map(|s| {
                96 + s.counts.capacity() * 4
                    + s.held.iter().map(|h| 24 + h.capacity() * 8).sum::<usize>()
                    + s.due.capacity() * 8
            })
            .sum()
    }
    fn name(&self) -> &'static str {
        "tmcf-buffered"
    }
}

/// rocast's damped TMCF — rocast's own variant, not a paper's.
///
/// Why: TMCF as specified hands the choice to any interface that counted more in the
/// last slot. Under ECN's sparse marking (Pmax 1 %) a slot holds zero or one CNP per
/// interface, so with k equally congested branches the choice follows whichever branch
/// marked last: the sender hears the *maximum* of k noisy signals, a selection bias
/// that leaves it below the fair share (`tmcf-robustness`). A choice pinned to one
/// congested branch holds the fair share in the same experiment (the other branches'
/// unicasts adapt around the multicast), but could not follow a moving bottleneck.
///
/// What: TMCF's slots, but each interface's CNPs are counted over a sliding window
/// (a count decayed by 2^-[`Self::WINDOW_SHIFT`] per slot: about 32 slots, 1.6 ms at
/// the paper's 50 µs slot), and the choice moves only when another interface's count
/// exceeds the chosen one's by a significant margin: `n_other − n_chosen > z ·
/// sqrt(n_other + n_chosen)` (the difference of two Poisson counts in standard
/// deviations). Equally congested branches then rarely trade the choice, while a
/// branch that clearly marks more takes it within a few hundred microseconds. `z`
/// ([`Self::DEFAULT_Z`] = 3 unless configured) and the window are rocast's
/// assumptions; `tmcf-robustness` shows the sensitivity to `z`. The first CNP of a
/// group picks its interface at once, as in TMCF.
#[derive(Clone, Debug)]
pub struct DampedTmcfCnpFilter {
    pub slot: Duration,
    /// Margin of a change of choice, in standard deviations.
    pub z: f64,
    groups: BTreeMap<u32, DampedState>,
}

#[derive(Clone, Debug)]
struct DampedState {
    slot_start: Instant,
    /// CNPs per interface in the current slot.
    counts: Vec<u32>,
    /// CNPs per interface over the sliding window (decayed per slot).
    window: Vec<f64>,
    chosen: Option<usize>,
}

impl DampedTmcfCnpFilter {
    /// A slot's count decays by 2^-WINDOW_SHIFT per slot: a window of about 32 slots.
    pub const WINDOW_SHIFT: i32 = 5;
    /// Margin of a change of choice, standard deviations.
    pub const DEFAULT_Z: f64 = 3.0;

    pub fn new(slot: Duration, z: f64) -> Self {
        DampedTmcfCnpFilter {
            slot,
            z: if z.is_finite() {
                z.max(0.0)
            } else {
                Self::DEFAULT_Z
            },
            groups: BTreeMap::new(),
        }
    }
    /// The interface whose CNPs pass now, for inspection.
    pub fn chosen(&self, group: u32) -> Option<usize> {
        self.groups.get(&group).and_then(|s| s.chosen)
    }
    /// A group's windowed CNP counts, for inspection.
    pub fn window_counts(&self, group: u32) -> Option<&[f64]> {
        self.groups.get(&group).map(|s| s.window.as_slice())
    }
}

impl DampedState {
    /// Folds the finished slot and `empty` further empty slots into the window, then
    /// moves the choice if another interface now counts significantly more.
    fn close_slots(&mut self, empty: u64, z: f64) {
        let keep = 1.0 - 2f64.powi(-DampedTmcfCnpFilter::WINDOW_SHIFT);
        let decay = keep.powi(empty.min(4096) as i32);
        for (n, c) in self.window.iter_mut().zip(&self.counts) {
            *n = (*n * keep + *c as f64) * decay;
        }
        self.counts.iter_mut().for_each(|c| *c = 0);
        let Some(c) = self.chosen else { return };
        let mine = self.window.get(c).copied().unwrap_or(0.0);
        // The largest count, the lowest interface among equals.
        let mut best = c;
        let mut top = mine;
        for (i, &n) in self.window.iter().enumerate() {
            if n > top {
                (best, top) = (i, n);
            }
        }
        if best != c && top - mine > z * (top + mine).sqrt() {
            self.chosen = Some(best);
        }
    }
}

impl CnpFilter for DampedTmcfCnpFilter {
    fn admit(&mut self, now: Instant, group: u32, entry: usize, entries: usize) -> bool {
        let st = self.groups.entry(group).or_insert_with(|| DampedState {
            slot_start: now,
            counts: Vec::new(),
            window: Vec::new(),
            chosen: None,
        });
        if st.counts.len() < entries {
            st.counts.resize(entries, 0);
            st.window.resize(entries, 0.0);
        }
        if let Some(slots) = slots_passed(&mut st.slot_start, now, self.slot) {
            st.close_slots(slots - 1, self.z);
        }
        count_in_slot(&mut st.counts, &mut st.chosen, entry)
    }
    fn forget(&mut self, group: u32) {
        self.groups.remove(&group);
    }
    fn memory_bytes(&self) -> usize {
        self.groups
            .values()
            .map(|s| 72 + s.counts.capacity() * 4 + s.window.capacity() * 8)
            .sum()
    }
    fn name(&self) -> &'static str {
        "tmcf-damped"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_ps(n * 1_000_000)
    }

    #[test]
    fn policy_names_round_trip_and_build_their_filter() {
        let w = Duration::from_us(50);
        let built: Vec<&str> = CnpFilterPolicy::NAMES
            .iter()
            .map(|n| {
                let p = CnpFilterPolicy::from_name(n, w).unwrap();
                assert_eq!(p.name(), *n);
                p.build().name()
            })
            .collect();
        assert_eq!(
            built,
            [
                "cepheus-counter",
                "tmcf",
                "tmcf-damped",
                "tmcf-buffered",
                "forward-all"
            ]
        );
        let e = CnpFilterPolicy::from_name("counter", w)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cepheus, tmcf, tmcf-damped, tmcf-buffered, forward-all"),
            "{e}"
        );
    }

    /// The buffered reading, CNP by CNP: slot T1 = [0, 50) us hears interface 0 twice
    /// (at 10 and 30) and interface 1 once; nothing passes on arrival; when T1 ends,
    /// interface 0's two CNPs are released at 60 and 80 us (one slot after each came),
    /// interface 1's never.
    #[test]
    fn buffered_tmcf_releases_the_busiest_interfaces_cnps_one_slot_later() {
        let mut f = BufferedTmcfCnpFilter::new(Duration::from_us(50));
        assert_eq!(f.next_release(), None);
        assert!(!f.admit(us(0), 9, 1, 2)); // the group's slots start at its first CNP
        assert!(!f.admit(us(10), 9, 0, 2));
        assert!(!f.admit(us(30), 9, 0, 2));
        // Due: the end of T1.
        assert_eq!(f.next_release(), Some(us(50)));
        let mut out = Vec::new();
        f.release(us(49), &mut out);
        assert!(out.is_empty());
        f.release(us(50), &mut out);
        assert!(out.is_empty(), "nothing is due before 60 us");
        assert_eq!(f.next_release(), Some(us(60)));
        f.release(us(60), &mut out);
        assert_eq!(out, [9]);
        assert_eq!(f.next_release(), Some(us(80)));
        f.release(us(200), &mut out);
        assert_eq!(out, [9, 9], "interface 1's single CNP is never released");
        assert_eq!(f.next_release(), None);
        // A tie in the next slot keeps the interface chosen before.
        assert!(!f.admit(us(210), 9, 1, 2));
        assert!(!f.admit(us(220), 9, 0, 2));
        out.clear();
        f.release(us(400), &mut out);
        assert_eq!(out, [9]);
        f.forget(9);
        assert_eq!(f.next_release(), None);
        assert_eq!(f.memory_bytes(), 0);
    }

    /// A flood of CNPs holds at most MAX_HELD per interface and slot.
    #[test]
    fn buffered_tmcf_holds_a_bounded_number_of_cnps() {
        let mut f = BufferedTmcfCnpFilter::new(Duration::from_us(50));
        for i in 0..10_000u64 {
            f.admit(Instant::from_ps(i * 1_000), 1, 0, 1);
        }
        let mut out = Vec::new();
        f.release(us(1_000), &mut out);
        assert_eq!(out.len(), BufferedTmcfCnpFilter::MAX_HELD);
    }

    #[test]
    fn forward_all_passes_everything() {
        let mut f = ForwardAllCnp;
        assert!((0..10).all(|i| f.admit(us(i), 1, (i % 3) as usize, 3)));
    }

    #[test]
    fn only_the_most_congested_path_passes() {
        let mut f = CounterCnpFilter::new(Duration::from_us(50));
        // Path 0 is congested: 5 CNPs. Path 1 sends one: it is not the worst, dropped.
        for i in 0..5 {
            assert!(f.admit(us(i), 7, 0, 2));
        }
        assert!(!f.admit(us(6), 7, 1, 2));
        assert!(f.admit(us(7), 7, 0, 2));
        assert_eq!(f.counters(7), Some(&[6u16, 1][..]));
        // Another group's counters are separate.
        assert!(f.admit(us(8), 8, 1, 2));
    }

    #[test]
    fn equally_congested_paths_do_not_all_pass() {
        let mut f = CounterCnpFilter::new(Duration::from_us(1_000));
        // Three paths alternate one CNP each: the first to speak keeps the ties.
        let passed: Vec<bool> = (0..9)
            .map(|i| f.admit(us(i), 1, (i % 3) as usize, 3))
            .collect();
        assert_eq!(
            passed,
            [true, false, false, true, false, false, true, false, false]
        );
    }

    #[test]
    fn aging_lets_a_new_bottleneck_take_over() {
        let mut f = CounterCnpFilter::new(Duration::from_us(10));
        for i in 0..8 {
            assert!(f.admit(us(i), 1, 0, 2));
        }
        assert!(!f.admit(us(9), 1, 1, 2), "path 0 still dominates");
        // Path 0 goes quiet; three windows later its 8 CNPs have aged to 1. A tie
        // stays with path 0, whose CNPs passed last; one more CNP and path 1 leads.
        assert!(!f.admit(us(30), 1, 1, 2));
        assert_eq!(f.counters(1), Some(&[1u16, 1][..]));
        assert!(f.admit(us(31), 1, 1, 2));
        assert!(f.admit(us(32), 1, 1, 2));
        assert!(
            !f.admit(us(33), 1, 0, 2),
            "the old bottleneck is no longer the worst"
        );
        f.forget(1);
        assert!(f.counters(1).is_none());
    }

    // ---- TMCF slot logic, packet by packet (slot 50 µs) ----

    #[test]
    fn tmcf_first_slot_passes_the_first_interface_heard() {
        let mut f = TmcfCnpFilter::new(Duration::from_us(50));
        assert!(
            f.admit(us(1), 1, 2, 3),
            "nothing known: the first CNP passes"
        );
        assert_eq!(f.chosen(1), Some(2));
        assert!(
            !f.admit(us(2), 1, 0, 3),
            "another interface in the same slot is held back"
        );
        assert!(f.admit(us(3), 1, 2, 3));
    }

    #[test]
    fn tmcf_next_slot_follows_the_largest_count() {
        let mut f = TmcfCnpFilter::new(Duration::from_us(50));
        // Slot [0, 50): interface 0 first (chosen), but interface 1 counts 3 to 1.
        assert!(f.admit(us(0), 1, 0, 2));
        for t in [10, 20, 30] {
            assert!(!f.admit(us(t), 1, 1, 2));
        }
        // Slot [50, 100): only interface 1 passes.
        assert!(!f.admit(us(55), 1, 0, 2));
        assert!(f.admit(us(60), 1, 1, 2));
        assert_eq!(f.chosen(1), Some(1));
    }

    #[test]
    fn tmcf_ties_keep_the_previous_choice_else_the_lowest() {
        let mut f = TmcfCnpFilter::new(Duration::from_us(50));
        assert!(f.admit(us(0), 1, 2, 3)); // chosen 2
        assert!(!f.admit(us(1), 1, 1, 3));
        // Tie 1:1 between 1 and 2: 2 keeps the next slot.
        assert!(f.admit(us(51), 1, 2, 3));
        assert!(!f.admit(us(52), 1, 1, 3));
        assert!(!f.admit(us(53), 1, 0, 3));
        // Slot [100, 150) after a three-way tie 1:1:1: 2 still holds it.
        assert!(f.admit(us(101), 1, 2, 3));
        // A tie the previous choice is not part of goes to the lowest interface.
        let mut g = TmcfCnpFilter::new(Duration::from_us(50));
        assert!(g.admit(us(0), 9, 2, 3)); // chosen 2, count 1
        for t in [1, 2] {
            g.admit(us(t), 9, 0, 3);
            g.admit(us(t), 9, 1, 3);
        }
        assert!(g.admit(us(60), 9, 0, 3));
        assert!(!g.admit(us(61), 9, 1, 3));
    }

    #[test]
    fn tmcf_empty_or_skipped_slots_keep_the_choice() {
        let mut f = TmcfCnpFilter::new(Duration::from_us(50));
        assert!(f.admit(us(0), 1, 0, 2));
        // Slot [50, 100) is empty; at 120 µs interface 0 still holds the choice.
        assert!(!f.admit(us(120), 1, 1, 2));
        assert_eq!(f.chosen(1), Some(0));
        // Slot [100, 150) counted 1 for interface 1 and none for 0: 1 takes over.
        assert!(!f.admit(us(160), 1, 0, 2));
        assert!(f.admit(us(170), 1, 1, 2));
        assert_eq!(f.chosen(1), Some(1));
        // Many empty slots later, still interface 1.
        assert!(f.admit(us(5_000), 1, 1, 2));
        assert!(!f.admit(us(5_001), 1, 0, 2));
    }

    #[test]
    fn tmcf_groups_are_independent_and_forgotten() {
        let mut f = TmcfCnpFilter::new(Duration::from_us(50));
        assert!(f.admit(us(0), 1, 0, 2));
        assert!(f.admit(us(0), 2, 1, 2));
        assert!(!f.admit(us(1), 1, 1, 2));
        assert!(f.memory_bytes() > 0);
        f.forget(1);
        f.forget(2);
        assert_eq!(f.memory_bytes(), 0);
        assert!(
            !f.admit(us(2), 3, 5, 2),
            "an entry beyond the table passes nothing"
        );
    }

    // ---- rocast's damped TMCF, packet by packet (slot 50 µs) ----

    #[test]
    fn damped_tmcf_holds_its_branch_against_equal_noise() {
        let mut f = DampedTmcfCnpFilter::new(Duration::from_us(50), 3.0);
        assert!(f.admit(us(0), 1, 0, 3), "the first CNP picks its interface");
        // Branches 1, 2 and 0 mark one CNP each in turn, one per slot: TMCF hands
        // the choice to each in turn; the damped choice stays with branch 0.
        let mut t = 50;
        for slot in 0..300u64 {
            let entry = [1, 2, 0][(slot % 3) as usize];
            assert_eq!(f.admit(us(t + 1), 1, entry, 3), entry == 0, "slot {slot}");
            t += 50;
        }
        assert_eq!(f.chosen(1), Some(0));
        let mut g = TmcfCnpFilter::new(Duration::from_us(50));
        g.admit(us(0), 1, 0, 3);
        g.admit(us(51), 1, 1, 3);
        g.admit(us(101), 1, 2, 3);
        assert_eq!(
            g.chosen(1),
            Some(1),
            "TMCF itself moves to the last slot's marker"
        );
    }

    #[test]
    fn damped_tmcf_moves_to_a_clearly_worse_branch_and_decays() {
        let mut f = DampedTmcfCnpFilter::new(Duration::from_us(50), 3.0);
        assert!(f.admit(us(0), 1, 0, 2));
        // Branch 1 marks one CNP per slot (a receiver's most, at 50 µs CNP spacing),
        // branch 0 is quiet: branch 1 takes over once its windowed count n passes
        // 3·sqrt(n + branch 0's): 14 slots of one CNP each (0.7 ms) against the one
        // CNP branch 0 counted first, still in its window.
        let mut switched_at = None;
        for slot in 1..20u64 {
            if f.admit(us(slot * 50 + 1), 1, 1, 2) && switched_at.is_none() {
                switched_at = Some(slot);
            }
        }
        assert_eq!(switched_at, Some(15), "{:?}", f.window_counts(1));
        assert!(!f.admit(us(1001), 1, 0, 2));
        // A long silence decays every count; the choice stands.
        assert!(f.admit(us(200_000), 1, 1, 2));
        let n = f.window_counts(1).unwrap();
        assert!(n.iter().all(|&v| v < 1e-3), "{n:?}");
        assert!(!f.admit(us(200_001), 1, 5, 2), "beyond the table: nothing");
        f.forget(1);
        assert!(f.window_counts(1).is_none());
        assert_eq!(f.memory_bytes(), 0);
    }

    #[test]
    fn damped_policy_keeps_its_margin() {
        let p = CnpFilterPolicy::from_name("tmcf-damped", Duration::from_us(50)).unwrap();
        assert_eq!(p, CnpFilterPolicy::TmcfDamped(Duration::from_us(50), 300));
        assert_eq!(
            p.with_damped_z(1.5),
            CnpFilterPolicy::TmcfDamped(Duration::from_us(50), 150)
        );
        assert_eq!(
            CnpFilterPolicy::ForwardAll.with_damped_z(2.0),
            CnpFilterPolicy::ForwardAll
        );
    }
}
