//! One session's transaction as a single typed state: `autocommit`, whether
//! a transaction is open and how it was opened, what its BEGIN is sent with
//! when it binds, and the one shard connection it is bound to. Transitions
//! are methods; the single-shard invariant (a transaction is bound to at
//! most one shard's connection, and every write or locking read of it runs
//! there) is kept by [`Transaction::route_shard`] and [`Transaction::bind`].
//! The state is generic over the binding so the transitions are unit-tested
//! without connections.

use thiserror::Error;

use super::pause::ShardGuard;
use crate::backend::PooledConn;
use crate::router::{StatementKind, Target};

/// The backend connection a transaction is bound to.
pub struct BoundTransaction {
    /// The shard the transaction's first write or locking read went to
    /// (ids of the topology it bound on).
    pub target: Target,
    /// Name of the shard's fleet (ids may change across reloads).
    pub fleet: String,
    /// The connection holding the open transaction.
    pub conn: PooledConn,
    /// The transaction's registration on its shard at the pause gate:
    /// `PAUSE SHARDS` waits for the transaction to end.
    pub guard: ShardGuard,
}

/// What the transaction state needs to know of its binding.
pub trait Binding {
    /// The bound shard.
    fn shard(&self) -> u32;
    /// The name of the bound shard's fleet.
    fn fleet(&self) -> &str;
}

impl Binding for BoundTransaction {
    fn shard(&self) -> u32 {
        self.target.shard
    }

    fn fleet(&self) -> &str {
        &self.fleet
    }
}

/// How the open transaction was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// With autocommit off, by the first statement on a shard.
    Implicit,
    /// By `BEGIN` / `START TRANSACTION ...`: its text, sent to the backend
    /// when the transaction binds.
    Explicit {
        /// The statement's text.
        begin: String,
    },
}

/// What is sent with the transaction's BEGIN when it binds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    /// `SET TRANSACTION ...` (no scope): sent right before the next
    /// transaction's BEGIN on its connection (or before the next autocommit
    /// statement), then forgotten.
    next: Option<String>,
    /// SAVEPOINT statements given before the transaction bound; replayed
    /// right after its BEGIN.
    savepoints: Vec<String>,
}

/// Where the session's transaction is.
enum Phase<B> {
    /// No transaction is open. With autocommit off, SAVEPOINTs given before
    /// the statement that opens one wait in `pending`.
    Idle(Pending),
    /// A transaction is open, none of its statements needed its own
    /// connection yet (reads ran on pooled ones).
    Open { opened: Opened, pending: Pending },
    /// The transaction's first write or locking read bound it to one
    /// shard's connection.
    Bound {
        opened: Opened,
        binding: B,
        /// Whether the previous statement ran on the bound connection
        /// (`SHOW WARNINGS` then asks it).
        ran_last: bool,
    },
}

/// Where a single-shard statement runs as far as the transaction decides
/// ([`Transaction::route_shard`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardVenue {
    /// On a pooled connection, outside any transaction.
    Pool,
    /// On the bound connection.
    Bound,
    /// On a new connection the transaction binds to.
    Bind,
    /// Nowhere: a write or locking read for another shard than the one the
    /// transaction is bound to.
    OtherShard,
}

/// A transition the state refuses.
#[derive(Debug, Clone, Copy, Error, PartialEq, Eq)]
pub enum TransitionError {
    /// The transaction is bound to a connection: it must be committed or
    /// rolled back there first.
    #[error("the transaction is bound to a shard's connection; COMMIT or ROLLBACK it first")]
    Bound,
    /// Binding or sending needs an open transaction.
    #[error("no transaction is open")]
    NotOpen,
    /// A savepoint outside a transaction is the server's business.
    #[error("no transaction is open or about to open")]
    NoTransaction,
    /// `SET TRANSACTION` inside a transaction.
    #[error("Transaction characteristics can't be changed while a transaction is in progress")]
    InProgress,
}

/// What undoes a `SET autocommit` that came with other variables when the
/// server refused the SET ([`Transaction::undo_autocommit`]).
pub struct AutocommitUndo {
    autocommit: bool,
    /// The unbound transaction turning autocommit on ended, if any.
    ended: Option<(Option<Opened>, Pending)>,
}

/// A session's transaction state.
pub struct Transaction<B = BoundTransaction> {
    /// `autocommit` as the client set it.
    autocommit: bool,
    phase: Phase<B>,
}

