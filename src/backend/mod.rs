//! Backend: raw connections to the fleet's MySQL servers and per-host pools.

pub mod conn;
pub mod health;
pub mod pool;

pub use conn::{BackendConn, BackendError, ConnKey};
pub use pool::{Backends, HostPool, PoolShare, PooledConn};
