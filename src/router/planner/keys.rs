//! Shard keys: which column is a table's key, what a key value can be
//! written as (a literal, or a `?` parameter marker when preparing), and
//! which shard a key literal selects (checking 64-bit IDs and rewriting an
//! object ID to its `local_id`).

use std::borrow::Cow;

use sqlparser::ast::{Expr, Value, ValueWithSpan};

use super::Env;
use crate::id::{mod_shard, ObjectId};
use crate::router::plan::RouteError;
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

/// A key literal as written.
enum KeyLiteral<'v> {
    /// A number, or a quoted string (IDs may be quoted decimal strings).
    Text(&'v str),
    /// `X'..'` or `0x..`: the hex digits of a binary string.
    Hex(&'v str),
}

fn key_literal(value: &ValueWithSpan) -> Option<KeyLiteral<'_>> {
    match &value.value {
        Value::Number(n, _) => Some(KeyLiteral::Text(n)),
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(KeyLiteral::Text(s)),
        Value::HexStringLiteral(h) => Some(KeyLiteral::Hex(h)),
        _ => None,
    }
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
    let id = ObjectId::decode(raw)
        .map_err(|_| "its reserved top bits (63-62) are set; IDs are below 2^62".to_owned())?;
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
    /// can route: a number or string literal (a hex string for mod-shard
    /// keys; for IDs it is refused with a reason), or, when preparing, a
    /// `?` marker (any shard).
    pub(super) fn key_value<'e>(&self, expr: &'e Expr) -> Option<&'e ValueWithSpan> {
        match expr {
            Expr::Value(v) if key_literal(v).is_some() || (self.prepare && is_marker(v)) => Some(v),
            _ => None,
        }
    }

    /// The shard a key value selects on a table (and, for an object table,
    /// the row's local id); `None` for a `?` marker (any shard of the
    /// fleet).
    pub(super) fn key_shard(
        &self,
        rule: &TableRule,
        value: &ValueWithSpan,
    ) -> Result<Option<KeyShard>, RouteError> {
        if is_marker(value) {
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
                let shard = match key_literal(value) {
                    Some(KeyLiteral::Text(key)) => mod_shard(key.as_bytes(), fleet.shard_count),
                    Some(KeyLiteral::Hex(digits)) => {
                        let key = hex_bytes(digits).ok_or_else(|| {
                            RouteError::Syntax(format!(
                                "bad hexadecimal literal {}",
                                self.src.text(value.span)
                            ))
                        })?;
                        mod_shard(&key, fleet.shard_count)
                    }
                    None => mod_shard(b"", fleet.shard_count),
                };
                KeyShard {
                    shard,
                    local_id: None,
                }
            }
        };
        Ok(Some(key))
    }

    /// [`Env::key_shard`], rewriting an object ID to its local id.
    pub(super) fn key_shard_edit(
        &self,
        rule: &TableRule,
        value: &ValueWithSpan,
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

    /// Checks an ID literal: a decimal 64-bit number with the reserved bits
    /// clear, a shard inside the fleet, and (for object tables) the table's
    /// type.
    fn check_id(
        &self,
        value: &ValueWithSpan,
        fleet: &Fleet,
        object: Option<(&TableRule, u16)>,
    ) -> Result<ObjectId, RouteError> {
        let written = self.src.text(value.span);
        let bad = |reason: String| RouteError::BadId {
            id: written.to_owned(),
            reason,
        };
        let digits = match key_literal(value) {
            Some(KeyLiteral::Text(digits)) => digits,
            Some(KeyLiteral::Hex(_)) => {
                return Err(bad(
                    "an ID is a 64-bit unsigned integer written in decimal (or as a quoted decimal string), not a hexadecimal string".to_owned()
                ))
            }
            None => "",
        };
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
