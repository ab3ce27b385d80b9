//! Transactions: BEGIN, COMMIT and ROLLBACK, `SET autocommit`, and the
//! backend connection a transaction binds to on its first write or locking
//! read.

use std::sync::Arc;

use tokio::io::AsyncWrite;

use super::answer::write_ok;
use super::checkout::{fleet_name, host_addr};
use super::failure::{backend_error, close_after_failure, relay_failure_to_client, Failure, Scope};
use super::pause::ShardGuard;
use super::relay::{RelayFailure, RelayOptions};
use super::session_state::SessionState;
use super::transaction_state::{AutocommitUndo, BoundTransaction, ShardVenue, TransitionError};
use super::venue::{send_and_relay, send_unrelayed, Venue};
use super::Engine;
use crate::backend::HostPool;
use crate::error::ClientError;
use crate::protocol::packets::ERR_HEADER;
use crate::protocol::FrameWriter;
use crate::router::{RouteError, ShardQuery, SqlText, Target};
use crate::topology::Topology;
use mysql_common::constants::Command;

impl Engine {
    /// BEGIN / START TRANSACTION: answered by the proxy; the statement is
    /// sent when the transaction binds. A transaction already bound is
    /// committed first, as the server does.
    pub(super) async fn begin<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        sql: SqlText,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        if state.transaction.is_bound() {
            self.end_transaction(topology, state, "COMMIT", client, false)
                .await?;
        }
        let begin = recorded_text(sql)?;
        state.transaction.begin(begin).map_err(transition_failure)?;
        write_ok(client, state).await
    }

    /// `SET autocommit`: turning it on commits a bound transaction and ends
    /// an explicit one, as the server does.
    pub(super) async fn set_autocommit<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        on: bool,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        self.apply_autocommit(topology, state, on, client).await?;
        write_ok(client, state).await
    }

    /// The session side of `SET autocommit` (the answer aside); returns
    /// what undoes it while nothing was committed.
    pub(super) async fn apply_autocommit<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        on: bool,
        client: &mut FrameWriter<W>,
    ) -> Result<AutocommitUndo, Failure> {
        if on && state.transaction.is_bound() {
            self.end_transaction(topology, state, "COMMIT", client, false)
                .await?;
        }
        state
            .transaction
            .set_autocommit(on)
            .map_err(transition_failure)
    }

    /// `SET TRANSACTION ...` without a scope: kept for the next
    /// transaction; refused inside one, with the server's error.
    pub(super) async fn set_next_transaction<W: AsyncWrite + Unpin>(
        &self,
        state: &mut SessionState,
        sql: SqlText,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        if state.transaction.is_open() {
            return Err(Failure::Client(ClientError::Backend {
                code: 1568,
                sql_state: "25001".to_owned(),
                message: TransitionError::InProgress.to_string(),
            }));
        }
        let sql = recorded_text(sql)?;
        state
            .transaction
            .set_next(sql)
            .map_err(transition_failure)?;
        write_ok(client, state).await
    }

    /// Decides where a shard statement runs, binding the transaction to its
    /// shard on the first write or locking read (the statement's pause-gate
    /// `guard` then moves into the transaction). Returns the venue and the
    /// guard to hold while the statement runs.
    pub(super) async fn venue_for(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        query: &ShardQuery,
        guard: ShardGuard,
    ) -> Result<(Venue, ShardGuard), Failure> {
        let target = query.target;
        let fleet = fleet_name(topology, target);
        let pool = || self.backends.pool(host_addr(topology, target.host));
        match state
            .transaction
            .route_shard(target.shard, fleet, query.kind)
        {
            ShardVenue::Pool => return Ok((Venue::Pool(pool()), guard)),
            ShardVenue::Bound => {
                Box::pin(self.check_not_moved(topology, state)).await?;
                return Ok((Venue::Bound, guard));
            }
            ShardVenue::OtherShard => {
                let (bound_shard, bound_fleet) = state
                    .transaction
                    .bound()
                    .map(|bound| (bound.target.shard, bound.fleet.as_str()))
                    .unwrap_or_default();
                return Err(Failure::Client(ClientError::Transaction(format!(
                    "this transaction is bound to shard {bound_shard} of fleet {bound_fleet}; a write or locking read for shard {} of fleet {fleet} cannot join it (transactions are single-shard). \
                     COMMIT or ROLLBACK first; plain reads of other shards are served outside the transaction",
                    target.shard,
                ))));
            }
            ShardVenue::Bind => {}
        }
        // Boxed: the statement path's future does not carry a binding's.
        Box::pin(self.bind_transaction(topology, state, &pool(), target, fleet, guard)).await
    }

    /// Checks out the connection a transaction binds, sends what opens the
    /// transaction on it, and binds it with `guard`.
    async fn bind_transaction(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        pool: &Arc<HostPool>,
        target: Target,
        fleet: &str,
        guard: ShardGuard,
    ) -> Result<(Venue, ShardGuard), Failure> {
        // The transaction's own connection: outside the session's share, so
        // its reads of other shards on the same host never wait for it.
        let mut conn = self
            .checkout_with(topology, pool, Some(target), state, false)
            .await?;
        let opening = state
            .transaction
            .take_opening()
            .map_err(transition_failure)?;
        for sql in &opening {
            conn = send_unrelayed(conn, sql).await?;
        }
        state
            .transaction
            .bind(BoundTransaction {
                target,
                fleet: fleet.to_owned(),
                conn,
                guard,
            })
            .map_err(transition_failure)?;
        Ok((Venue::Bound, ShardGuard::default()))
    }

    /// What a server does before a schema change: the open transaction is
    /// committed (a bound one on its own connection, through the same
    /// checks as a COMMIT), and none is open afterwards; with autocommit
    /// off the next statement opens a new one. A failed COMMIT is the
    /// statement's error, and the schema change must then not be sent.
    pub(super) async fn commit_implicitly<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        let committed = if state.transaction.is_bound() {
            self.end_transaction(topology, state, "COMMIT", client, false)
                .await
        } else {
            Ok(())
        };
        // Committed or not, the transaction is over (a failed COMMIT lost
        // its connection, or the server rolled it back); one whose COMMIT
        // the fence refused stays open, bound.
        state.transaction.end_unbound();
        committed
    }

    /// When the shard of the session's bound transaction has another master
    /// in `topology` than the one the transaction runs on (a reload moved
    /// it), rolls the transaction back there, ends it, and fails: it must
    /// not commit on the old master.
    pub(super) async fn check_not_moved(
        &self,
        topology: &Topology,
        state: &mut SessionState,
    ) -> Result<(), Failure> {
        let Some(bound) = state.transaction.bound() else {
            return Ok(());
        };
        let master = topology
            .fleet_by_name(&bound.fleet)
            .and_then(|fleet| topology.master_of(fleet, bound.target.shard))
            .map(|host| host_addr(topology, host));
        let from = bound.conn.pool().addr.clone();
        let to = match master {
            Some(addr) if addr == from => return Ok(()),
            Some(addr) => addr.to_owned(),
            None => "no master (the shard is no longer in the config)".to_owned(),
        };
        let Some(mut bound) = state.transaction.end() else {
            return Ok(());
        };
        match bound
            .conn
            .conn()
            .simple_command(Command::COM_QUERY, b"ROLLBACK")
            .await
        {
            Ok(answer) if answer.first() != Some(&ERR_HEADER) => bound.conn.release(),
            _ => bound.conn.discard_broken(),
        }
        Err(Failure::Client(ClientError::ShardMoved {
            fleet: bound.fleet.clone(),
            shard: bound.target.shard,
            from,
            to,
        }))
    }

    /// Sends COMMIT or ROLLBACK to the bound connection (answering with its
    /// response when `answer` is set) and unbinds it. A COMMIT whose shard
    /// moved to another master meanwhile is a rollback and an error. A
    /// COMMIT (explicit, or the implicit one before BEGIN, `SET autocommit
    /// = 1` or a schema change) while the fence is up is refused, the
    /// transaction left open ([`super::fence::Fence::commit_refusal`]).
    pub(super) async fn end_transaction<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        sql: &str,
        client: &mut FrameWriter<W>,
        answer: bool,
    ) -> Result<(), Failure> {
        if sql == "COMMIT" && state.transaction.is_bound() {
            if let Some(error) = self.fence.commit_refusal() {
                return Err(Failure::Client(error));
            }
            self.check_not_moved(topology, state).await?;
        }
        let bound = if answer {
            state.transaction.finish()
        } else {
            state.transaction.commit_implicitly()
        };
        let Some(mut bound) = bound else {
            return if answer {
                write_ok(client, state).await
            } else {
                Ok(())
            };
        };
        let addr = bound.conn.pool().addr.clone();
        let result = if answer {
            send_and_relay(
                &mut bound.conn,
                sql.as_bytes(),
                client,
                RelayOptions {
                    first_seq: state.response_seq,
                    deprecate_eof: state.deprecate_eof,
                    shard: None,
                    composer: None,
                    more_results: state.more_results,
                    binary_rows: state.binary_rows,
                    session_status: state.status_flags(),
                    local_infile: None,
                },
                &state.entry,
            )
            .await
            .map(|outcome| !outcome.failed)
        } else {
            let backend = bound.conn.conn();
            match backend
                .send_command(Command::COM_QUERY, sql.as_bytes())
                .await
            {
                Err(error) => Err(RelayFailure::NotSent(error)),
                Ok(()) => match backend.reader.next_packet().await {
                    Ok((_, payload)) if payload.first() == Some(&ERR_HEADER) => {
                        bound.conn.release();
                        return Err(Failure::Client(backend_error(&payload)));
                    }
                    Ok(_) => Ok(true),
                    Err(error) => Err(RelayFailure::Backend {
                        error,
                        forwarded: false,
                        next_seq: 1,
                    }),
                },
            }
        };
        match result {
            Ok(_) => {
                bound.conn.release();
                Ok(())
            }
            Err(failure) => {
                close_after_failure(bound.conn, &failure);
                let scope = if sql == "COMMIT" {
                    Scope::Commit
                } else {
                    Scope::Transaction
                };
                Err(relay_failure_to_client(
                    &mut state.response_seq,
                    failure,
                    addr,
                    scope,
                ))
            }
        }
    }
}

