//! `DECODE ID n IN fleet` and `ENCODE ID a b c IN fleet`: IDs read and
//! written with the named fleet's `id_layout` (a composed layout answers as
//! `DECODE ID` / `ENCODE ID` do; a time layout with its own columns).

use std::time::{Duration, UNIX_EPOCH};

use super::{decode_id, encode_id};
use crate::admin::{AdminError, Answer, Cell};
use crate::engine::Engine;
use crate::id::{FieldName, LayoutKind, ObjectId};
use crate::topology::{Fleet, Topology};

const TIME_COLUMNS: &[&str] = &[
    "id", "fleet", "shard", "time_ms", "time", "sequence", "database", "master",
];

fn fleet<'t>(topology: &'t Topology, name: &str) -> Result<&'t Fleet, AdminError> {
    topology
        .fleet_by_name(name)
        .and_then(|f| topology.fleet(f))
        .ok_or_else(|| {
            let known: Vec<&str> = topology.fleets.iter().map(|f| f.name.as_str()).collect();
            AdminError::Argument(format!(
                "unknown fleet '{name}' (fleets: {})",
                known.join(", ")
            ))
        })
}

/// The fields of `id` in `fleet_name`'s layout and where its row lives.
pub fn decode(engine: &Engine, id: u64, fleet_name: &str) -> Result<Answer, AdminError> {
    let topology = engine.topology.load();
    let fleet = fleet(&topology, fleet_name)?;
    if fleet.layout.kind() == LayoutKind::Composed && fleet.layout.is_pinterest() {
        return decode_id::answer(engine, id);
    }
    let fields = fleet.layout.decode(id)?;
    Ok(time_answer(&topology, fleet, id, &fields))
}

/// The ID of the fields `shard second third` in `fleet_name`'s layout: a
/// composed layout reads them as shard, type, local id; a time layout as
/// shard, time_ms, sequence.
pub fn encode(
    engine: &Engine,
    shard: u64,
    second: &str,
    third: u64,
    fleet_name: &str,
) -> Result<Answer, AdminError> {
    let topology = engine.topology.load();
    let fleet = fleet(&topology, fleet_name)?;
    if fleet.layout.is_pinterest() {
        return encode_id::answer(engine, shard, second, third);
    }
    let values: Vec<(FieldName, u64)> = match fleet.layout.kind() {
        LayoutKind::Time => {
            let time_ms = second.parse::<u64>().map_err(|_| {
                AdminError::Argument(format!("time_ms must be a number, not '{second}'"))
            })?;
            vec![
                (FieldName::Shard, shard),
                (FieldName::TimeMs, time_ms),
                (FieldName::Sequence, third),
            ]
        }
        LayoutKind::Composed => {
            let type_id = second.parse::<u64>().map_err(|_| {
                AdminError::Argument(format!("type must be a number, not '{second}'"))
            })?;
            vec![
                (FieldName::Shard, shard),
                (FieldName::Type, type_id),
                (FieldName::Local, third),
            ]
        }
    };
    let id = fleet.layout.encode(&values)?;
    let fields = fleet.layout.decode(id)?;
    if fleet.layout.kind() == LayoutKind::Composed {
        let get = |n: FieldName| fields.iter().find(|(f, _)| *f == n).map_or(0, |v| v.1);
        let object = ObjectId {
            shard: get(FieldName::Shard) as u32,
            type_id: get(FieldName::Type) as u16,
            local_id: get(FieldName::Local),
        };
        return Ok(decode_id::id_answer(&topology, id, object));
    }
    Ok(time_answer(&topology, fleet, id, &fields))
}

/// One row: the ID, its fleet, shard, time (milliseconds since the
/// layout's epoch, and as UTC text), sequence, database and master.
fn time_answer(topology: &Topology, fleet: &Fleet, id: u64, fields: &[(FieldName, u64)]) -> Answer {
    let get = |n: FieldName| fields.iter().find(|(f, _)| *f == n).map(|v| v.1);
    let shard = get(FieldName::Shard).and_then(|s| u32::try_from(s).ok());
    let time_ms = get(FieldName::TimeMs);
    let time = time_ms.map(|t| {
        crate::clock::format_time(
            UNIX_EPOCH + Duration::from_millis(fleet.layout.epoch_ms.saturating_add(t)),
        )
    });
    let home = shard.filter(|&s| s < fleet.shard_count);
    let database = home.map(|s| fleet.database_name(s));
    let master = home
        .and_then(|s| fleet.range_of(s))
        .and_then(|range| topology.host(range.master))
        .map(|host| host.addr.as_str());
    let mut answer = Answer::new(TIME_COLUMNS);
    answer.push(vec![
        id.into(),
        fleet.name.as_str().into(),
        Cell::from(shard),
        Cell::from(time_ms),
        Cell::from(time),
        Cell::from(get(FieldName::Sequence)),
        database.into(),
        master.into(),
    ]);
    answer
}
