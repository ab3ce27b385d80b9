//! Frontend: accepts client connections, logs clients in, and runs each
//! session's command loop.

pub mod handshake;
