//! The 64-bit object ID and the mod-shard hash.
//!
//! ```text
//! bit 63-62 reserved (0) | bit 61-46 shard (16) | bit 45-36 type (10) | bit 35-0 local (36)
//! ```

use md5::{Digest, Md5};

pub mod layout;

pub use layout::{FieldName, IdLayout, LayoutKind};

/// Largest shard number the ID layout can carry.
pub const MAX_SHARD: u32 = (1 << 16) - 1;
/// Largest type id the ID layout can carry.
pub const MAX_TYPE: u16 = (1 << 10) - 1;
/// Largest local id (the row's AUTO_INCREMENT) the ID layout can carry.
pub const MAX_LOCAL: u64 = (1 << 36) - 1;

const SHARD_SHIFT: u32 = 46;
const TYPE_SHIFT: u32 = 36;
const RESERVED_MASK: u64 = 0b11 << 62;

/// The part of [`compose_sql`]'s text that a server prints in the error
/// (1690, BIGINT UNSIGNED value is out of range) it raises for a `local_id`
/// above [`MAX_LOCAL`]: how the relay recognises that error.
pub const COMPOSE_OVERFLOW_MARK: &str = ">> 36) * 18446744073709551615";

/// SQL that composes the 64-bit ID of a row of type `type_id` on `shard`
/// from its `local_id` column (`local_id`, `p.local_id`):
/// `((S<<46)|(T<<36)|(c + (c >> 36) * 18446744073709551615))`. For a
/// `local_id` that fits 36 bits the added term is 0; for a larger one the
/// server's unsigned arithmetic overflows and the statement fails (error
/// 1690, whose message contains [`COMPOSE_OVERFLOW_MARK`]) instead of
/// OR-ing the extra bits into the type and shard fields, which would name
/// another row. The column's type and metadata are those of the plain OR.
pub fn compose_sql(shard: u32, type_id: u16, local_id: &str) -> String {
    format!(
        "(({shard}<<{SHARD_SHIFT})|({type_id}<<{TYPE_SHIFT})|({local_id} + ({local_id} {COMPOSE_OVERFLOW_MARK}))"
    )
}

/// The 64-bit ID of fields the caller knows fit the layout (`shard` at most
/// [`MAX_SHARD`], `type_id` at most [`MAX_TYPE`], `local_id` at most
/// [`MAX_LOCAL`]); [`ObjectId::encode`] is the checked form.
pub const fn compose(shard: u32, type_id: u16, local_id: u64) -> u64 {
    ((shard as u64) << SHARD_SHIFT) | ((type_id as u64) << TYPE_SHIFT) | local_id
}

/// The three fields of a 64-bit object ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectId {
    /// Virtual shard number.
    pub shard: u32,
    /// Object type id (pin=1, board=2, ... from the config).
    pub type_id: u16,
    /// The row's AUTO_INCREMENT `local_id` inside its shard database.
    pub local_id: u64,
}

/// What is wrong with an ID or with the fields given to compose one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The ID has bit 63 or 62 set; such IDs are never issued.
    #[error("ID {id} is not a shardgate ID: its reserved top bits (63-62) are set; IDs must be below 2^62 (4611686018427387904)")]
    ReservedBits {
        /// The offending ID.
        id: u64,
    },
    /// The shard number does not fit the 16-bit shard field.
    #[error("shard {shard} does not fit in an ID: shard must be 0-{MAX_SHARD}")]
    ShardTooLarge {
        /// The offending shard number.
        shard: u32,
    },
    /// The type id does not fit the 10-bit type field.
    #[error("type id {type_id} does not fit in an ID: type must be 0-{MAX_TYPE}")]
    TypeTooLarge {
        /// The offending type id.
        type_id: u16,
    },
    /// The local id does not fit the 36-bit local field.
    #[error("local id {local_id} does not fit in an ID: local id must be 0-{MAX_LOCAL}")]
    LocalTooLarge {
        /// The offending local id.
        local_id: u64,
    },
    /// The ID has a bit set that no field of the fleet's layout covers.
    #[error(
        "ID {id} does not fit the fleet's ID layout: bit {bit} is set but belongs to no field"
    )]
    UnusedBits {
        /// The offending ID.
        id: u64,
        /// The highest such bit.
        bit: u32,
    },
    /// A value wider than its field of the layout.
    #[error("{field} {value} does not fit in an ID: {field} must be 0-{max}")]
    FieldTooLarge {
        /// The field.
        field: FieldName,
        /// The offending value.
        value: u64,
        /// The field's largest value.
        max: u64,
    },
    /// A field the fleet's layout does not have.
    #[error("the fleet's ID layout has no field {field}")]
    NoSuchField {
        /// The field asked for.
        field: FieldName,
    },
}

