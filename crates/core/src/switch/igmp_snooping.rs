//! [`IgmpSnooping`]: which ports want which IPv4 multicast group, learnt from the
//! hosts' IGMP reports (RFC 4541 §2.1) — how a commodity switch carries plain IP
//! multicast, and how `rocast switch` carries RoCE UD multicast (the broadcast-select
//! paper's transport, 002 §II-A) to exactly the QPs' hosts that joined instead of
//! flooding every port.
//!
//! Rules (a group-granular subset of RFC 4541, sans-IO: the caller passes `now`):
//! - a report joining group G on port p makes p a member of G until `now` + the group
//!   membership interval (RFC 3376 §8.4: robustness × query interval + query response
//!   interval) when a querier runs, else until a leave;
//! - a leave (v2 Leave, or a v3 record wanting no source) removes p at once (the
//!   switch has no other host behind a host port: immediate leave, RFC 4541 §2.1.1);
//!   on a port toward another switch a leave is ignored — other hosts may sit behind
//!   it — and the membership ages out instead;
//! - with a query interval, the switch is the querier: a general query is due at the
//!   first call and then every interval ([`poll_query`](IgmpSnooping::poll_query)).
//!
//! Bounds (a flood of reports once grew `rocast switch` by 450 MB): with
//! [`with_limits`](IgmpSnooping::with_limits) the table holds at most a number of
//! memberships in all and per port (a port toward another switch counts only
//! against the total), a join past a cap is refused and counted
//! ([`refused`](IgmpSnooping::refused)), and without a querier memberships still age
//! (after the given idle age; a host re-reports when it is queried or re-joins).
//!
//! Memory: per (group, port) membership [`MEMBERSHIP_BYTES`] and per group with members
//! [`GROUP_BYTES`] (each group holds its own `BTreeMap` of ports: one node of
//! eleven slots); a group with no member takes nothing. Measured: 400,000 one-port
//! groups grew `rocast switch` by about 347 B each (the uncapped flood of reports).

use crate::time::{Duration, Instant};
use crate::wire::igmp::MembershipChange;
use crate::wire::Ipv4Address;
use std::collections::BTreeMap;

/// Query response interval (RFC 3376 §8.3 default, 10 s), what the general query
/// advertises and what the membership interval adds.
pub const QUERY_RESPONSE_INTERVAL: Duration = Duration::from_ms(10_000);
/// Robustness variable (RFC 3376 §8.1 default).
pub const ROBUSTNESS: u32 = 2;

/// Bytes one (group, port) membership costs.
pub const MEMBERSHIP_BYTES: usize = 24;
/// Bytes a group with members costs besides its memberships (its own `BTreeMap` node
/// and its slot in the table of groups).
pub const GROUP_BYTES: usize = 320;

/// Membership of one port: until when (`None`: until a leave).
type Expiry = Option<Instant>;

#[derive(Debug, Clone, Default)]
pub struct IgmpSnooping {
    groups: BTreeMap<u32, BTreeMap<u16, Expiry>>,
    query_interval: Option<Duration>,
    next_query: Option<Instant>,
    /// No membership ends before this (a lower bound: refreshes only move ends
    /// later), so `expire` walks the table only when something may be due.
    next_end: Option<Instant>,
    /// Caps: memberships in all and of one host port (`usize::MAX`: none).
    max_memberships: usize,
    max_per_port: usize,
    /// How long a membership lives without a querier (`None`: until its leave).
    idle_age: Option<Duration>,
    /// Memberships held, in all and per port.
    len: usize,
    per_port: BTreeMap<u16, usize>,
    refused: u64,
}

impl IgmpSnooping {
    /// A table; with `query_interval` the switch also queries (and memberships age).
    pub fn new(query_interval: Option<Duration>) -> Self {
        IgmpSnooping {
            groups: BTreeMap::new(),
            query_interval,
            next_query: None,
            next_end: None,
            max_memberships: usize::MAX,
            max_per_port: usize::MAX,
            idle_age: None,
            len: 0,
            per_port: BTreeMap::new(),
            refused: 0,
        }
    }

    /// The same table bounded (module docs): at most `max_memberships` in all and
    /// `max_per_port` per host port, memberships living `idle_age` without a querier.
    pub fn with_limits(
        mut self,
        max_memberships: usize,
        max_per_port: usize,
        idle_age: Duration,
    ) -> Self {
        self.max_memberships = max_memberships;
        self.max_per_port = max_per_port;
        self.idle_age = Some(idle_age);
        self
    }

