//! Reads back from a server how it will read the session's statements
//! (`sql_mode`, `character_set_client`), after a `SET` that may change it,
//! and the values a `SET` computed, so they are replayed by value.

use super::merge::{decode_text_row, Value};
use crate::backend::BackendConn;
use crate::protocol::binary::{is_decimal_text, parse_column_definition, ColumnInfo};
use crate::protocol::frame::read_lenenc_int;
use crate::protocol::packets::{ends_result_set, ERR_HEADER};
use mysql_common::constants::ColumnType;
use mysql_common::constants::Command;

/// The statement that reads the session's lexical state (and its
/// `wait_timeout`, which a `SET` may change as well).
const LEX_STATE_QUERY: &[u8] =
    b"SELECT @@session.sql_mode, @@session.character_set_client, @@session.wait_timeout";

/// How an error that the server answered (the connection still usable)
/// starts.
const REFUSED: &str = "the server refused ";

/// What the server answered: `(sql_mode, character_set_client)`, and the
/// session's `wait_timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLexState {
    /// `@@session.sql_mode`.
    pub sql_mode: String,
    /// `@@session.character_set_client`.
    pub character_set_client: String,
    /// `@@session.wait_timeout`, in seconds.
    pub wait_timeout: Option<u64>,
}

/// Asks `conn` for the session's `sql_mode`, `character_set_client` and
/// `wait_timeout` (one round trip). `Err` says why the answer could not
/// be had.
pub async fn read_lex_state(conn: &mut BackendConn) -> Result<ServerLexState, String> {
    let mut values = read_row(conn, LEX_STATE_QUERY).await?.into_iter();
    match (values.next(), values.next(), values.next()) {
        (Some(Some(sql_mode)), Some(Some(character_set_client)), Some(wait_timeout)) => {
            Ok(ServerLexState {
                sql_mode,
                character_set_client,
                wait_timeout: wait_timeout.and_then(|text| text.parse().ok()),
            })
        }
        _ => Err("malformed row".to_owned()),
    }
}

/// Runs `query` on `conn` and returns the values of its last row (NULL as
/// `None`), as text. `Err` says why the answer could not be had.
pub async fn read_row(conn: &mut BackendConn, query: &[u8]) -> Result<Vec<Option<String>>, String> {
    let row = read_typed_row(conn, query).await?;
    Ok(row
        .into_iter()
        .map(|(_, value)| value.map(|text| String::from_utf8_lossy(&text).into_owned()))
        .collect())
}

/// [`read_row`] with each value's column type (`None` for a column
/// definition shardgate cannot read), the values as the server sent them.
async fn read_typed_row(
    conn: &mut BackendConn,
    query: &[u8],
) -> Result<Vec<(Option<ColumnInfo>, Option<Vec<u8>>)>, String> {
    let (types, rows) = read_text_rows(conn, query).await?;
    let row = rows.into_iter().last().ok_or("no row")?;
    Ok(types.into_iter().zip(row).collect())
}

