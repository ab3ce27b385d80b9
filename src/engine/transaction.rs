//! Transactions: BEGIN, COMMIT and ROLLBACK, `SET autocommit`, and the
//! backend connection a transaction binds to on its first write or locking
//! read.

use tokio::io::AsyncWrite;

use super::answer::write_ok;
use super::checkout::{fleet_name, host_addr};
use super::failure::{backend_error, close_after_failure, relay_failure_to_client, Failure, Scope};
use super::pause::ShardGuard;
use super::relay::{RelayFailure, RelayOptions};
use super::session_state::{BoundTransaction, SessionState};
use super::venue::{send_and_relay, send_unrelayed, Venue};
use super::Engine;
use crate::error::ClientError;
use crate::protocol::packets::ERR_HEADER;
use crate::protocol::FrameWriter;
use crate::router::{RouteError, ShardQuery, SqlText, StatementKind, Target};
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
        state.pending_savepoints.clear();
        if state.bound.is_some() {
            self.end_transaction(topology, state, "COMMIT", client, false)
                .await?;
        }
        state.explicit_transaction = true;
        state.begin_sql = recorded_text(sql)?;
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

    /// The session side of `SET autocommit` (the answer aside).
    pub(super) async fn apply_autocommit<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        on: bool,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        if on && state.bound.is_some() {
            self.end_transaction(topology, state, "COMMIT", client, false)
                .await?;
        }
        if on {
            state.explicit_transaction = false;
            state.implicit_transaction = false;
        }
        state.autocommit = on;
        Ok(())
    }

    /// `SET TRANSACTION ...` without a scope: kept for the next
    /// transaction; refused inside one, with the server's error.
    pub(super) async fn set_next_transaction<W: AsyncWrite + Unpin>(
        &self,
        state: &mut SessionState,
        sql: SqlText,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        if state.transaction_open() {
            return Err(Failure::Client(ClientError::Backend {
                code: 1568,
                sql_state: "25001".to_owned(),
                message: "Transaction characteristics can't be changed while a transaction is in progress".to_owned(),
            }));
        }
        state.next_transaction = Some(recorded_text(sql)?);
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
        let pool = self.backends.pool(host_addr(topology, target.host));
        if query.kind == StatementKind::SchemaChange {
            return Ok((Venue::Pool(pool), guard));
        }
        if !state.in_transaction() {
            return Ok((Venue::Pool(pool), guard));
        }
        if let Some(bound) = &state.bound {
            if on_bound_shard(topology, state, target) {
                self.check_not_moved(topology, state).await?;
                return Ok((Venue::Bound, guard));
            }
            if query.kind == StatementKind::Read {
                return Ok((Venue::Pool(pool), guard));
            }
            return Err(Failure::Client(ClientError::Transaction(format!(
                "this transaction is bound to shard {} of fleet {}; a write or locking read for shard {} of fleet {} cannot join it (transactions are single-shard). \
                 COMMIT or ROLLBACK first; plain reads of other shards are served outside the transaction",
                bound.target.shard,
                bound.fleet,
                target.shard,
                fleet_name(topology, target),
            ))));
        }
        if query.kind == StatementKind::Read {
            return Ok((Venue::Pool(pool), guard));
        }
        // The transaction's own connection: outside the session's share, so
        // its reads of other shards on the same host never wait for it.
        let mut conn = self
            .checkout_with(topology, &pool, Some(target), state, false)
            .await?;
        let opening = state
            .next_transaction
            .take()
            .into_iter()
            .chain(std::iter::once(state.begin_statement().to_owned()))
            .chain(state.pending_savepoints.drain(..))
            .collect::<Vec<_>>();
        for sql in &opening {
            conn = send_unrelayed(conn, sql).await?;
        }
        state.bound = Some(BoundTransaction {
            target,
            fleet: fleet_name(topology, target).to_owned(),
            conn,
            guard,
        });
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
        let committed = if state.bound.is_some() {
            self.end_transaction(topology, state, "COMMIT", client, false)
                .await
        } else {
            Ok(())
        };
        // Committed or not, the transaction is over (a failed COMMIT lost
        // its connection, or the server rolled it back).
        state.explicit_transaction = false;
        state.implicit_transaction = false;
        state.pending_savepoints.clear();
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
        let Some(bound) = &state.bound else {
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
        let Some(mut bound) = state.end_bound() else {
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
        if sql == "COMMIT" && state.bound.is_some() {
            if let Some(error) = self.fence.commit_refusal() {
                return Err(Failure::Client(error));
            }
            self.check_not_moved(topology, state).await?;
        }
        if answer {
            state.explicit_transaction = false;
            state.next_transaction = None;
        }
        state.implicit_transaction = false;
        state.pending_savepoints.clear();
        let Some(mut bound) = state.bound.take() else {
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
    state.bound.as_ref().is_some_and(|bound| {
        bound.target.shard == target.shard && bound.fleet == fleet_name(topology, target)
    })
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
    if autocommit != Some(true) || state.bound.is_none() {
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
