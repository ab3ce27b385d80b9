//! The admin port: MySQL protocol (on `opensrv-mysql`), its own accounts,
//! one small file per command.

use std::io;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::engine::Engine;

/// Serves admin sessions on `listener` until the process ends.
pub async fn serve(engine: Arc<Engine>, listener: TcpListener) -> io::Result<()> {
    let _ = (engine, listener);
    Ok(())
}
