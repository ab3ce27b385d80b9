//! shardgate: a MySQL wire-protocol routing proxy for a Pinterest-style
//! sharded MySQL/MariaDB fleet.
//!
//! The crate is split the way a statement travels:
//! [`frontend`] (client sessions) → [`router`] (SQL → [`router::Plan`], pure)
//! → [`engine`] (executes a plan) → [`backend`] (host pools, raw connections).
//! [`topology`] holds the config and the routing table; [`id`] the 64-bit ID
//! codec; [`protocol`] the MySQL packet helpers shared by both sides.

pub mod admin;
pub mod backend;
pub mod cli;
pub mod clock;
pub mod control;
pub mod engine;
pub mod error;
pub mod frontend;
pub mod id;
pub mod net;
pub mod ops;
pub mod protocol;
pub mod router;
pub mod server;
pub mod stats;
pub mod sync;
pub mod topology;

#[cfg(test)]
mod docs_check;
#[cfg(test)]
mod layering;
#[cfg(test)]
mod test_alloc;
