//! `ENCODE ID shard type local`: the 64-bit ID of those fields. The type
//! is a type id or a type name from the config's `types`.

use super::decode_id::id_answer;
use crate::admin::{AdminError, Answer};
use crate::engine::Engine;
use crate::id::{ObjectId, MAX_SHARD, MAX_TYPE};

/// The ID, with the same columns as `DECODE ID`.
pub fn answer(
    engine: &Engine,
    shard: u64,
    object_type: &str,
    local_id: u64,
) -> Result<Answer, AdminError> {
    let topology = engine.topology.load();
    let type_id = match object_type.parse::<u64>() {
        Ok(number) => u16::try_from(number).ok().filter(|t| *t <= MAX_TYPE).ok_or_else(|| {
            AdminError::Argument(format!(
                "type id {number} does not fit in an ID: type must be 0-{MAX_TYPE}"
            ))
        })?,
        Err(_) => topology
            .config
            .types
            .get(object_type)
            .and_then(|t| u16::try_from(*t).ok())
            .ok_or_else(|| {
                let known: Vec<String> = topology
                    .config
                    .types
                    .iter()
                    .map(|(name, id)| format!("{name}={id}"))
                    .collect();
                AdminError::Argument(format!(
                    "unknown type '{object_type}': give a type id or one of the config's types ({})",
                    known.join(", ")
                ))
            })?,
    };
    let shard = u32::try_from(shard)
        .ok()
        .filter(|s| *s <= MAX_SHARD)
        .ok_or_else(|| {
            AdminError::Argument(format!(
                "shard {shard} does not fit in an ID: shard must be 0-{MAX_SHARD}"
            ))
        })?;
    let fields = ObjectId {
        shard,
        type_id,
        local_id,
    };
    let id = fields.encode()?;
    Ok(id_answer(&topology, id, fields))
}
