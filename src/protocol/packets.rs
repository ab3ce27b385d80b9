//! Packets the proxy builds or inspects: OK, ERR, EOF, and small text
//! result sets for answers the proxy gives itself.

use mysql_common::constants::{ColumnFlags, ColumnType, StatusFlags};

use super::frame::{read_lenenc_int, write_lenenc_bytes, write_lenenc_int};

/// Header byte of an OK packet.
pub const OK_HEADER: u8 = 0x00;
/// Header byte of an ERR packet.
pub const ERR_HEADER: u8 = 0xFF;
/// Header byte of an EOF packet (and of the OK that ends a result set when
/// `CLIENT_DEPRECATE_EOF` is on).
pub const EOF_HEADER: u8 = 0xFE;
/// Header byte of a LOCAL INFILE request.
pub const LOCAL_INFILE_HEADER: u8 = 0xFB;
/// The byte that stands for NULL in a text-protocol row (in place of a
/// length-encoded string).
pub const TEXT_NULL: u8 = 0xFB;

/// Collation id for utf8mb4_general_ci, used for text the proxy writes.
pub const UTF8MB4_GENERAL_CI: u16 = 45;
/// Collation id for binary, used for numeric columns.
pub const BINARY_COLLATION: u16 = 63;

/// The fields of an OK packet the proxy cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkInfo {
    /// Rows affected.
    pub affected_rows: u64,
    /// AUTO_INCREMENT value of the first row inserted, or 0.
    pub last_insert_id: u64,
    /// Server status flags.
    pub status: StatusFlags,
    /// Warning count.
    pub warnings: u16,
    /// Byte offset where the status flags start (what follows is kept as is
    /// when the packet is rewritten).
    tail_offset: usize,
}

/// Parses an OK packet payload (header 0x00, or 0xFE when it ends a result
/// set under `CLIENT_DEPRECATE_EOF`).
pub fn parse_ok(payload: &[u8]) -> Option<OkInfo> {
    let mut rest = payload.get(1..)?;
    let affected_rows = read_lenenc_int(&mut rest)?;
    let last_insert_id = read_lenenc_int(&mut rest)?;
    let tail_offset = payload.len() - rest.len();
    let status =
        StatusFlags::from_bits_truncate(u16::from_le_bytes([*rest.first()?, *rest.get(1)?]));
    let warnings = u16::from_le_bytes([*rest.get(2)?, *rest.get(3)?]);
    Some(OkInfo {
        affected_rows,
        last_insert_id,
        status,
        warnings,
        tail_offset,
    })
}

/// The same OK packet with another last-insert-id; everything after it
/// (status, warnings, info, session state) is kept byte for byte.
pub fn rewrite_ok_insert_id(payload: &[u8], info: &OkInfo, last_insert_id: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.push(payload[0]);
    write_lenenc_int(&mut out, info.affected_rows);
    write_lenenc_int(&mut out, last_insert_id);
    out.extend_from_slice(&payload[info.tail_offset..]);
    out
}

/// Where the status flags of an OK/EOF payload start: after the header,
/// warnings (EOF, `eof` set) or the two length-encoded integers (an OK, or
/// the 0xFE OK that ends a result set under `CLIENT_DEPRECATE_EOF`).
pub fn status_offset(payload: &[u8], eof: bool) -> Option<usize> {
    let at = if eof {
        3
    } else {
        let mut rest = payload.get(1..)?;
        read_lenenc_int(&mut rest)?;
        read_lenenc_int(&mut rest)?;
        payload.len() - rest.len()
    };
    (payload.len() >= at + 2).then_some(at)
}

/// The status flags a client is told: the backend's, with
/// `SERVER_STATUS_AUTOCOMMIT` and `SERVER_STATUS_IN_TRANS` taken from
/// `session`, and `SERVER_MORE_RESULTS_EXISTS` added when `more` (the
/// client gets more results after this one).
pub fn session_status(backend: StatusFlags, session: StatusFlags, more: bool) -> StatusFlags {
    let owned = StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_STATUS_IN_TRANS;
    let mut status = (backend - owned) | (session & owned);
    if more {
        status |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
    }
    status
}

/// Rewrites, in place, the two status bytes at `at` of an OK/EOF payload
/// ([`status_offset`]) with [`session_status`].
pub fn rewrite_status(payload: &mut [u8], at: usize, session: StatusFlags, more: bool) {
    if let Some(bytes) = payload.get_mut(at..at + 2) {
        let backend = StatusFlags::from_bits_truncate(u16::from_le_bytes([bytes[0], bytes[1]]));
        bytes.copy_from_slice(&session_status(backend, session, more).bits().to_le_bytes());
    }
}

