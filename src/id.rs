//! The 64-bit object ID and the mod-shard hash (SPEC section 2).
//!
//! ```text
//! bit 63-62 reserved (0) | bit 61-46 shard (16) | bit 45-36 type (10) | bit 35-0 local (36)
//! ```

/// Largest shard number the ID layout can carry.
pub const MAX_SHARD: u32 = (1 << 16) - 1;
/// Largest type id the ID layout can carry.
pub const MAX_TYPE: u16 = (1 << 10) - 1;
/// Largest local id (the row's AUTO_INCREMENT) the ID layout can carry.
pub const MAX_LOCAL: u64 = (1 << 36) - 1;

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
    /// Placeholder until the codec lands.
    #[error("placeholder")]
    Placeholder,
}

impl ObjectId {
    /// Splits a 64-bit ID into its fields; rejects IDs with reserved bits set.
    pub fn decode(id: u64) -> Result<ObjectId, IdError> {
        todo!("{id}")
    }

    /// Composes the 64-bit ID; rejects fields wider than the layout allows.
    pub fn encode(self) -> Result<u64, IdError> {
        todo!()
    }
}

/// The mod-shard of a key: md5(key) as a big-endian u128, modulo `count`.
pub fn mod_shard(key: &[u8], count: u32) -> u32 {
    todo!("{key:?}{count}")
}
