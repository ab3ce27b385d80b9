//! COM_STMT_EXECUTE decoded into its bound parameter values.

use std::collections::HashMap;

use mysql_common::constants::ColumnType;

use super::{BinaryError, DateTime, Time};
use crate::protocol::frame::read_lenenc_int;

/// The unsigned bit in the flag byte of a COM_STMT_EXECUTE parameter type.
const PARAM_UNSIGNED: u8 = 0x80;

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
    Date(DateTime),
    /// TIME.
    Time(Time),
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
/// keyed by parameter index) takes that value, moved out of `long_data` (a
/// long value is not copied), as [`ParamValue::Bytes`], and has no bytes in
/// the payload, whatever its NULL bit says. The caller clears `long_data`
/// after each execute and on COM_STMT_RESET.
///
/// The payload is the classic format: the client must not have negotiated
/// `CLIENT_QUERY_ATTRIBUTES` (parameter count and names in the packet).
pub fn parse_execute(
    payload: &[u8],
    param_count: usize,
    types: &mut Vec<(ColumnType, bool)>,
    long_data: &mut HashMap<u16, Vec<u8>>,
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
            let long = u16::try_from(index).ok().and_then(|i| long_data.remove(&i));
            let value = if let Some(data) = long {
                ParamValue::Bytes {
                    data,
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

/// Where one parameter's value is in a COM_STMT_EXECUTE payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamBytes {
    /// NULL: its bit is set in the NULL bitmap (or its type is NULL).
    Null,
    /// Sent before with COM_STMT_SEND_LONG_DATA: no bytes in the payload.
    Long,
    /// The bytes of its value, as the binary protocol writes them.
    Value(std::ops::Range<usize>),
}

/// Where each parameter's value is in a COM_STMT_EXECUTE `payload` that
/// [`parse_execute`] accepted with these `types` (as it left them);
/// `long(i)`: parameter `i` had long data. `None` when the payload does not
/// read so, or long data went to a parameter whose type does not carry
/// bytes.
pub fn param_spans(
    payload: &[u8],
    types: &[(ColumnType, bool)],
    long: impl Fn(usize) -> bool,
) -> Option<Vec<ParamBytes>> {
    let count = types.len();
    if count == 0 {
        return Some(Vec::new());
    }
    let bitmap_at = 9;
    let bitmap = payload.get(bitmap_at..bitmap_at + count.div_ceil(8))?;
    let bound_at = bitmap_at + bitmap.len();
    let mut at = bound_at + 1;
    if *payload.get(bound_at)? != 0 {
        at += count * 2;
    }
    let mut spans = Vec::with_capacity(count);
    for (index, &(column_type, _)) in types.iter().enumerate() {
        let wire = param_wire(column_type)?;
        if long(index) {
            if !matches!(wire, ParamWire::Bytes { .. }) {
                return None;
            }
            spans.push(ParamBytes::Long);
            continue;
        }
        if bitmap[index / 8] & (1 << (index % 8)) != 0 {
            spans.push(ParamBytes::Null);
            continue;
        }
        let len = match wire {
            ParamWire::Null => {
                spans.push(ParamBytes::Null);
                continue;
            }
            ParamWire::Int(width) => width,
            ParamWire::Float => 4,
            ParamWire::Double => 8,
            ParamWire::Decimal | ParamWire::Bytes { .. } => {
                let mut rest = payload.get(at..)?;
                let before = rest.len();
                let len = usize::try_from(read_lenenc_int(&mut rest)?).ok()?;
                (before - rest.len()).checked_add(len)?
            }
            ParamWire::DateTime | ParamWire::Time => 1 + usize::from(*payload.get(at)?),
        };
        let end = at.checked_add(len)?;
        payload.get(at..end)?;
        spans.push(ParamBytes::Value(at..end));
        at = end;
    }
    (at == payload.len()).then_some(spans)
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
            ParamValue::Date(dt)
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
            ParamValue::Time(t)
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