/// Status flags of an EOF packet payload (0xFE, warnings, status).
pub fn parse_eof_status(payload: &[u8]) -> Option<StatusFlags> {
    let bytes = payload.get(3..5)?;
    Some(StatusFlags::from_bits_truncate(u16::from_le_bytes([
        bytes[0], bytes[1],
    ])))
}

/// Builds an OK packet payload.
pub fn ok_packet(
    affected_rows: u64,
    last_insert_id: u64,
    status: StatusFlags,
    warnings: u16,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.push(OK_HEADER);
    write_lenenc_int(&mut out, affected_rows);
    write_lenenc_int(&mut out, last_insert_id);
    out.extend_from_slice(&status.bits().to_le_bytes());
    out.extend_from_slice(&warnings.to_le_bytes());
    out
}

/// Builds an ERR packet payload (protocol 4.1 form, with SQLSTATE).
pub fn err_packet(code: u16, sql_state: &str, message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + message.len());
    out.push(ERR_HEADER);
    out.extend_from_slice(&code.to_le_bytes());
    out.push(b'#');
    let state = sql_state.as_bytes();
    out.extend_from_slice(&state[..state.len().min(5)]);
    out.extend(std::iter::repeat_n(
        b'0',
        5usize.saturating_sub(state.len()),
    ));
    out.extend_from_slice(message.as_bytes());
    out
}

/// The code, SQLSTATE and message of an ERR packet payload.
pub fn parse_err(payload: &[u8]) -> Option<(u16, String, String)> {
    let code = u16::from_le_bytes([*payload.get(1)?, *payload.get(2)?]);
    let rest = payload.get(3..)?;
    let (state, message) = if rest.first() == Some(&b'#') && rest.len() >= 6 {
        (
            String::from_utf8_lossy(&rest[1..6]).into_owned(),
            &rest[6..],
        )
    } else {
        ("HY000".to_owned(), rest)
    };
    Some((code, state, String::from_utf8_lossy(message).into_owned()))
}

/// Builds an EOF packet payload.
pub fn eof_packet(status: StatusFlags, warnings: u16) -> Vec<u8> {
    let mut out = vec![EOF_HEADER];
    out.extend_from_slice(&warnings.to_le_bytes());
    out.extend_from_slice(&status.bits().to_le_bytes());
    out
}

/// Whether `payload`, read where a row could come, ends the result set
/// instead: an ERR, or a packet with the 0xFE header that is too short to be
/// a row (an EOF under 9 bytes, or an OK when the client set
/// `CLIENT_DEPRECATE_EOF`, which is any 0xFE packet shorter than a full
/// frame: a row that starts with 0xFE is a length-encoded 8-byte length).
pub fn ends_result_set(payload: &[u8], deprecate_eof: bool) -> bool {
    match payload.first() {
        Some(&ERR_HEADER) => true,
        Some(&EOF_HEADER) if deprecate_eof => payload.len() < super::frame::MAX_FRAME_PAYLOAD,
        Some(&EOF_HEADER) => payload.len() < 9,
        _ => false,
    }
}

/// The packet that ends a result set: EOF, or an OK with the 0xFE header
/// when the client set `CLIENT_DEPRECATE_EOF`.
pub fn result_set_terminator(deprecate_eof: bool, status: StatusFlags) -> Vec<u8> {
    if deprecate_eof {
        let mut ok = ok_packet(0, 0, status, 0);
        ok[0] = EOF_HEADER;
        ok
    } else {
        eof_packet(status, 0)
    }
}

/// A column of a result set the proxy answers itself.
#[derive(Debug, Clone, Copy)]
pub enum LocalColumnType {
    /// A UTF-8 string.
    Text,
    /// An unsigned 64-bit integer.
    UnsignedBigInt,
    /// A signed 64-bit integer, as a server types `@@autocommit`.
    BigInt,
}

/// Builds a column definition (protocol 4.1) payload.
pub fn column_definition(name: &str, column_type: LocalColumnType) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + name.len());
    write_lenenc_bytes(&mut out, b"def");
    write_lenenc_bytes(&mut out, b"");
    write_lenenc_bytes(&mut out, b"");
    write_lenenc_bytes(&mut out, b"");
    write_lenenc_bytes(&mut out, name.as_bytes());
    write_lenenc_bytes(&mut out, name.as_bytes());
    out.push(0x0C);
    let (collation, length, kind, flags) = match column_type {
        LocalColumnType::Text => (
            UTF8MB4_GENERAL_CI,
            1024u32,
            ColumnType::MYSQL_TYPE_VAR_STRING,
            ColumnFlags::empty(),
        ),
        LocalColumnType::UnsignedBigInt => (
            BINARY_COLLATION,
            20,
            ColumnType::MYSQL_TYPE_LONGLONG,
            ColumnFlags::UNSIGNED_FLAG | ColumnFlags::BINARY_FLAG,
        ),
        LocalColumnType::BigInt => (
            BINARY_COLLATION,
            21,
            ColumnType::MYSQL_TYPE_LONGLONG,
            ColumnFlags::BINARY_FLAG,
        ),
    };
    out.extend_from_slice(&collation.to_le_bytes());
    out.extend_from_slice(&length.to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(&flags.bits().to_le_bytes());
    out.push(0);
    out.extend_from_slice(&[0, 0]);
    out
}

