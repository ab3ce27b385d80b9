//! Binary-protocol codec for prepared statements.
//!
//! shardgate prepares nothing on a shard. It reads the parameters of a
//! COM_STMT_EXECUTE ([`parse_execute`]), renders each one as an SQL literal
//! ([`render_literal`]) into the statement text, routes and runs that text with
//! COM_QUERY, then converts each text-protocol row of the answer into the
//! binary-protocol row the client expects ([`text_row_to_binary`], using the
//! column types from [`parse_column_definition`]).
//!
//! Everything here is pure: no sockets, no state beyond what the caller passes.
//! No input makes it panic; bad input gives a [`BinaryError`].

use std::collections::HashMap;
use std::fmt::Write as _;

use mysql_common::constants::{ColumnFlags, ColumnType};
use thiserror::Error;

use super::charset::Charset;
use super::frame::{read_lenenc_int, write_lenenc_bytes};

/// The NULL marker of a text-protocol row value.
const TEXT_NULL: u8 = 0xFB;

/// Longest piece of offending text quoted in an error message.
const ERROR_TEXT_MAX: usize = 64;

/// The unsigned bit in the flag byte of a COM_STMT_EXECUTE parameter type.
const PARAM_UNSIGNED: u8 = 0x80;

/// The charset number of `binary`.
const BINARY_CHARSET: u16 = 63;

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

// ---------------------------------------------------------------------------
// Column definitions
// ---------------------------------------------------------------------------

/// The parts of a column definition that decide its binary-protocol encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnInfo {
    /// The column's wire type.
    pub column_type: ColumnType,
    /// Column flags (`UNSIGNED_FLAG` matters for integers).
    pub flags: ColumnFlags,
    /// Decimals (fractional-second digits for temporal types).
    pub decimals: u8,
    /// Character set number of the column.
    pub charset: u16,
}

impl ColumnInfo {
    /// A column of `column_type` with `flags`, no decimals and the binary charset.
    pub fn new(column_type: ColumnType, flags: ColumnFlags) -> Self {
        Self {
            column_type,
            flags,
            decimals: 0,
            charset: BINARY_CHARSET,
        }
    }

    /// Whether the column carries `UNSIGNED_FLAG`.
    pub fn is_unsigned(&self) -> bool {
        self.flags.contains(ColumnFlags::UNSIGNED_FLAG)
    }
}

/// Reads a protocol-4.1 column definition packet payload (without MariaDB's
/// extended type info). `None` if it is truncated or names an unknown type.
pub fn parse_column_definition(payload: &[u8]) -> Option<ColumnInfo> {
    let mut buf = payload;
    // catalog, schema, table, org_table, name, org_name
    for _ in 0..6 {
        skip_lenenc_bytes(&mut buf)?;
    }
    let fixed_len = read_lenenc_int(&mut buf)?;
    // charset u16, length u32, type u8, flags u16, decimals u8 (+ 2 filler bytes)
    if fixed_len < 10 || buf.len() < 10 {
        return None;
    }
    let charset = u16::from_le_bytes([buf[0], buf[1]]);
    let column_type = ColumnType::try_from(buf[6]).ok()?;
    let flags = ColumnFlags::from_bits_truncate(u16::from_le_bytes([buf[7], buf[8]]));
    let decimals = buf[9];
    Some(ColumnInfo {
        column_type,
        flags,
        decimals,
        charset,
    })
}

/// Skips one length-encoded string, advancing `buf`.
fn skip_lenenc_bytes(buf: &mut &[u8]) -> Option<()> {
    let len = usize::try_from(read_lenenc_int(buf)?).ok()?;
    *buf = buf.get(len..)?;
    Some(())
}

// ---------------------------------------------------------------------------
// Text row -> binary row
// ---------------------------------------------------------------------------

/// How a column's value travels in a binary-protocol row.
#[derive(Debug, Clone, Copy)]
enum RowWire {
    /// Little-endian integer of this many bytes.
    Int(usize),
    Float,
    Double,
    /// Length-encoded string, the text bytes unchanged.
    Bytes,
    DateTime,
    Time,
    /// No bytes; the value is always NULL.
    Null,
}

fn row_wire(column_type: ColumnType) -> Option<RowWire> {
    use ColumnType::*;
    Some(match column_type {
        MYSQL_TYPE_TINY => RowWire::Int(1),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => RowWire::Int(2),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => RowWire::Int(4),
        MYSQL_TYPE_LONGLONG => RowWire::Int(8),
        MYSQL_TYPE_FLOAT => RowWire::Float,
        MYSQL_TYPE_DOUBLE => RowWire::Double,
        MYSQL_TYPE_DECIMAL
        | MYSQL_TYPE_NEWDECIMAL
        | MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_STRING
        | MYSQL_TYPE_ENUM
        | MYSQL_TYPE_SET
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_JSON
        | MYSQL_TYPE_GEOMETRY
        | MYSQL_TYPE_BIT
        | MYSQL_TYPE_VECTOR => RowWire::Bytes,
        MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE | MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP => {
            RowWire::DateTime
        }
        MYSQL_TYPE_TIME => RowWire::Time,
        MYSQL_TYPE_NULL => RowWire::Null,
        MYSQL_TYPE_TIMESTAMP2
        | MYSQL_TYPE_DATETIME2
        | MYSQL_TYPE_TIME2
        | MYSQL_TYPE_TYPED_ARRAY
        | MYSQL_TYPE_UNKNOWN => return None,
    })
}

/// Converts one text-protocol row payload (per column a length-encoded string,
/// or `0xFB` for NULL) into a binary-protocol row payload appended to `out`:
/// `0x00`, the NULL bitmap (offset 2), then the non-NULL values encoded by
/// column type. On error `out` is left as it was.
///
/// A `MYSQL_TYPE_NULL` column is always sent as NULL.
pub fn text_row_to_binary(
    row: &[u8],
    columns: &[ColumnInfo],
    out: &mut Vec<u8>,
) -> Result<(), BinaryError> {
    let start = out.len();
    let result = write_binary_row(row, columns, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_binary_row(
    row: &[u8],
    columns: &[ColumnInfo],
    out: &mut Vec<u8>,
) -> Result<(), BinaryError> {
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (columns.len() + 7 + 2) / 8, 0);
    let mut rest = row;
    for (index, column) in columns.iter().enumerate() {
        let wire = row_wire(column.column_type).ok_or(BinaryError::UnsupportedColumnType {
            column: index,
            column_type: column.column_type,
        })?;
        match read_text_value(&mut rest, index, columns.len())? {
            Some(text) if !matches!(wire, RowWire::Null) => {
                write_binary_value(text, wire, column, index, out)?;
            }
            _ => {
                let bit = index + 2;
                out[bitmap_at + bit / 8] |= 1 << (bit % 8);
            }
        }
    }
    if !rest.is_empty() {
        return Err(BinaryError::RowTooLong {
            columns: columns.len(),
            extra: rest.len(),
        });
    }
    Ok(())
}

/// Reads one text-row value: `None` for NULL.
fn read_text_value<'a>(
    rest: &mut &'a [u8],
    index: usize,
    expected: usize,
) -> Result<Option<&'a [u8]>, BinaryError> {
    match rest.first() {
        None => Err(BinaryError::RowTooShort {
            expected,
            found: index,
        }),
        Some(&TEXT_NULL) => {
            *rest = &rest[1..];
            Ok(None)
        }
        Some(_) => {
            let truncated = BinaryError::RowTruncated { column: index };
            let len = read_lenenc_int(rest).ok_or(truncated.clone())?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&len| len <= rest.len())
                .ok_or(truncated)?;
            let (value, tail) = rest.split_at(len);
            *rest = tail;
            Ok(Some(value))
        }
    }
}

fn write_binary_value(
    text: &[u8],
    wire: RowWire,
    column: &ColumnInfo,
    index: usize,
    out: &mut Vec<u8>,
) -> Result<(), BinaryError> {
    let bad_number = || BinaryError::BadNumber {
        column: index,
        column_type: column.column_type,
        text: shorten(text),
    };
    match wire {
        RowWire::Int(width) => {
            let bytes = parse_int(text, width, column.is_unsigned()).ok_or_else(bad_number)?;
            out.extend_from_slice(&bytes[..width]);
        }
        RowWire::Float => {
            let value: f32 = parse_text(text).ok_or_else(bad_number)?;
            out.extend_from_slice(&value.to_le_bytes());
        }
        RowWire::Double => {
            let value: f64 = parse_text(text).ok_or_else(bad_number)?;
            out.extend_from_slice(&value.to_le_bytes());
        }
        RowWire::Bytes => write_lenenc_bytes(out, text),
        RowWire::DateTime => {
            let dt = parse_datetime_text(text).ok_or_else(|| BinaryError::BadDate {
                column: index,
                text: shorten(text),
            })?;
            write_datetime(out, &dt);
        }
        RowWire::Time => {
            let t = parse_time_text(text).ok_or_else(|| BinaryError::BadTime {
                column: index,
                text: shorten(text),
            })?;
            write_time(out, &t);
        }
        // Handled by the caller: always NULL.
        RowWire::Null => {}
    }
    Ok(())
}

/// Parses decimal text as an integer that fits `width` bytes, signed or not;
/// returns its little-endian bytes (the first `width` are the encoding).
fn parse_int(text: &[u8], width: usize, unsigned: bool) -> Option<[u8; 8]> {
    let bits = 8 * width as u32;
    if unsigned {
        let value: u64 = parse_text(text)?;
        if bits < 64 && value >> bits != 0 {
            return None;
        }
        Some(value.to_le_bytes())
    } else {
        let value: i64 = parse_text(text)?;
        if bits < 64 {
            let max = (1i64 << (bits - 1)) - 1;
            if value > max || value < -max - 1 {
                return None;
            }
        }
        Some(value.to_le_bytes())
    }
}

fn parse_text<T: std::str::FromStr>(text: &[u8]) -> Option<T> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn shorten(text: &[u8]) -> String {
    String::from_utf8_lossy(&text[..text.len().min(ERROR_TEXT_MAX)]).into_owned()
}

/// A date and time of day as the binary protocol carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct DateTime {
    year: u16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    micros: u32,
}

/// A TIME value as the binary protocol carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Time {
    negative: bool,
    days: u32,
    hours: u8,
    minutes: u8,
    seconds: u8,
    micros: u32,
}

