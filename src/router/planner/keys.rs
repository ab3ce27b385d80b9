//! Shard keys: which column is a table's key, what a key value can be
//! written as (a literal, or a `?` parameter marker when preparing), and
//! which shard a key literal selects (checking 64-bit IDs and rewriting an
//! object ID to its `local_id`).

use std::borrow::Cow;

use sqlparser::ast::{Expr, Value, ValueWithSpan};
use sqlparser::tokenizer::Span;

use super::notes::{self, KeyRule};
use super::{unsupported, Env};
use crate::id::{mod_shard, FieldName, ObjectId};
use crate::router::plan::{ClientCharset, RouteError};
use crate::router::text::Edits;
use crate::topology::{Fleet, TableKind, TableRule};

/// The key column of a logical table.
pub(super) fn key_column(rule: &TableRule) -> &str {
    match &rule.kind {
        TableKind::Object { .. } => "id",
        TableKind::Mapping { from_column } => from_column,
        TableKind::ModShard { key_column } => key_column,
    }
}

/// Where a key value goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyShard {
    /// The shard.
    pub(super) shard: u32,
    /// For an object ID: the row's `local_id`.
    pub(super) local_id: Option<u64>,
}

/// A key value as written: a literal or a `?` marker, possibly after a
/// character-set introducer (`_utf8mb4 X'3132'`, as bound string
/// parameters are written).
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyValue<'e> {
    /// The literal (after the introducer, if any).
    pub(super) value: &'e ValueWithSpan,
    /// The introducer's character set (`utf8mb4` for `_utf8mb4`).
    introducer: Option<&'e str>,
    /// The whole expression, introducer included (what an ID rewrite
    /// replaces).
    pub(super) span: Span,
}

/// A key literal as written.
enum KeyLiteral<'v> {
    /// A number, or a quoted string (IDs may be quoted decimal strings).
    Text(&'v str),
    /// `X'..'` or `0x..` without an introducer: the hex digits of a binary
    /// string (MariaDB may read it as a number).
    Hex(&'v str),
    /// `_cs X'..'`: the hex digits of a string in `charset` (a string
    /// parameter as the proxy binds it; an ID bound as a string).
    IntroducedHex {
        /// The character set.
        charset: &'v str,
        /// The hex digits.
        digits: &'v str,
    },
}

fn key_literal<'v>(key: &KeyValue<'v>) -> Option<KeyLiteral<'v>> {
    match (&key.value.value, key.introducer) {
        (Value::Number(n, _), None) => Some(KeyLiteral::Text(n)),
        (Value::SingleQuotedString(s) | Value::DoubleQuotedString(s), _) => {
            Some(KeyLiteral::Text(s))
        }
        (Value::HexStringLiteral(h), Some(charset)) => {
            Some(KeyLiteral::IntroducedHex { charset, digits: h })
        }
        (Value::HexStringLiteral(h), _) => Some(KeyLiteral::Hex(h)),
        _ => None,
    }
}

/// Whether a string in a character set is compared with a utf8mb4 key
/// column byte for byte: UTF-8 (`utf8`, `utf8mb3`, `utf8mb4`) and `binary`.
fn compares_bytewise(charset: &str) -> bool {
    ["utf8", "utf8mb3", "utf8mb4", "binary"]
        .iter()
        .any(|name| charset.eq_ignore_ascii_case(name))
}

/// The first bytes of a stub the engine binds in place of a long value of
/// a prepared statement while its text is routed (`engine::long_values`):
/// the value is spliced in after routing, so the router treats a stub as
/// an expression of unknown value, never as a key ([`is_long_value_stub`]).
pub const LONG_VALUE_STUB_PREFIX: &[u8] = b"\x01shardgate long value ";

/// Whether hex digits (of `X'..'`) spell a long-value stub
/// ([`LONG_VALUE_STUB_PREFIX`]).
pub fn is_long_value_stub(digits: &str) -> bool {
    let digits = digits.as_bytes();
    digits.len() >= 2 * LONG_VALUE_STUB_PREFIX.len()
        && LONG_VALUE_STUB_PREFIX
            .iter()
            .zip(digits.chunks(2))
            .all(|(&byte, pair)| {
                std::str::from_utf8(pair)
                    .ok()
                    .and_then(|p| u8::from_str_radix(p, 16).ok())
                    == Some(byte)
            })
}

/// Whether a value is a `?` parameter marker.
pub(super) fn is_marker(value: &ValueWithSpan) -> bool {
    matches!(&value.value, Value::Placeholder(p) if p == "?")
}

/// The bytes of a binary string written in hex (odd digit counts as
/// `0x..` allows: a leading zero); `None` if a digit is not hex.
fn hex_bytes(digits: &str) -> Option<Vec<u8>> {
    let padded: Cow<'_, str> = if digits.len() % 2 == 1 {
        Cow::Owned(format!("0{digits}"))
    } else {
        Cow::Borrowed(digits)
    };
    padded
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
        })
        .collect()
}