/// Whether `target` is the shard of the session's bound transaction
/// (compared by fleet name: fleet ids may change across reloads).
pub(super) fn on_bound_shard(topology: &Topology, state: &SessionState, target: Target) -> bool {
    state
        .transaction
        .is_bound_to(target.shard, fleet_name(topology, target))
}

/// A transition the session's transaction refused where the engine made
/// sure it would not: a fault of the proxy.
pub(super) fn transition_failure(error: TransitionError) -> Failure {
    Failure::Client(ClientError::Internal(format!(
        "session transaction state: {error}"
    )))
}

/// The text of a statement the session records (SET, BEGIN, a pending
/// SAVEPOINT): recorded as text, so bytes that are not UTF-8 are refused
/// rather than altered.
pub(super) fn recorded_text(sql: SqlText) -> Result<String, Failure> {
    String::from_utf8(Vec::from(sql.0)).map_err(|_| {
        Failure::Client(ClientError::Route(RouteError::Unreadable(
            "a SET, BEGIN or SAVEPOINT that is not valid UTF-8 (the session records these as text)"
                .to_owned(),
        )))
    })
}

/// A `SET` that turns autocommit on among other variables: with a bound
/// transaction, turning it on commits, and the other assignments could
/// still fail after the commit; refused, so the transaction stays the
/// client's to end. Without a bound transaction nothing is committed and
/// a failed SET leaves the session as it was.
pub(super) fn check_combined_autocommit(
    state: &SessionState,
    autocommit: Option<bool>,
) -> Result<(), Failure> {
    if autocommit != Some(true) || !state.transaction.is_bound() {
        return Ok(());
    }
    Err(Failure::Client(ClientError::Transaction(
        "SET autocommit = 1 together with other variables inside a transaction would commit it \
         before the other assignments are checked; COMMIT or ROLLBACK first, or SET autocommit = 1 \
         on its own"
            .to_owned(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_statements_must_be_utf8() {
        assert_eq!(
            recorded_text(SqlText::from(&b"BEGIN"[..])).ok().as_deref(),
            Some("BEGIN")
        );
        let refused = recorded_text(SqlText::from(&b"SET @a = '\xff'"[..]));
        assert!(matches!(
            refused,
            Err(Failure::Client(ClientError::Route(RouteError::Unreadable(
                _
            ))))
        ));
    }
}