/// The value of a run of ASCII digits (1 to 9 of them).
fn digits(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 9 {
        return None;
    }
    text.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// `H:MM:SS[.f]` with 1 to `max_hour_digits` hour digits and 1 to 6
/// fractional digits: (hours, minutes, seconds, microseconds).
fn parse_clock(text: &[u8], max_hour_digits: usize) -> Option<(u32, u8, u8, u32)> {
    let (clock, fraction) = match text.iter().position(|&b| b == b'.') {
        Some(dot) => (&text[..dot], Some(&text[dot + 1..])),
        None => (text, None),
    };
    let colon = clock.iter().position(|&b| b == b':')?;
    let hour_text = &clock[..colon];
    if hour_text.len() > max_hour_digits {
        return None;
    }
    let hours = digits(hour_text)?;
    let rest = &clock[colon + 1..];
    if rest.len() != 5 || rest[2] != b':' {
        return None;
    }
    let minutes = digits(&rest[..2])? as u8;
    let seconds = digits(&rest[3..])? as u8;
    let micros = match fraction {
        None => 0,
        Some(f) if f.len() <= 6 => digits(f)? * 10u32.pow(6 - f.len() as u32),
        Some(_) => return None,
    };
    Some((hours, minutes, seconds, micros))
}

/// `YYYY-MM-DD[ HH:MM:SS[.ffffff]]`.
fn parse_datetime_text(text: &[u8]) -> Option<DateTime> {
    let (date, clock) = match text.iter().position(|&b| b == b' ') {
        Some(space) => (&text[..space], Some(&text[space + 1..])),
        None => (text, None),
    };
    if date.len() != 10 || date[4] != b'-' || date[7] != b'-' {
        return None;
    }
    let mut dt = DateTime {
        year: digits(&date[..4])? as u16,
        month: digits(&date[5..7])? as u8,
        day: digits(&date[8..])? as u8,
        ..DateTime::default()
    };
    if let Some(clock) = clock {
        if clock.first() == Some(&b':') || clock.get(2) != Some(&b':') {
            return None;
        }
        let (hour, minute, second, micros) = parse_clock(clock, 2)?;
        dt.hour = hour as u8;
        dt.minute = minute;
        dt.second = second;
        dt.micros = micros;
    }
    Some(dt)
}

/// `[-]H:MM:SS[.ffffff]` (the hours may exceed 23).
fn parse_time_text(text: &[u8]) -> Option<Time> {
    let (negative, rest) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (hours, minutes, seconds, micros) = parse_clock(rest, 9)?;
    Some(Time {
        negative,
        days: hours / 24,
        hours: (hours % 24) as u8,
        minutes,
        seconds,
        micros,
    })
}

/// Binary DATE/DATETIME/TIMESTAMP: the shortest of lengths 0, 4, 7, 11.
fn write_datetime(out: &mut Vec<u8>, dt: &DateTime) {
    let len = if dt.micros != 0 {
        11
    } else if dt.hour != 0 || dt.minute != 0 || dt.second != 0 {
        7
    } else if dt.year != 0 || dt.month != 0 || dt.day != 0 {
        4
    } else {
        0
    };
    out.push(len);
    if len >= 4 {
        out.extend_from_slice(&dt.year.to_le_bytes());
        out.extend_from_slice(&[dt.month, dt.day]);
    }
    if len >= 7 {
        out.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
    }
    if len == 11 {
        out.extend_from_slice(&dt.micros.to_le_bytes());
    }
}

/// Binary TIME: the shortest of lengths 0, 8, 12.
fn write_time(out: &mut Vec<u8>, t: &Time) {
    let len = if t.micros != 0 {
        12
    } else if t.days != 0 || t.hours != 0 || t.minutes != 0 || t.seconds != 0 {
        8
    } else {
        0
    };
    out.push(len);
    if len >= 8 {
        out.push(u8::from(t.negative));
        out.extend_from_slice(&t.days.to_le_bytes());
        out.extend_from_slice(&[t.hours, t.minutes, t.seconds]);
    }
    if len == 12 {
        out.extend_from_slice(&t.micros.to_le_bytes());
    }
}

// ---------------------------------------------------------------------------
// COM_STMT_EXECUTE
// ---------------------------------------------------------------------------

/// One bound parameter of COM_STMT_EXECUTE.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// SQL NULL (NULL bit set, or type `MYSQL_TYPE_NULL`).
    Null,
    /// A signed integer (TINY, SHORT, YEAR, INT24, LONG, LONGLONG).
    Int(i64),
    /// An integer sent with the unsigned flag.
    UInt(u64),
    /// FLOAT (widened exactly to f64, as the server does) or DOUBLE.
    Float(f64),
    /// A DECIMAL/NEWDECIMAL parameter, its text checked by
    /// [`is_decimal_text`] (any other text is refused); rendered unquoted so
    /// it stays exact.
    Decimal(String),
    /// Strings, blobs, and any long data.
    Bytes {
        /// The bytes as sent.
        data: Vec<u8>,
        /// Sent as a BLOB/GEOMETRY/BIT type: the value has the binary charset.
        binary: bool,
    },
    /// DATE, DATETIME or TIMESTAMP.
    Date {
        /// Year.
        year: u16,
        /// Month (0 in a zero date).
        month: u8,
        /// Day of month.
        day: u8,
        /// Hour.
        hour: u8,
        /// Minute.
        minute: u8,
        /// Second.
        second: u8,
        /// Microseconds (at most 999 999).
        micros: u32,
    },
    /// TIME.
    Time {
        /// Negative interval.
        negative: bool,
        /// Whole days.
        days: u32,
        /// Hours (0-23 as sent by clients).
        hours: u8,
        /// Minutes.
        minutes: u8,
        /// Seconds.
        seconds: u8,
        /// Microseconds (at most 999 999).
        micros: u32,
    },
}

/// A decoded COM_STMT_EXECUTE.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteRequest {
    /// The statement the client executes.
    pub statement_id: u32,
    /// The flags byte: cursor type (`0` no cursor, `1` read-only, `2` for
    /// update, `4` scrollable).
    pub cursor_flags: u8,
    /// The parameter values, one per placeholder.
    pub params: Vec<ParamValue>,
}

/// How a parameter's value travels in COM_STMT_EXECUTE.
#[derive(Debug, Clone, Copy)]
enum ParamWire {
    Null,
    Int(usize),
    Float,
    Double,
    Decimal,
    Bytes { binary: bool },
    DateTime,
    Time,
}

fn param_wire(column_type: ColumnType) -> Option<ParamWire> {
    use ColumnType::*;
    Some(match column_type {
        MYSQL_TYPE_NULL => ParamWire::Null,
        MYSQL_TYPE_TINY => ParamWire::Int(1),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => ParamWire::Int(2),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => ParamWire::Int(4),
        MYSQL_TYPE_LONGLONG => ParamWire::Int(8),
        MYSQL_TYPE_FLOAT => ParamWire::Float,
        MYSQL_TYPE_DOUBLE => ParamWire::Double,
        MYSQL_TYPE_DECIMAL | MYSQL_TYPE_NEWDECIMAL => ParamWire::Decimal,
        MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_STRING
        | MYSQL_TYPE_ENUM
        | MYSQL_TYPE_SET
        | MYSQL_TYPE_JSON => ParamWire::Bytes { binary: false },
        MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB
        | MYSQL_TYPE_BLOB
        | MYSQL_TYPE_GEOMETRY
        | MYSQL_TYPE_BIT
        | MYSQL_TYPE_VECTOR => ParamWire::Bytes { binary: true },
        MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE | MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP => {
            ParamWire::DateTime
        }
        MYSQL_TYPE_TIME => ParamWire::Time,
        MYSQL_TYPE_TIMESTAMP2
        | MYSQL_TYPE_DATETIME2
        | MYSQL_TYPE_TIME2
        | MYSQL_TYPE_TYPED_ARRAY
        | MYSQL_TYPE_UNKNOWN => return None,
    })
}

/// A bounds-checked reader over a COM_STMT_EXECUTE payload.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
}

/// Decodes a COM_STMT_EXECUTE payload (without the command byte) for a
/// statement with `param_count` placeholders.
///
/// `types` holds the parameter types `(type, unsigned)` kept for the
/// statement: when the packet's new-params-bound flag is set they are
/// replaced by the ones it sends (as soon as they are read, even if a value
/// later turns out malformed, as clients do not resend them); otherwise they
/// are used as they are and must have one entry per parameter.
///
/// A parameter with an entry in `long_data` (from COM_STMT_SEND_LONG_DATA,
/// keyed by parameter index) takes that value, as [`ParamValue::Bytes`], and
/// has no bytes in the payload, whatever its NULL bit says. The caller clears
/// `long_data` after each execute and on COM_STMT_RESET.
///
/// The payload is the classic format: the client must not have negotiated
/// `CLIENT_QUERY_ATTRIBUTES` (parameter count and names in the packet).
pub fn parse_execute(
    payload: &[u8],
    param_count: usize,
    types: &mut Vec<(ColumnType, bool)>,
    long_data: &HashMap<u16, Vec<u8>>,
) -> Result<ExecuteRequest, BinaryError> {
    let mut reader = Reader { buf: payload };
    let header = |what| BinaryError::Truncated { what };
    let statement_id = u32::from_le_bytes(reader.array().ok_or(header("statement id"))?);
    let cursor_flags = reader.u8().ok_or(header("flags"))?;
    let _iteration_count = reader.array::<4>().ok_or(header("iteration count"))?;

    let mut params = Vec::new();
    if param_count > 0 {
        let bitmap = reader
            .take(param_count.div_ceil(8))
            .ok_or(header("NULL bitmap"))?;
        let bound = reader.u8().ok_or(header("new-params-bound flag"))?;
        if bound != 0 {
            let raw = reader
                .take(param_count.saturating_mul(2))
                .ok_or(header("parameter types"))?;
            let mut new_types = Vec::with_capacity(param_count);
            for (index, pair) in raw.chunks_exact(2).enumerate() {
                let column_type = ColumnType::try_from(pair[0])
                    .ok()
                    .filter(|t| param_wire(*t).is_some())
                    .ok_or(BinaryError::UnknownParamType {
                        index,
                        type_byte: pair[0],
                    })?;
                new_types.push((column_type, pair[1] & PARAM_UNSIGNED != 0));
            }
            *types = new_types;
        } else if types.len() != param_count {
            return Err(BinaryError::MissingParamTypes {
                expected: param_count,
                known: types.len(),
            });
        }

        params.reserve(param_count);
        for (index, &(column_type, unsigned)) in types.iter().enumerate() {
            let wire = param_wire(column_type).ok_or(BinaryError::UnknownParamType {
                index,
                type_byte: column_type as u8,
            })?;
            let long = u16::try_from(index).ok().and_then(|i| long_data.get(&i));
            let value = if let Some(data) = long {
                ParamValue::Bytes {
                    data: data.clone(),
                    binary: matches!(wire, ParamWire::Bytes { binary: true }),
                }
            } else if bitmap[index / 8] & (1 << (index % 8)) != 0 {
                ParamValue::Null
            } else {
                read_param(&mut reader, wire, unsigned, index)?
            };
            params.push(value);
        }
    }

    if !reader.buf.is_empty() {
        return Err(BinaryError::TrailingBytes {
            extra: reader.buf.len(),
        });
    }
    Ok(ExecuteRequest {
        statement_id,
        cursor_flags,
        params,
    })
}

