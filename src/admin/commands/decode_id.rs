//! `DECODE ID n`: the fields of a 64-bit ID and where its row lives.

use crate::admin::{AdminError, Answer, Cell};
use crate::engine::Engine;
use crate::id::ObjectId;
use crate::topology::{TableKind, Topology};

const COLUMNS: &[&str] = &[
    "id", "shard", "type_id", "type", "local_id", "fleet", "database", "master",
];

/// The ID's fields, type name and home.
pub fn answer(engine: &Engine, id: u64) -> Result<Answer, AdminError> {
    let fields = ObjectId::decode(id)?;
    Ok(id_answer(&engine.topology.load(), id, fields))
}

/// The one-row answer shared by `DECODE ID` and `ENCODE ID`: the fields,
/// the type's name in the config, and the fleet, database and master of
/// the object table of that type (NULL where the config has none).
pub fn id_answer(topology: &Topology, id: u64, fields: ObjectId) -> Answer {
    let type_name = topology
        .config
        .types
        .iter()
        .find(|(_, type_id)| u64::from(**type_id) == u64::from(fields.type_id))
        .map(|(name, _)| name.as_str());
    let fleet = topology
        .tables
        .values()
        .filter(|rule| {
            rule.kind
                == TableKind::Object {
                    type_id: fields.type_id,
                }
        })
        .map(|rule| rule.fleet)
        .min()
        .and_then(|fleet| topology.fleet(fleet))
        .filter(|fleet| fields.shard < fleet.shard_count);
    let database = fleet.map(|f| f.database_name(fields.shard));
    let master = fleet
        .and_then(|f| f.range_of(fields.shard))
        .and_then(|range| topology.host(range.master))
        .map(|host| host.addr.as_str());
    let mut answer = Answer::new(COLUMNS);
    answer.push(vec![
        id.into(),
        fields.shard.into(),
        fields.type_id.into(),
        Cell::from(type_name),
        fields.local_id.into(),
        fleet.map(|f| f.name.as_str()).into(),
        database.into(),
        master.into(),
    ]);
    answer
}