/// Runs `query` on `conn` and returns its column types (`None` for a
/// definition shardgate cannot read) and every row's values as the server
/// sent them (NULL as `None`).
pub async fn read_text_rows(
    conn: &mut BackendConn,
    query: &[u8],
) -> Result<(Vec<Option<ColumnInfo>>, Vec<Vec<Value>>), String> {
    conn.send_command(Command::COM_QUERY, query)
        .await
        .map_err(|e| e.to_string())?;
    let deprecate_eof = conn
        .key
        .framing
        .contains(mysql_common::constants::CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let first = next_packet(conn).await?;
    if first.first() == Some(&ERR_HEADER) {
        return Err(format!("{REFUSED}{}", String::from_utf8_lossy(query)));
    }
    let columns = read_lenenc_int(&mut first.as_slice()).ok_or("malformed column count")?;
    let mut types = Vec::new();
    for _ in 0..columns {
        types.push(parse_column_definition(&next_packet(conn).await?));
    }
    if !deprecate_eof {
        next_packet(conn).await?;
    }
    let count = usize::try_from(columns).map_err(|_| "malformed column count")?;
    let mut rows = Vec::new();
    loop {
        let packet = next_packet(conn).await?;
        match packet.first() {
            Some(&ERR_HEADER) => return Err("the server failed reading the session state".into()),
            _ if ends_result_set(&packet, deprecate_eof) => break,
            _ => rows.push(decode_text_row(&packet, count)),
        }
    }
    Ok((types, rows))
}

/// System variables that act once or read the clock (`timestamp`,
/// `insert_id`, ...): their read-back value is not what the `SET` meant,
/// so a `SET` of one of them is replayed as written.
const ONE_SHOT: &[&str] = &[
    "timestamp",
    "insert_id",
    "last_insert_id",
    "identity",
    "rand_seed1",
    "rand_seed2",
    "gtid_seq_no",
];

/// The expressions that read back what a `SET` of `variables` (as the
/// router names them) left in the session: `@@session.x`, `@u`, and for
/// `NAMES` / `CHARACTER SET` the three variables they set. `None` when a
/// name cannot be read back safely (quoted, one-shot).
pub fn readback_expressions(variables: &[String]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for name in variables {
        match name.as_str() {
            "names" | "charset" => out.extend(
                [
                    "character_set_client",
                    "character_set_results",
                    "collation_connection",
                ]
                .map(|v| format!("@@session.{v}")),
            ),
            user if user.starts_with('@') => {
                let plain = user.len() > 1
                    && user[1..]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'));
                if !plain {
                    return None;
                }
                out.push(user.to_owned());
            }
            system => {
                let plain = !system.is_empty()
                    && system
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                if !plain || ONE_SHOT.contains(&system) {
                    return None;
                }
                out.push(format!("@@session.{system}"));
            }
        }
    }
    Some(out)
}

/// The query that reads `expressions` back: for each, its value, its bytes
/// in hex, its character set and its collation.
pub fn readback_query(expressions: &[String]) -> String {
    let columns: Vec<String> = expressions
        .iter()
        .map(|e| format!("{e}, HEX({e}), CHARSET({e}), COLLATION({e})"))
        .collect();
    format!("SELECT {}", columns.join(", "))
}

/// One value read back by [`readback_query`]'s four columns, as a literal
/// that gives the same value and type on any connection, whatever its
/// `sql_mode` or character set: `NULL`, a number as the server wrote it (a
/// double with an exponent), a string as `_charset X'hex' COLLATE c`.
/// `None` for what cannot be written so.
fn literal(
    column: Option<ColumnInfo>,
    value: Option<&[u8]>,
    hex: Option<&[u8]>,
    charset: Option<&[u8]>,
    collation: Option<&[u8]>,
) -> Option<String> {
    let Some(value) = value else {
        return Some("NULL".to_owned());
    };
    let text = std::str::from_utf8(value).ok()?;
    let numeric = || is_decimal_text(value);
    use ColumnType::*;
    match column?.column_type {
        MYSQL_TYPE_TINY
        | MYSQL_TYPE_SHORT
        | MYSQL_TYPE_LONG
        | MYSQL_TYPE_LONGLONG
        | MYSQL_TYPE_INT24
        | MYSQL_TYPE_YEAR
        | MYSQL_TYPE_DECIMAL
        | MYSQL_TYPE_NEWDECIMAL => numeric().then(|| text.to_owned()),
        MYSQL_TYPE_DOUBLE | MYSQL_TYPE_FLOAT => {
            if !numeric() {
                return None;
            }
            Some(if text.contains(['e', 'E']) {
                text.to_owned()
            } else {
                format!("{text}e0")
            })
        }
        MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_STRING
        | MYSQL_TYPE_TINY_BLOB
        | MYSQL_TYPE_MEDIUM_BLOB
        | MYSQL_TYPE_LONG_BLOB
        | MYSQL_TYPE_BLOB => {
            let name = |bytes: Option<&[u8]>| {
                let bytes = bytes?;
                (!bytes.is_empty()
                    && bytes
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'_'))
                .then(|| String::from_utf8_lossy(bytes).into_owned())
            };
            let hex = hex?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let hex = String::from_utf8_lossy(hex);
            let charset = name(charset)?;
            if charset == "binary" {
                return Some(format!("_binary X'{hex}'"));
            }
            Some(format!("_{charset} X'{hex}' COLLATE {}", name(collation)?))
        }
        _ => None,
    }
}

