//! `shardgate id decode|encode`.

use clap::Subcommand;

use super::CliError;
use crate::id::ObjectId;

#[derive(Subcommand)]
pub(super) enum IdCommand {
    /// Split an ID into shard, type and local id.
    Decode {
        /// The 64-bit ID.
        id: String,
    },
    /// Compose an ID from shard, type and local id.
    Encode {
        /// Shard number.
        shard: u32,
        /// Type id.
        type_id: u16,
        /// Local id (the row's AUTO_INCREMENT).
        local_id: u64,
    },
}

/// Prints the fields of an ID, or the ID of the fields.
pub(super) fn run(command: IdCommand) -> Result<(), CliError> {
    match command {
        IdCommand::Decode { id } => {
            let fields = decode(&id)?;
            println!(
                "shard={} type={} local={}",
                fields.shard, fields.type_id, fields.local_id
            );
        }
        IdCommand::Encode {
            shard,
            type_id,
            local_id,
        } => {
            let id = ObjectId {
                shard,
                type_id,
                local_id,
            }
            .encode()?;
            println!("{id}");
        }
    }
    Ok(())
}

/// The fields of the ID written as `text`.
fn decode(text: &str) -> Result<ObjectId, CliError> {
    let raw: u64 = text
        .trim()
        .parse()
        .map_err(|_| CliError::NotAnId(text.to_owned()))?;
    Ok(ObjectId::decode(raw)?)
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
