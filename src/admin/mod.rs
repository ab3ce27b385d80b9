//! The admin port: MySQL protocol (on `opensrv-mysql`), its own accounts
//! (`admin.users`; client accounts are refused), one small file per
//! command under [`commands`]. Every answer is a result set.

mod admission;
mod answer;
mod bounded;
mod commands;
pub mod parse;
mod shim;
pub mod throttle;

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use opensrv_mysql::{AsyncMysqlIntermediary, ErrorKind};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::control::cutover::CutoverError;
use crate::control::failover::FailoverError;
use crate::control::pause::{FleetPauseError, PauseError};
use crate::control::reload::ReloadError;
use crate::control::split::DriverError;
use crate::control::zookeeper::ZkError;
use crate::control::Control;
use crate::frontend::handshake::{refuse_too_many_connections, LoginBounds};
use crate::id::IdError;
use crate::ops::OpsError;
use crate::ops::RowVerifyError;
use crate::router::RouteError;

pub use answer::{Answer, Cell};
pub use commands::{run, Context};
pub use parse::{parse, Command, ParseError};

pub use admission::{
    LOGIN_TIMEOUT, MAX_CONNECTIONS, MAX_PENDING_PER_ADDRESS, RESERVED_FOR_LOGGED_IN,
};

/// Serves admin sessions on `listener` until the process ends, each on its
/// own task, with the client port's login bounds (`limits`:
/// `handshake_timeout_ms` but at most [`LOGIN_TIMEOUT`], `max_login_packet`,
/// then `max_allowed_packet`) applied in front of opensrv-mysql
/// ([`bounded`]), and at most [`MAX_CONNECTIONS`] connections, shared as
/// [`admission`] says (a connection that loses its place before it logged
/// in is closed; one more than [`MAX_CONNECTIONS`] logged-in sessions is
/// answered 1040 in place of the greeting).
pub async fn serve(control: Arc<Control>, listener: TcpListener) -> io::Result<()> {
    let addr = listener.local_addr()?;
    info!(%addr, "serving the admin port");
    warn_of_sample_account(&control, addr);
    let admission = Arc::new(admission::Admission::default());
    let throttle = Arc::new(throttle::LoginThrottle::default());
    crate::net::accept_forever(listener, "admin port", |stream, peer, connection_id| {
        let place = admission.admit(peer.ip());
        let bounds = LoginBounds::new(&control.engine.topology.load().config.limits)
            .at_most(LOGIN_TIMEOUT);
        let control = control.clone();
        let throttle = throttle.clone();
        async move {
            let Some((ticket, displaced)) = place else {
                debug!(connection_id, %peer, "too many admin sessions; answered 1040");
                refuse_too_many_connections(stream, MAX_CONNECTIONS);
                return;
            };
            let _ = stream.set_nodelay(true);
            let (reader, writer) = stream.into_split();
            let logged_in = Arc::new(AtomicBool::new(false));
            let reader = bounded::BoundedReader::new(reader, bounds, logged_in.clone());
            let shim = shim::AdminShim::new(
                control,
                (connection_id, peer),
                logged_in,
                throttle,
                ticket,
            );
            tokio::select! {
                ended = AsyncMysqlIntermediary::run_on(shim, reader, writer) => {
                    if let Err(error) = ended {
                        debug!(connection_id, %peer, %error, "admin session ended with an error");
                    }
                }
                Ok(()) = displaced => {
                    debug!(connection_id, %peer, "not logged in, and a newer connection took its place: closed");
                }
            }
        }
    })
    .await;
    Ok(())
}

/// Warns when the admin port listens beyond loopback and the sample
/// account `admin`/`admin` can log in there.
fn warn_of_sample_account(control: &Control, addr: std::net::SocketAddr) {
    let topology = control.engine.topology.load();
    let sample = topology.config.admin.as_ref().is_some_and(|admin| {
        admin
            .users
            .iter()
            .any(|user| user.name == "admin" && user.password == "admin")
    });
    if sample && !addr.ip().is_loopback() {
        warn!(
            %addr,
            "the admin port listens beyond loopback with the sample account admin/admin: anyone who \
             reaches {addr} can pause shards, promote replicas and read the config; give it a password \
             of your own in admin.users, or listen on 127.0.0.1"
        );
    }
}