impl<B> Default for Transaction<B> {
    /// Autocommit on, no transaction.
    fn default() -> Self {
        Self {
            autocommit: true,
            phase: Phase::Idle(Pending::default()),
        }
    }
}

impl<B: Binding> Transaction<B> {
    /// No transaction open, `autocommit` as given, and what waits for the
    /// next transaction: its `SET TRANSACTION` and the savepoints given
    /// before it (a session taken over from another process).
    pub fn restored(autocommit: bool, next: Option<String>, savepoints: Vec<String>) -> Self {
        Self {
            autocommit,
            phase: Phase::Idle(Pending { next, savepoints }),
        }
    }

    /// While no transaction is open: the pending `SET TRANSACTION` and
    /// savepoints ([`Transaction::restored`] takes them back); `None` while
    /// one is open.
    pub fn idle_pending(&self) -> Option<(Option<&str>, &[String])> {
        match &self.phase {
            Phase::Idle(pending) => Some((pending.next.as_deref(), &pending.savepoints)),
            _ => None,
        }
    }

    /// `autocommit` as the client set it.
    pub fn autocommit(&self) -> bool {
        self.autocommit
    }

    /// Whether statements are inside a transaction: an explicit one, or
    /// any statement with autocommit off.
    pub fn in_transaction(&self) -> bool {
        !self.autocommit || self.is_explicit()
    }

    /// Whether a transaction is open (`@@in_transaction`, the
    /// `SERVER_STATUS_IN_TRANS` flag): explicit, bound, or opened by a
    /// statement with autocommit off.
    pub fn is_open(&self) -> bool {
        !matches!(self.phase, Phase::Idle(_))
    }

    /// How the open transaction was opened.
    pub fn opened(&self) -> Option<&Opened> {
        match &self.phase {
            Phase::Idle(_) => None,
            Phase::Open { opened, .. } | Phase::Bound { opened, .. } => Some(opened),
        }
    }

    fn is_explicit(&self) -> bool {
        matches!(self.opened(), Some(Opened::Explicit { .. }))
    }

    /// The binding of a bound transaction.
    pub fn bound(&self) -> Option<&B> {
        match &self.phase {
            Phase::Bound { binding, .. } => Some(binding),
            _ => None,
        }
    }

    /// The binding of a bound transaction, to use its connection.
    pub fn bound_mut(&mut self) -> Option<&mut B> {
        match &mut self.phase {
            Phase::Bound { binding, .. } => Some(binding),
            _ => None,
        }
    }

    /// Whether the transaction is bound to a connection.
    pub fn is_bound(&self) -> bool {
        matches!(self.phase, Phase::Bound { .. })
    }

    /// Whether the transaction is bound to `shard` of the fleet named
    /// `fleet`.
    pub fn is_bound_to(&self, shard: u32, fleet: &str) -> bool {
        self.bound()
            .is_some_and(|bound| bound.shard() == shard && bound.fleet() == fleet)
    }

    /// The bound connection for the statement about to run on it (it is
    /// then the one that ran the previous statement).
    pub fn run_on_bound(&mut self) -> Option<&mut B> {
        match &mut self.phase {
            Phase::Bound {
                binding, ran_last, ..
            } => {
                *ran_last = true;
                Some(binding)
            }
            _ => None,
        }
    }

    /// A statement runs on another connection than the bound one.
    pub fn ran_elsewhere(&mut self) {
        if let Phase::Bound { ran_last, .. } = &mut self.phase {
            *ran_last = false;
        }
    }

    /// Whether the previous statement ran on the bound connection.
    pub fn ran_last_on_bound(&self) -> bool {
        matches!(self.phase, Phase::Bound { ran_last: true, .. })
    }

    /// BEGIN / START TRANSACTION (`begin`: its text): an explicit
    /// transaction opens; savepoints pending from before are dropped, a
    /// pending `SET TRANSACTION` stays for it. A bound transaction must be
    /// committed first.
    pub fn begin(&mut self, begin: String) -> Result<(), TransitionError> {
        let next = match &mut self.phase {
            Phase::Bound { .. } => return Err(TransitionError::Bound),
            Phase::Idle(pending) | Phase::Open { pending, .. } => pending.next.take(),
        };
        self.phase = Phase::Open {
            opened: Opened::Explicit { begin },
            pending: Pending {
                next,
                savepoints: Vec::new(),
            },
        };
        Ok(())
    }

