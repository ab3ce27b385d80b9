//! Who may hold the admin port's places, so sockets that never log in
//! cannot lock operators out: connections not logged in yet hold at most
//! [`MAX_CONNECTIONS`] - [`RESERVED_FOR_LOGGED_IN`] places, at most
//! [`MAX_PENDING_PER_ADDRESS`] of them per client address (IPv6 per /64, as
//! the login throttle counts), and each has [`LOGIN_TIMEOUT`] to log in.
//! A new connection over one of these bounds is not refused: it ends the
//! oldest connection not logged in of its own address (or, over the port's
//! bounds, of the address holding the most), which had the longest time to
//! log in. Only when every place is held by a logged-in session is a new
//! connection refused (1040).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::throttle::address_key;
use crate::sync::lock;

/// Most admin connections open at once (logged in or not).
pub const MAX_CONNECTIONS: usize = crate::net::MAX_ADMIN_CONNECTIONS;
/// Places that connections not logged in never take.
pub const RESERVED_FOR_LOGGED_IN: usize = 16;
/// Most connections not logged in from one client address.
pub const MAX_PENDING_PER_ADDRESS: usize = 4;
/// Longest an admin login may take (`limits.handshake_timeout_ms` when it
/// is shorter).
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The bounds a [`Table`] keeps.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    total: usize,
    pending: usize,
    per_address: usize,
}

const BOUNDS: Bounds = Bounds {
    total: MAX_CONNECTIONS,
    pending: MAX_CONNECTIONS - RESERVED_FOR_LOGGED_IN,
    per_address: MAX_PENDING_PER_ADDRESS,
};

/// What happens to a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// It takes a free place.
    Admit,
    /// It takes the place of the connection not logged in at this index
    /// of [`Table::pending`], which ends.
    Evict(usize),
    /// Every place is held by a logged-in session.
    Refuse,
}

#[derive(Debug)]
struct Pending {
    id: u64,
    address: IpAddr,
    /// Ends the connection when sent (or dropped on its login).
    end: Option<oneshot::Sender<()>>,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    /// Connections not logged in yet, oldest first.
    pending: Vec<Pending>,
    logged_in: usize,
}

impl Table {
    fn decide(&self, address: IpAddr, bounds: Bounds) -> Decision {
        let of = |address: IpAddr| self.pending.iter().filter(|p| p.address == address).count();
        if of(address) >= bounds.per_address {
            return self
                .pending
                .iter()
                .position(|p| p.address == address)
                .map_or(Decision::Refuse, Decision::Evict);
        }
        let full = self.pending.len() >= bounds.pending
            || self.pending.len() + self.logged_in >= bounds.total;
        if !full {
            return Decision::Admit;
        }
        // The oldest of the address holding the most (the first one listed
        // among the addresses with that many).
        let most = self.pending.iter().map(|p| of(p.address)).max();
        self.pending
            .iter()
            .position(|p| Some(of(p.address)) == most)
            .map_or(Decision::Refuse, Decision::Evict)
    }
}

/// The admin port's places.
#[derive(Debug, Default)]
pub struct Admission {
    table: Mutex<Table>,
}

/// One admitted connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    logged_in: AtomicBool,
}

impl Admission {
    /// A place for a connection from `address`, and what resolves (`Ok`)
    /// when another connection took its place before it logged in; `None`
    /// when every place is held by a logged-in session.
    pub fn admit(self: &Arc<Self>, address: IpAddr) -> Option<(Ticket, oneshot::Receiver<()>)> {
        let address = address_key(address);
        let mut table = lock(&self.table);
        match table.decide(address, BOUNDS) {
            Decision::Refuse => return None,
            Decision::Evict(index) => {
                let evicted = table.pending.remove(index);
                if let Some(end) = evicted.end {
                    let _ = end.send(());
                }
            }
            Decision::Admit => {}
        }
        let id = table.next_id;
        table.next_id += 1;
        let (end, ended) = oneshot::channel();
        table.pending.push(Pending {
            id,
            address,
            end: Some(end),
        });
        let ticket = Ticket {
            admission: Arc::clone(self),
            id,
            logged_in: AtomicBool::new(false),
        };
        Some((ticket, ended))
    }
}

impl Ticket {
    /// Moves the connection to the logged-in sessions; `false` when it
    /// lost its place meanwhile (the login is then refused).
    pub fn log_in(&self) -> bool {
        let mut table = lock(&self.admission.table);
        let Some(index) = table.pending.iter().position(|p| p.id == self.id) else {
            return false;
        };
        table.pending.remove(index);
        table.logged_in += 1;
        self.logged_in.store(true, Ordering::Release);
        true
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut table = lock(&self.admission.table);
        if self.logged_in.load(Ordering::Acquire) {
            table.logged_in -= 1;
        } else {
            table.pending.retain(|p| p.id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Bounds = Bounds {
        total: 6,
        pending: 4,
        per_address: 2,
    };

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn table(pending: &[u8], logged_in: usize) -> Table {
        Table {
            next_id: 0,
            pending: pending
                .iter()
                .enumerate()
                .map(|(id, &last)| Pending {
                    id: id as u64,
                    address: ip(last),
                    end: None,
                })
                .collect(),
            logged_in,
        }
    }

    #[test]
    fn one_address_ends_its_own_oldest_pending_connection() {
        assert_eq!(table(&[1, 2], 0).decide(ip(1), SMALL), Decision::Admit);
        assert_eq!(
            table(&[2, 1, 1], 0).decide(ip(1), SMALL),
            Decision::Evict(1)
        );
        assert_eq!(table(&[2, 1, 1], 0).decide(ip(3), SMALL), Decision::Admit);
    }

    #[test]
    fn pending_connections_leave_places_for_logged_in_sessions() {
        // Four pending (the most they hold): a fifth ends the oldest of the
        // address with the most.
        assert_eq!(
            table(&[1, 2, 3, 3], 0).decide(ip(4), SMALL),
            Decision::Evict(2)
        );
        assert_eq!(
            table(&[1, 2, 3, 4], 0).decide(ip(5), SMALL),
            Decision::Evict(0)
        );
        // Logged-in sessions may take the places pending ones may not.
        assert_eq!(table(&[1], 4).decide(ip(2), SMALL), Decision::Admit);
        assert_eq!(table(&[1, 2], 4).decide(ip(3), SMALL), Decision::Evict(0));
        // Only a port full of logged-in sessions refuses.
        assert_eq!(table(&[], 6).decide(ip(1), SMALL), Decision::Refuse);
    }

    #[tokio::test]
    async fn tickets_move_to_logged_in_and_free_their_place() {
        let admission = Arc::new(Admission::default());
        let address = IpAddr::from([127, 0, 0, 1]);
        let (first, mut first_ended) = admission.admit(address).unwrap();
        let mut others = Vec::new();
        for _ in 1..MAX_PENDING_PER_ADDRESS {
            others.push(admission.admit(address).unwrap());
        }
        assert!(first.log_in());
        // Logged in: the sender is gone, not sent.
        assert!(first_ended.try_recv().is_err());
        let (second, mut second_ended) = others.remove(0);
        let (late, _) = admission.admit(address).unwrap();
        let (late2, _) = admission.admit(address).unwrap();
        // The oldest pending one (the second) was ended by the fifth
        // pending connection of the address.
        assert_eq!(second_ended.try_recv(), Ok(()));
        drop((second, late, late2, others));
        let table = lock(&admission.table);
        assert_eq!((table.pending.len(), table.logged_in), (0, 1));
        drop(table);
        drop(first);
        assert_eq!(lock(&admission.table).logged_in, 0);
    }
}
