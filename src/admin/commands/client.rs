//! What clients send on their own when they connect (`select
//! @@version_comment limit 1`, `SELECT DATABASE()`, `SELECT
//! @@max_allowed_packet`, ...): answered with one row of plausible values.

use super::Context;
use crate::admin::parse::SelectItem;
use crate::admin::{AdminError, Answer, Cell};
use crate::frontend::handshake::SERVER_VERSION;

/// One row with a value per item.
pub fn select(context: &Context<'_>, items: &[SelectItem]) -> Result<Answer, AdminError> {
    let mut columns = Vec::with_capacity(items.len());
    let mut row = Vec::with_capacity(items.len());
    for item in items {
        let (column, value) = match item {
            SelectItem::Variable { name, column } => (column, variable(name)),
            SelectItem::Function { name, column } => (column, function(context, name, column)?),
        };
        columns.push(column.as_str());
        row.push(value);
    }
    let mut answer = Answer::new(&columns);
    answer.push(row);
    Ok(answer)
}

fn version() -> &'static str {
    SERVER_VERSION.trim_start_matches("5.5.5-")
}

/// Session variables clients read; NULL for any other.
fn variable(name: &str) -> Cell {
    match name {
        "version_comment" => "shardgate admin port".into(),
        "version" => version().into(),
        "max_allowed_packet" => 67_108_864u64.into(),
        "wait_timeout" | "interactive_timeout" => 28_800u64.into(),
        "net_write_timeout" => 60u64.into(),
        "autocommit" => 1u64.into(),
        "lower_case_table_names" => 0u64.into(),
        "sql_mode" => "".into(),
        "time_zone" => "SYSTEM".into(),
        "system_time_zone" => "UTC".into(),
        "transaction_isolation" | "tx_isolation" => "REPEATABLE-READ".into(),
        name if name.starts_with("character_set_") => "utf8mb4".into(),
        name if name.starts_with("collation_") => "utf8mb4_general_ci".into(),
        _ => Cell::Null,
    }
}

fn function(context: &Context<'_>, name: &str, column: &str) -> Result<Cell, AdminError> {
    Ok(match name {
        "database" | "schema" => context.database.into(),
        "user" | "current_user" | "session_user" | "system_user" => context.client.as_str().into(),
        "version" => version().into(),
        "connection_id" => context.connection_id.into(),
        _ => {
            return Err(AdminError::Argument(format!(
                "the admin port answers SELECT only of @@variables, DATABASE(), USER(), VERSION() and CONNECTION_ID(), not {column}; SHOW COMMANDS lists the admin commands"
            )))
        }
    })
}