    /// `SET autocommit`: turning it on ends the open transaction (a bound
    /// one must be committed first); turning it off changes nothing else.
    /// The returned value undoes it.
    pub fn set_autocommit(&mut self, on: bool) -> Result<AutocommitUndo, TransitionError> {
        let mut undo = AutocommitUndo {
            autocommit: self.autocommit,
            ended: None,
        };
        if on {
            let (opened, pending) = match &mut self.phase {
                Phase::Bound { .. } => return Err(TransitionError::Bound),
                Phase::Idle(pending) => (None, std::mem::take(pending)),
                Phase::Open { opened, pending } => (Some(opened.clone()), std::mem::take(pending)),
            };
            self.phase = Phase::Idle(Pending {
                next: pending.next.clone(),
                savepoints: Vec::new(),
            });
            undo.ended = Some((opened, pending));
        }
        self.autocommit = on;
        Ok(undo)
    }

    /// Puts back what [`Transaction::set_autocommit`] changed (the server
    /// refused the SET it came with). A transaction bound meanwhile stays
    /// as it is.
    pub fn undo_autocommit(&mut self, undo: AutocommitUndo) {
        self.autocommit = undo.autocommit;
        if let (Some((opened, pending)), Phase::Idle(_)) = (undo.ended, &self.phase) {
            self.phase = match opened {
                None => Phase::Idle(pending),
                Some(opened) => Phase::Open { opened, pending },
            };
        }
    }

    /// `SET TRANSACTION ...` without a scope (`sql`): kept for the next
    /// transaction; refused inside one.
    pub fn set_next(&mut self, sql: String) -> Result<(), TransitionError> {
        match &mut self.phase {
            Phase::Idle(pending) => {
                pending.next = Some(sql);
                Ok(())
            }
            _ => Err(TransitionError::InProgress),
        }
    }

    /// The pending `SET TRANSACTION` an autocommit statement (outside any
    /// transaction) takes; it stays pending until it is sent
    /// ([`Transaction::next_sent`]).
    pub fn next_for_autocommit(&self) -> Option<String> {
        match &self.phase {
            Phase::Idle(pending) if !self.in_transaction() => pending.next.clone(),
            _ => None,
        }
    }

    /// The pending `SET TRANSACTION` was sent: it is used up.
    pub fn next_sent(&mut self) {
        if let Phase::Idle(pending) | Phase::Open { pending, .. } = &mut self.phase {
            pending.next = None;
        }
    }

    /// A statement ran on shards (not a schema change): with autocommit off
    /// it opens the implicit transaction, if none is open.
    pub fn statement_on_shards(&mut self) {
        if self.autocommit {
            return;
        }
        if let Phase::Idle(pending) = &mut self.phase {
            let pending = std::mem::take(pending);
            self.phase = Phase::Open {
                opened: Opened::Implicit,
                pending,
            };
        }
    }

    /// A read over several shards outside a transaction is the statement
    /// a pending `SET TRANSACTION` was for; its parts run without it.
    pub fn multi_shard_read(&mut self) {
        if !self.in_transaction() {
            self.next_sent();
        }
    }

    /// SAVEPOINT (`sql`) before the transaction bound: recorded, to be
    /// replayed after its BEGIN. A bound transaction runs it on its
    /// connection; outside a transaction it is not recorded.
    pub fn add_savepoint(&mut self, sql: String) -> Result<(), TransitionError> {
        if !self.in_transaction() {
            return Err(TransitionError::NoTransaction);
        }
        match &mut self.phase {
            Phase::Bound { .. } => Err(TransitionError::Bound),
            Phase::Idle(pending) | Phase::Open { pending, .. } => {
                pending.savepoints.push(sql);
                Ok(())
            }
        }
    }

    /// Where a single-shard statement of `kind` for `shard` of the fleet
    /// named `fleet` runs: outside a transaction, and a schema change
    /// always, on a pooled connection; inside one, on the bound connection
    /// when it is the bound shard's; a plain read of another shard on a
    /// pooled connection; the first write or locking read binds the
    /// transaction; a write or locking read for a second shard is refused.
    pub fn route_shard(&self, shard: u32, fleet: &str, kind: StatementKind) -> ShardVenue {
        if kind == StatementKind::SchemaChange || !self.in_transaction() {
            return ShardVenue::Pool;
        }
        match &self.phase {
            Phase::Bound { .. } if self.is_bound_to(shard, fleet) => ShardVenue::Bound,
            _ if kind == StatementKind::Read => ShardVenue::Pool,
            Phase::Bound { .. } => ShardVenue::OtherShard,
            _ => ShardVenue::Bind,
        }
    }

