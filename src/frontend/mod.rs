//! Frontend: accepts client connections (TLS when configured), logs clients
//! in, and runs each session's command loop.

pub mod handoff;
pub mod handshake;
pub mod listener;
pub mod session;
pub mod takeover;
pub mod tls;

pub use listener::serve;
