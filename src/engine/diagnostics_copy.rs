//! The previous statement's diagnostics copied out of the connection held
//! for `SHOW WARNINGS`, so that connection can go back to its pool when
//! another session needs it (the pool is full): `SHOW WARNINGS|ERRORS
//! [LIMIT ..]`, `SHOW COUNT(*) WARNINGS|ERRORS` and `SELECT @@warning_count`
//! are then answered from the copy, as the server would have answered them.

use super::lex_state::{read_row, read_text_rows};
use super::merge::Value;
use crate::backend::BackendConn;
use crate::router::DiagnosticsArea;

/// The diagnostics area of a statement: its conditions (Level, Code,
/// Message, as `SHOW WARNINGS` listed them, at most `max_error_count`) and
/// its counts. The default is a statement that left nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiagnosticsCopy {
    rows: Vec<Vec<Value>>,
    warning_count: u64,
    error_count: u64,
}

impl DiagnosticsCopy {
    /// The rows `SHOW WARNINGS` (`Warnings`: every condition) or `SHOW
    /// ERRORS` (`Errors`: level `Error` only) lists, `limit` being its
    /// `LIMIT` as `(offset, count)`.
    pub fn list(&self, area: DiagnosticsArea, limit: Option<(usize, usize)>) -> Vec<Vec<Value>> {
        let (offset, count) = limit.unwrap_or((0, usize::MAX));
        self.rows
            .iter()
            .filter(|row| {
                area == DiagnosticsArea::Warnings
                    || row.first().and_then(Option::as_deref) == Some(b"Error".as_slice())
            })
            .skip(offset)
            .take(count)
            .cloned()
            .collect()
    }

    /// `@@warning_count` (`Warnings`) or `@@error_count` (`Errors`).
    pub fn count(&self, area: DiagnosticsArea) -> u64 {
        match area {
            DiagnosticsArea::Warnings => self.warning_count,
            DiagnosticsArea::Errors => self.error_count,
        }
    }
}

/// The `LIMIT` of a `SHOW WARNINGS|ERRORS` text as `(offset, count)`:
/// `LIMIT count`, `LIMIT offset, count` or `LIMIT count OFFSET offset`.
/// `None` without a `LIMIT` (or with one that is not plain numbers).
pub fn show_limit(sql: &[u8]) -> Option<(usize, usize)> {
    let text = std::str::from_utf8(sql).ok()?;
    let at = text.to_ascii_uppercase().rfind("LIMIT")?;
    let rest = text[at + "LIMIT".len()..]
        .trim()
        .trim_end_matches(';')
        .trim();
    let number = |text: &str| text.trim().parse::<usize>().ok();
    if let Some((offset, count)) = rest.split_once(',') {
        return Some((number(offset)?, number(count)?));
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    match words.as_slice() {
        [count] => Some((0, number(count)?)),
        [count, keyword, offset] if keyword.eq_ignore_ascii_case("OFFSET") => {
            Some((number(offset)?, number(count)?))
        }
        _ => None,
    }
}

/// Reads the diagnostics area of the statement `conn` ran last; the
/// diagnostics statements leave it as it was.
pub(super) async fn copy_diagnostics(conn: &mut BackendConn) -> Result<DiagnosticsCopy, String> {
    let (_, rows) = read_text_rows(conn, b"SHOW WARNINGS").await?;
    let counts = read_row(
        conn,
        b"SELECT @@session.warning_count, @@session.error_count",
    )
    .await?;
    let count = |index: usize| {
        counts
            .get(index)
            .and_then(Option::as_deref)
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| "malformed diagnostics counts".to_owned())
    };
    Ok(DiagnosticsCopy {
        rows,
        warning_count: count(0)?,
        error_count: count(1)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(level: &str, code: &str, message: &str) -> Vec<Value> {
        [level, code, message]
            .iter()
            .map(|v| Some(v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn lists_and_counts_as_the_server_does() {
        let copy = DiagnosticsCopy {
            rows: vec![
                row("Warning", "1292", "Truncated incorrect INTEGER value: 'x1'"),
                row("Error", "1062", "Duplicate entry"),
                row("Note", "1051", "Unknown table"),
            ],
            warning_count: 70,
            error_count: 1,
        };
        use DiagnosticsArea::{Errors, Warnings};
        assert_eq!(copy.list(Warnings, None).len(), 3);
        assert_eq!(
            copy.list(Errors, None),
            vec![row("Error", "1062", "Duplicate entry")]
        );
        assert_eq!(
            copy.list(Warnings, Some((1, 1))),
            vec![row("Error", "1062", "Duplicate entry")]
        );
        assert_eq!(copy.list(Warnings, Some((5, 1))), Vec::<Vec<Value>>::new());
        assert_eq!((copy.count(Warnings), copy.count(Errors)), (70, 1));
        let nothing = DiagnosticsCopy::default();
        assert!(nothing.list(Warnings, None).is_empty());
        assert_eq!(nothing.count(Warnings), 0);
    }

    #[test]
    fn reads_the_limit_of_show_warnings() {
        assert_eq!(show_limit(b"SHOW WARNINGS"), None);
        assert_eq!(show_limit(b"show warnings limit 2"), Some((0, 2)));
        assert_eq!(show_limit(b"SHOW WARNINGS LIMIT 1, 3;"), Some((1, 3)));
        assert_eq!(show_limit(b"SHOW ERRORS LIMIT 3 OFFSET 1 ; "), Some((1, 3)));
        assert_eq!(show_limit(b"SHOW ERRORS LIMIT x"), None);
        assert_eq!(show_limit(b"SHOW ERRORS LIMIT 1 2"), None);
    }
}
