//! A statement's failure, and its translation into the error the client
//! sees (the MySQL error packet).

use std::io;

use tokio::io::AsyncWrite;

use super::relay::RelayFailure;
use crate::backend::PooledConn;
use crate::error::ClientError;
use crate::protocol::packets::{err_packet, parse_err};
use crate::protocol::FrameWriter;

/// A statement's failure: an error for the client, or a dead client.
pub(crate) enum Failure {
    /// An error to answer the client with; the session goes on.
    Client(ClientError),
    /// The client connection failed; the session ends.
    Io(io::Error),
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Self {
        Failure::Io(error)
    }
}

/// Turns an I/O error on a backend connection into the client's error.
pub(crate) fn lost_connection(host: &str) -> impl Fn(io::Error) -> Failure + '_ {
    move |error| {
        Failure::Client(ClientError::BackendLost {
            host: host.to_owned(),
            reason: error.to_string(),
        })
    }
}

/// Closes a connection whose statement failed: a backend failure also drops
/// the host's idle connections (likely stale too); a client failure does
/// not reflect on the host. Returns the host's address.
pub(super) fn close_after_failure(conn: PooledConn, failure: &RelayFailure) -> String {
    let addr = conn.pool().addr.clone();
    match failure {
        RelayFailure::NotSent(_) | RelayFailure::Backend { .. } => conn.discard_broken(),
        RelayFailure::Client(_) => drop(conn),
    }
    addr
}

/// What a lost backend connection took with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// A statement outside a transaction.
    Statement,
    /// A statement of an open transaction (or its ROLLBACK).
    Transaction,
    /// The COMMIT of an open transaction.
    Commit,
}

/// The error for a failed relay: says whether the statement may have run.
/// When part of the answer already reached the client, the ERR packet
/// continues its sequence numbering (`response_seq` moves past what was
/// forwarded).
pub(super) fn relay_failure_to_client(
    response_seq: &mut u8,
    failure: RelayFailure,
    host: String,
    scope: Scope,
) -> Failure {
    let (error, sent) = match failure {
        RelayFailure::Client(error) => return Failure::Io(error),
        RelayFailure::NotSent(error) => (error, false),
        RelayFailure::Backend {
            error,
            forwarded,
            next_seq,
        } => {
            if forwarded {
                *response_seq = next_seq;
            }
            (error, true)
        }
    };
    let outcome = match (scope, sent) {
        (Scope::Statement, false) => "the statement was not sent, so it did not run",
        (Scope::Statement, true) => {
            "the statement was sent before the connection broke, so it may have run: check before running it again"
        }
        (Scope::Commit, true) => {
            "the COMMIT was sent before the connection broke, so the transaction may or may not have committed: check before running it again"
        }
        (Scope::Transaction, _) | (Scope::Commit, false) => {
            "the open transaction was rolled back by the server"
        }
    };
    Failure::Client(ClientError::BackendLost {
        host,
        reason: format!("{error}; {outcome}"),
    })
}

/// The client's error for a backend's ERR packet: its code, SQLSTATE and
/// message as they came (a 1105 if the packet cannot be read).
pub(crate) fn backend_error(payload: &[u8]) -> ClientError {
    match parse_err(payload) {
        Some((code, sql_state, message)) => ClientError::Backend {
            code,
            sql_state,
            message,
        },
        None => ClientError::Backend {
            code: 1105,
            sql_state: "HY000".to_owned(),
            message: "shardgate: malformed error from backend".to_owned(),
        },
    }
}

/// The failure of a statement any master could run when the config has
/// none.
pub(super) fn no_masters() -> Failure {
    Failure::Client(ClientError::NoHealthyHost(
        "the config has no hosts".to_owned(),
    ))
}

/// Writes an ERR packet for `error`.
pub async fn write_error<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    seq: u8,
    error: &ClientError,
) -> io::Result<()> {
    let payload = err_packet(error.code(), error.sql_state(), &error.to_string());
    client.write_packet(seq, &payload).await.map(|_| ())
}

/// Writes the error of a failed statement to the client; a dead client is
/// the caller's `Err`.
pub(super) async fn answer_failure<W: AsyncWrite + Unpin>(
    client: &mut FrameWriter<W>,
    seq: u8,
    result: Result<(), Failure>,
) -> io::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(Failure::Client(error)) => write_error(client, seq, &error).await,
        Err(Failure::Io(error)) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset() -> io::Error {
        io::Error::new(io::ErrorKind::ConnectionReset, "reset")
    }

    fn lost_message(failure: Failure) -> (String, String) {
        match failure {
            Failure::Client(ClientError::BackendLost { host, reason }) => (host, reason),
            Failure::Client(other) => panic!("not a lost connection: {other:?}"),
            Failure::Io(error) => panic!("not a client error: {error}"),
        }
    }

    #[test]
    fn a_relay_failure_says_whether_the_statement_may_have_run() {
        let mut seq = 1;
        let not_sent = relay_failure_to_client(
            &mut seq,
            RelayFailure::NotSent(reset()),
            "h:1".to_owned(),
            Scope::Statement,
        );
        let (host, reason) = lost_message(not_sent);
        assert_eq!(host, "h:1");
        assert!(reason.ends_with("so it did not run"), "{reason}");
        assert_eq!(seq, 1);

        let sent = RelayFailure::Backend {
            error: reset(),
            forwarded: false,
            next_seq: 7,
        };
        let (_, reason) = lost_message(relay_failure_to_client(
            &mut seq,
            sent,
            "h:1".to_owned(),
            Scope::Commit,
        ));
        assert!(reason.contains("may or may not have committed"), "{reason}");
        assert_eq!(seq, 1, "nothing was forwarded: the ERR starts the answer");

        let forwarded = RelayFailure::Backend {
            error: reset(),
            forwarded: true,
            next_seq: 7,
        };
        let (_, reason) = lost_message(relay_failure_to_client(
            &mut seq,
            forwarded,
            "h:1".to_owned(),
            Scope::Transaction,
        ));
        assert!(reason.contains("rolled back by the server"), "{reason}");
        assert_eq!(seq, 7, "the ERR continues the forwarded answer");
    }

    #[test]
    fn a_dead_client_is_not_a_client_error() {
        let mut seq = 1;
        let failure = relay_failure_to_client(
            &mut seq,
            RelayFailure::Client(reset()),
            "h:1".to_owned(),
            Scope::Statement,
        );
        assert!(matches!(failure, Failure::Io(_)));
    }

    #[test]
    fn backend_errors_keep_their_code_and_state() {
        let packet = err_packet(1062, "23000", "Duplicate entry '1' for key 'PRIMARY'");
        assert_eq!(
            backend_error(&packet),
            ClientError::Backend {
                code: 1062,
                sql_state: "23000".to_owned(),
                message: "Duplicate entry '1' for key 'PRIMARY'".to_owned(),
            }
        );
        let malformed = backend_error(&[0xFF]);
        assert_eq!(malformed.code(), 1105);
        assert!(malformed.to_string().contains("malformed error"));
    }
}
