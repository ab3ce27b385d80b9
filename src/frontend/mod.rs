//! Frontend: accepts client connections, logs clients in, and runs each
//! session's command loop.

pub mod handshake;
pub mod listener;
pub mod session;

pub use listener::serve;
