//! The answer to an admin command: a small result set, written to the
//! client through `opensrv-mysql`.

use std::io;
use std::time::Duration;

pub use crate::clock::format_time;

use opensrv_mysql::{Column, ColumnFlags, ColumnType, OkResponse, QueryResultWriter};
use tokio::io::AsyncWrite;

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A string.
    Text(String),
    /// A non-negative integer.
    Int(u64),
    /// A real number (latencies in milliseconds).
    Float(f64),
    /// SQL NULL.
    Null,
}

impl From<String> for Cell {
    fn from(value: String) -> Self {
        Cell::Text(value)
    }
}

impl From<&str> for Cell {
    fn from(value: &str) -> Self {
        Cell::Text(value.to_owned())
    }
}

impl From<u64> for Cell {
    fn from(value: u64) -> Self {
        Cell::Int(value)
    }
}

impl From<u32> for Cell {
    fn from(value: u32) -> Self {
        Cell::Int(value.into())
    }
}

impl From<u16> for Cell {
    fn from(value: u16) -> Self {
        Cell::Int(value.into())
    }
}

impl From<usize> for Cell {
    fn from(value: usize) -> Self {
        Cell::Int(value as u64)
    }
}

impl From<f64> for Cell {
    fn from(value: f64) -> Self {
        Cell::Float(value)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(value: Option<T>) -> Self {
        value.map_or(Cell::Null, Into::into)
    }
}

/// A result set: column names, rows, and an optional info text (sent in
/// the final OK packet). No columns means a plain OK.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each with one cell per column.
    pub rows: Vec<Vec<Cell>>,
    /// Text for the final OK packet.
    pub info: String,
}

impl Answer {
    /// An empty result set with these columns.
    pub fn new(columns: &[&str]) -> Self {
        Self {
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            ..Self::default()
        }
    }

    /// Appends a row (one cell per column).
    pub fn push(&mut self, row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.columns.len());
        self.rows.push(row);
    }

    /// The cell of `column` in `row`, by column name (tests).
    pub fn cell(&self, row: usize, column: &str) -> Option<&Cell> {
        let index = self.columns.iter().position(|c| c == column)?;
        self.rows.get(row)?.get(index)
    }

    /// Writes the answer as a text result set (or an OK when it has no
    /// columns).
    pub async fn write<W>(&self, results: QueryResultWriter<'_, W>) -> io::Result<()>
    where
        W: AsyncWrite + Send + Unpin,
    {
        if self.columns.is_empty() {
            return results
                .completed(OkResponse {
                    info: self.info.clone(),
                    ..OkResponse::default()
                })
                .await;
        }
        let columns: Vec<Column> = self
            .columns
            .iter()
            .enumerate()
            .map(|(index, name)| self.column(index, name))
            .collect();
        let mut writer = results.start(&columns).await?;
        for row in &self.rows {
            for cell in row {
                match cell {
                    Cell::Text(text) => writer.write_col(text.as_str())?,
                    Cell::Int(n) => writer.write_col(*n)?,
                    Cell::Float(x) => writer.write_col(*x)?,
                    Cell::Null => writer.write_col(None::<u64>)?,
                }
            }
            writer.end_row().await?;
        }
        writer.finish_with_info(&self.info).await
    }

    /// The definition of column `index`, typed after its first non-NULL cell.
    fn column(&self, index: usize, name: &str) -> Column {
        let first = self
            .rows
            .iter()
            .filter_map(|row| row.get(index))
            .find(|cell| !matches!(cell, Cell::Null));
        let (coltype, colflags) = match first {
            Some(Cell::Int(_)) => (ColumnType::MYSQL_TYPE_LONGLONG, ColumnFlags::UNSIGNED_FLAG),
            Some(Cell::Float(_)) => (ColumnType::MYSQL_TYPE_DOUBLE, ColumnFlags::empty()),
            _ => (ColumnType::MYSQL_TYPE_VAR_STRING, ColumnFlags::empty()),
        };
        Column {
            table: String::new(),
            column: name.to_owned(),
            coltype,
            colflags,
        }
    }
}

/// A duration in milliseconds, to the microsecond.
pub fn millis(duration: Duration) -> f64 {
    micros_to_millis(duration.as_micros().min(u128::from(u64::MAX)) as u64)
}

/// Microseconds as milliseconds (`1234` → `1.234`).
pub fn micros_to_millis(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn times_in_utc() {
        assert_eq!(format_time(UNIX_EPOCH), "1970-01-01 00:00:00.000 UTC");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(format_time(t), "2024-02-29 12:34:56.789 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(format_time(t), "2000-02-29 00:00:00.000 UTC");
    }

    #[test]
    fn column_types_follow_the_cells() {
        let mut answer = Answer::new(&["a", "b", "c", "d"]);
        answer.push(vec![Cell::Null, 1u64.into(), 1.5.into(), "x".into()]);
        answer.push(vec![Cell::Int(3), Cell::Null, Cell::Null, Cell::Null]);
        assert_eq!(
            answer.column(0, "a").coltype,
            ColumnType::MYSQL_TYPE_LONGLONG
        );
        assert_eq!(
            answer.column(1, "b").coltype,
            ColumnType::MYSQL_TYPE_LONGLONG
        );
        assert_eq!(answer.column(2, "c").coltype, ColumnType::MYSQL_TYPE_DOUBLE);
        assert_eq!(
            answer.column(3, "d").coltype,
            ColumnType::MYSQL_TYPE_VAR_STRING
        );
        assert_eq!(answer.cell(1, "a"), Some(&Cell::Int(3)));
        assert_eq!(millis(Duration::from_micros(1234)), 1.234);
    }
}
