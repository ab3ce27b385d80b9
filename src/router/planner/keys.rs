//! Shard keys: which column is a table's key, what literals a key can be
//! written as, and which shard a key literal selects (checking 64-bit IDs
//! and rewriting an object ID to its `local_id`).

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

/// A number or string literal (what an ID or key can be written as).
pub(super) fn literal(expr: &Expr) -> Option<&ValueWithSpan> {
    match expr {
        Expr::Value(v) if key_text(v).is_some() => Some(v),
        _ => None,
    }
}

fn key_text(value: &ValueWithSpan) -> Option<&str> {
    match &value.value {
        Value::Number(n, _) => Some(n.as_str()),
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.as_str()),
        _ => None,
    }
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
    /// The shard a key literal selects on a table, rewriting object IDs to
    /// their local id.
    pub(super) fn key_shard(
        &self,
        rule: &TableRule,
        value: &ValueWithSpan,
        edits: &mut Edits,
    ) -> Result<u32, RouteError> {
        let fleet = self.fleet(rule.fleet)?;
        match &rule.kind {
            TableKind::Object { type_id } => {
                let id = self.check_id(value, fleet, Some((rule, *type_id)))?;
                edits.replace(self.range(value.span)?, id.local_id.to_string());
                Ok(id.shard)
            }
            TableKind::Mapping { .. } => Ok(self.check_id(value, fleet, None)?.shard),
            TableKind::ModShard { .. } => {
                let key = key_text(value).unwrap_or_default();
                Ok(mod_shard(key.as_bytes(), fleet.shard_count))
            }
        }
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
        let digits = key_text(value).unwrap_or_default();
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