/// Decodes a 64-bit ID whose shard must be inside `fleet`; the error is
/// the reason of a [`RouteError::BadId`].
pub(super) fn decode_id(raw: u64, fleet: &Fleet) -> Result<ObjectId, String> {
    let id = if fleet.layout.is_pinterest() {
        ObjectId::decode(raw)
            .map_err(|_| "its reserved top bits (63-62) are set; IDs are below 2^62".to_owned())?
    } else {
        let fields = fleet
            .layout
            .decode(raw)
            .map_err(|e| format!("{e} ({})", fleet.layout.describe()))?;
        let get = |n: FieldName| fields.iter().find(|(f, _)| *f == n).map_or(0, |v| v.1);
        ObjectId {
            shard: u32::try_from(get(FieldName::Shard)).unwrap_or(u32::MAX),
            type_id: u16::try_from(get(FieldName::Type)).unwrap_or(u16::MAX),
            local_id: get(FieldName::Local),
        }
    };
    if id.shard >= fleet.shard_count {
        return Err(format!(
            "its shard {} is outside fleet {} (shards 0-{})",
            id.shard,
            fleet.name,
            fleet.shard_count.saturating_sub(1)
        ));
    }
    Ok(id)
}

impl Env<'_> {
    /// The value of a key restriction or of an INSERT's key column, if it
    /// can route: a number or string literal, possibly after a
    /// character-set introducer (a hex string for mod-shard keys; for IDs
    /// it is refused with a reason), or, when preparing, a `?` marker (any
    /// shard). With ANSI_QUOTES a double-quoted "value" is an identifier.
    pub(super) fn key_value<'e>(&self, expr: &'e Expr) -> Option<KeyValue<'e>> {
        let key = match expr {
            Expr::Value(value) => KeyValue {
                value,
                introducer: None,
                span: value.span,
            },
            Expr::Prefixed { prefix, value } => match value.as_ref() {
                Expr::Value(inner) => KeyValue {
                    value: inner,
                    introducer: Some(prefix.value.strip_prefix('_').unwrap_or(&prefix.value)),
                    span: prefix.span.union(&inner.span),
                },
                _ => return None,
            },
            _ => return None,
        };
        if self.ctx.lex.ansi_quotes && matches!(key.value.value, Value::DoubleQuotedString(_)) {
            return None;
        }
        let usable = key_literal(&key).is_some()
            || (self.prepare && key.introducer.is_none() && is_marker(key.value));
        usable.then_some(key)
    }

    /// The bytes of a string key as the server compares them with a
    /// utf8mb4 key column, or the reason they cannot be known: non-ASCII
    /// text in a character set the server would convert before comparing,
    /// or (`decoded_by_lexer`: the text of a quoted literal) text holding
    /// 0x1A, the lexer's stand-in for bytes it could not read as text.
    /// `charset` is the literal's introducer, if any, else the session's.
    fn key_text_bytes<'k>(
        &self,
        key: &KeyValue<'_>,
        bytes: &'k [u8],
        charset: Option<&str>,
        decoded_by_lexer: bool,
    ) -> Result<&'k [u8], RouteError> {
        let written = || self.src.text(key.span).to_owned();
        if decoded_by_lexer && bytes.contains(&0x1A) {
            return Err(unsupported(format!(
                "the shard key value {} holds bytes shardgate cannot read as text of the connection's character set; send the key in ASCII",
                written()
            )));
        }
        let bytewise = match charset {
            Some(charset) => compares_bytewise(charset),
            None => self.ctx.lex.charset == ClientCharset::Utf8,
        };
        if !bytewise && !bytes.is_ascii() {
            return Err(unsupported(format!(
                "the shard key value {} has non-ASCII characters in a character set other than UTF-8; use a utf8mb4 connection (SET NAMES utf8mb4) for such keys",
                written()
            )));
        }
        Ok(bytes)
    }

    /// The shard a key value selects on a table (and, for an object table,
    /// the row's local id); `None` for a `?` marker (any shard of the
    /// fleet).
    pub(super) fn key_shard(
        &self,
        rule: &TableRule,
        value: KeyValue<'_>,
    ) -> Result<Option<KeyShard>, RouteError> {
        // A stub stands for a value the router has not seen: the engine
        // routes the statement again with the value itself.
        if matches!(&value.value.value, Value::HexStringLiteral(h) if is_long_value_stub(h)) {
            return Err(unsupported(
                "a long bound value stands where a shard key goes",
            ));
        }
        if is_marker(value.value) {
            return Ok(None);
        }
        let fleet = self.fleet(rule.fleet)?;
        let key = match &rule.kind {
            TableKind::Object { type_id } => {
                let id = self.check_id(value, fleet, Some((rule, *type_id)))?;
                KeyShard {
                    shard: id.shard,
                    local_id: Some(id.local_id),
                }
            }
            TableKind::Mapping { .. } => KeyShard {
                shard: self.check_id(value, fleet, None)?.shard,
                local_id: None,
            },
            TableKind::ModShard { .. } => {
                let bad_hex = || {
                    RouteError::Syntax(format!(
                        "bad hexadecimal literal {}",
                        self.src.text(value.span)
                    ))
                };
                let shard = match key_literal(&value) {
                    Some(KeyLiteral::Text(key)) => {
                        let charset = value.introducer;
                        mod_shard(
                            self.key_text_bytes(&value, key.as_bytes(), charset, true)?,
                            fleet.shard_count,
                        )
                    }
                    Some(KeyLiteral::Hex(digits)) => {
                        mod_shard(&hex_bytes(digits).ok_or_else(bad_hex)?, fleet.shard_count)
                    }
                    Some(KeyLiteral::IntroducedHex { charset, digits }) => {
                        let key = hex_bytes(digits).ok_or_else(bad_hex)?;
                        mod_shard(
                            self.key_text_bytes(&value, &key, Some(charset), false)?,
                            fleet.shard_count,
                        )
                    }
                    None => mod_shard(b"", fleet.shard_count),
                };
                KeyShard {
                    shard,
                    local_id: None,
                }
            }
        };
        let rule_kind = match &rule.kind {
            TableKind::Object { type_id } => KeyRule::Object(*type_id),
            TableKind::Mapping { .. } => KeyRule::Mapping,
            TableKind::ModShard { .. } => KeyRule::ModShard,
        };
        notes::note_key(
            self.src.range(value.value.span),
            value.introducer.is_some(),
            rule_kind,
            rule.fleet,
        );
        Ok(Some(key))
    }

    /// [`Env::key_shard`], rewriting an object ID to its local id.
    pub(super) fn key_shard_edit(
        &self,
        rule: &TableRule,
        value: KeyValue<'_>,
        edits: &mut Edits,
    ) -> Result<Option<u32>, RouteError> {
        let Some(key) = self.key_shard(rule, value)? else {
            return Ok(None);
        };
        if let Some(local_id) = key.local_id {
            edits.replace(self.range(value.span)?, local_id.to_string());
        }
        Ok(Some(key.shard))
    }

    /// The text of a number or string literal, or of a string bound as
    /// `_cs X'..'`; `None` for a plain hex literal, a marker or bytes that
    /// are not UTF-8.
    pub(super) fn decimal_text<'v>(&self, value: &KeyValue<'v>) -> Option<Cow<'v, str>> {
        match key_literal(value)? {
            KeyLiteral::Text(text) => Some(Cow::Borrowed(text)),
            KeyLiteral::IntroducedHex { digits, .. } => hex_bytes(digits)
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .map(Cow::Owned),
            KeyLiteral::Hex(_) => None,
        }
    }

    /// Checks an ID literal: a decimal 64-bit number with the reserved bits
    /// clear, a shard inside the fleet, and (for object tables) the table's
    /// type.
    fn check_id(
        &self,
        value: KeyValue<'_>,
        fleet: &Fleet,
        object: Option<(&TableRule, u16)>,
    ) -> Result<ObjectId, RouteError> {
        let written = self.src.text(value.span);
        let bad = |reason: String| RouteError::BadId {
            id: written.to_owned(),
            reason,
        };
        if let Some(KeyLiteral::Hex(_)) = key_literal(&value) {
            return Err(bad(
                "an ID is a 64-bit unsigned integer written in decimal (or as a quoted decimal string), not a hexadecimal string".to_owned()
            ));
        }
        let digits = self.decimal_text(&value).unwrap_or_default();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(
                "an ID is a 64-bit unsigned integer written in decimal".to_owned()
            ));
        }
        let raw: u64 = digits
            .parse()
            .map_err(|_| bad("it does not fit in 64 bits".to_owned()))?;
        let id = decode_id(raw, fleet).map_err(bad)?;
        if let Some((rule, type_id)) = object {
            if id.type_id != type_id {
                return Err(bad(format!(
                    "its type is {}, but table {} holds type {}",
                    self.type_label(id.type_id),
                    rule.name,
                    self.type_label(type_id)
                )));
            }
        }
        Ok(id)
    }

    /// `1 (pin)`.
    fn type_label(&self, type_id: u16) -> String {
        let name = self
            .topo
            .config
            .types
            .iter()
            .find(|(_, &t)| t == u32::from(type_id))
            .map(|(name, _)| name.as_str());
        match name {
            Some(name) => format!("{type_id} ({name})"),
            None => type_id.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::id::{mod_shard, ObjectId};
    use crate::router::{
        route, ClientCharset, LexMode, Plan, RandomPlacement, RouteContext, TrailCharset,
    };
    use crate::topology::tests::{load, SPEC_YAML};

    fn route_with(sql: &str, lex: LexMode) -> Plan {
        let ctx = RouteContext {
            current_db: None,
            lex,
            ..RouteContext::default()
        };
        route(sql, &load(SPEC_YAML), &ctx, &mut RandomPlacement::new())
    }

    fn shard_sql(plan: Plan) -> (u32, String) {
        match plan {
            Plan::Shard(query) => (query.target.shard, query.sql.to_string()),
            other => panic!("expected one shard, got {other:?}"),
        }
    }

    fn refusal(plan: Plan) -> String {
        match plan {
            Plan::Reject(error) => error.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    const GBK: LexMode = LexMode {
        no_backslash_escapes: false,
        ansi_quotes: false,
        charset: ClientCharset::AsciiTrail(TrailCharset::Gbk),
        server_version: 101119,
    };

    #[test]
    fn introduced_hex_ids_route_and_are_rewritten_whole() {
        let id = ObjectId {
            shard: 2077,
            type_id: 1,
            local_id: 42,
        }
        .encode()
        .unwrap();
        let hex: String = id.to_string().bytes().map(|b| format!("{b:02X}")).collect();
        for introducer in ["_utf8mb4", "_gbk", "_binary", "_latin1"] {
            let sql = format!("SELECT data FROM pins WHERE id = {introducer} X'{hex}'");
            let (shard, text) = shard_sql(route_with(&sql, LexMode::default()));
            assert_eq!(shard, 2077, "{sql}");
            assert_eq!(text, "SELECT data FROM db02077.pins WHERE local_id = 42");
        }
        // A plain hex literal is still no ID.
        let sql = format!("SELECT data FROM pins WHERE id = X'{hex}'");
        assert!(refusal(route_with(&sql, LexMode::default())).contains("hexadecimal"));
    }

    #[test]
    fn string_keys_route_only_when_their_bytes_are_known() {
        let email = "a@b.c";
        let hex: String = email.bytes().map(|b| format!("{b:02X}")).collect();
        let expected = mod_shard(email.as_bytes(), 4096);
        for sql in [
            format!("SELECT user_id FROM user_by_email WHERE email = '{email}'"),
            format!("SELECT user_id FROM user_by_email WHERE email = _gbk X'{hex}'"),
            format!("SELECT user_id FROM user_by_email WHERE email = _utf8mb4 X'{hex}'"),
        ] {
            assert_eq!(shard_sql(route_with(&sql, GBK)).0, expected, "{sql}");
        }
        // Non-ASCII: the same bytes on a utf8 connection, refused otherwise.
        let utf8 = "é@b.c";
        let utf8_hex: String = utf8.bytes().map(|b| format!("{b:02X}")).collect();
        let by_utf8 =
            format!("SELECT user_id FROM user_by_email WHERE email = _utf8mb4 X'{utf8_hex}'");
        assert_eq!(
            shard_sql(route_with(&by_utf8, GBK)).0,
            mod_shard(utf8.as_bytes(), 4096)
        );
        let quoted = format!("SELECT user_id FROM user_by_email WHERE email = '{utf8}'");
        assert_eq!(
            shard_sql(route_with(&quoted, LexMode::default())).0,
            mod_shard(utf8.as_bytes(), 4096)
        );
        // In gbk the lexer reads these bytes as one multibyte character it
        // masks, so the key is refused as unreadable.
        let refused = refusal(route_with(&quoted, GBK));
        assert!(
            refused.contains("non-ASCII") || refused.contains("cannot read"),
            "{refused}"
        );
        let by_gbk = "SELECT user_id FROM user_by_email WHERE email = _gbk X'C4E3'";
        assert!(refusal(route_with(by_gbk, LexMode::default())).contains("non-ASCII"));
        // 0x1A in text: a byte the lexer could not read.
        let sub = "SELECT user_id FROM user_by_email WHERE email = 'a\u{1A}b'";
        assert!(refusal(route_with(sub, LexMode::default())).contains("cannot read"));
    }

    #[test]
    fn double_quotes_are_no_key_under_ansi_quotes() {
        let id = ObjectId {
            shard: 5,
            type_id: 1,
            local_id: 1,
        }
        .encode()
        .unwrap();
        let sql = format!("SELECT data FROM pins WHERE id = \"{id}\"");
        assert_eq!(shard_sql(route_with(&sql, LexMode::default())).0, 5);
        let ansi = LexMode {
            ansi_quotes: true,
            ..LexMode::default()
        };
        assert!(refusal(route_with(&sql, ansi)).contains("no shard key"));
    }
}