    /// Joins refused because a cap was reached.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    fn forget(&mut self, port: u16) {
        self.len -= 1;
        if let Some(n) = self.per_port.get_mut(&port) {
            *n -= 1;
            if *n == 0 {
                self.per_port.remove(&port);
            }
        }
    }

    /// The group membership interval, when memberships age: from the querier's
    /// interval, else the idle age of [`with_limits`](Self::with_limits).
    pub fn membership_interval(&self) -> Option<Duration> {
        self.query_interval
            .map(|q| {
                Duration::from_ps(q.as_ps() * ROBUSTNESS as u64 + QUERY_RESPONSE_INTERVAL.as_ps())
            })
            .or(self.idle_age)
    }

    /// Applies one report's change from `port` (`to_switch`: the port leads to another
    /// switch). Returns whether the membership table changed.
    pub fn apply(&mut self, now: Instant, port: u16, to_switch: bool, c: MembershipChange) -> bool {
        let key = c.group.to_u32();
        if c.join {
            let until = self.membership_interval().map(|m| now + m);
            if let Some(u) = until {
                self.next_end = Some(self.next_end.map_or(u, |e| e.min(u)));
            }
            if let Some(u) = self.groups.get_mut(&key).and_then(|p| p.get_mut(&port)) {
                *u = until;
                return false;
            }
            let on_port = self.per_port.get(&port).copied().unwrap_or(0);
            if self.len >= self.max_memberships || (!to_switch && on_port >= self.max_per_port) {
                self.refused += 1;
                return false;
            }
            self.groups.entry(key).or_default().insert(port, until);
            self.len += 1;
            *self.per_port.entry(port).or_default() += 1;
            true
        } else if to_switch {
            false
        } else {
            let Some(ports) = self.groups.get_mut(&key) else {
                return false;
            };
            let removed = ports.remove(&port).is_some();
            if ports.is_empty() {
                self.groups.remove(&key);
            }
            if removed {
                self.forget(port);
            }
            removed
        }
    }

    /// The member ports of `group`, in order; `None` when the group has none (an
    /// unregistered group).
    pub fn members(&self, group: Ipv4Address) -> Option<impl Iterator<Item = u16> + '_> {
        self.groups.get(&group.to_u32()).map(|p| p.keys().copied())
    }

    /// Whether `port` joined `group`.
    pub fn is_member(&self, group: Ipv4Address, port: u16) -> bool {
        self.groups
            .get(&group.to_u32())
            .is_some_and(|p| p.contains_key(&port))
    }

    /// Every group with members, in order, with its member ports in order.
    pub fn groups(&self) -> impl Iterator<Item = (Ipv4Address, impl Iterator<Item = u16> + '_)> {
        self.groups
            .iter()
            .map(|(&g, ports)| (Ipv4Address::from_u32(g), ports.keys().copied()))
    }

    /// Every (group, port) membership, in order.
    pub fn memberships(&self) -> impl Iterator<Item = (Ipv4Address, u16)> + '_ {
        self.groups
            .iter()
            .flat_map(|(&g, ports)| ports.keys().map(move |&p| (Ipv4Address::from_u32(g), p)))
    }

    /// Drops memberships that ran out by `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> u64 {
        if self.next_end.is_none_or(|e| now < e) {
            return 0;
        }
        let mut gone = Vec::new();
        self.groups.retain(|_, ports| {
            ports.retain(|&p, until| {
                let keep = until.is_none_or(|u| u > now);
                if !keep {
                    gone.push(p);
                }
                keep
            });
            !ports.is_empty()
        });
        let n = gone.len() as u64;
        for p in gone {
            self.forget(p);
        }
        self.next_end = self
            .groups
            .values()
            .flat_map(|p| p.values().filter_map(|u| *u))
            .min();
        n
    }

    /// Whether a general query is due at `now` (then the next one is scheduled). The
    /// first call with a query interval is the start-up query.
    pub fn poll_query(&mut self, now: Instant) -> bool {
        let Some(q) = self.query_interval else {
            return false;
        };
        match self.next_query {
            Some(t) if now < t => false,
            _ => {
                self.next_query = Some(now + q);
                true
            }
        }
    }

    /// When something may be due: a query, or (a lower bound of) a membership's end;
    /// the start-up query is due at once: time zero.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let query = match (self.query_interval, self.next_query) {
            (Some(_), None) => Some(Instant::from_ps(0)),
            (_, next) => next,
        };
        self.next_end.into_iter().chain(query).min()
    }

    /// Memberships held.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
    /// Bytes of the table (the figure in `rocast switch --stats`'s memory line).
    pub fn memory_bytes(&self) -> usize {
        self.len * MEMBERSHIP_BYTES + self.groups.len() * GROUP_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(d: u8) -> Ipv4Address {
        Ipv4Address::new(239, 1, 1, d)
    }
    fn join(d: u8) -> MembershipChange {
        MembershipChange {
            group: g(d),
            join: true,
        }
    }
    fn leave(d: u8) -> MembershipChange {
        MembershipChange {
            group: g(d),
            join: false,
        }
    }
    fn t(s: u64) -> Instant {
        Instant::from_ps(s * 1_000_000_000_000)
    }
    fn ports(s: &IgmpSnooping, d: u8) -> Vec<u16> {
        s.members(g(d)).map(|m| m.collect()).unwrap_or_default()
    }

    #[test]
    fn joins_and_leaves_without_a_querier_never_age() {
        let mut s = IgmpSnooping::new(None);
        assert!(s.apply(t(0), 3, false, join(1)));
        assert!(s.apply(t(0), 1, false, join(1)));
        assert!(
            !s.apply(t(1), 1, false, join(1)),
            "a repeated join changes nothing"
        );
        assert_eq!(ports(&s, 1), vec![1, 3]);
        assert!(s.members(g(2)).is_none());
        assert_eq!(s.expire(t(100_000)), 0);
        assert_eq!(s.poll_timeout(), None);
        assert!(!s.poll_query(t(5)));
        assert!(s.apply(t(2), 3, false, leave(1)));
        assert!(!s.apply(t(2), 3, false, leave(1)));
        assert!(s.apply(t(2), 1, false, leave(1)));
        assert!(s.members(g(1)).is_none() && s.is_empty());
    }

    #[test]
    fn with_a_querier_memberships_age_and_queries_are_due_each_interval() {
        let mut s = IgmpSnooping::new(Some(Duration::from_ms(125_000)));
        assert_eq!(s.membership_interval(), Some(Duration::from_ms(260_000)));
        assert_eq!(s.poll_timeout(), Some(t(0)), "the start-up query is due");
        assert!(s.poll_query(t(0)), "start-up query");
        assert!(!s.poll_query(t(124)));
        assert_eq!(s.poll_timeout(), Some(t(125)));
        s.apply(t(10), 2, false, join(1));
        s.apply(t(100), 4, false, join(1));
        assert_eq!(s.poll_timeout(), Some(t(125)));
        assert!(s.poll_query(t(125)));
        assert_eq!(s.poll_timeout(), Some(t(250)));
        // A refresh moves port 2's end from 270 s to 400 s.
        s.apply(t(140), 2, false, join(1));
        assert_eq!(s.expire(t(359)), 0);
        assert_eq!(s.expire(t(360)), 1, "port 4 joined at 100 s, not refreshed");
        assert_eq!(ports(&s, 1), vec![2]);
        assert_eq!(s.expire(t(400)), 1);
        assert!(s.is_empty());
    }

    #[test]
    fn joins_past_the_caps_are_refused_and_counted_and_idle_memberships_age() {
        let mut s = IgmpSnooping::new(None).with_limits(3, 2, Duration::from_ms(60_000));
        assert!(s.apply(t(0), 1, false, join(1)));
        assert!(s.apply(t(0), 1, false, join(2)));
        assert!(!s.apply(t(0), 1, false, join(3)), "port 1 holds its two");
        assert_eq!(s.refused(), 1);
        assert!(s.apply(t(0), 2, false, join(3)));
        assert!(!s.apply(t(0), 3, false, join(4)), "three in all");
        assert!(
            !s.apply(t(0), 9, true, join(5)),
            "a switch port meets the total cap"
        );
        assert_eq!((s.refused(), s.len()), (3, 3));
        assert!(
            !s.apply(t(30), 1, false, join(1)),
            "a refresh is no new membership"
        );
        assert!(s.apply(t(30), 1, false, leave(2)));
        assert!(s.apply(t(30), 3, false, join(4)), "room again");
        assert_eq!(s.expire(t(60)), 1, "port 2's join at 0 s, idle 60 s");
        assert_eq!(s.expire(t(90)), 2);
        assert!(s.is_empty() && s.len() == 0);
        assert_eq!(s.memory_bytes(), 0);
    }

    #[test]
    fn a_leave_on_a_switch_port_waits_for_the_membership_to_age() {
        let mut s = IgmpSnooping::new(Some(Duration::from_ms(125_000)));
        s.apply(t(0), 7, true, join(1));
        assert!(!s.apply(t(1), 7, true, leave(1)));
        assert_eq!(ports(&s, 1), vec![7]);
        assert_eq!(s.expire(t(260)), 1);
        assert_eq!(s.memberships().count(), 0);
    }
}