impl ObjectId {
    /// Splits a 64-bit ID into its fields; rejects IDs with reserved bits set.
    pub fn decode(id: u64) -> Result<ObjectId, IdError> {
        if id & RESERVED_MASK != 0 {
            return Err(IdError::ReservedBits { id });
        }
        Ok(ObjectId {
            shard: ((id >> SHARD_SHIFT) & u64::from(MAX_SHARD)) as u32,
            type_id: ((id >> TYPE_SHIFT) & u64::from(MAX_TYPE)) as u16,
            local_id: id & MAX_LOCAL,
        })
    }

    /// Composes the 64-bit ID; rejects fields wider than the layout allows.
    pub fn encode(self) -> Result<u64, IdError> {
        if self.shard > MAX_SHARD {
            return Err(IdError::ShardTooLarge { shard: self.shard });
        }
        if self.type_id > MAX_TYPE {
            return Err(IdError::TypeTooLarge {
                type_id: self.type_id,
            });
        }
        if self.local_id > MAX_LOCAL {
            return Err(IdError::LocalTooLarge {
                local_id: self.local_id,
            });
        }
        Ok(compose(self.shard, self.type_id, self.local_id))
    }
}

/// The mod-shard of a key: md5(key) as a big-endian u128, modulo `count`.
///
/// `count` of 0 is treated as 1 (every key on shard 0); validated configs
/// never have it.
pub fn mod_shard(key: &[u8], count: u32) -> u32 {
    let digest: [u8; 16] = Md5::digest(key).into();
    (u128::from_be_bytes(digest) % u128::from(count.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: u64 = 241294492511762325;

    #[test]
    fn decode_spec_vector() {
        let id = ObjectId::decode(VECTOR).expect("valid id");
        assert_eq!(
            id,
            ObjectId {
                shard: 3429,
                type_id: 1,
                local_id: 7075733
            }
        );
    }

    #[test]
    fn encode_spec_vector() {
        let id = ObjectId {
            shard: 3429,
            type_id: 1,
            local_id: 7075733,
        };
        assert_eq!(id.encode(), Ok(VECTOR));
    }

    #[test]
    fn local_id_is_36_bits_not_32() {
        let id = ObjectId {
            shard: 1,
            type_id: 1,
            local_id: 1 << 33,
        };
        let raw = id.encode().expect("fits");
        assert_eq!(ObjectId::decode(raw), Ok(id));
    }

    #[test]
    fn mod_shard_spec_vectors() {
        assert_eq!(mod_shard(b"1.2.3.4", 4096), 1537);
        assert_eq!(mod_shard(b"user@example.com", 4096), 2479);
    }

    #[test]
    fn mod_shard_of_one_shard_is_zero() {
        assert_eq!(mod_shard(b"anything", 1), 0);
        assert_eq!(mod_shard(b"anything", 0), 0);
    }

    #[test]
    fn reserved_bits_rejected() {
        for id in [1u64 << 63, 1 << 62, u64::MAX, VECTOR | (1 << 62)] {
            let err = ObjectId::decode(id).expect_err("reserved bits set");
            assert_eq!(err, IdError::ReservedBits { id });
            assert!(err.to_string().contains(&id.to_string()));
        }
    }

    #[test]
    fn round_trip_at_maxima() {
        let max = ObjectId {
            shard: MAX_SHARD,
            type_id: MAX_TYPE,
            local_id: MAX_LOCAL,
        };
        let raw = max.encode().expect("maxima fit");
        assert_eq!(raw, (1 << 62) - 1);
        assert_eq!(ObjectId::decode(raw), Ok(max));
        let zero = ObjectId {
            shard: 0,
            type_id: 0,
            local_id: 0,
        };
        assert_eq!(zero.encode(), Ok(0));
        assert_eq!(ObjectId::decode(0), Ok(zero));
    }

    #[test]
    fn oversized_fields_rejected() {
        let base = ObjectId {
            shard: 0,
            type_id: 0,
            local_id: 0,
        };
        assert_eq!(
            ObjectId {
                shard: MAX_SHARD + 1,
                ..base
            }
            .encode(),
            Err(IdError::ShardTooLarge { shard: 65536 })
        );
        assert_eq!(
            ObjectId {
                type_id: MAX_TYPE + 1,
                ..base
            }
            .encode(),
            Err(IdError::TypeTooLarge { type_id: 1024 })
        );
        assert_eq!(
            ObjectId {
                local_id: MAX_LOCAL + 1,
                ..base
            }
            .encode(),
            Err(IdError::LocalTooLarge { local_id: 1 << 36 })
        );
    }

    #[test]
    fn composed_sql_text() {
        assert_eq!(
            compose_sql(3429, 1, "p.local_id"),
            "((3429<<46)|(1<<36)|(p.local_id + (p.local_id >> 36) * 18446744073709551615))"
        );
        assert!(compose_sql(0, 2, "local_id").contains(COMPOSE_OVERFLOW_MARK));
    }
}