    /// What opens the transaction on the connection it binds to, in order:
    /// the pending `SET TRANSACTION`, the BEGIN (the client's text for an
    /// explicit transaction, else `START TRANSACTION`), the pending
    /// savepoints. They are no longer pending afterwards, whether the
    /// binding then succeeds or not.
    pub fn take_opening(&mut self) -> Result<Vec<String>, TransitionError> {
        let (opened, pending) = match &mut self.phase {
            Phase::Idle(_) => return Err(TransitionError::NotOpen),
            Phase::Bound { .. } => return Err(TransitionError::Bound),
            Phase::Open { opened, pending } => (opened, std::mem::take(pending)),
        };
        let begin = match opened {
            Opened::Explicit { begin } if !begin.is_empty() => begin.clone(),
            _ => "START TRANSACTION".to_owned(),
        };
        Ok(pending
            .next
            .into_iter()
            .chain(std::iter::once(begin))
            .chain(pending.savepoints)
            .collect())
    }

    /// Binds the open transaction to `binding`, the connection its
    /// [`Transaction::take_opening`] statements ran on.
    pub fn bind(&mut self, binding: B) -> Result<(), TransitionError> {
        let opened = match &mut self.phase {
            Phase::Idle(_) => return Err(TransitionError::NotOpen),
            Phase::Bound { .. } => return Err(TransitionError::Bound),
            Phase::Open { opened, .. } => std::mem::replace(opened, Opened::Implicit),
        };
        self.phase = Phase::Bound {
            opened,
            binding,
            ran_last: false,
        };
        Ok(())
    }

    /// COMMIT or ROLLBACK from the client: no transaction is open
    /// afterwards, and a pending `SET TRANSACTION` is forgotten. Returns
    /// the binding for the caller to send it on.
    pub fn finish(&mut self) -> Option<B> {
        self.replace_phase(Phase::Idle(Pending::default()))
    }

    /// The commit a server makes before BEGIN, `SET autocommit = 1` or a
    /// schema change, sent on the bound connection (returned): an implicit
    /// transaction ends; an explicit one stays open, unbound, until the
    /// statement that committed it opens the next or ends it. Pending
    /// savepoints go.
    pub fn commit_implicitly(&mut self) -> Option<B> {
        let next = match &mut self.phase {
            Phase::Idle(pending) | Phase::Open { pending, .. } => pending.next.take(),
            Phase::Bound { .. } => None,
        };
        let pending = Pending {
            next,
            savepoints: Vec::new(),
        };
        let after = match self.opened() {
            Some(Opened::Explicit { begin }) => Phase::Open {
                opened: Opened::Explicit {
                    begin: begin.clone(),
                },
                pending,
            },
            _ => Phase::Idle(pending),
        };
        self.replace_phase(after)
    }

    /// After a schema change's implicit commit: no transaction is open
    /// (a pending `SET TRANSACTION` stays). A transaction still bound (its
    /// COMMIT was refused) stays open.
    pub fn end_unbound(&mut self) {
        let next = match &mut self.phase {
            Phase::Bound { .. } => return,
            Phase::Idle(pending) | Phase::Open { pending, .. } => pending.next.take(),
        };
        self.phase = Phase::Idle(Pending {
            next,
            savepoints: Vec::new(),
        });
    }

    /// Ends the transaction without touching the server (the caller rolls
    /// back, or the server already did: a deadlock, an idle transaction on
    /// a shard being paused, its shard moved): no transaction is open, and
    /// with autocommit off the next statement opens one. Returns the
    /// binding, if any, for the caller to settle.
    pub fn end(&mut self) -> Option<B> {
        if !self.is_bound() {
            self.end_unbound();
            return None;
        }
        self.replace_phase(Phase::Idle(Pending::default()))
    }

    /// The bound connection failed or was dropped (the server rolls the
    /// transaction back): the binding is returned, and the session's
    /// transaction stays open as the client opened it, unbound.
    pub fn lose_binding(&mut self) -> Option<B> {
        let opened = self.opened().cloned()?;
        if !self.is_bound() {
            return None;
        }
        self.replace_phase(Phase::Open {
            opened,
            pending: Pending::default(),
        })
    }