/// Builds a text-protocol row payload; `None` is SQL NULL.
pub fn text_row(values: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in values {
        match value {
            Some(bytes) => write_lenenc_bytes(&mut out, bytes),
            None => out.push(LOCAL_INFILE_HEADER),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_set_ends_on_err_and_short_fe_packets_only() {
        let eof = eof_packet(StatusFlags::empty(), 0);
        assert!(ends_result_set(&eof, false));
        assert!(ends_result_set(&[ERR_HEADER, 0x28, 0x04], false));
        let mut long_row = vec![EOF_HEADER];
        long_row.extend_from_slice(&[0; 12]);
        assert!(!ends_result_set(&long_row, false));
        assert!(ends_result_set(&long_row, true));
        assert!(!ends_result_set(
            &vec![EOF_HEADER; super::super::frame::MAX_FRAME_PAYLOAD],
            true
        ));
        assert!(!ends_result_set(&[TEXT_NULL], true));
        assert!(!ends_result_set(&[], true));
    }

    #[test]
    fn ok_packet_round_trips_and_rewrites_insert_id() {
        let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        let mut payload = ok_packet(1, 7_075_733, status, 2);
        payload.extend_from_slice(b"info");
        let info = parse_ok(&payload).unwrap();
        assert_eq!(
            (info.affected_rows, info.last_insert_id, info.warnings),
            (1, 7_075_733, 2)
        );
        assert_eq!(info.status, status);
        let rewritten = rewrite_ok_insert_id(&payload, &info, 241_294_492_511_762_325);
        let again = parse_ok(&rewritten).unwrap();
        assert_eq!(again.last_insert_id, 241_294_492_511_762_325);
        assert_eq!(
            (again.affected_rows, again.warnings, again.status),
            (1, 2, status)
        );
        assert!(rewritten.ends_with(b"info"));
    }

    #[test]
    fn status_flags_are_rewritten_in_place_with_the_sessions_truth() {
        let backend = StatusFlags::SERVER_STATUS_AUTOCOMMIT
            | StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES
            | StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        let session = StatusFlags::SERVER_STATUS_IN_TRANS;
        let mut ok = ok_packet(300, 1 << 40, backend, 3);
        ok.extend_from_slice(b"info");
        let at = status_offset(&ok, false).unwrap();
        rewrite_status(&mut ok, at, session, false);
        let info = parse_ok(&ok).unwrap();
        assert_eq!(
            info.status,
            StatusFlags::SERVER_STATUS_IN_TRANS
                | StatusFlags::SERVER_STATUS_NO_BACKSLASH_ESCAPES
                | StatusFlags::SERVER_MORE_RESULTS_EXISTS
        );
        assert_eq!(
            (info.affected_rows, info.last_insert_id, info.warnings),
            (300, 1 << 40, 3)
        );
        assert!(ok.ends_with(b"info"));

        let mut eof = eof_packet(StatusFlags::SERVER_STATUS_IN_TRANS, 7);
        let at = status_offset(&eof, true).unwrap();
        rewrite_status(&mut eof, at, StatusFlags::SERVER_STATUS_AUTOCOMMIT, true);
        assert_eq!(
            parse_eof_status(&eof),
            Some(StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_MORE_RESULTS_EXISTS)
        );
        assert_eq!(&eof[1..3], &7u16.to_le_bytes());
        // The 0xFE OK that ends a result set under CLIENT_DEPRECATE_EOF.
        let mut end = result_set_terminator(true, StatusFlags::SERVER_STATUS_AUTOCOMMIT);
        let at = status_offset(&end, false).unwrap();
        rewrite_status(&mut end, at, StatusFlags::empty(), false);
        assert_eq!(parse_ok(&end).unwrap().status, StatusFlags::empty());
        assert_eq!(status_offset(&[OK_HEADER, 0], false), None);
    }

    #[test]
    fn err_packet_round_trips() {
        let payload = err_packet(1062, "23000", "Duplicate entry");
        assert_eq!(
            parse_err(&payload),
            Some((1062, "23000".to_owned(), "Duplicate entry".to_owned()))
        );
    }
}
