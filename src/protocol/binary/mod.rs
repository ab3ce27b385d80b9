//! Binary-protocol codec for prepared statements.
//!
//! shardgate sends no parameters to a shard. It reads the parameters of a
//! COM_STMT_EXECUTE ([`parse_execute`], in `execute`) and renders each one as
//! an SQL literal ([`render_literal`], in `literal`) into the statement text,
//! which is routed and run (on one server as a prepared statement executed
//! at once, its binary rows relayed as they are). A multi-shard read's
//! binary rows are split into values ([`binary_row_values`]), compared and
//! added ([`binary_scalar`], [`number_text_to_binary`]) and written back
//! ([`write_binary_values`]). Where the answer comes as text rows
//! (diagnostics, result sets the proxy writes), each is converted into the
//! binary-protocol row the client expects ([`text_row_to_binary`], in
//! `rows`, using the column types that [`parse_column_definition`] in
//! `columns` reads).
//!
//! Everything here is pure: no sockets, no state beyond what the caller passes.
//! No input makes it panic; bad input gives a [`BinaryError`].

use mysql_common::constants::ColumnType;
use thiserror::Error;

mod columns;
mod execute;
mod literal;
mod rows;
#[cfg(test)]
mod tests;

pub use columns::{parse_column_definition, ColumnInfo};
pub use execute::{
    is_decimal_text, param_spans, parse_execute, ExecuteRequest, ParamBytes, ParamValue,
};
pub use literal::{bind_separator, bytes_are_text, push_hex, render_literal};
pub use rows::{
    binary_row_values, binary_scalar, number_text_to_binary, text_row_to_binary,
    write_binary_values, BinaryScalar,
};

/// Longest piece of offending text quoted in an error message.
const ERROR_TEXT_MAX: usize = 64;

/// What went wrong while converting a row or reading COM_STMT_EXECUTE.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BinaryError {
    /// The text row ended before every column had a value.
    #[error("text row has {found} values, the result set has {expected} columns")]
    RowTooShort {
        /// Columns in the result set.
        expected: usize,
        /// Values the row held.
        found: usize,
    },
    /// A value's length runs past the end of the text row, or is malformed.
    #[error("text row truncated in the value of column {column}")]
    RowTruncated {
        /// Zero-based column index.
        column: usize,
    },
    /// The text row has bytes after its last column's value.
    #[error("text row has {extra} bytes after its {columns} values")]
    RowTooLong {
        /// Columns in the result set.
        columns: usize,
        /// Bytes left over.
        extra: usize,
    },
    /// A numeric column's text is not a number of its type (or is out of range).
    #[error("column {column}: {text:?} is not a valid {column_type:?} value")]
    BadNumber {
        /// Zero-based column index.
        column: usize,
        /// The column's type.
        column_type: ColumnType,
        /// The offending text (shortened).
        text: String,
    },
    /// A DATE/DATETIME/TIMESTAMP column's text is not `YYYY-MM-DD[ HH:MM:SS[.ffffff]]`.
    #[error("column {column}: {text:?} is not a valid date/datetime")]
    BadDate {
        /// Zero-based column index.
        column: usize,
        /// The offending text (shortened).
        text: String,
    },
    /// A TIME column's text is not `[-]H:MM:SS[.ffffff]`.
    #[error("column {column}: {text:?} is not a valid time")]
    BadTime {
        /// Zero-based column index.
        column: usize,
        /// The offending text (shortened).
        text: String,
    },
    /// A column type that never appears in a result set sent to a client.
    #[error("column {column}: type {column_type:?} has no binary-protocol form")]
    UnsupportedColumnType {
        /// Zero-based column index.
        column: usize,
        /// The column's type.
        column_type: ColumnType,
    },
    /// COM_STMT_EXECUTE ended inside its header, NULL bitmap or type list.
    #[error("COM_STMT_EXECUTE truncated in its {what}")]
    Truncated {
        /// The part that was cut short.
        what: &'static str,
    },
    /// COM_STMT_EXECUTE ended inside the value of a parameter.
    #[error("COM_STMT_EXECUTE truncated in the value of parameter {index}")]
    ParamTruncated {
        /// Zero-based parameter index.
        index: usize,
    },
    /// A parameter type byte that is not a type a client may bind.
    #[error("COM_STMT_EXECUTE: parameter {index} has unsupported type 0x{type_byte:02x}")]
    UnknownParamType {
        /// Zero-based parameter index.
        index: usize,
        /// The type byte as sent.
        type_byte: u8,
    },
    /// No parameter types in this COM_STMT_EXECUTE and none kept from an earlier one.
    #[error(
        "COM_STMT_EXECUTE sends no parameter types and {known} are known for {expected} parameters"
    )]
    MissingParamTypes {
        /// Parameters of the statement.
        expected: usize,
        /// Types kept from an earlier execute.
        known: usize,
    },
    /// A parameter value that is malformed for its type.
    #[error("COM_STMT_EXECUTE: parameter {index}: {reason}")]
    BadParam {
        /// Zero-based parameter index.
        index: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A value that has no SQL literal (a NaN or infinite float, a DECIMAL
    /// whose text is not a number).
    #[error("a {0} value has no SQL literal")]
    Unrepresentable(&'static str),
    /// COM_STMT_EXECUTE has bytes after the last parameter value.
    #[error("COM_STMT_EXECUTE has {extra} bytes after its parameter values")]
    TrailingBytes {
        /// Bytes left over.
        extra: usize,
    },
}

/// A DATE, DATETIME or TIMESTAMP as the binary protocol carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DateTime {
    /// Year.
    pub year: u16,
    /// Month (0 in a zero date).
    pub month: u8,
    /// Day of month.
    pub day: u8,
    /// Hour.
    pub hour: u8,
    /// Minute.
    pub minute: u8,
    /// Second.
    pub second: u8,
    /// Microseconds (at most 999 999).
    pub micros: u32,
}

/// A TIME value as the binary protocol carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Time {
    /// Negative interval.
    pub negative: bool,
    /// Whole days.
    pub days: u32,
    /// Hours (0-23 as sent by clients).
    pub hours: u8,
    /// Minutes.
    pub minutes: u8,
    /// Seconds.
    pub seconds: u8,
    /// Microseconds (at most 999 999).
    pub micros: u32,
}