/// Why an admin command failed; sent to the operator as a MySQL error.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The command was not understood (1064); the message says what is accepted.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// An argument that does not fit the config in force (an unknown fleet,
    /// type or host, a shard out of range) (1210).
    #[error("{0}")]
    Argument(String),
    /// `EXPLAIN ROUTE` of a statement the proxy would refuse: the client's
    /// error, with its code.
    #[error("EXPLAIN ROUTE: the proxy refuses this statement: {0}")]
    Route(RouteError),
    /// An ID or ID fields that do not fit the layout (1210).
    #[error(transparent)]
    Id(#[from] IdError),
    /// `VERIFY FLEET` could not run (1105).
    #[error("VERIFY FLEET could not run: {0}")]
    Ops(#[from] OpsError),
    /// `VERIFY SHARDS ... ROWS` refused (1210 for arguments) or could not
    /// run (1105).
    #[error("VERIFY SHARDS ... ROWS: {0}")]
    VerifyRows(#[from] RowVerifyError),
    /// `RELOAD CONFIG` refused the file; the config in force stays (1105).
    #[error("RELOAD CONFIG: {0}")]
    Reload(#[from] ReloadError),
    /// `PROMOTE REPLICA` refused or failed (1105).
    #[error("PROMOTE REPLICA: {0}")]
    Failover(#[from] FailoverError),
    /// `PAUSE SHARDS` / `RESUME SHARDS` refused or failed (1105).
    #[error("{0}")]
    Pause(#[from] PauseError),
    /// A fleet-wide `PAUSE SHARDS` / `RESUME SHARDS` refused or failed (1105).
    #[error("{0}")]
    FleetPause(#[from] FleetPauseError),
    /// `MOVE SHARDS` refused (1210 for arguments) or failed (1105).
    #[error("MOVE SHARDS: {0}")]
    Cutover(Box<CutoverError>),
    /// ZooKeeper did not answer (`SHOW PROXIES`) (1105).
    #[error("{0}")]
    ZooKeeper(#[from] ZkError),
    /// `SPLIT SHARDS` refused (1210: the arguments or the state record do
    /// not fit) or failed to start (1105, also while another split runs).
    #[error("SPLIT SHARDS: {0}")]
    Split(#[from] DriverError),
}

impl From<CutoverError> for AdminError {
    fn from(error: CutoverError) -> Self {
        AdminError::Cutover(Box::new(error))
    }
}

impl AdminError {
    /// The MySQL error code and kind the operator gets.
    pub fn kind(&self) -> ErrorKind {
        match self {
            AdminError::Parse(_) => ErrorKind::ER_PARSE_ERROR,
            AdminError::Argument(_) | AdminError::Id(_) => ErrorKind::ER_WRONG_ARGUMENTS,
            AdminError::Route(error) => ErrorKind::from(error.code()),
            AdminError::Cutover(error) if error.is_argument() => ErrorKind::ER_WRONG_ARGUMENTS,
            AdminError::VerifyRows(RowVerifyError::Argument(_)) => ErrorKind::ER_WRONG_ARGUMENTS,
            AdminError::Split(DriverError::Refused(_)) => ErrorKind::ER_WRONG_ARGUMENTS,
            AdminError::Ops(_)
            | AdminError::Reload(_)
            | AdminError::Failover(_)
            | AdminError::Pause(_)
            | AdminError::FleetPause(_)
            | AdminError::Cutover(_)
            | AdminError::VerifyRows(_)
            | AdminError::ZooKeeper(_)
            | AdminError::Split(_) => ErrorKind::ER_UNKNOWN_ERROR,
        }
    }
}
