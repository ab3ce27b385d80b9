//! The one accept loop every listening port uses (client, admin,
//! metrics), the panic isolation of a connection's task, connection
//! counting, and the open-file limit with the client connection cap it
//! leaves room for.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tracing::{error, info, warn};

use crate::topology::Topology;

/// Most admin connections open at once (logged in or not); the client
/// connection cap keeps descriptors for them.
pub const MAX_ADMIN_CONNECTIONS: usize = 64;

/// Accepts connections on `listener` forever and serves each on its own
/// task with `serve(stream, peer, connection_id)` (ids count from 1). A
/// failed accept is logged and retried after a pause, so the port keeps
/// serving: out of file descriptors or memory (EMFILE, ENFILE, ENOBUFS,
/// ENOMEM), the pause doubles from 10 ms up to 1 s while the failures
/// last, with one warning per run of failures. A panic in a connection's
/// task ends that connection only ([`isolate`]).
pub async fn accept_forever<F, Fut>(listener: TcpListener, what: &'static str, mut serve: F)
where
    F: FnMut(TcpStream, SocketAddr, u32) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    install_panic_hook();
    let mut next_id: u32 = 1;
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut failures: u64 = 0;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if failures > 0 {
                    info!(failures, "{what}: accepting again");
                    failures = 0;
                    backoff = ACCEPT_BACKOFF_MIN;
                }
                let connection_id = next_id;
                next_id = next_id.wrapping_add(1).max(1);
                tokio::spawn(isolate(
                    serve(stream, peer, connection_id),
                    what,
                    connection_id,
                    peer,
                ));
            }
            Err(error) if is_out_of_resources(&error) => {
                if failures == 0 {
                    warn!(%error, "{what}: accept failed, out of resources; retrying with a pause of up to 1 s (raise `ulimit -n` or lower limits.max_client_connections)");
                }
                failures += 1;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
            Err(error) => {
                warn!(%error, "{what}: accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF_MIN).await;
            }
        }
    }
}

const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Whether a failed accept means the process is out of descriptors or
/// memory (retrying at once would spin).
fn is_out_of_resources(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// `connection`, with a panic inside it caught: the panic ends this
/// connection only (its socket is closed as the task's state is dropped)
/// and is logged as one line with the connection, the place and the
/// message. Tokio would keep the runtime up as well; catching it here
/// gives the log line its context.
pub fn isolate<F>(
    connection: F,
    what: &'static str,
    connection_id: u32,
    peer: SocketAddr,
) -> impl Future<Output = ()> + Send + 'static
where
    F: Future<Output = ()> + Send + 'static,
{
    Isolated {
        connection: Box::pin(connection),
        what,
        connection_id,
        peer,
    }
}

struct Isolated<F> {
    connection: Pin<Box<F>>,
    what: &'static str,
    connection_id: u32,
    peer: SocketAddr,
}

impl<F: Future<Output = ()>> Future for Isolated<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let outer = IN_ISOLATED_TASK.with(|flag| flag.replace(true));
        let polled =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.connection.as_mut().poll(cx)));
        IN_ISOLATED_TASK.with(|flag| flag.set(outer));
        match polled {
            Ok(poll) => poll,
            Err(payload) => {
                let panic = LAST_PANIC
                    .with(|last| last.borrow_mut().take())
                    .unwrap_or_else(|| panic_message(payload.as_ref()).to_owned());
                error!(
                    connection_id = self.connection_id,
                    peer = %self.peer,
                    "{}: connection ended by a panic (other connections go on): {panic}",
                    self.what
                );
                Poll::Ready(())
            }
        }
    }
}

