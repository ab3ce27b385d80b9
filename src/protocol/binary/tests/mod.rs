//! Unit tests of the binary-protocol codec, by codec.

use super::*;
use crate::protocol::charset::Charset;
use crate::protocol::frame::write_lenenc_bytes;
use crate::protocol::packets::TEXT_NULL;
use mysql_common::constants::{ColumnFlags as F, ColumnType as T, Command};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{Column, ComStmtExecuteRequestBuilder};
use mysql_common::proto::{Binary, MyDeserialize, MySerialize};
use mysql_common::row::RowDeserializer;
use mysql_common::value::ServerSide;
use mysql_common::Value;
use std::collections::HashMap;
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
            None => row.push(TEXT_NULL),
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

mod columns;
mod execute;
mod literal;
mod rows;

/// A DATE/DATETIME parameter value from its fields.
fn date(
    year: u16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    micros: u32,
) -> ParamValue {
    ParamValue::Date(DateTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
        micros,
    })
}

/// A TIME parameter value from its fields.
fn time(negative: bool, days: u32, hours: u8, minutes: u8, seconds: u8, micros: u32) -> ParamValue {
    ParamValue::Time(Time {
        negative,
        days,
        hours,
        minutes,
        seconds,
        micros,
    })
}
