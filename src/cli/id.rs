//! `shardgate id decode|encode`.

use std::path::PathBuf;

use clap::Subcommand;

use super::CliError;
use crate::id::{FieldName, IdError, IdLayout, LayoutKind, ObjectId, MAX_TYPE};
use crate::topology::Topology;

#[derive(Subcommand)]
pub(super) enum IdCommand {
    /// Split an ID into shard, type and local id (or the fields of a
    /// fleet's `id_layout`, with --config and --fleet).
    Decode {
        /// The 64-bit ID.
        id: String,
        /// Config file (YAML) whose fleet's `id_layout` reads the ID.
        #[arg(long, requires = "fleet")]
        config: Option<PathBuf>,
        /// The fleet of --config whose `id_layout` reads the ID.
        #[arg(long, requires = "config")]
        fleet: Option<String>,
    },
    /// Compose an ID from shard, type and local id (shard, time_ms and
    /// sequence for a fleet with a time `id_layout`).
    Encode {
        /// Shard number.
        shard: u32,
        /// Type id (time_ms for a time layout).
        type_id: u64,
        /// Local id, the row's AUTO_INCREMENT (sequence for a time layout).
        local_id: u64,
        /// Config file (YAML) whose fleet's `id_layout` composes the ID.
        #[arg(long, requires = "fleet")]
        config: Option<PathBuf>,
        /// The fleet of --config whose `id_layout` composes the ID.
        #[arg(long, requires = "config")]
        fleet: Option<String>,
    },
}

/// Prints the fields of an ID, or the ID of the fields.
pub(super) fn run(command: IdCommand) -> Result<(), CliError> {
    match command {
        IdCommand::Decode { id, config, fleet } => match layout(config, fleet)? {
            None => {
                let fields = decode(&id)?;
                println!(
                    "shard={} type={} local={}",
                    fields.shard, fields.type_id, fields.local_id
                );
            }
            Some(layout) => {
                let raw = number(&id)?;
                let fields = layout.decode(raw)?;
                let text: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={v}")).collect();
                println!("{}", text.join(" "));
            }
        },
        IdCommand::Encode {
            shard,
            type_id,
            local_id,
            config,
            fleet,
        } => {
            let id = match layout(config, fleet)? {
                None => ObjectId {
                    shard,
                    type_id: u16::try_from(type_id).map_err(|_| IdError::FieldTooLarge {
                        field: FieldName::Type,
                        value: type_id,
                        max: u64::from(MAX_TYPE),
                    })?,
                    local_id,
                }
                .encode()?,
                Some(layout) => {
                    let (second, third) = match layout.kind() {
                        LayoutKind::Time => (FieldName::TimeMs, FieldName::Sequence),
                        LayoutKind::Composed => (FieldName::Type, FieldName::Local),
                    };
                    layout.encode(&[
                        (FieldName::Shard, u64::from(shard)),
                        (second, type_id),
                        (third, local_id),
                    ])?
                }
            };
            println!("{id}");
        }
    }
    Ok(())
}

/// The `id_layout` of `--fleet` in `--config`, when both are given.
fn layout(config: Option<PathBuf>, fleet: Option<String>) -> Result<Option<IdLayout>, CliError> {
    let (Some(config), Some(fleet)) = (config, fleet) else {
        return Ok(None);
    };
    let topology = Topology::load(&config).map_err(CliError::Config)?;
    let found = topology
        .fleet_by_name(&fleet)
        .and_then(|f| topology.fleet(f))
        .ok_or_else(|| CliError::UnknownFleet {
            fleet: fleet.clone(),
            known: topology
                .fleets
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    Ok(Some(found.layout.clone()))
}

fn number(text: &str) -> Result<u64, CliError> {
    text.trim()
        .parse()
        .map_err(|_| CliError::NotAnId(text.to_owned()))
}

/// The fields of the ID written as `text`.
fn decode(text: &str) -> Result<ObjectId, CliError> {
    Ok(ObjectId::decode(number(text)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_reads_a_number_and_refuses_text() {
        let fields = decode(" 241294492511762325 ").map_err(|e| e.to_string());
        assert_eq!(
            fields.map(|f| (f.shard, f.type_id, f.local_id)),
            Ok((3429, 1, 7075733))
        );
        assert_eq!(
            decode("abc").map(|_| ()).map_err(|e| e.to_string()),
            Err("'abc' is not a 64-bit unsigned integer".to_owned())
        );
    }
}