thread_local! {
    /// Whether this thread is polling an [`isolate`]d connection.
    static IN_ISOLATED_TASK: Cell<bool> = const { Cell::new(false) };
    /// The panic hook's account of the last panic in an isolated task.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that, for a panic inside an [`isolate`]d
/// connection, only records its place and message for the one log line
/// [`isolate`] writes (with a backtrace when `RUST_BACKTRACE` asks for
/// one); any other panic goes to the hook that was there before.
pub fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_ISOLATED_TASK.with(Cell::get) {
                return previous(info);
            }
            let place = info
                .location()
                .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
            let mut text = format!("{}{place}", panic_message(info.payload()));
            let backtrace = std::backtrace::Backtrace::capture();
            if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
                text.push_str(&format!("\n{backtrace}"));
            }
            LAST_PANIC.with(|last| *last.borrow_mut() = Some(text));
        }));
    });
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "(no message)"
    }
}

/// How many connections of one port are open; each holds a
/// [`ConnectionSlot`] for its whole life, logged in or not.
#[derive(Debug, Clone, Default)]
pub struct ConnectionCount(Arc<AtomicUsize>);

/// One counted connection; dropping it frees the place.
#[derive(Debug)]
pub struct ConnectionSlot(Arc<AtomicUsize>);

impl ConnectionCount {
    /// A place for one more connection, unless `limit` are open already.
    pub fn try_acquire(&self, limit: usize) -> Option<ConnectionSlot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < limit).then_some(open + 1)
            })
            .ok()
            .map(|_| ConnectionSlot(self.0.clone()))
    }

    /// A place for a connection accepted elsewhere (a session a takeover
    /// moved here), counted whatever the limit: it is open already.
    pub fn count_in(&self) -> ConnectionSlot {
        self.0.fetch_add(1, Ordering::AcqRel);
        ConnectionSlot(self.0.clone())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// File descriptors kept free beside client connections and backend pools:
/// listeners, admin and metrics connections, health checks, the config
/// watcher, logs, the runtime.
pub const FD_HEADROOM: u64 = 128;

/// The process's open-file limit (RLIMIT_NOFILE) as found at start and as
/// left after raising the soft limit to the hard one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimit {
    /// The soft limit found.
    pub found: u64,
    /// The soft limit in force.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Allocations at least this long are mapped on their own
/// ([`map_large_allocations`]).
const MAP_LARGE_ALLOCATIONS_FROM: usize = 1 << 20;

/// Makes glibc's allocator map every allocation of
/// [`MAP_LARGE_ALLOCATIONS_FROM`] bytes or more on its own, once per
/// process: freed, it goes back to the system at once, and grown, it moves
/// in place (mremap) rather than by copy. By default glibc raises that
/// threshold after the first large free (up to 32 MiB), and a long
/// statement's buffers then came from heaps that kept them once freed and
/// grew by copying (20 MiB of long data left 21 MiB held).
pub fn map_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            let threshold = libc::c_int::try_from(MAP_LARGE_ALLOCATIONS_FROM).unwrap_or(1 << 20);
            // SAFETY: mallopt only changes the allocator's tuning.
            if unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, threshold) } == 0 {
                warn!("cannot set the allocator's mmap threshold (M_MMAP_THRESHOLD)");
            }
        });
    }
}

/// Raises the soft open-file limit to the hard limit, once per process
/// (logged), and returns the limits; `None` where they cannot be read.
pub fn open_file_limit() -> Option<FileLimit> {
    static LIMIT: OnceLock<Option<FileLimit>> = OnceLock::new();
    *LIMIT.get_or_init(|| match raise_open_file_limit() {
        Ok(limit) => {
            info!(
                found = limit.found,
                soft = limit.soft,
                hard = limit.hard,
                "open file limit (RLIMIT_NOFILE)"
            );
            Some(limit)
        }
        Err(error) => {
            warn!(%error, "cannot read or raise the open file limit (RLIMIT_NOFILE)");
            None
        }
    })
}

fn raise_open_file_limit() -> io::Result<FileLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let found = limit.rlim_cur;
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        } else {
            // macOS refuses an unlimited hard limit; the soft one stays.
            warn!(error = %io::Error::last_os_error(), "cannot raise the soft open file limit to the hard limit");
        }
    }
    Ok(FileLimit {
        found,
        soft: limit.rlim_cur,
        hard: limit.rlim_max,
    })
}

