//! Failed admin logins slow down the next ones from the same address: after
//! [`FREE_FAILURES`] failures, each attempt waits a delay that doubles per
//! failure from [`FIRST_DELAY`] up to [`MAX_DELAY`], and attempts from one
//! address take turns (parallel connections do not multiply the rate). A
//! delay, never a ban: a correct password is let in after at most the
//! queue's wait, and a success forgets the address's failures. An address
//! quiet for [`FORGET_AFTER`] is forgotten. The table holds at most
//! [`MAX_ADDRESSES`] addresses; when it is full, the others share one entry
//! (an attacker with many addresses is throttled as one). IPv6 addresses
//! count per /64.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

/// Failures from one address before attempts wait.
pub const FREE_FAILURES: u32 = 3;
/// The first wait.
pub const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest wait of one attempt: the rate of a guessing loop.
pub const MAX_DELAY: Duration = Duration::from_secs(2);
/// Longest queue of attempts from one address; an attempt that would wait
/// longer is refused unchecked.
pub const MAX_QUEUE: Duration = Duration::from_secs(10);
/// An address whose last failure is this old is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(600);
/// Most addresses tracked one by one.
pub const MAX_ADDRESSES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last_failure: Instant,
    busy_until: Instant,
}

/// What an attempt must do before its password is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Wait this long, then check.
    Wait(Duration),
    /// Refused unchecked: the address's queue is full.
    Refuse,
}

/// The failed logins of the admin port, per client address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    entries: HashMap<IpAddr, Entry>,
    shared: Option<Entry>,
}

/// The address attempts are counted under (an IPv6 address by its /64).
pub(super) fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
        v4 => v4,
    }
}

fn delay(failures: u32) -> Duration {
    if failures < FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = (failures - FREE_FAILURES).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

impl Table {
    fn entry(&mut self, ip: IpAddr, now: Instant) -> Option<&mut Entry> {
        let ip = address_key(ip);
        if self.entries.contains_key(&ip) {
            return self.entries.get_mut(&ip);
        }
        if self
            .shared
            .is_some_and(|e| now.duration_since(e.last_failure) >= FORGET_AFTER)
        {
            self.shared = None;
        }
        self.shared.as_mut()
    }

    fn record_failure(&mut self, ip: IpAddr, now: Instant) {
        let ip = address_key(ip);
        let fresh = Entry {
            failures: 0,
            last_failure: now,
            busy_until: now,
        };
        if !self.entries.contains_key(&ip) && self.entries.len() >= MAX_ADDRESSES {
            self.entries
                .retain(|_, e| now.duration_since(e.last_failure) < FORGET_AFTER);
        }
        let entry = if self.entries.contains_key(&ip) || self.entries.len() < MAX_ADDRESSES {
            self.entries.entry(ip).or_insert(fresh)
        } else {
            self.shared.get_or_insert(fresh)
        };
        entry.failures = entry.failures.saturating_add(1);
        entry.last_failure = now;
    }
}

impl LoginThrottle {
    /// Takes the next turn of an attempt from `ip` at `now`.
    pub fn turn(&self, ip: IpAddr, now: Instant) -> Turn {
        let mut table = lock(&self.table);
        let Some(entry) = table.entry(ip, now) else {
            return Turn::Wait(Duration::ZERO);
        };
        if now.duration_since(entry.last_failure) >= FORGET_AFTER {
            *entry = Entry {
                failures: 0,
                last_failure: now,
                busy_until: now,
            };
        }
        let wait = delay(entry.failures);
        if wait.is_zero() {
            return Turn::Wait(Duration::ZERO);
        }
        let start = entry.busy_until.max(now);
        if start.duration_since(now) + wait > MAX_QUEUE {
            return Turn::Refuse;
        }
        entry.busy_until = start + wait;
        Turn::Wait(entry.busy_until.duration_since(now))
    }

    /// Records the outcome of an attempt from `ip`.
    pub fn record(&self, ip: IpAddr, accepted: bool, now: Instant) {
        let mut table = lock(&self.table);
        if accepted {
            table.entries.remove(&address_key(ip));
        } else {
            table.record_failure(ip, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn failures_double_the_wait_up_to_the_cap_and_a_success_resets() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        let a = ip("10.0.0.1");
        let mut waits = Vec::new();
        let mut at = now;
        for _ in 0..9 {
            let Turn::Wait(wait) = throttle.turn(a, at) else {
                panic!("refused")
            };
            waits.push(wait.as_millis());
            at += wait;
            throttle.record(a, false, at);
        }
        assert_eq!(waits, [0, 0, 0, 100, 200, 400, 800, 1600, 2000]);
        assert_eq!(
            throttle.turn(ip("10.0.0.2"), at),
            Turn::Wait(Duration::ZERO)
        );
        throttle.record(a, true, at);
        assert_eq!(throttle.turn(a, at), Turn::Wait(Duration::ZERO));
    }

    #[test]
    fn parallel_attempts_take_turns_and_a_full_queue_refuses() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        let a = ip("10.0.0.1");
        for _ in 0..10 {
            throttle.record(a, false, now);
        }
        let turns: Vec<Turn> = (0..6).map(|_| throttle.turn(a, now)).collect();
        assert_eq!(
            turns,
            [
                Turn::Wait(MAX_DELAY),
                Turn::Wait(MAX_DELAY * 2),
                Turn::Wait(MAX_DELAY * 3),
                Turn::Wait(MAX_DELAY * 4),
                Turn::Wait(MAX_DELAY * 5),
                Turn::Refuse
            ]
        );
        let later = now + FORGET_AFTER + MAX_QUEUE;
        assert_eq!(
            throttle.turn(a, later),
            Turn::Wait(Duration::ZERO),
            "forgotten"
        );
    }

    #[test]
    fn the_table_is_bounded_and_ipv6_counts_per_64() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        for n in 0..(MAX_ADDRESSES as u32 + 100) {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            for _ in 0..FREE_FAILURES {
                throttle.record(address, false, now);
            }
        }
        let table = lock(&throttle.table);
        assert_eq!(table.entries.len(), MAX_ADDRESSES);
        assert_eq!(table.shared.map(|e| e.failures), Some(100 * FREE_FAILURES));
        drop(table);
        let other = IpAddr::V4(std::net::Ipv4Addr::new(192, 168, 1, 1));
        assert!(matches!(throttle.turn(other, now), Turn::Wait(w) if w > Duration::ZERO));
        assert_eq!(
            address_key(ip("2001:db8::1")),
            address_key(ip("2001:db8::ffff:1"))
        );
        assert_ne!(
            address_key(ip("2001:db8::1")),
            address_key(ip("2001:db8:0:1::1"))
        );
        assert_eq!(address_key(ip("::ffff:10.0.0.1")), ip("10.0.0.1"));
    }
}