fn read_param(
    reader: &mut Reader<'_>,
    wire: ParamWire,
    unsigned: bool,
    index: usize,
) -> Result<ParamValue, BinaryError> {
    let truncated = BinaryError::ParamTruncated { index };
    let bad = |reason| BinaryError::BadParam { index, reason };
    Ok(match wire {
        ParamWire::Null => ParamValue::Null,
        ParamWire::Int(width) => {
            let raw = reader.take(width).ok_or(truncated)?;
            let mut bytes = [0u8; 8];
            bytes[..width].copy_from_slice(raw);
            if unsigned {
                ParamValue::UInt(u64::from_le_bytes(bytes))
            } else {
                // Sign-extend from `width` bytes.
                let shift = 64 - 8 * width as u32;
                ParamValue::Int(i64::from_le_bytes(bytes) << shift >> shift)
            }
        }
        ParamWire::Float => {
            let raw = reader.array().ok_or(truncated)?;
            ParamValue::Float(f64::from(f32::from_le_bytes(raw)))
        }
        ParamWire::Double => {
            ParamValue::Float(f64::from_le_bytes(reader.array().ok_or(truncated)?))
        }
        ParamWire::Decimal | ParamWire::Bytes { .. } => {
            let len = read_lenenc_int(&mut reader.buf).ok_or(truncated.clone())?;
            let len = usize::try_from(len).map_err(|_| truncated.clone())?;
            let data = reader.take(len).ok_or(truncated)?;
            match wire {
                ParamWire::Bytes { binary } => ParamValue::Bytes {
                    data: data.to_vec(),
                    binary,
                },
                _ if is_decimal_text(data) => {
                    ParamValue::Decimal(String::from_utf8_lossy(data).into_owned())
                }
                _ => {
                    return Err(bad(
                        "a DECIMAL value is not a number ([+-]digits[.digits][e[+-]digits])",
                    ))
                }
            }
        }
        ParamWire::DateTime => {
            let len = reader.u8().ok_or(truncated.clone())?;
            if !matches!(len, 0 | 4 | 7 | 11) {
                return Err(bad("date/datetime length is not 0, 4, 7 or 11"));
            }
            let raw = reader.take(usize::from(len)).ok_or(truncated)?;
            let mut dt = DateTime::default();
            if len >= 4 {
                dt.year = u16::from_le_bytes([raw[0], raw[1]]);
                dt.month = raw[2];
                dt.day = raw[3];
            }
            if len >= 7 {
                dt.hour = raw[4];
                dt.minute = raw[5];
                dt.second = raw[6];
            }
            if len == 11 {
                dt.micros = u32::from_le_bytes([raw[7], raw[8], raw[9], raw[10]]);
            }
            if dt.micros > 999_999 {
                return Err(bad("microseconds above 999999"));
            }
            ParamValue::Date {
                year: dt.year,
                month: dt.month,
                day: dt.day,
                hour: dt.hour,
                minute: dt.minute,
                second: dt.second,
                micros: dt.micros,
            }
        }
        ParamWire::Time => {
            let len = reader.u8().ok_or(truncated.clone())?;
            if !matches!(len, 0 | 8 | 12) {
                return Err(bad("time length is not 0, 8 or 12"));
            }
            let raw = reader.take(usize::from(len)).ok_or(truncated)?;
            let mut t = Time::default();
            if len >= 8 {
                t.negative = raw[0] != 0;
                t.days = u32::from_le_bytes([raw[1], raw[2], raw[3], raw[4]]);
                t.hours = raw[5];
                t.minutes = raw[6];
                t.seconds = raw[7];
            }
            if len == 12 {
                t.micros = u32::from_le_bytes([raw[8], raw[9], raw[10], raw[11]]);
            }
            if t.micros > 999_999 {
                return Err(bad("microseconds above 999999"));
            }
            ParamValue::Time {
                negative: t.negative,
                days: t.days,
                hours: t.hours,
                minutes: t.minutes,
                seconds: t.seconds,
                micros: t.micros,
            }
        }
    })
}

/// Whether `text` is a number MariaDB reads as exactly that number and
/// nothing else: `[+-]digits[.digits][e[+-]digits]` (the integer or the
/// fraction part may be empty, not both).
pub fn is_decimal_text(text: &[u8]) -> bool {
    let unsigned = match text.split_first() {
        Some((b'+' | b'-', rest)) => rest,
        _ => text,
    };
    let (mantissa, exponent) = match unsigned.iter().position(|&b| b == b'e' || b == b'E') {
        Some(e) => (&unsigned[..e], Some(&unsigned[e + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
        None => (mantissa, &[][..]),
    };
    let mantissa_ok =
        (!int.is_empty() || !frac.is_empty()) && int.iter().chain(frac).all(u8::is_ascii_digit);
    let exponent_ok = match exponent {
        None => true,
        Some(exponent) => {
            let digits = match exponent.split_first() {
                Some((b'+' | b'-', rest)) => rest,
                _ => exponent,
            };
            !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
        }
    };
    mantissa_ok && exponent_ok
}

// ---------------------------------------------------------------------------
// SQL literals
// ---------------------------------------------------------------------------

/// Appends `value` to `out` as a MySQL SQL literal that no character set
/// and no `sql_mode` can read as anything but that one value: the text
/// written is ASCII, and holds no backslash and no quote a value's bytes
/// could pair with.
///
/// - `NULL`; integers in decimal; DECIMAL values as their text, which
///   [`is_decimal_text`] has checked (`[+-]digits[.digits][e[+-]digits]`);
/// - floats in shortest round-trip scientific notation (`1.5e0`, `1e300`),
///   so MariaDB reads them as exactly the same DOUBLE; NaN and infinities,
///   which MariaDB cannot hold, are refused;
/// - strings as a hex literal with the connection's character set as
///   introducer (`_gbk X'C4E3'`), so the server takes the same bytes as
///   text of the same character set; blobs (`binary`), values sent in the
///   binary character set, and bytes that are not well-formed text of
///   `charset` (which the server would refuse in an introduced literal)
///   as `_binary X'..'`. The introduced literal has the character set's
///   default collation (not `collation_connection`) with the coercibility
///   of any literal, so comparing it with a column uses the column's
///   collation as a plain literal would;
/// - dates as `'YYYY-MM-DD'` or `'YYYY-MM-DD HH:MM:SS[.f]'`, times as
///   `'[-]HH:MM:SS[.f]'` with the days folded into the hours (e.g.
///   `'-26:03:04.000005'`), written from their numeric fields; fractions
///   without trailing zeros, microseconds above 999 999 clamped.
///
/// A negative number right after a `-` gives `--5`, which MariaDB reads as
/// minus minus 5 (a comment needs a space after `--`); the caller keeps
/// words from running into the literal ([`bind_separator`]).
pub fn render_literal(
    value: &ParamValue,
    charset: Charset,
    out: &mut String,
) -> Result<(), BinaryError> {
    match value {
        ParamValue::Null => out.push_str("NULL"),
        ParamValue::Int(v) => {
            let _ = write!(out, "{v}");
        }
        ParamValue::UInt(v) => {
            let _ = write!(out, "{v}");
        }
        ParamValue::Float(v) if v.is_finite() => {
            let _ = write!(out, "{v:e}");
        }
        ParamValue::Float(_) => return Err(BinaryError::Unrepresentable("NaN or infinity")),
        ParamValue::Decimal(text) if is_decimal_text(text.as_bytes()) => out.push_str(text),
        ParamValue::Decimal(_) => return Err(BinaryError::Unrepresentable("DECIMAL text")),
        ParamValue::Bytes { data, binary } => {
            let text_charset = !binary && !charset.is_binary() && charset.is_well_formed(data);
            let introducer = if text_charset {
                charset.name()
            } else {
                Charset::BINARY.name()
            };
            out.reserve(data.len() * 2 + introducer.len() + 5);
            out.push('_');
            out.push_str(introducer);
            out.push(' ');
            push_hex(data, out);
        }
        ParamValue::Date {
            year,
            month,
            day,
            hour,
            minute,
            second,
            micros,
        } => {
            let _ = write!(out, "'{year:04}-{month:02}-{day:02}");
            if *hour != 0 || *minute != 0 || *second != 0 || *micros != 0 {
                let _ = write!(out, " {hour:02}:{minute:02}:{second:02}");
                push_fraction(*micros, out);
            }
            out.push('\'');
        }
        ParamValue::Time {
            negative,
            days,
            hours,
            minutes,
            seconds,
            micros,
        } => {
            let total_hours = u64::from(*days) * 24 + u64::from(*hours);
            let zero = total_hours == 0 && *minutes == 0 && *seconds == 0 && *micros == 0;
            out.push('\'');
            if *negative && !zero {
                out.push('-');
            }
            let _ = write!(out, "{total_hours:02}:{minutes:02}:{seconds:02}");
            push_fraction(*micros, out);
            out.push('\'');
        }
    }
    Ok(())
}

/// What goes between the statement text before a `?` marker (ending in
/// `before`) and the literal that replaces it: a space when the two would
/// otherwise run together (`SELECT?` would become the word
/// `SELECT_utf8mb4`; `1-?` with -5 would start a `--`).
pub fn bind_separator(before: Option<char>, literal_start: Option<char>) -> &'static str {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$' || !c.is_ascii();
    match (before, literal_start) {
        (Some(b), Some(l)) if word(b) && (word(l) || l == '\'') => " ",
        (Some('-'), Some('-' | '+')) => " ",
        _ => "",
    }
}

fn push_hex(data: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(data.len() * 2 + 3);
    out.push_str("X'");
    for &b in data {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0F)]));
    }
    out.push('\'');
}