/// The client port's connection limit: `limits.max_client_connections`,
/// or fewer when the open-file limit leaves no room for that many beside
/// the backend pools (every host × `backend.pool_max_per_host`, and one
/// health check each), the admin port and [`FD_HEADROOM`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCap {
    /// The limit in force.
    pub effective: usize,
    /// `limits.max_client_connections`.
    pub configured: usize,
    /// The descriptors the budget keeps for everything but clients.
    pub reserved: u64,
}

impl ClientCap {
    /// The cap for `topology` within the open-file limit `files` (none
    /// known: the configured cap).
    pub fn new(topology: &Topology, files: Option<FileLimit>) -> Self {
        let config = &topology.config;
        let configured =
            usize::try_from(config.limits.max_client_connections).unwrap_or(usize::MAX);
        let hosts = topology.hosts.len() as u64;
        let reserved = hosts * (u64::from(config.backend.pool_max_per_host) + 1)
            + MAX_ADMIN_CONNECTIONS as u64
            + FD_HEADROOM;
        let room = files.map_or(u64::MAX, |files| files.soft.saturating_sub(reserved));
        Self {
            effective: configured.min(usize::try_from(room).unwrap_or(usize::MAX)),
            configured,
            reserved,
        }
    }

    /// `Err` with what to raise when the open-file limit `files` leaves
    /// room for no client at all (a proxy that would answer every client
    /// 1040 must not start): the limit in force, what the pools, the admin
    /// port and the headroom take, and the limit that serves one client and
    /// the configured number.
    pub fn check(&self, files: Option<FileLimit>) -> Result<(), String> {
        let Some(files) = files else { return Ok(()) };
        if self.effective > 0 || self.configured == 0 {
            return Ok(());
        }
        Err(format!(
            "the open file limit (RLIMIT_NOFILE, `ulimit -n`) of {} leaves no descriptor for a \
             client connection: the backend pools (every host × (backend.pool_max_per_host + 1)), \
             {MAX_ADMIN_CONNECTIONS} admin connections and {FD_HEADROOM} spare descriptors take {}; \
             the proxy needs an open file limit of at least {} to serve one client ({} for \
             limits.max_client_connections = {}); raise `ulimit -n` (hard limit {}) or lower \
             backend.pool_max_per_host",
            files.soft,
            self.reserved,
            self.reserved + 1,
            self.reserved.saturating_add(self.configured as u64),
            self.configured,
            files.hard,
        ))
    }