/// The `SET` that gives a connection the values a `SET` of `variables` just
/// left on `conn`, read back there; `Ok(None)` when they cannot be
/// replayed by value (the caller keeps the statement's text). The
/// statement is run once on `conn`, where it changes nothing, so a server
/// that would refuse it says so now. `Err`: the connection failed.
pub async fn read_replay(
    conn: &mut BackendConn,
    variables: &[String],
) -> Result<Option<String>, String> {
    let Some(expressions) = readback_expressions(variables) else {
        return Ok(None);
    };
    if expressions.is_empty() {
        return Ok(None);
    }
    let row = match read_typed_row(conn, readback_query(&expressions).as_bytes()).await {
        Ok(row) => row,
        Err(reason) if reason.starts_with(REFUSED) => return Ok(None),
        Err(reason) => return Err(reason),
    };
    let Some(sql) = replay_statement(&expressions, &row) else {
        return Ok(None);
    };
    let answer = conn
        .simple_command(Command::COM_QUERY, sql.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    Ok((answer.first() != Some(&ERR_HEADER)).then_some(sql))
}

/// The `SET` of each of `expressions` to its value in `row` (four columns
/// each, see [`readback_query`]).
fn replay_statement(
    expressions: &[String],
    row: &[(Option<ColumnInfo>, Option<Vec<u8>>)],
) -> Option<String> {
    if row.len() != expressions.len() * 4 {
        return None;
    }
    let assignments = expressions
        .iter()
        .zip(row.chunks(4))
        .map(|(expression, columns)| {
            let bytes = |i: usize| columns.get(i).and_then(|(_, v)| v.as_deref());
            let value = literal(columns[0].0, bytes(0), bytes(1), bytes(2), bytes(3))?;
            Some(format!("{expression} = {value}"))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(format!("SET {}", assignments.join(", ")))
}

async fn next_packet(conn: &mut BackendConn) -> Result<Vec<u8>, String> {
    conn.reader
        .next_packet()
        .await
        .map(|(_, payload)| payload)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::constants::ColumnFlags;

    fn column(column_type: ColumnType) -> Option<ColumnInfo> {
        Some(ColumnInfo::new(column_type, ColumnFlags::empty()))
    }

    /// One read-back value's four columns.
    fn cells(
        column_type: ColumnType,
        value: Option<&str>,
        hex: &str,
        charset: &str,
        collation: &str,
    ) -> Vec<(Option<ColumnInfo>, Option<Vec<u8>>)> {
        let text = |s: &str| Some(s.as_bytes().to_vec());
        vec![
            (column(column_type), value.map(|v| v.as_bytes().to_vec())),
            (column(ColumnType::MYSQL_TYPE_VAR_STRING), text(hex)),
            (column(ColumnType::MYSQL_TYPE_VAR_STRING), text(charset)),
            (column(ColumnType::MYSQL_TYPE_VAR_STRING), text(collation)),
        ]
    }

    #[test]
    fn readback_names_the_variables_a_set_changed() {
        let names =
            |v: &[&str]| readback_expressions(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            names(&["sql_mode", "@x", "names"]).unwrap(),
            [
                "@@session.sql_mode",
                "@x",
                "@@session.character_set_client",
                "@@session.character_set_results",
                "@@session.collation_connection",
            ]
        );
        // Not plain names, or one-shot variables: replayed as written.
        assert_eq!(names(&["@`a b`"]), None);
        assert_eq!(names(&["@"]), None);
        assert_eq!(names(&["x;drop"]), None);
        assert_eq!(names(&["timestamp"]), None);
        assert_eq!(
            readback_query(&["@x".to_owned()]),
            "SELECT @x, HEX(@x), CHARSET(@x), COLLATION(@x)"
        );
    }

    #[test]
    fn values_replay_as_literals_no_session_can_misread() {
        use ColumnType::*;
        let exprs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut row = cells(
            MYSQL_TYPE_VAR_STRING,
            Some("A'\\"),
            "41275C",
            "utf8mb3",
            "utf8mb3_general_ci",
        );
        row.extend(cells(
            MYSQL_TYPE_LONGLONG,
            Some("-1025"),
            "FF",
            "binary",
            "binary",
        ));
        row.extend(cells(
            MYSQL_TYPE_DOUBLE,
            Some("2.5"),
            "2",
            "binary",
            "binary",
        ));
        row.extend(cells(
            MYSQL_TYPE_DOUBLE,
            Some("1e300"),
            "",
            "binary",
            "binary",
        ));
        row.extend(cells(
            MYSQL_TYPE_NEWDECIMAL,
            Some("1.50"),
            "",
            "binary",
            "binary",
        ));
        row.extend(cells(MYSQL_TYPE_VAR_STRING, None, "", "", ""));
        row.extend(cells(
            MYSQL_TYPE_MEDIUM_BLOB,
            Some("\u{1}"),
            "01",
            "binary",
            "binary",
        ));
        row.extend(cells(
            MYSQL_TYPE_VAR_STRING,
            Some(""),
            "",
            "latin1",
            "latin1_bin",
        ));
        let names = exprs(&["@@session.a", "@b", "@c", "@d", "@e", "@f", "@g", "@h"]);
        assert_eq!(
            replay_statement(&names, &row).unwrap(),
            "SET @@session.a = _utf8mb3 X'41275C' COLLATE utf8mb3_general_ci, @b = -1025, \
             @c = 2.5e0, @d = 1e300, @e = 1.50, @f = NULL, @g = _binary X'01', \
             @h = _latin1 X'' COLLATE latin1_bin"
        );
        // What the server never sends is not written into a statement.
        for bad in [
            cells(MYSQL_TYPE_LONGLONG, Some("1; DROP"), "", "binary", "binary"),
            cells(MYSQL_TYPE_DOUBLE, Some("nan"), "", "binary", "binary"),
            cells(
                MYSQL_TYPE_VAR_STRING,
                Some("x"),
                "7Z",
                "utf8mb4",
                "utf8mb4_bin",
            ),
            cells(
                MYSQL_TYPE_VAR_STRING,
                Some("x"),
                "78",
                "utf8mb4 x",
                "utf8mb4_bin",
            ),
            cells(MYSQL_TYPE_VAR_STRING, Some("x"), "78", "utf8mb4", "b'"),
            cells(MYSQL_TYPE_GEOMETRY, Some("x"), "78", "binary", "binary"),
        ] {
            assert_eq!(replay_statement(&exprs(&["@x"]), &bad), None, "{bad:?}");
        }
        assert_eq!(replay_statement(&exprs(&["@x", "@y"]), &row[..4]), None);
    }
}