    /// Puts `phase` in place and returns the binding of the old one.
    fn replace_phase(&mut self, phase: Phase<B>) -> Option<B> {
        match std::mem::replace(&mut self.phase, phase) {
            Phase::Bound { binding, .. } => Some(binding),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binding without a connection.
    #[derive(Debug)]
    struct Fake {
        shard: u32,
        fleet: &'static str,
    }

    impl Binding for Fake {
        fn shard(&self) -> u32 {
            self.shard
        }

        fn fleet(&self) -> &str {
            self.fleet
        }
    }

    /// What happens to a session's transaction.
    #[derive(Debug, Clone, Copy)]
    enum Event {
        Begin(&'static str),
        Autocommit(bool),
        SetNext(&'static str),
        NextSent,
        MultiShardRead,
        OnShards,
        Savepoint(&'static str),
        /// The first write or locking read binds to this shard of fleet
        /// "main".
        Bind(u32),
        RunOnBound,
        RanElsewhere,
        Finish,
        CommitImplicitly,
        EndUnbound,
        End,
        Lose,
    }
    use Event::*;

    fn apply(state: &mut Transaction<Fake>, event: Event) -> Result<(), TransitionError> {
        match event {
            Begin(sql) => return state.begin(sql.to_owned()),
            Autocommit(on) => return state.set_autocommit(on).map(|_| ()),
            SetNext(sql) => return state.set_next(sql.to_owned()),
            Savepoint(sql) => return state.add_savepoint(sql.to_owned()),
            Bind(shard) => {
                state.take_opening()?;
                return state.bind(Fake {
                    shard,
                    fleet: "main",
                });
            }
            RunOnBound => {
                return state
                    .run_on_bound()
                    .map(|_| ())
                    .ok_or(TransitionError::NotOpen)
            }
            NextSent => state.next_sent(),
            MultiShardRead => state.multi_shard_read(),
            OnShards => state.statement_on_shards(),
            RanElsewhere => state.ran_elsewhere(),
            EndUnbound => state.end_unbound(),
            Finish => {
                let _ = state.finish();
            }
            CommitImplicitly => {
                let _ = state.commit_implicitly();
            }
            End => {
                let _ = state.end();
            }
            Lose => {
                let _ = state.lose_binding();
            }
        }
        Ok(())
    }

    fn after(events: &[Event]) -> Transaction<Fake> {
        let mut state = Transaction::default();
        for event in events {
            if let Err(error) = apply(&mut state, *event) {
                panic!("setup {events:?}: {event:?} refused: {error}");
            }
        }
        state
    }

    /// The whole state in a line: autocommit, phase, pending statements.
    fn describe(state: &Transaction<Fake>) -> String {
        let opened = |opened: &Opened| match opened {
            Opened::Implicit => "implicit".to_owned(),
            Opened::Explicit { begin } => format!("explicit({begin})"),
        };
        let pending = |pending: &Pending| {
            let mut text = String::new();
            if let Some(next) = &pending.next {
                text += &format!(" next({next})");
            }
            if !pending.savepoints.is_empty() {
                text += &format!(" sp({})", pending.savepoints.join(","));
            }
            text
        };
        let phase = match &state.phase {
            Phase::Idle(p) => format!("idle{}", pending(p)),
            Phase::Open {
                opened: o,
                pending: p,
            } => format!("open {}{}", opened(o), pending(p)),
            Phase::Bound {
                opened: o,
                binding,
                ran_last,
            } => format!(
                "bound {} {}{}",
                opened(o),
                binding.shard,
                if *ran_last { " ran-last" } else { "" }
            ),
        };
        let autocommit = if state.autocommit() { "on" } else { "off" };
        format!("{autocommit} {phase}")
    }

    /// A row of [`transitions`]: its name, the events before, the event,
    /// and the state after it (described) or its refusal.
    type Case = (
        &'static str,
        &'static [Event],
        Event,
        Result<&'static str, TransitionError>,
    );

    #[test]
    fn transitions() {
        use TransitionError as E;
        let bound_explicit: &[Event] = &[Begin("BEGIN"), Bind(1)];
        let bound_implicit: &[Event] = &[Autocommit(false), OnShards, Bind(1)];
        let cases: &[Case] = &[
            ("fresh", &[], OnShards, Ok("on idle")),
            ("begin", &[], Begin("BEGIN"), Ok("on open explicit(BEGIN)")),
            ("autocommit off", &[], Autocommit(false), Ok("off idle")),
            (
                "autocommit=0 starts an implicit transaction on the first statement",
                &[Autocommit(false)],
                OnShards,
                Ok("off open implicit"),
            ),
            (
                "a second statement keeps it",
                &[Autocommit(false), OnShards],
                OnShards,
                Ok("off open implicit"),
            ),
            (
                "an explicit transaction stays explicit",
                &[Autocommit(false), Begin("BEGIN")],
                OnShards,
                Ok("off open explicit(BEGIN)"),
            ),
            (
                "first write binds",
                &[Begin("BEGIN")],
                Bind(1),
                Ok("on bound explicit(BEGIN) 1"),
            ),
            (
                "implicit binds",
                &[Autocommit(false), OnShards],
                Bind(7),
                Ok("off bound implicit 7"),
            ),
            (
                "no transaction: nothing to bind",
                &[],
                Bind(1),
                Err(E::NotOpen),
            ),
            (
                "autocommit off, no statement yet: nothing to bind",
                &[Autocommit(false)],
                Bind(1),
                Err(E::NotOpen),
            ),
            (
                "a second shard inside an explicit transaction is refused",
                bound_explicit,
                Bind(2),
                Err(E::Bound),
            ),
            (
                "a second shard inside an implicit one too",
                bound_implicit,
                Bind(2),
                Err(E::Bound),
            ),
            (
                "BEGIN while bound: commit first",
                bound_explicit,
                Begin("BEGIN"),
                Err(E::Bound),
            ),
            (
                "autocommit on while bound: commit first",
                bound_explicit,
                Autocommit(true),
                Err(E::Bound),
            ),
            (
                "autocommit off while bound changes nothing else",
                bound_explicit,
                Autocommit(false),
                Ok("off bound explicit(BEGIN) 1"),
            ),
            (
                "autocommit on ends an unbound explicit one",
                &[Begin("BEGIN")],
                Autocommit(true),
                Ok("on idle"),
            ),
            (
                "autocommit on ends an unbound implicit one",
                &[Autocommit(false), OnShards, Savepoint("SAVEPOINT a")],
                Autocommit(true),
                Ok("on idle"),
            ),
            (
                "COMMIT/ROLLBACK ends a bound one",
                bound_explicit,
                Finish,
                Ok("on idle"),
            ),
            (
                "... an implicit one",
                bound_implicit,
                Finish,
                Ok("off idle"),
            ),
            (
                "... and forgets a pending SET TRANSACTION",
                &[SetNext("SET TRANSACTION READ ONLY"), Begin("BEGIN")],
                Finish,
                Ok("on idle"),
            ),
            (
                "... and pending savepoints",
                &[Begin("BEGIN"), Savepoint("SAVEPOINT a")],
                Finish,
                Ok("on idle"),
            ),
            (
                "the commit before BEGIN/autocommit/DDL ends an implicit one",
                bound_implicit,
                CommitImplicitly,
                Ok("off idle"),
            ),
            (
                "... and unbinds an explicit one, left to the statement that committed it",
                bound_explicit,
                CommitImplicitly,
                Ok("on open explicit(BEGIN)"),
            ),
            (
                "DDL in an unbound transaction: none is open afterwards",
                &[Begin("BEGIN"), Savepoint("SAVEPOINT a")],
                EndUnbound,
                Ok("on idle"),
            ),
            (
                "DDL whose commit was refused: the bound transaction stays",
                bound_explicit,
                EndUnbound,
                Ok("on bound explicit(BEGIN) 1"),
            ),
            (
                "DDL keeps a pending SET TRANSACTION",
                &[
                    Autocommit(false),
                    SetNext("SET TRANSACTION READ ONLY"),
                    OnShards,
                ],
                EndUnbound,
                Ok("off idle next(SET TRANSACTION READ ONLY)"),
            ),
            (
                "rolled back by the proxy or the server (pause, deadlock)",
                bound_explicit,
                End,
                Ok("on idle"),
            ),
            (
                "... autocommit off: the next statement opens one",
                bound_implicit,
                End,
                Ok("off idle"),
            ),
            (
                "a lost connection leaves the client's transaction open, unbound",
                bound_explicit,
                Lose,
                Ok("on open explicit(BEGIN)"),
            ),
            (
                "... an implicit one too",
                bound_implicit,
                Lose,
                Ok("off open implicit"),
            ),
            (
                "nothing bound: nothing lost",
                &[Begin("BEGIN")],
                Lose,
                Ok("on open explicit(BEGIN)"),
            ),
            (
                "SET TRANSACTION is kept for the next transaction",
                &[],
                SetNext("SET TRANSACTION READ ONLY"),
                Ok("on idle next(SET TRANSACTION READ ONLY)"),
            ),
            (
                "BEGIN keeps it",
                &[SetNext("SET TRANSACTION READ ONLY")],
                Begin("BEGIN"),
                Ok("on open explicit(BEGIN) next(SET TRANSACTION READ ONLY)"),
            ),
            (
                "SET TRANSACTION inside a transaction is refused",
                &[Begin("BEGIN")],
                SetNext("SET TRANSACTION READ ONLY"),
                Err(E::InProgress),
            ),
            (
                "... an implicit one too",
                &[Autocommit(false), OnShards],
                SetNext("SET TRANSACTION READ ONLY"),
                Err(E::InProgress),
            ),
            (
                "... and a bound one",
                bound_explicit,
                SetNext("SET TRANSACTION READ ONLY"),
                Err(E::InProgress),
            ),
            (
                "sent before an autocommit statement",
                &[SetNext("SET TRANSACTION READ ONLY")],
                NextSent,
                Ok("on idle"),
            ),
            (
                "a multi-shard read outside a transaction uses it up",
                &[SetNext("SET TRANSACTION READ ONLY")],
                MultiShardRead,
                Ok("on idle"),
            ),
            (
                "... not inside one",
                &[Autocommit(false), SetNext("SET TRANSACTION READ ONLY")],
                MultiShardRead,
                Ok("off idle next(SET TRANSACTION READ ONLY)"),
            ),
            (
                "SAVEPOINT outside a transaction is not recorded",
                &[],
                Savepoint("SAVEPOINT a"),
                Err(E::NoTransaction),
            ),
            (
                "SAVEPOINT before the transaction binds is recorded",
                &[Begin("BEGIN"), Savepoint("SAVEPOINT a")],
                Savepoint("SAVEPOINT b"),
                Ok("on open explicit(BEGIN) sp(SAVEPOINT a,SAVEPOINT b)"),
            ),
            (
                "... with autocommit off before any statement too",
                &[Autocommit(false)],
                Savepoint("SAVEPOINT a"),
                Ok("off idle sp(SAVEPOINT a)"),
            ),
            (
                "... and the first statement opens the transaction with it",
                &[Autocommit(false), Savepoint("SAVEPOINT a")],
                OnShards,
                Ok("off open implicit sp(SAVEPOINT a)"),
            ),
            (
                "SAVEPOINT in a bound transaction runs on its connection",
                bound_explicit,
                Savepoint("SAVEPOINT a"),
                Err(E::Bound),
            ),
            (
                "BEGIN drops savepoints of the transaction before",
                &[Begin("BEGIN"), Savepoint("SAVEPOINT a")],
                Begin("START TRANSACTION READ ONLY"),
                Ok("on open explicit(START TRANSACTION READ ONLY)"),
            ),
            (
                "a statement on the bound connection",
                bound_explicit,
                RunOnBound,
                Ok("on bound explicit(BEGIN) 1 ran-last"),
            ),
            (
                "... then one elsewhere",
                &[Begin("BEGIN"), Bind(1), RunOnBound],
                RanElsewhere,
                Ok("on bound explicit(BEGIN) 1"),
            ),
            (
                "nothing bound to run on",
                &[Begin("BEGIN")],
                RunOnBound,
                Err(E::NotOpen),
            ),
        ];
        for (name, setup, event, expected) in cases {
            let mut state = after(setup);
            let got = apply(&mut state, *event).map(|()| describe(&state));
            let expected = expected.map(str::to_owned);
            assert_eq!(got, expected, "{name}: {setup:?} then {event:?}");
            if got.is_err() {
                assert_eq!(
                    describe(&state),
                    describe(&after(setup)),
                    "{name}: a refused transition changes nothing"
                );
            }
        }
    }

    #[test]
    fn open_and_in_transaction() {
        let cases: &[(&[Event], bool, bool)] = &[
            // (events, is_open, in_transaction)
            (&[], false, false),
            (&[Autocommit(false)], false, true),
            (&[Autocommit(false), OnShards], true, true),
            (&[Begin("BEGIN")], true, true),
            (&[Begin("BEGIN"), Bind(1)], true, true),
            (&[Begin("BEGIN"), Bind(1), Lose], true, true),
            (&[Begin("BEGIN"), Bind(1), Finish], false, false),
            (&[Autocommit(false), OnShards, Bind(1), End], false, true),
        ];
        for (events, open, in_transaction) in cases {
            let state = after(events);
            assert_eq!(
                (state.is_open(), state.in_transaction()),
                (*open, *in_transaction),
                "{events:?}"
            );
        }
    }

    #[test]
    fn statements_go_to_the_bound_shard_or_are_refused() {
        use ShardVenue::{Bound, OtherShard, Pool};
        use StatementKind::*;
        let bound: &[Event] = &[Begin("BEGIN"), Bind(1)];
        let cases: &[(&[Event], u32, &str, StatementKind, ShardVenue)] = &[
            (&[], 1, "main", Write, Pool),
            (&[], 1, "main", LockingRead, Pool),
            (&[Begin("BEGIN")], 1, "main", Read, Pool),
            (&[Begin("BEGIN")], 1, "main", Write, ShardVenue::Bind),
            (&[Begin("BEGIN")], 1, "main", LockingRead, ShardVenue::Bind),
            (&[Begin("BEGIN")], 1, "main", SchemaChange, Pool),
            (&[Autocommit(false)], 1, "main", Read, Pool),
            (
                &[Autocommit(false), OnShards],
                1,
                "main",
                Write,
                ShardVenue::Bind,
            ),
            (bound, 1, "main", Read, Bound),
            (bound, 1, "main", Write, Bound),
            (bound, 2, "main", Read, Pool),
            (bound, 2, "main", Write, OtherShard),
            (bound, 2, "main", LockingRead, OtherShard),
            (bound, 1, "other", Write, OtherShard),
            (bound, 1, "main", SchemaChange, Pool),
            // Autocommit on ends nothing bound; a transaction bound with
            // autocommit off stays in force once it is off.
            (
                &[Autocommit(false), OnShards, Bind(1)],
                2,
                "main",
                Write,
                OtherShard,
            ),
        ];
        for (events, shard, fleet, kind, venue) in cases {
            let state = after(events);
            assert_eq!(
                state.route_shard(*shard, fleet, *kind),
                *venue,
                "{events:?}: {kind:?} on shard {shard} of {fleet}"
            );
        }
    }

    #[test]
    fn the_opening_is_set_transaction_begin_savepoints() {
        let cases: &[(&[Event], &[&str])] = &[
            (&[Begin("BEGIN")], &["BEGIN"]),
            (&[Begin("")], &["START TRANSACTION"]),
            (&[Autocommit(false), OnShards], &["START TRANSACTION"]),
            (
                &[
                    SetNext("SET TRANSACTION READ ONLY"),
                    Autocommit(false),
                    Savepoint("SAVEPOINT a"),
                    OnShards,
                    Savepoint("SAVEPOINT b"),
                ],
                &[
                    "SET TRANSACTION READ ONLY",
                    "START TRANSACTION",
                    "SAVEPOINT a",
                    "SAVEPOINT b",
                ],
            ),
            (
                &[
                    Begin("START TRANSACTION WITH CONSISTENT SNAPSHOT"),
                    Savepoint("SAVEPOINT a"),
                ],
                &["START TRANSACTION WITH CONSISTENT SNAPSHOT", "SAVEPOINT a"],
            ),
        ];
        for (events, opening) in cases {
            let mut state = after(events);
            let taken = state.take_opening();
            let taken = taken
                .as_ref()
                .map(|o| o.iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(taken, Ok(opening.to_vec()), "{events:?}");
            // Taken once: a failed binding does not send them again.
            assert_eq!(
                state.take_opening().map(|o| o.len()),
                Ok(1),
                "{events:?}: only the BEGIN is left"
            );
        }
    }

    #[test]
    fn a_refused_set_autocommit_is_undone() {
        let cases: &[(&[Event], bool, &str)] = &[
            (
                &[Begin("BEGIN"), Savepoint("SAVEPOINT a")],
                true,
                "on open explicit(BEGIN) sp(SAVEPOINT a)",
            ),
            (
                &[Autocommit(false), OnShards, Savepoint("SAVEPOINT a")],
                true,
                "off open implicit sp(SAVEPOINT a)",
            ),
            (
                &[Autocommit(false), Savepoint("SAVEPOINT a")],
                true,
                "off idle sp(SAVEPOINT a)",
            ),
            (&[], false, "on idle"),
            (
                &[Begin("BEGIN"), Bind(3)],
                false,
                "on bound explicit(BEGIN) 3",
            ),
        ];
        for (events, on, restored) in cases {
            let mut state = after(events);
            let undo = state.set_autocommit(*on).expect("set autocommit");
            assert_eq!(state.autocommit(), *on);
            state.undo_autocommit(undo);
            assert_eq!(describe(&state), *restored, "{events:?}");
        }
    }
}