    /// Logs the cap at start; a warning when the open-file limit lowered it.
    pub fn log(&self, files: Option<FileLimit>) {
        let soft = files.map(|f| f.soft);
        if self.effective < self.configured {
            warn!(
                configured = self.configured,
                effective = self.effective,
                open_file_limit = ?soft,
                reserved = self.reserved,
                "limits.max_client_connections does not fit the open file limit beside the backend pools; clients past the lower cap get 1040 (raise `ulimit -n` to serve more)"
            );
        } else {
            info!(
                max_client_connections = self.effective,
                open_file_limit = ?soft,
                reserved = self.reserved,
                "client connection cap"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};

    /// A panic in one connection's task ends that connection only: the
    /// listener goes on accepting and serving the others, and the panicking
    /// connection's socket is closed.
    #[tokio::test]
    async fn a_panic_in_one_connection_ends_that_connection_only() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let captured = Captured::default();
        let logs = captured.0.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || captured.clone())
            .finish();
        // The test runtime has one thread: the connections' tasks log here.
        let _logging = tracing::subscriber::set_default(subscriber);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let open = ConnectionCount::default();
        let counted = open.clone();
        tokio::spawn(accept_forever(
            listener,
            "test port",
            move |mut stream, _, id| {
                let slot = counted.try_acquire(10);
                async move {
                    let _slot = slot;
                    let mut byte = [0u8; 1];
                    stream.read_exact(&mut byte).await.unwrap();
                    if byte[0] == b'p' {
                        panic!("test panic in connection {id}");
                    }
                    stream.write_all(b"ok").await.unwrap();
                }
            },
        ));
        for round in 0..3 {
            let mut doomed = TcpStream::connect(addr).await.unwrap();
            doomed.write_all(b"p").await.unwrap();
            let mut rest = Vec::new();
            let read = doomed.read_to_end(&mut rest).await;
            assert!(
                read.is_err() || rest.is_empty(),
                "round {round}: closed without an answer"
            );
            let mut fine = TcpStream::connect(addr).await.unwrap();
            fine.write_all(b"q").await.unwrap();
            let mut answer = [0u8; 2];
            fine.read_exact(&mut answer).await.unwrap();
            assert_eq!(&answer, b"ok", "round {round}");
        }
        // Every connection's slot was given back, the panicked ones too.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while open.open() != 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(open.open(), 0);
        // One log line per panic, with the connection, the place and the
        // message.
        let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
        let panics: Vec<&str> = logs
            .lines()
            .filter(|line| line.contains("connection ended by a panic"))
            .collect();
        assert_eq!(panics.len(), 3, "{logs}");
        for line in panics {
            assert!(line.contains("test port"), "{line}");
            assert!(line.contains("test panic in connection"), "{line}");
            assert!(line.contains("src/net.rs:"), "{line}");
        }
    }

    /// A `tracing` writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn connection_slots_are_counted_and_given_back() {
        let open = ConnectionCount::default();
        let first = open.try_acquire(2).unwrap();
        let second = open.try_acquire(2).unwrap();
        assert!(open.try_acquire(2).is_none());
        drop(first);
        assert_eq!(open.open(), 1);
        assert!(open.try_acquire(2).is_some());
        drop(second);
        assert_eq!(open.open(), 0);
    }

    #[test]
    fn the_client_cap_leaves_room_for_the_backend_pools() {
        let topology = load(SPEC_YAML);
        let files = |soft| FileLimit {
            found: soft,
            soft,
            hard: soft,
        };
        let unlimited = ClientCap::new(&topology, None);
        assert_eq!(unlimited.effective, unlimited.configured);
        let reserved = topology.hosts.len() as u64
            * (u64::from(topology.config.backend.pool_max_per_host) + 1)
            + MAX_ADMIN_CONNECTIONS as u64
            + FD_HEADROOM;
        assert_eq!(unlimited.reserved, reserved);
        let roomy = ClientCap::new(&topology, Some(files(1_000_000)));
        assert_eq!(roomy.effective, roomy.configured);
        let tight = ClientCap::new(&topology, Some(files(reserved + 100)));
        assert_eq!(tight.effective, 100);
        assert_eq!(tight.check(Some(files(reserved + 100))), Ok(()));
        let one = ClientCap::new(&topology, Some(files(reserved + 1)));
        assert_eq!(one.effective, 1);
        assert_eq!(one.check(Some(files(reserved + 1))), Ok(()));
        let none = ClientCap::new(&topology, Some(files(reserved)));
        assert_eq!(none.effective, 0);
        let refusal = none.check(Some(files(reserved))).unwrap_err();
        assert!(
            refusal.contains(&format!(
                "open file limit (RLIMIT_NOFILE, `ulimit -n`) of {reserved} "
            )) && refusal.contains(&format!("at least {} to serve one client", reserved + 1)),
            "{refusal}"
        );
        assert_eq!(unlimited.check(None), Ok(()));
    }

    #[test]
    fn the_soft_open_file_limit_is_raised_to_the_hard_limit() {
        let limit = open_file_limit().expect("RLIMIT_NOFILE is readable on Linux");
        assert_eq!(limit.soft, limit.hard);
        assert!(limit.found <= limit.soft);
    }
}