/// `.ffffff` without trailing zeros; nothing for 0.
fn push_fraction(micros: u32, out: &mut String) {
    if micros == 0 {
        return;
    }
    let digits = format!("{:06}", micros.min(999_999));
    out.push('.');
    out.push_str(digits.trim_end_matches('0'));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::frame::write_lenenc_bytes;
    use mysql_common::constants::{ColumnFlags as F, ColumnType as T};
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::{Column, ComStmtExecuteRequestBuilder};
    use mysql_common::proto::{Binary, MyDeserialize, MySerialize};
    use mysql_common::row::RowDeserializer;
    use mysql_common::value::ServerSide;
    use mysql_common::Value;
    use std::sync::Arc;

    // ----- helpers -----

    fn col(t: ColumnType) -> ColumnInfo {
        ColumnInfo::new(t, F::empty())
    }

    fn ucol(t: ColumnType) -> ColumnInfo {
        ColumnInfo::new(t, F::UNSIGNED_FLAG)
    }

    /// The values of a text row, `None` for NULL.
    type TextValues<'a> = Vec<Option<&'a [u8]>>;

    /// A text-protocol row from optional values.
    fn text_row(values: &[Option<&[u8]>]) -> Vec<u8> {
        let mut row = Vec::new();
        for v in values {
            match v {
                None => row.push(0xFB),
                Some(v) => write_lenenc_bytes(&mut row, v),
            }
        }
        row
    }

    fn convert(values: &[Option<&[u8]>], columns: &[ColumnInfo]) -> Result<Vec<u8>, BinaryError> {
        let mut out = Vec::new();
        text_row_to_binary(&text_row(values), columns, &mut out).map(|()| out)
    }

    /// The binary value of one non-NULL column (header and bitmap checked and stripped).
    fn one(column: ColumnInfo, text: &str) -> Result<Vec<u8>, BinaryError> {
        let out = convert(&[Some(text.as_bytes())], &[column])?;
        assert_eq!(&out[..2], &[0x00, 0x00], "header and empty bitmap");
        Ok(out[2..].to_vec())
    }

    fn lit(value: &ParamValue, charset: &str) -> String {
        let mut out = String::new();
        let charset = Charset::from_name(charset).expect("known charset");
        render_literal(value, charset, &mut out).expect("renders");
        out
    }

    fn bytes(data: &[u8]) -> ParamValue {
        ParamValue::Bytes {
            data: data.to_vec(),
            binary: false,
        }
    }

    /// The header of a COM_STMT_EXECUTE payload (no command byte).
    fn exec_header(stmt: u32) -> Vec<u8> {
        let mut p = stmt.to_le_bytes().to_vec();
        p.push(0); // no cursor
        p.extend_from_slice(&1u32.to_le_bytes());
        p
    }

    fn no_long_data() -> HashMap<u16, Vec<u8>> {
        HashMap::new()
    }

    /// A deterministic byte generator for the fuzz-like loops.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u8 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) as u8
        }
    }

    // ----- column definitions -----

    #[test]
    fn column_definition_from_mysql_common() {
        let column = Column::new(T::MYSQL_TYPE_NEWDECIMAL)
            .with_schema(b"db00001")
            .with_table(b"pins")
            .with_org_table(b"pins")
            .with_name(b"price")
            .with_org_name(b"price")
            .with_flags(F::UNSIGNED_FLAG | F::NOT_NULL_FLAG)
            .with_column_length(12)
            .with_character_set(33)
            .with_decimals(2);
        let mut payload = Vec::new();
        column.serialize(&mut payload);
        let info = parse_column_definition(&payload).expect("parses");
        // mysql_common 0.37 serialises column_length before character_set
        // (the protocol has them the other way round, as its own parser
        // reads them): compare with what that parser reads back.
        let back = Column::deserialize((), &mut ParseBuf(&payload)).expect("round trip");
        assert_eq!(
            info,
            ColumnInfo {
                column_type: back.column_type(),
                flags: back.flags(),
                decimals: back.decimals(),
                charset: back.character_set(),
            }
        );
        assert_eq!(info.column_type, T::MYSQL_TYPE_NEWDECIMAL);
        assert_eq!(info.flags, F::UNSIGNED_FLAG | F::NOT_NULL_FLAG);
        assert_eq!(info.decimals, 2);
        assert!(info.is_unsigned());
        // Every truncation before the decimals byte fails cleanly.
        for cut in 0..payload.len() - 2 {
            assert_eq!(parse_column_definition(&payload[..cut]), None, "cut {cut}");
        }
        // An unknown type byte is refused.
        let type_at = payload.len() - 6;
        assert_eq!(payload[type_at], T::MYSQL_TYPE_NEWDECIMAL as u8);
        payload[type_at] = 0x30;
        assert_eq!(parse_column_definition(&payload), None);
    }

    #[test]
    fn column_definition_handwritten_and_garbage() {
        let mut p = Vec::new();
        for s in ["def", "", "", "", "1", ""] {
            write_lenenc_bytes(&mut p, s.as_bytes());
        }
        p.push(0x0c);
        p.extend_from_slice(&63u16.to_le_bytes());
        p.extend_from_slice(&1u32.to_le_bytes());
        p.push(T::MYSQL_TYPE_LONGLONG as u8);
        p.extend_from_slice(&0x0081u16.to_le_bytes());
        p.push(0);
        p.extend_from_slice(&[0, 0]);
        let info = parse_column_definition(&p).unwrap();
        assert_eq!(info.column_type, T::MYSQL_TYPE_LONGLONG);
        assert_eq!(info.flags, F::NOT_NULL_FLAG | F::BINARY_FLAG);
        assert_eq!(info.charset, 63);
        let mut rng = Lcg(7);
        for len in 0..400 {
            let junk: Vec<u8> = (0..len % 100).map(|_| rng.next()).collect();
            let _ = parse_column_definition(&junk);
        }
        assert_eq!(parse_column_definition(&[0xFE, 0xFF, 0xFF]), None);
        assert_eq!(
            parse_column_definition(&[0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
            None
        );
    }

    // ----- text row -> binary row: numbers and strings -----

    #[test]
    fn tiny_signed_and_unsigned() {
        assert_eq!(one(col(T::MYSQL_TYPE_TINY), "-128").unwrap(), [0x80]);
        assert_eq!(one(col(T::MYSQL_TYPE_TINY), "127").unwrap(), [0x7F]);
        assert_eq!(one(col(T::MYSQL_TYPE_TINY), "-1").unwrap(), [0xFF]);
        assert_eq!(one(ucol(T::MYSQL_TYPE_TINY), "255").unwrap(), [0xFF]);
        assert_eq!(one(ucol(T::MYSQL_TYPE_TINY), "0").unwrap(), [0x00]);
        for (c, text) in [
            (col(T::MYSQL_TYPE_TINY), "128"),
            (col(T::MYSQL_TYPE_TINY), "-129"),
            (ucol(T::MYSQL_TYPE_TINY), "256"),
            (ucol(T::MYSQL_TYPE_TINY), "-1"),
            (col(T::MYSQL_TYPE_TINY), ""),
            (col(T::MYSQL_TYPE_TINY), "1.0"),
            (col(T::MYSQL_TYPE_TINY), " 1"),
        ] {
            assert!(
                matches!(one(c, text), Err(BinaryError::BadNumber { column: 0, .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn short_year_long_int24() {
        assert_eq!(
            one(col(T::MYSQL_TYPE_SHORT), "-32768").unwrap(),
            [0x00, 0x80]
        );
        assert_eq!(
            one(ucol(T::MYSQL_TYPE_SHORT), "65535").unwrap(),
            [0xFF, 0xFF]
        );
        assert!(one(col(T::MYSQL_TYPE_SHORT), "32768").is_err());
        let year = ColumnInfo::new(T::MYSQL_TYPE_YEAR, F::UNSIGNED_FLAG | F::ZEROFILL_FLAG);
        assert_eq!(one(year, "2024").unwrap(), 2024u16.to_le_bytes());
        assert_eq!(one(year, "0000").unwrap(), [0, 0]);
        assert_eq!(one(col(T::MYSQL_TYPE_LONG), "-1").unwrap(), [0xFF; 4]);
        assert_eq!(
            one(col(T::MYSQL_TYPE_LONG), "-2147483648").unwrap(),
            i32::MIN.to_le_bytes()
        );
        assert_eq!(
            one(ucol(T::MYSQL_TYPE_LONG), "4294967295").unwrap(),
            u32::MAX.to_le_bytes()
        );
        assert!(one(col(T::MYSQL_TYPE_LONG), "2147483648").is_err());
        assert_eq!(
            one(col(T::MYSQL_TYPE_INT24), "-8388608").unwrap(),
            (-8_388_608i32).to_le_bytes()
        );
        assert_eq!(
            one(ucol(T::MYSQL_TYPE_INT24), "16777215").unwrap(),
            16_777_215u32.to_le_bytes()
        );
        // Zerofill text keeps its leading zeros.
        let zf = ColumnInfo::new(T::MYSQL_TYPE_LONG, F::UNSIGNED_FLAG | F::ZEROFILL_FLAG);
        assert_eq!(one(zf, "0000000042").unwrap(), 42u32.to_le_bytes());
    }

    #[test]
    fn longlong_signed_and_unsigned() {
        assert_eq!(
            one(col(T::MYSQL_TYPE_LONGLONG), "-9223372036854775808").unwrap(),
            i64::MIN.to_le_bytes()
        );
        assert_eq!(
            one(col(T::MYSQL_TYPE_LONGLONG), "9223372036854775807").unwrap(),
            i64::MAX.to_le_bytes()
        );
        assert_eq!(
            one(ucol(T::MYSQL_TYPE_LONGLONG), "18446744073709551615").unwrap(),
            u64::MAX.to_le_bytes()
        );
        assert!(one(col(T::MYSQL_TYPE_LONGLONG), "18446744073709551615").is_err());
        assert!(one(ucol(T::MYSQL_TYPE_LONGLONG), "18446744073709551616").is_err());
        assert!(one(ucol(T::MYSQL_TYPE_LONGLONG), "-1").is_err());
        // Not UTF-8.
        let out = convert(&[Some(&[0xFF, 0x31])], &[col(T::MYSQL_TYPE_LONGLONG)]);
        assert!(matches!(out, Err(BinaryError::BadNumber { .. })));
    }

    #[test]
    fn float_and_double() {
        assert_eq!(
            one(col(T::MYSQL_TYPE_FLOAT), "1.5").unwrap(),
            1.5f32.to_le_bytes()
        );
        assert_eq!(
            one(col(T::MYSQL_TYPE_FLOAT), "-3.40282e38").unwrap(),
            (-3.40282e38f32).to_le_bytes()
        );
        assert_eq!(
            one(col(T::MYSQL_TYPE_FLOAT), "0.1").unwrap(),
            0.1f32.to_le_bytes()
        );
        assert_eq!(
            one(col(T::MYSQL_TYPE_DOUBLE), "-2.5e-300").unwrap(),
            (-2.5e-300f64).to_le_bytes()
        );
        assert_eq!(
            one(col(T::MYSQL_TYPE_DOUBLE), "0.30000000000000004").unwrap(),
            (0.1f64 + 0.2).to_le_bytes()
        );
        assert_eq!(
            one(col(T::MYSQL_TYPE_DOUBLE), "1e300").unwrap(),
            1e300f64.to_le_bytes()
        );
        assert!(matches!(
            one(col(T::MYSQL_TYPE_DOUBLE), "1,5"),
            Err(BinaryError::BadNumber {
                column_type: T::MYSQL_TYPE_DOUBLE,
                ..
            })
        ));
    }

    #[test]
    fn string_kinds_are_lenenc_copies() {
        let long = vec![b'x'; 300];
        let emoji = "h\u{e9}llo \u{1F600}".as_bytes();
        let samples: [&[u8]; 5] = [b"", b"12.50", emoji, &[0xFB, 0x00, 0xFF], &long];
        for t in [
            T::MYSQL_TYPE_DECIMAL,
            T::MYSQL_TYPE_NEWDECIMAL,
            T::MYSQL_TYPE_VARCHAR,
            T::MYSQL_TYPE_VAR_STRING,
            T::MYSQL_TYPE_STRING,
            T::MYSQL_TYPE_ENUM,
            T::MYSQL_TYPE_SET,
            T::MYSQL_TYPE_TINY_BLOB,
            T::MYSQL_TYPE_MEDIUM_BLOB,
            T::MYSQL_TYPE_LONG_BLOB,
            T::MYSQL_TYPE_BLOB,
            T::MYSQL_TYPE_JSON,
            T::MYSQL_TYPE_GEOMETRY,
            T::MYSQL_TYPE_BIT,
        ] {
            for sample in samples {
                let out = convert(&[Some(sample)], &[col(t)]).unwrap();
                let mut expected = vec![0x00, 0x00];
                write_lenenc_bytes(&mut expected, sample);
                assert_eq!(out, expected, "{t:?}");
            }
        }
        // 300 bytes need the 0xFC length form.
        let out = convert(&[Some(&long)], &[col(T::MYSQL_TYPE_BLOB)]).unwrap();
        assert_eq!(&out[2..5], &[0xFC, 0x2C, 0x01]);
    }

    // ----- NULL bitmap -----

    #[test]
    fn null_bitmap_has_offset_two() {
        let c = col(T::MYSQL_TYPE_LONG);
        let one_v: &[u8] = b"1";
        let mut values = [Some(one_v); 10];
        for i in [0, 5, 6, 9] {
            values[i] = None;
        }
        let out = convert(&values, &[c; 10]).unwrap();
        // bits 2, 7, 8, 11
        assert_eq!(&out[..3], &[0x00, 0x84, 0x09]);
        assert_eq!(out.len(), 3 + 6 * 4);
        for chunk in out[3..].chunks(4) {
            assert_eq!(chunk, 1i32.to_le_bytes());
        }
        // Bitmap sizes: (n + 9) / 8, one bit per NULL.
        for (n, len) in [(0, 1), (1, 1), (6, 1), (7, 2), (14, 2), (15, 3)] {
            let columns = vec![c; n];
            let values = vec![None; n];
            let out = convert(&values, &columns).unwrap();
            assert_eq!(out.len(), 1 + len, "{n} columns");
            let set: u32 = out[1..].iter().map(|b| b.count_ones()).sum();
            assert_eq!(set as usize, n);
        }
        // The 7th column's bit is the first of the second byte.
        let mut values = vec![Some(one_v); 7];
        values[6] = None;
        let out = convert(&values, &[c; 7]).unwrap();
        assert_eq!(&out[..3], &[0x00, 0x00, 0x01]);
        // Only the first column NULL.
        let out = convert(&[None, Some(one_v)], &[c; 2]).unwrap();
        assert_eq!(out, [0x00, 0x04, 1, 0, 0, 0]);
    }

    #[test]
    fn null_type_column_is_always_null() {
        let columns = [col(T::MYSQL_TYPE_NULL), col(T::MYSQL_TYPE_LONGLONG)];
        let out = convert(&[None, Some(b"7")], &columns).unwrap();
        assert_eq!(&out[..2], &[0x00, 0x04]);
        assert_eq!(&out[2..], 7i64.to_le_bytes());
        let out = convert(&[Some(b"x"), Some(b"7")], &columns).unwrap();
        assert_eq!(&out[..2], &[0x00, 0x04]);
        assert_eq!(out.len(), 10);
    }

    // ----- temporal -----

    #[test]
    fn dates_and_datetimes() {
        let date = col(T::MYSQL_TYPE_DATE);
        let dt = ColumnInfo {
            decimals: 6,
            ..col(T::MYSQL_TYPE_DATETIME)
        };
        let ts = col(T::MYSQL_TYPE_TIMESTAMP);
        assert_eq!(one(date, "0000-00-00").unwrap(), [0]);
        assert_eq!(one(dt, "0000-00-00 00:00:00").unwrap(), [0]);
        assert_eq!(one(dt, "0000-00-00 00:00:00.000000").unwrap(), [0]);
        assert_eq!(one(date, "2024-02-29").unwrap(), [4, 0xE8, 0x07, 2, 29]);
        assert_eq!(one(date, "2024-00-00").unwrap(), [4, 0xE8, 0x07, 0, 0]);
        assert_eq!(
            one(ts, "2024-01-01 00:00:00").unwrap(),
            [4, 0xE8, 0x07, 1, 1]
        );
        assert_eq!(
            one(dt, "2024-02-29 13:14:15").unwrap(),
            [7, 0xE8, 0x07, 2, 29, 13, 14, 15]
        );
        let mut expected = vec![11, 0xE8, 0x07, 2, 29, 13, 14, 15];
        expected.extend_from_slice(&1u32.to_le_bytes());
        assert_eq!(one(dt, "2024-02-29 13:14:15.000001").unwrap(), expected);
        // DATETIME(1) and TIMESTAMP(3) text.
        let mut expected = vec![11, 0xE8, 0x07, 2, 29, 0, 0, 0];
        expected.extend_from_slice(&500_000u32.to_le_bytes());
        assert_eq!(one(dt, "2024-02-29 00:00:00.5").unwrap(), expected);
        let mut expected = vec![11, 0x0F, 0x27, 12, 31, 23, 59, 59];
        expected.extend_from_slice(&123_000u32.to_le_bytes());
        assert_eq!(one(ts, "9999-12-31 23:59:59.123").unwrap(), expected);
        for bad in [
            "2024-1-01",
            "24-01-01",
            "2024/01/01",
            "abcd-ef-gh",
            "2024-01-01 1:02:03",
            "2024-01-01 01:02",
            "2024-01-01 01:02:03.",
            "2024-01-01 01:02:03.1234567",
            "2024-01-01 01:02:03.12a",
            "2024-01-01T01:02:03",
            "2024-01-01 ",
            "2024-01-01 -1:02:03",
            "+024-01-01",
            "",
        ] {
            assert!(
                matches!(one(dt, bad), Err(BinaryError::BadDate { column: 0, .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn times() {
        let time = ColumnInfo {
            decimals: 6,
            ..col(T::MYSQL_TYPE_TIME)
        };
        assert_eq!(one(time, "00:00:00").unwrap(), [0]);
        assert_eq!(one(time, "00:00:00.000000").unwrap(), [0]);
        assert_eq!(one(time, "01:02:03").unwrap(), [8, 0, 0, 0, 0, 0, 1, 2, 3]);
        assert_eq!(
            one(time, "-838:59:59").unwrap(),
            [8, 1, 34, 0, 0, 0, 22, 59, 59]
        );
        let mut expected = vec![12, 0, 1, 0, 0, 0, 2, 3, 4];
        expected.extend_from_slice(&5u32.to_le_bytes());
        assert_eq!(one(time, "26:03:04.000005").unwrap(), expected);
        let mut expected = vec![12, 1, 1, 0, 0, 0, 2, 3, 4];
        expected.extend_from_slice(&5u32.to_le_bytes());
        assert_eq!(one(time, "-26:03:04.000005").unwrap(), expected);
        let mut expected = vec![12, 1, 0, 0, 0, 0, 0, 0, 1];
        expected.extend_from_slice(&500_000u32.to_le_bytes());
        assert_eq!(one(time, "-00:00:01.5").unwrap(), expected);
        assert_eq!(one(time, "5:00:00").unwrap(), [8, 0, 0, 0, 0, 0, 5, 0, 0]);
        for bad in [
            "",
            "-",
            "12:00",
            "12:0:00",
            "1a:00:00",
            ":00:00",
            "--1:00:00",
            "+1:00:00",
            "01:02:03.1234567",
            "1234567890:00:00",
            "01:02:03 ",
            "1 01:02:03",
        ] {
            assert!(
                matches!(one(time, bad), Err(BinaryError::BadTime { column: 0, .. })),
                "{bad:?}"
            );
        }
    }

    // ----- row shape and errors -----

    #[test]
    fn row_shape_errors() {
        let columns = [col(T::MYSQL_TYPE_VAR_STRING); 3];
        assert_eq!(
            convert(&[Some(b"a"), None], &columns),
            Err(BinaryError::RowTooShort {
                expected: 3,
                found: 2
            })
        );
        assert_eq!(
            convert(&[Some(b"a"), None, None, Some(b"b")], &columns),
            Err(BinaryError::RowTooLong {
                columns: 3,
                extra: 2
            })
        );
        let mut out = Vec::new();
        // A length that runs past the end.
        assert_eq!(
            text_row_to_binary(&[0x05, b'a', b'b'], &columns[..1], &mut out),
            Err(BinaryError::RowTruncated { column: 0 })
        );
        // 0xFF is not a length.
        assert_eq!(
            text_row_to_binary(&[0xFF], &columns[..1], &mut out),
            Err(BinaryError::RowTruncated { column: 0 })
        );
        // A huge 8-byte length.
        let huge = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert_eq!(
            text_row_to_binary(&huge, &columns[..1], &mut out),
            Err(BinaryError::RowTruncated { column: 0 })
        );
        assert!(out.is_empty());
        assert_eq!(
            convert(&[Some(b"x")], &[col(T::MYSQL_TYPE_TIME2)]),
            Err(BinaryError::UnsupportedColumnType {
                column: 0,
                column_type: T::MYSQL_TYPE_TIME2
            })
        );
        // No columns: header and a one-byte bitmap.
        assert_eq!(convert(&[], &[]), Ok(vec![0x00, 0x00]));
    }

    #[test]
    fn output_is_appended_and_restored_on_error() {
        let columns = [col(T::MYSQL_TYPE_LONG), col(T::MYSQL_TYPE_LONG)];
        let mut out = vec![0xAA, 0xBB];
        text_row_to_binary(&text_row(&[Some(b"1"), None]), &columns, &mut out).unwrap();
        assert_eq!(out, [0xAA, 0xBB, 0x00, 0x08, 1, 0, 0, 0]);
        let err = text_row_to_binary(&text_row(&[Some(b"1"), Some(b"x")]), &columns, &mut out);
        assert!(matches!(err, Err(BinaryError::BadNumber { column: 1, .. })));
        assert_eq!(out, [0xAA, 0xBB, 0x00, 0x08, 1, 0, 0, 0]);
        // Offending text is shortened in the error.
        let long = vec![b'9'; 1000];
        match convert(&[Some(b"1"), Some(&long)], &columns) {
            Err(BinaryError::BadNumber { text, .. }) => assert_eq!(text.len(), ERROR_TEXT_MAX),
            other => panic!("{other:?}"),
        }
    }

    fn mixed_columns() -> Vec<ColumnInfo> {
        vec![
            col(T::MYSQL_TYPE_TINY),
            ucol(T::MYSQL_TYPE_SHORT),
            col(T::MYSQL_TYPE_LONG),
            ucol(T::MYSQL_TYPE_LONGLONG),
            col(T::MYSQL_TYPE_FLOAT),
            col(T::MYSQL_TYPE_DOUBLE),
            col(T::MYSQL_TYPE_NEWDECIMAL),
            col(T::MYSQL_TYPE_VAR_STRING),
            col(T::MYSQL_TYPE_DATETIME),
            col(T::MYSQL_TYPE_TIME),
            col(T::MYSQL_TYPE_NULL),
        ]
    }

    #[test]
    fn text_row_truncations_and_junk_never_panic() {
        let columns = mixed_columns();
        let row = text_row(&[
            Some(b"-5"),
            Some(b"65535"),
            None,
            Some(b"18446744073709551615"),
            Some(b"1.5"),
            Some(b"-0.25"),
            Some(b"12.50"),
            Some("\u{1F600}".as_bytes()),
            Some(b"2024-02-29 13:14:15.5"),
            Some(b"-26:03:04.000005"),
            None,
        ]);
        let mut out = Vec::new();
        text_row_to_binary(&row, &columns, &mut out).unwrap();
        for cut in 0..row.len() {
            out.clear();
            assert!(
                text_row_to_binary(&row[..cut], &columns, &mut out).is_err(),
                "cut {cut}"
            );
            assert!(out.is_empty());
        }
        let mut rng = Lcg(42);
        for round in 0..3000 {
            let mut fuzzed = row.clone();
            for _ in 0..1 + round % 4 {
                let at = usize::from(rng.next()) % fuzzed.len();
                fuzzed[at] = rng.next();
            }
            let _ = text_row_to_binary(&fuzzed, &columns, &mut out);
            let junk: Vec<u8> = (0..round % 64).map(|_| rng.next()).collect();
            let _ = text_row_to_binary(&junk, &columns, &mut out);
        }
    }

    /// Converted rows read back by mysql_common's binary-row parser, with the
    /// column definitions it serialises read by `parse_column_definition`.
    #[test]
    fn binary_rows_read_back_by_mysql_common() {
        let infos = mixed_columns();
        let columns: Arc<[Column]> = infos
            .iter()
            .map(|c| {
                let column = Column::new(c.column_type).with_flags(c.flags);
                let mut p = Vec::new();
                column.serialize(&mut p);
                let parsed = parse_column_definition(&p);
                assert_eq!(parsed, Some(ColumnInfo { charset: 0, ..*c }));
                column
            })
            .collect();
        let emoji = "h\u{e9}llo \u{1F600}".as_bytes();
        let rows: Vec<(TextValues, Vec<Value>)> = vec![
            (
                vec![
                    Some(b"-5"),
                    Some(b"65535"),
                    Some(b"-2147483648"),
                    Some(b"18446744073709551615"),
                    Some(b"1.5"),
                    Some(b"-0.25"),
                    Some(b"12.50"),
                    Some(emoji),
                    Some(b"2024-02-29 13:14:15.5"),
                    Some(b"-26:03:04.000005"),
                    None,
                ],
                vec![
                    Value::Int(-5),
                    Value::Int(65535),
                    Value::Int(-2147483648),
                    Value::UInt(u64::MAX),
                    Value::Float(1.5),
                    Value::Double(-0.25),
                    Value::Bytes(b"12.50".to_vec()),
                    Value::Bytes(emoji.to_vec()),
                    Value::Date(2024, 2, 29, 13, 14, 15, 500_000),
                    Value::Time(true, 1, 2, 3, 4, 5),
                    Value::NULL,
                ],
            ),
            (
                vec![
                    None,
                    Some(b"0"),
                    None,
                    Some(b"0"),
                    None,
                    Some(b"1e300"),
                    None,
                    Some(b""),
                    Some(b"0000-00-00 00:00:00"),
                    Some(b"00:00:00"),
                    None,
                ],
                vec![
                    Value::NULL,
                    Value::Int(0),
                    Value::NULL,
                    Value::Int(0),
                    Value::NULL,
                    Value::Double(1e300),
                    Value::NULL,
                    Value::Bytes(Vec::new()),
                    Value::Date(0, 0, 0, 0, 0, 0, 0),
                    Value::Time(false, 0, 0, 0, 0, 0),
                    Value::NULL,
                ],
            ),
            (
                vec![
                    Some(b"127"),
                    None,
                    Some(b"7"),
                    None,
                    Some(b"-1e-3"),
                    None,
                    Some(b"-0.001"),
                    None,
                    Some(b"1999-12-31 23:59:59"),
                    Some(b"838:59:59"),
                    None,
                ],
                vec![
                    Value::Int(127),
                    Value::NULL,
                    Value::Int(7),
                    Value::NULL,
                    Value::Float(-1e-3),
                    Value::NULL,
                    Value::Bytes(b"-0.001".to_vec()),
                    Value::NULL,
                    Value::Date(1999, 12, 31, 23, 59, 59, 0),
                    Value::Time(false, 34, 22, 59, 59, 0),
                    Value::NULL,
                ],
            ),
        ];
        for (text, expected) in rows {
            let binary = convert(&text, &infos).unwrap();
            let mut buf = ParseBuf(&binary);
            let row = RowDeserializer::<ServerSide, Binary>::deserialize(columns.clone(), &mut buf)
                .expect("mysql_common reads the row");
            assert!(buf.is_empty(), "row fully consumed");
            assert_eq!(row.into_inner().unwrap(), expected);
        }
    }

    // ----- COM_STMT_EXECUTE -----

    #[test]
    fn execute_with_types_then_without() {
        let mut types = Vec::new();
        // 3 params: BIGINT 42, VARCHAR 'abc', INT UNSIGNED NULL (bit 2).
        let mut p = exec_header(9);
        p.push(0b0000_0100);
        p.push(1);
        p.extend_from_slice(&[T::MYSQL_TYPE_LONGLONG as u8, 0x00]);
        p.extend_from_slice(&[T::MYSQL_TYPE_VAR_STRING as u8, 0x00]);
        p.extend_from_slice(&[T::MYSQL_TYPE_LONG as u8, 0x80]);
        p.extend_from_slice(&42i64.to_le_bytes());
        write_lenenc_bytes(&mut p, b"abc");
        let req = parse_execute(&p, 3, &mut types, &no_long_data()).unwrap();
        assert_eq!(
            req,
            ExecuteRequest {
                statement_id: 9,
                cursor_flags: 0,
                params: vec![ParamValue::Int(42), bytes(b"abc"), ParamValue::Null],
            }
        );
        assert_eq!(
            types,
            vec![
                (T::MYSQL_TYPE_LONGLONG, false),
                (T::MYSQL_TYPE_VAR_STRING, false),
                (T::MYSQL_TYPE_LONG, true),
            ]
        );
        // Second execute: no types, the kept ones apply; param 1 NULL now.
        let mut p = exec_header(9);
        p.push(0b0000_0010);
        p.push(0);
        p.extend_from_slice(&(-7i64).to_le_bytes());
        p.extend_from_slice(&u32::MAX.to_le_bytes());
        let req = parse_execute(&p, 3, &mut types, &no_long_data()).unwrap();
        assert_eq!(
            req.params,
            vec![
                ParamValue::Int(-7),
                ParamValue::Null,
                ParamValue::UInt(4_294_967_295)
            ]
        );
        assert_eq!(types.len(), 3);
        // Types missing on a first execute.
        let mut fresh = Vec::new();
        assert_eq!(
            parse_execute(&p, 3, &mut fresh, &no_long_data()),
            Err(BinaryError::MissingParamTypes {
                expected: 3,
                known: 0
            })
        );
        // Kept types for another parameter count.
        let mut two = vec![(T::MYSQL_TYPE_LONG, false); 2];
        assert!(matches!(
            parse_execute(&p, 3, &mut two, &no_long_data()),
            Err(BinaryError::MissingParamTypes { .. })
        ));
    }

    #[test]
    fn execute_without_params_and_cursor_flags() {
        let mut p = exec_header(0xDEAD_BEEF);
        p[4] = 1; // CURSOR_TYPE_READ_ONLY
        let mut types = Vec::new();
        let req = parse_execute(&p, 0, &mut types, &no_long_data()).unwrap();
        assert_eq!(req.statement_id, 0xDEAD_BEEF);
        assert_eq!(req.cursor_flags, 1);
        assert!(req.params.is_empty());
        p.push(0);
        assert_eq!(
            parse_execute(&p, 0, &mut types, &no_long_data()),
            Err(BinaryError::TrailingBytes { extra: 1 })
        );
        assert_eq!(
            parse_execute(&p[..3], 0, &mut types, &no_long_data()),
            Err(BinaryError::Truncated {
                what: "statement id"
            })
        );
    }

    /// A one-parameter execute with the given type, flag and value bytes.
    fn one_param(t: u8, flag: u8, value: &[u8]) -> Vec<u8> {
        let mut p = exec_header(1);
        p.extend_from_slice(&[0, 1, t, flag]);
        p.extend_from_slice(value);
        p
    }

    fn parse_one(t: ColumnType, unsigned: bool, value: &[u8]) -> Result<ParamValue, BinaryError> {
        let p = one_param(t as u8, if unsigned { 0x80 } else { 0 }, value);
        let mut types = Vec::new();
        let mut req = parse_execute(&p, 1, &mut types, &no_long_data())?;
        assert_eq!(types, [(t, unsigned)]);
        Ok(req.params.remove(0))
    }

    #[test]
    fn execute_integer_and_float_values() {
        use ParamValue as P;
        assert_eq!(
            parse_one(T::MYSQL_TYPE_TINY, false, &[0xFF]),
            Ok(P::Int(-1))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_TINY, true, &[0xFF]),
            Ok(P::UInt(255))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_SHORT, false, &[0x00, 0x80]),
            Ok(P::Int(-32768))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_YEAR, true, &2024u16.to_le_bytes()),
            Ok(P::UInt(2024))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_LONG, false, &(-5i32).to_le_bytes()),
            Ok(P::Int(-5))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_INT24, false, &(-8_388_608i32).to_le_bytes()),
            Ok(P::Int(-8_388_608))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_LONGLONG, false, &i64::MIN.to_le_bytes()),
            Ok(P::Int(i64::MIN))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_LONGLONG, true, &u64::MAX.to_le_bytes()),
            Ok(P::UInt(u64::MAX))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_FLOAT, false, &1.1f32.to_le_bytes()),
            Ok(P::Float(f64::from(1.1f32)))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_DOUBLE, false, &(-0.1f64).to_le_bytes()),
            Ok(P::Float(-0.1))
        );
        assert_eq!(parse_one(T::MYSQL_TYPE_NULL, false, b""), Ok(P::Null));
    }

    #[test]
    fn execute_string_values() {
        use ParamValue as P;
        assert_eq!(
            parse_one(T::MYSQL_TYPE_NEWDECIMAL, false, b"\x06-12.50"),
            Ok(P::Decimal("-12.50".into()))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_DECIMAL, false, b"\x041e10"),
            Ok(P::Decimal("1e10".into()))
        );
        // DECIMAL text that is not a number is refused, never spliced.
        for junk in [&b"\x081); DROP"[..], b"\x00", b"\x030x1", b"\x02\\'"] {
            assert!(
                matches!(
                    parse_one(T::MYSQL_TYPE_NEWDECIMAL, false, junk),
                    Err(BinaryError::BadParam { index: 0, .. })
                ),
                "{junk:?}"
            );
        }
        assert_eq!(
            parse_one(T::MYSQL_TYPE_BLOB, false, b"\x02\x00\xFF"),
            Ok(P::Bytes {
                data: vec![0, 0xFF],
                binary: true
            })
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_STRING, false, b"\x00"),
            Ok(bytes(b""))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_JSON, false, b"\x02{}"),
            Ok(bytes(b"{}"))
        );
        let mut long = vec![0xFC, 0x2C, 0x01];
        long.extend_from_slice(&[b'q'; 300]);
        assert_eq!(
            parse_one(T::MYSQL_TYPE_VARCHAR, false, &long),
            Ok(bytes(&[b'q'; 300]))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_VARCHAR, false, b"\xFB"),
            Err(BinaryError::ParamTruncated { index: 0 })
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_VARCHAR, false, b"\x05abc"),
            Err(BinaryError::ParamTruncated { index: 0 })
        );
        // Decimal text: [+-]digits[.digits][e[+-]digits] only.
        for (text, plain) in [
            ("1", true),
            ("-1.5", true),
            ("+.5", true),
            ("5.", true),
            ("1e5", true),
            ("-1.5E-7", true),
            ("2e+10", true),
            ("", false),
            (".", false),
            ("-", false),
            ("e5", false),
            ("1e", false),
            ("1e+", false),
            ("1e5.5", false),
            ("1.2.3", false),
            ("1 ", false),
            (" 1", false),
            ("0x10", false),
            ("--1", false),
            ("1'", false),
            ("1\\", false),
            ("\u{661}", false),
        ] {
            assert_eq!(is_decimal_text(text.as_bytes()), plain, "{text:?}");
        }
    }

    #[test]
    fn execute_temporal_values() {
        use ParamValue as P;
        let date = |y, mo, d, h, mi, s, us| P::Date {
            year: y,
            month: mo,
            day: d,
            hour: h,
            minute: mi,
            second: s,
            micros: us,
        };
        assert_eq!(
            parse_one(T::MYSQL_TYPE_DATETIME, false, &[0]),
            Ok(date(0, 0, 0, 0, 0, 0, 0))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_DATE, false, &[4, 0xE8, 0x07, 2, 29]),
            Ok(date(2024, 2, 29, 0, 0, 0, 0))
        );
        assert_eq!(
            parse_one(
                T::MYSQL_TYPE_TIMESTAMP,
                false,
                &[7, 0xE8, 0x07, 2, 29, 1, 2, 3]
            ),
            Ok(date(2024, 2, 29, 1, 2, 3, 0))
        );
        let mut v = vec![11, 0xE8, 0x07, 2, 29, 1, 2, 3];
        v.extend_from_slice(&999_999u32.to_le_bytes());
        assert_eq!(
            parse_one(T::MYSQL_TYPE_DATETIME, false, &v),
            Ok(date(2024, 2, 29, 1, 2, 3, 999_999))
        );
        v.truncate(8);
        v.extend_from_slice(&1_000_000u32.to_le_bytes());
        assert_eq!(
            parse_one(T::MYSQL_TYPE_DATETIME, false, &v),
            Err(BinaryError::BadParam {
                index: 0,
                reason: "microseconds above 999999"
            })
        );
        assert!(matches!(
            parse_one(T::MYSQL_TYPE_DATETIME, false, &[5, 0, 0, 0, 0, 0]),
            Err(BinaryError::BadParam { index: 0, .. })
        ));
        let time = |n, d, h, m, s, us| P::Time {
            negative: n,
            days: d,
            hours: h,
            minutes: m,
            seconds: s,
            micros: us,
        };
        assert_eq!(
            parse_one(T::MYSQL_TYPE_TIME, false, &[0]),
            Ok(time(false, 0, 0, 0, 0, 0))
        );
        assert_eq!(
            parse_one(T::MYSQL_TYPE_TIME, false, &[8, 1, 1, 0, 0, 0, 2, 3, 4]),
            Ok(time(true, 1, 2, 3, 4, 0))
        );
        assert_eq!(
            parse_one(
                T::MYSQL_TYPE_TIME,
                false,
                &[12, 1, 1, 0, 0, 0, 2, 3, 4, 5, 0, 0, 0]
            ),
            Ok(time(true, 1, 2, 3, 4, 5))
        );
        assert!(matches!(
            parse_one(T::MYSQL_TYPE_TIME, false, &[7, 0, 0, 0, 0, 0, 0, 0]),
            Err(BinaryError::BadParam { .. })
        ));
    }

    #[test]
    fn execute_rejects_unbindable_types() {
        for t in [0x11u8, 0x12, 0x13, 0x14, 0xF3, 0x30, 0xF4] {
            let p = one_param(t, 0, &[0; 8]);
            let mut types = vec![(T::MYSQL_TYPE_LONG, false)];
            assert_eq!(
                parse_execute(&p, 1, &mut types, &no_long_data()),
                Err(BinaryError::UnknownParamType {
                    index: 0,
                    type_byte: t
                }),
                "type 0x{t:02x}"
            );
            assert_eq!(types, [(T::MYSQL_TYPE_LONG, false)], "types kept");
        }
    }

    #[test]
    fn execute_long_data() {
        // p0 VARCHAR (long data; its NULL bit is set too: long data wins),
        // p1 BLOB (long data), p2 LONG 5, p3 VARCHAR NULL.
        let mut p = exec_header(3);
        p.push(0b0000_1001);
        p.push(1);
        for t in [
            T::MYSQL_TYPE_VAR_STRING,
            T::MYSQL_TYPE_BLOB,
            T::MYSQL_TYPE_LONG,
            T::MYSQL_TYPE_VAR_STRING,
        ] {
            p.extend_from_slice(&[t as u8, 0]);
        }
        p.extend_from_slice(&5i32.to_le_bytes());
        let mut long_data = HashMap::new();
        long_data.insert(0u16, b"long text".to_vec());
        long_data.insert(1u16, vec![0xFF, 0x00]);
        long_data.insert(9u16, b"no such parameter: ignored".to_vec());
        let req = parse_execute(&p, 4, &mut Vec::new(), &long_data).unwrap();
        assert_eq!(
            req.params,
            vec![
                bytes(b"long text"),
                ParamValue::Bytes {
                    data: vec![0xFF, 0x00],
                    binary: true
                },
                ParamValue::Int(5),
                ParamValue::Null,
            ]
        );
    }

    #[test]
    fn execute_truncations_and_junk_never_panic() {
        let mut p = exec_header(77);
        p.extend_from_slice(&[0b0000_0100, 0]);
        p.push(1);
        let kinds = [
            (T::MYSQL_TYPE_LONGLONG, 0x80),
            (T::MYSQL_TYPE_VAR_STRING, 0),
            (T::MYSQL_TYPE_NULL, 0),
            (T::MYSQL_TYPE_DATETIME, 0),
            (T::MYSQL_TYPE_TIME, 0),
            (T::MYSQL_TYPE_DOUBLE, 0),
            (T::MYSQL_TYPE_TINY, 0),
            (T::MYSQL_TYPE_NEWDECIMAL, 0),
            (T::MYSQL_TYPE_FLOAT, 0),
        ];
        for (t, f) in kinds {
            p.extend_from_slice(&[t as u8, f]);
        }
        p.extend_from_slice(&u64::MAX.to_le_bytes());
        write_lenenc_bytes(&mut p, &[b'z'; 260]);
        p.extend_from_slice(&[11, 0xE8, 0x07, 2, 29, 1, 2, 3, 1, 0, 0, 0]);
        p.extend_from_slice(&[12, 1, 1, 0, 0, 0, 2, 3, 4, 5, 0, 0, 0]);
        p.extend_from_slice(&2.5f64.to_le_bytes());
        p.push(0x80);
        write_lenenc_bytes(&mut p, b"3.14");
        p.extend_from_slice(&0.5f32.to_le_bytes());
        let n = kinds.len();
        let good = parse_execute(&p, n, &mut Vec::new(), &no_long_data()).unwrap();
        assert_eq!(good.params.len(), n);
        assert_eq!(good.params[2], ParamValue::Null);
        assert_eq!(good.params[6], ParamValue::Int(-128));
        assert_eq!(good.params[7], ParamValue::Decimal("3.14".into()));
        assert_eq!(good.params[8], ParamValue::Float(0.5));
        let types_end = 9 + 2 + 1 + 2 * n;
        let sentinel = vec![(T::MYSQL_TYPE_BIT, true); n];
        for cut in 0..p.len() {
            let mut types = sentinel.clone();
            let result = parse_execute(&p[..cut], n, &mut types, &no_long_data());
            assert!(result.is_err(), "cut {cut}");
            if cut < types_end {
                assert_eq!(types, sentinel, "types kept when cut at {cut}");
            }
        }
        let mut rng = Lcg(1);
        for round in 0..5000 {
            let mut fuzzed = p.clone();
            for _ in 0..1 + round % 3 {
                let at = usize::from(rng.next()) % fuzzed.len();
                fuzzed[at] = rng.next();
            }
            let mut types = Vec::new();
            let _ = parse_execute(&fuzzed, n, &mut types, &no_long_data());
            let junk: Vec<u8> = (0..round % 80).map(|_| rng.next()).collect();
            let _ = parse_execute(&junk, round % 20, &mut types, &no_long_data());
        }
        // An absurd parameter count is an error, not a huge allocation.
        assert!(parse_execute(&p, usize::MAX, &mut Vec::new(), &no_long_data()).is_err());
    }

    /// COM_STMT_EXECUTE as mysql_common serialises it, without the command byte.
    fn mysql_common_execute(stmt: u32, params: &[Value]) -> (Vec<u8>, bool) {
        let (request, as_long_data) = ComStmtExecuteRequestBuilder::new(stmt).build(params);
        let mut buf = Vec::new();
        request.serialize(&mut buf);
        assert_eq!(buf[0], 0x17, "COM_STMT_EXECUTE");
        (buf[1..].to_vec(), as_long_data)
    }

    fn to_param(v: &Value) -> ParamValue {
        match v.clone() {
            Value::NULL => ParamValue::Null,
            Value::Bytes(data) => ParamValue::Bytes {
                data,
                binary: false,
            },
            Value::Int(i) => ParamValue::Int(i),
            Value::UInt(u) => ParamValue::UInt(u),
            Value::Float(f) => ParamValue::Float(f64::from(f)),
            Value::Double(d) => ParamValue::Float(d),
            Value::Date(year, month, day, hour, minute, second, micros) => ParamValue::Date {
                year,
                month,
                day,
                hour,
                minute,
                second,
                micros,
            },
            Value::Time(negative, days, hours, minutes, seconds, micros) => ParamValue::Time {
                negative,
                days,
                hours,
                minutes,
                seconds,
                micros,
            },
        }
    }

    #[test]
    fn reads_mysql_common_execute_requests() {
        let values = vec![
            Value::Int(-42),
            Value::UInt(u64::MAX),
            Value::NULL,
            Value::Bytes("h\u{e9}llo \u{1F600}".as_bytes().to_vec()),
            Value::Float(1.1),
            Value::Double(-0.25),
            Value::Date(2024, 2, 29, 13, 14, 15, 123_456),
            Value::Date(2024, 2, 29, 13, 14, 15, 0),
            Value::Date(2024, 2, 29, 0, 0, 0, 0),
            Value::Date(0, 0, 0, 0, 0, 0, 0),
            Value::Time(true, 1, 2, 3, 4, 5),
            Value::Time(false, 0, 10, 0, 0, 0),
            Value::Time(false, 0, 0, 0, 0, 0),
            Value::Bytes(Vec::new()),
        ];
        let (payload, as_long_data) = mysql_common_execute(5, &values);
        assert!(!as_long_data);
        let mut types = Vec::new();
        let req = parse_execute(&payload, values.len(), &mut types, &no_long_data()).unwrap();
        assert_eq!(req.statement_id, 5);
        assert_eq!(req.cursor_flags, 0);
        let expected: Vec<ParamValue> = values.iter().map(to_param).collect();
        assert_eq!(req.params, expected);
        assert_eq!(types[1], (T::MYSQL_TYPE_LONGLONG, true));
        assert_eq!(types[2].0, T::MYSQL_TYPE_NULL);
        // The same values with the new-params-bound flag cleared and the
        // types left out: the kept types apply.
        let mut again = payload.clone();
        let flag_at = 9 + values.len().div_ceil(8);
        assert_eq!(again[flag_at], 1);
        again[flag_at] = 0;
        again.drain(flag_at + 1..flag_at + 1 + 2 * values.len());
        let req2 = parse_execute(&again, values.len(), &mut types, &no_long_data()).unwrap();
        assert_eq!(req2.params, expected);
    }

    #[test]
    fn reads_mysql_common_long_data_requests() {
        // Over 16 MiB in all: mysql_common sends the byte values with
        // COM_STMT_SEND_LONG_DATA and leaves them out of the execute packet.
        let big = vec![b'a'; 1 << 24];
        let values = vec![
            Value::Int(1),
            Value::Bytes(big.clone()),
            Value::Bytes(b"x".to_vec()),
        ];
        let (payload, as_long_data) = mysql_common_execute(8, &values);
        assert!(as_long_data);
        assert!(payload.len() < 64);
        let mut long_data = HashMap::new();
        long_data.insert(1u16, big.clone());
        long_data.insert(2u16, b"x".to_vec());
        let req = parse_execute(&payload, 3, &mut Vec::new(), &long_data).unwrap();
        assert_eq!(req.params[0], ParamValue::Int(1));
        assert_eq!(req.params[1], bytes(&big));
        assert_eq!(req.params[2], bytes(b"x"));
    }

    // ----- literals -----

    #[test]
    fn numbers_render() {
        let u = "utf8mb4";
        assert_eq!(lit(&ParamValue::Null, u), "NULL");
        assert_eq!(lit(&ParamValue::Int(i64::MIN), u), "-9223372036854775808");
        assert_eq!(lit(&ParamValue::Int(0), u), "0");
        assert_eq!(lit(&ParamValue::UInt(u64::MAX), u), "18446744073709551615");
        assert_eq!(lit(&ParamValue::Float(1.5), u), "1.5e0");
        assert_eq!(lit(&ParamValue::Float(1e300), u), "1e300");
        assert_eq!(lit(&ParamValue::Float(-0.25), u), "-2.5e-1");
        assert_eq!(lit(&ParamValue::Float(0.0), u), "0e0");
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut out = String::new();
            assert!(render_literal(&ParamValue::Float(v), Charset::UTF8MB4, &mut out).is_err());
        }
        for v in [
            0.1,
            0.1 + 0.2,
            -1e-7,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            123_456_789.123_456_79,
            f64::from(1.1f32),
            f64::from(f32::MAX),
            9_007_199_254_740_993.0,
        ] {
            let text = lit(&ParamValue::Float(v), u);
            assert!(text.contains('e'), "{text} is an approximate-value literal");
            assert_eq!(
                text.parse::<f64>().unwrap().to_bits(),
                v.to_bits(),
                "{text}"
            );
        }
        assert_eq!(lit(&ParamValue::Decimal("-12.50".into()), u), "-12.50");
        assert_eq!(lit(&ParamValue::Decimal(".5".into()), u), ".5");
        assert_eq!(lit(&ParamValue::Decimal("1e-5".into()), u), "1e-5");
        // Text that is not a number is refused, never spliced raw.
        for junk in ["1); DROP", "", "1 OR 1", "0x1"] {
            let mut out = String::new();
            assert!(
                render_literal(
                    &ParamValue::Decimal(junk.into()),
                    Charset::UTF8MB4,
                    &mut out
                )
                .is_err(),
                "{junk:?}"
            );
            assert!(out.is_empty());
        }
    }

    #[test]
    fn strings_render_as_introduced_hex() {
        // (charset, bytes, rendered)
        let cases: &[(&str, &[u8], &str)] = &[
            ("utf8mb4", b"", "_utf8mb4 X''"),
            ("utf8mb4", b"it's", "_utf8mb4 X'69742773'"),
            ("utf8mb4", b"a\\b\0\"", "_utf8mb4 X'615C620022'"),
            ("utf8mb4", "\u{1F600}".as_bytes(), "_utf8mb4 X'F09F9880'"),
            // Not UTF-8: the server would refuse `_utf8mb4 X'FF'`.
            ("utf8mb4", &[0xFF, 0x00, b'\''], "_binary X'FF0027'"),
            ("utf8mb3", "\u{1F600}".as_bytes(), "_binary X'F09F9880'"),
            ("utf8mb3", b"ok", "_utf8mb3 X'6F6B'"),
            ("latin1", &[0xE9, b'\\', b'\''], "_latin1 X'E95C27'"),
            ("binary", b"ab", "_binary X'6162'"),
            // 0x5C trail bytes stay inside their character.
            ("gbk", &[0xC4, 0xE3, b'\\', b'\''], "_gbk X'C4E35C27'"),
            ("gbk", &[0x81, 0x5C], "_gbk X'815C'"),
            ("gbk", &[0x81], "_binary X'81'"),
            ("big5", &[0xA4, 0x5C], "_big5 X'A45C'"),
            ("sjis", &[0x83, 0x5C], "_sjis X'835C'"),
            ("cp932", &[0x83, 0x5C, 0xB1], "_cp932 X'835CB1'"),
            ("cp932", &[0xFF], "_binary X'FF'"),
        ];
        for (charset, data, rendered) in cases {
            assert_eq!(lit(&bytes(data), charset), *rendered, "{charset} {data:?}");
        }
        let blob = |d: &[u8]| ParamValue::Bytes {
            data: d.to_vec(),
            binary: true,
        };
        assert_eq!(lit(&blob(b"abc"), "gbk"), "_binary X'616263'");
        assert_eq!(lit(&blob(b""), "utf8mb4"), "_binary X''");
        // Appends to what is there.
        let mut out = String::from("SELECT ");
        render_literal(&bytes(b"x"), Charset::UTF8MB4, &mut out).unwrap();
        assert_eq!(out, "SELECT _utf8mb4 X'78'");
        // Whatever the value, the literal is ASCII without a backslash and
        // with exactly the two quotes of its hex digits.
        let mut rng = Lcg(7);
        for len in 0..200 {
            let data: Vec<u8> = (0..len).map(|_| rng.next()).collect();
            for charset in ["utf8mb4", "gbk", "big5", "sjis", "latin1", "binary"] {
                let text = lit(&bytes(&data), charset);
                assert!(text.is_ascii() && !text.contains('\\') && !text.contains('"'));
                assert_eq!(text.matches('\'').count(), 2, "{text}");
            }
        }
    }

    #[test]
    fn separators_keep_tokens_apart() {
        assert_eq!(bind_separator(Some('T'), Some('_')), " ");
        assert_eq!(bind_separator(Some('X'), Some('\'')), " ");
        assert_eq!(bind_separator(Some('1'), Some('5')), " ");
        assert_eq!(bind_separator(Some('-'), Some('-')), " ");
        assert_eq!(bind_separator(Some('='), Some('_')), "");
        assert_eq!(bind_separator(Some(' '), Some('-')), "");
        assert_eq!(bind_separator(None, Some('_')), "");
        assert_eq!(bind_separator(Some('('), Some('\'')), "");
    }

    #[test]
    fn temporal_render() {
        let date = |y, mo, d, h, mi, s, us| ParamValue::Date {
            year: y,
            month: mo,
            day: d,
            hour: h,
            minute: mi,
            second: s,
            micros: us,
        };
        assert_eq!(lit(&date(0, 0, 0, 0, 0, 0, 0), "utf8mb4"), "'0000-00-00'");
        assert_eq!(
            lit(&date(2024, 2, 9, 0, 0, 0, 0), "utf8mb4"),
            "'2024-02-09'"
        );
        assert_eq!(
            lit(&date(2024, 2, 9, 1, 2, 3, 0), "utf8mb4"),
            "'2024-02-09 01:02:03'"
        );
        assert_eq!(
            lit(&date(2024, 2, 9, 0, 0, 0, 5), "utf8mb4"),
            "'2024-02-09 00:00:00.000005'"
        );
        assert_eq!(
            lit(&date(2024, 2, 9, 1, 2, 3, 500_000), "utf8mb4"),
            "'2024-02-09 01:02:03.5'"
        );
        assert_eq!(
            lit(&date(999, 1, 1, 0, 0, 0, 120_000), "utf8mb4"),
            "'0999-01-01 00:00:00.12'"
        );
        assert_eq!(
            lit(&date(1, 1, 1, 0, 0, 0, 5_000_000), "utf8mb4"),
            "'0001-01-01 00:00:00.999999'"
        );
        let time = |n, d, h, m, s, us| ParamValue::Time {
            negative: n,
            days: d,
            hours: h,
            minutes: m,
            seconds: s,
            micros: us,
        };
        assert_eq!(lit(&time(false, 0, 0, 0, 0, 0), "utf8mb4"), "'00:00:00'");
        assert_eq!(lit(&time(true, 0, 0, 0, 0, 0), "utf8mb4"), "'00:00:00'");
        assert_eq!(
            lit(&time(true, 1, 2, 3, 4, 5), "utf8mb4"),
            "'-26:03:04.000005'"
        );
        assert_eq!(
            lit(&time(false, 34, 22, 59, 59, 0), "utf8mb4"),
            "'838:59:59'"
        );
        assert_eq!(
            lit(&time(true, 0, 0, 0, 0, 500_000), "utf8mb4"),
            "'-00:00:00.5'"
        );
        assert_eq!(
            lit(&time(false, u32::MAX, 23, 0, 0, 0), "utf8mb4"),
            format!("'{}:00:00'", u64::from(u32::MAX) * 24 + 23)
        );
    }

    /// Rendered literals parse as one value for the router's parser, and
    /// an introduced string reads back the same hex digits.
    #[test]
    fn literals_parse_as_one_expression() {
        use sqlparser::ast::{Expr, SelectItem, SetExpr, Statement, Value};
        use sqlparser::dialect::MySqlDialect;
        use sqlparser::parser::Parser;

        let item = |sql: &str| -> Expr {
            let mut statements = Parser::parse_sql(&MySqlDialect {}, sql).expect("parses");
            let Some(Statement::Query(query)) = statements.pop() else {
                panic!("{sql}: not a query")
            };
            let SetExpr::Select(select) = *query.body else {
                panic!("{sql}: not a select")
            };
            match select.projection.into_iter().next() {
                Some(SelectItem::UnnamedExpr(e)) => e,
                other => panic!("{sql}: {other:?}"),
            }
        };
        for data in [&b"it's"[..], b"\\'", b"\xC4\xE3\\'", b"\xFF"] {
            let sql = format!("SELECT {} FROM t", lit(&bytes(data), "gbk"));
            match item(&sql) {
                Expr::Prefixed { value, .. } => match *value {
                    Expr::Value(v) => assert!(matches!(v.value, Value::HexStringLiteral(_))),
                    other => panic!("{sql}: {other:?}"),
                },
                other => panic!("{sql}: {other:?}"),
            }
        }
        for v in [1.5, 1e300, 2.5e-7, 0.0] {
            let sql = format!("SELECT {} FROM t", lit(&ParamValue::Float(v), "utf8mb4"));
            assert!(matches!(item(&sql), Expr::Value(_)), "{sql}");
        }
    }
}
