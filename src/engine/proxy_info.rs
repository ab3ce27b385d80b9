//! What the proxy answers about itself: `CONNECTION_ID()`, `VERSION()` /
//! `@@version`, and the process list of the session's account (`SHOW
//! [FULL] PROCESSLIST`, `information_schema.PROCESSLIST`).

use tokio::io::AsyncWrite;

use super::answer::{write_local_result, write_single_value};
use super::failure::Failure;
use super::merge::Value;
use super::session_state::SessionState;
use super::sessions::{truncated_info, SessionRow};
use super::Engine;
use crate::protocol::packets::LocalColumnType;
use crate::protocol::FrameWriter;
use crate::router::SessionAction;
use crate::topology::Topology;

use LocalColumnType::{Text, UnsignedBigInt};

/// `SHOW PROCESSLIST`'s columns (MariaDB's, Progress included).
const SHOW_COLUMNS: [(&str, LocalColumnType); 9] = [
    ("Id", UnsignedBigInt),
    ("User", Text),
    ("Host", Text),
    ("db", Text),
    ("Command", Text),
    ("Time", UnsignedBigInt),
    ("State", Text),
    ("Info", Text),
    ("Progress", Text),
];

/// `information_schema.PROCESSLIST`'s columns (MariaDB's); what the proxy
/// does not measure is 0.
const TABLE_COLUMNS: [(&str, LocalColumnType); 18] = [
    ("ID", UnsignedBigInt),
    ("USER", Text),
    ("HOST", Text),
    ("DB", Text),
    ("COMMAND", Text),
    ("TIME", UnsignedBigInt),
    ("STATE", Text),
    ("INFO", Text),
    ("TIME_MS", Text),
    ("STAGE", UnsignedBigInt),
    ("MAX_STAGE", UnsignedBigInt),
    ("PROGRESS", Text),
    ("MEMORY_USED", UnsignedBigInt),
    ("MAX_MEMORY_USED", UnsignedBigInt),
    ("EXAMINED_ROWS", UnsignedBigInt),
    ("QUERY_ID", UnsignedBigInt),
    ("INFO_BINARY", Text),
    ("TID", UnsignedBigInt),
];

impl Engine {
    /// Answers the statements about the proxy's own sessions and version
    /// (`CONNECTION_ID()`, `VERSION()`, the process list, `KILL`).
    pub(super) async fn run_proxy_info<W: AsyncWrite + Unpin>(
        &self,
        topology: &Topology,
        state: &mut SessionState,
        action: SessionAction,
        client: &mut FrameWriter<W>,
    ) -> Result<(), Failure> {
        match action {
            SessionAction::SelectConnectionId { column } => {
                let id = state.connection_id.to_string();
                write_single_value(client, state, &column, UnsignedBigInt, Some(id.as_bytes()))
                    .await
            }
            SessionAction::SelectVersion { column } => {
                let version = self.server_info().version.as_bytes();
                write_single_value(client, state, &column, Text, Some(version)).await
            }
            SessionAction::ProcessList { full, table, id } => {
                let mut rows = self.sessions.of_user(&state.entry.user());
                if let Some(id) = id {
                    rows.retain(|row| u64::from(row.id) == id);
                }
                let columns: &[(&str, LocalColumnType)] =
                    if table { &TABLE_COLUMNS } else { &SHOW_COLUMNS };
                let rows = rows
                    .iter()
                    .map(|row| processlist_row(row, full, table))
                    .collect();
                write_local_result(client, state, columns, rows).await
            }
            SessionAction::Kill { query, id } => {
                self.run_kill(topology, state, query, id, client).await
            }
            other => Err(Failure::Client(crate::error::ClientError::Internal(
                format!("{other:?} is not about the proxy's sessions"),
            ))),
        }
    }
}

/// One session's row: SHOW PROCESSLIST's columns, or the
/// information_schema table's.
fn processlist_row(row: &SessionRow, full: bool, table: bool) -> Vec<Value> {
    let text = |s: &str| Some(s.as_bytes().to_vec());
    let number = |n: u64| Some(n.to_string().into_bytes());
    let info = row
        .info
        .as_deref()
        .map(|info| if full { info } else { truncated_info(info) });
    let mut values = vec![
        number(u64::from(row.id)),
        text(&row.user),
        text(&row.host),
        row.db.as_deref().and_then(text),
        text(row.command),
        number(row.elapsed.as_secs()),
        text(row.state),
        info.and_then(text),
    ];
    if table {
        values.push(text(&format!("{:.3}", row.elapsed.as_secs_f64() * 1000.0)));
        values.extend([number(0), number(0)]);
        values.push(text("0.000"));
        values.extend([number(0), number(0), number(0), number(0)]);
        values.push(info.and_then(text));
        values.push(number(0));
    } else {
        values.push(text("0.000"));
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(info: &str) -> SessionRow {
        SessionRow {
            id: 4,
            user: "app".into(),
            host: "127.0.0.1:4000".into(),
            db: None,
            command: "Query",
            elapsed: Duration::from_millis(2500),
            state: "executing",
            info: Some(info.into()),
        }
    }

    #[test]
    fn rows_have_the_servers_columns() {
        let long = "x".repeat(150);
        let show = processlist_row(&row(&long), false, false);
        assert_eq!(show.len(), SHOW_COLUMNS.len());
        assert_eq!(show[0].as_deref(), Some(&b"4"[..]));
        assert_eq!(show[3], None);
        assert_eq!(show[5].as_deref(), Some(&b"2"[..]));
        assert_eq!(show[7].as_ref().map(Vec::len), Some(100));
        let full = processlist_row(&row(&long), true, false);
        assert_eq!(full[7].as_ref().map(Vec::len), Some(150));
        let table = processlist_row(&row("SELECT 1"), true, true);
        assert_eq!(table.len(), TABLE_COLUMNS.len());
        assert_eq!(table[8].as_deref(), Some(&b"2500.000"[..]));
        assert_eq!(table[16].as_deref(), Some(&b"SELECT 1"[..]));
    }
}
