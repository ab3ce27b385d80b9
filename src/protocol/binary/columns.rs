//! Column definitions: the parts that decide a column's binary-protocol encoding.

use mysql_common::constants::{ColumnFlags, ColumnType};

use crate::protocol::frame::read_lenenc_int;

/// The charset number of `binary`.
const BINARY_CHARSET: u16 = 63;

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
