//! A fleet's ID layout: which bits of the 64-bit ID hold which field.
//!
//! Two kinds: composed IDs (`shard`, `type`, `local`; Pinterest's, the
//! default, [`IdLayout::pinterest`]) and time-sortable IDs (`time_ms`,
//! `shard`, `sequence`; Instagram's scheme, minted by the server at INSERT
//! with [`IdLayout::mint_sql`]).

use std::fmt;

use super::{IdError, ObjectId, MAX_LOCAL, MAX_SHARD, MAX_TYPE};

/// A named field of an ID layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FieldName {
    /// The virtual shard number.
    Shard,
    /// The object type id.
    Type,
    /// The row's AUTO_INCREMENT `local_id`.
    Local,
    /// Milliseconds since the layout's epoch.
    TimeMs,
    /// A per-shard sequence number, cycling over the field's width.
    Sequence,
}

impl FieldName {
    /// Every field name, in the order `id decode` prints them.
    pub const ALL: [FieldName; 5] = [
        FieldName::TimeMs,
        FieldName::Shard,
        FieldName::Type,
        FieldName::Local,
        FieldName::Sequence,
    ];

    /// The name as written in the config (`time_ms`).
    pub fn as_str(self) -> &'static str {
        match self {
            FieldName::Shard => "shard",
            FieldName::Type => "type",
            FieldName::Local => "local",
            FieldName::TimeMs => "time_ms",
            FieldName::Sequence => "sequence",
        }
    }

    /// The field a config name means, if any.
    pub fn parse(name: &str) -> Option<FieldName> {
        FieldName::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One field: `bits` wide, its lowest bit at `shift`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Which field.
    pub name: FieldName,
    /// Position of the field's lowest bit.
    pub shift: u32,
    /// Width in bits.
    pub bits: u32,
}

impl Field {
    /// Largest value the field holds.
    pub fn max(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    fn mask(&self) -> u64 {
        self.max().checked_shl(self.shift).unwrap_or(0)
    }
}

/// Which scheme a layout follows, from the fields it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutKind {
    /// `shard`, `type`, `local`: composed from the row's `local_id`.
    Composed,
    /// `time_ms`, `shard`, `sequence`: minted by the server at INSERT.
    Time,
}

/// A fleet's ID layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdLayout {
    /// The fields, highest first.
    pub fields: Vec<Field>,
    /// Unix milliseconds that `time_ms` counts from (0 without `time_ms`).
    pub epoch_ms: u64,
}

/// Pinterest's fields (shard 16 bits, type 10, local 36), highest first:
/// a constant, so that asking whether a layout is Pinterest's (on every
/// ID a statement routes by) allocates nothing.
const PINTEREST_FIELDS: [Field; 3] = [
    Field {
        name: FieldName::Shard,
        shift: 46,
        bits: 16,
    },
    Field {
        name: FieldName::Type,
        shift: 36,
        bits: 10,
    },
    Field {
        name: FieldName::Local,
        shift: 0,
        bits: 36,
    },
];

/// A problem of a layout: the field it concerns (if one) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutProblem {
    /// The field the problem is about, for the line of the error.
    pub field: Option<FieldName>,
    /// What is wrong, for a person.
    pub message: String,
}

/// The per-shard sequence a time layout's INSERT draws from, created by
/// `fleet init` in every shard database of the fleet.
pub const SEQUENCE_NAME: &str = "shardgate_id_seq";

impl IdLayout {
    /// Pinterest's layout: shard 61-46, type 45-36, local 35-0.
    pub fn pinterest() -> IdLayout {
        IdLayout {
            fields: PINTEREST_FIELDS.to_vec(),
            epoch_ms: 0,
        }
    }

    /// Builds a layout from `(field, shift, bits)` (any order) and an epoch.
    pub fn new(fields: impl IntoIterator<Item = Field>, epoch_ms: u64) -> IdLayout {
        let mut fields: Vec<Field> = fields.into_iter().collect();
        fields.sort_by(|a, b| b.shift.cmp(&a.shift).then(a.name.cmp(&b.name)));
        IdLayout { fields, epoch_ms }
    }

    /// Whether this is Pinterest's layout (the default).
    pub fn is_pinterest(&self) -> bool {
        self.fields == PINTEREST_FIELDS && self.epoch_ms == 0
    }

    /// The field with this name, if the layout has it.
    pub fn field(&self, name: FieldName) -> Option<Field> {
        self.fields.iter().copied().find(|f| f.name == name)
    }

    /// Which scheme the layout follows (a checked layout has one).
    pub fn kind(&self) -> LayoutKind {
        if self.field(FieldName::TimeMs).is_some() {
            LayoutKind::Time
        } else {
            LayoutKind::Composed
        }
    }

    /// Everything wrong with the layout for a fleet of `shard_count`
    /// shards: fields past bit 62 (bit 63 stays 0 so an ID is a positive
    /// BIGINT), empty or overlapping fields, a missing field of its kind,
    /// fields of both kinds, a shard field too narrow for the fleet, an
    /// epoch without `time_ms`.
    pub fn check(&self, shard_count: u32) -> Vec<LayoutProblem> {
        let mut problems = Vec::new();
        let mut push = |field: Option<FieldName>, message: String| {
            problems.push(LayoutProblem { field, message })
        };
        for f in &self.fields {
            if f.bits == 0 {
                push(Some(f.name), format!("field {} has 0 bits", f.name));
            } else if u64::from(f.shift) + u64::from(f.bits) > 63 {
                push(
                    Some(f.name),
                    format!(
                        "field {} (bits {}-{}) does not fit in 63 bits: the highest bit an ID may use is 62",
                        f.name,
                        u64::from(f.shift) + u64::from(f.bits) - 1,
                        f.shift
                    ),
                );
            }
        }
        for (i, a) in self.fields.iter().enumerate() {
            for b in &self.fields[i + 1..] {
                let (a_end, b_end) = (a.shift + a.bits, b.shift + b.bits);
                if a.bits > 0 && b.bits > 0 && a.shift < b_end && b.shift < a_end {
                    push(
                        Some(b.name),
                        format!(
                            "fields {} (bits {}-{}) and {} (bits {}-{}) overlap",
                            a.name,
                            a_end.saturating_sub(1),
                            a.shift,
                            b.name,
                            b_end.saturating_sub(1),
                            b.shift
                        ),
                    );
                }
            }
        }
        let has = |n: FieldName| self.field(n).is_some();
        let composed = [FieldName::Shard, FieldName::Type, FieldName::Local];
        let time = [FieldName::TimeMs, FieldName::Shard, FieldName::Sequence];
        let (kind_name, required, other) = if has(FieldName::TimeMs) || has(FieldName::Sequence) {
            ("time_ms", time, [FieldName::Type, FieldName::Local])
        } else {
            (
                "composed",
                composed,
                [FieldName::TimeMs, FieldName::Sequence],
            )
        };
        for name in required {
            if !has(name) {
                push(
                    None,
                    format!(
                        "a {kind_name} layout needs the fields {}; {name} is missing",
                        required.map(FieldName::as_str).join(", ")
                    ),
                );
            }
        }
        for name in other {
            if has(name) {
                push(
                    Some(name),
                    format!(
                        "field {name} does not belong in a {kind_name} layout (fields {})",
                        required.map(FieldName::as_str).join(", ")
                    ),
                );
            }
        }
        if let Some(shard) = self.field(FieldName::Shard) {
            if shard.bits > 0 && shard.bits < 64 && u64::from(shard_count) > shard.max() + 1 {
                push(
                    Some(FieldName::Shard),
                    format!(
                        "the shard field's {} bits hold shards 0-{}, but the fleet has {shard_count} shards",
                        shard.bits,
                        shard.max()
                    ),
                );
            }
        }
        if self.epoch_ms != 0 && !has(FieldName::TimeMs) {
            push(
                None,
                "epoch_ms is set but the layout has no time_ms field".to_owned(),
            );
        }
        problems
    }

    fn used_mask(&self) -> u64 {
        self.fields.iter().fold(0, |m, f| m | f.mask())
    }

    /// Splits an ID into the layout's fields, highest first; an ID with a
    /// bit set outside every field is refused.
    pub fn decode(&self, raw: u64) -> Result<Vec<(FieldName, u64)>, IdError> {
        if self.is_pinterest() {
            let id = ObjectId::decode(raw)?;
            return Ok(vec![
                (FieldName::Shard, u64::from(id.shard)),
                (FieldName::Type, u64::from(id.type_id)),
                (FieldName::Local, id.local_id),
            ]);
        }
        let unused = raw & !self.used_mask();
        if unused != 0 {
            return Err(IdError::UnusedBits {
                id: raw,
                bit: 63 - unused.leading_zeros(),
            });
        }
        Ok(self
            .fields
            .iter()
            .map(|f| (f.name, (raw >> f.shift) & f.max()))
            .collect())
    }

    /// The shard field of an ID (decoded as [`IdLayout::decode`] does).
    pub fn shard_of(&self, raw: u64) -> Result<u32, IdError> {
        let fields = self.decode(raw)?;
        let shard = fields
            .iter()
            .find(|(n, _)| *n == FieldName::Shard)
            .map_or(0, |(_, v)| *v);
        Ok(u32::try_from(shard).unwrap_or(u32::MAX))
    }

    /// Composes an ID from field values (fields not given are 0); a value
    /// wider than its field, or a field the layout lacks, is refused.
    pub fn encode(&self, values: &[(FieldName, u64)]) -> Result<u64, IdError> {
        if self.is_pinterest() {
            let get = |n: FieldName| values.iter().find(|(f, _)| *f == n).map_or(0, |v| v.1);
            if let Some((name, _)) = values
                .iter()
                .find(|(n, _)| !matches!(n, FieldName::Shard | FieldName::Type | FieldName::Local))
            {
                return Err(IdError::NoSuchField { field: *name });
            }
            let shard = get(FieldName::Shard);
            let type_id = get(FieldName::Type);
            let local_id = get(FieldName::Local);
            if shard > u64::from(MAX_SHARD) {
                return Err(IdError::ShardTooLarge {
                    shard: u32::try_from(shard).unwrap_or(u32::MAX),
                });
            }
            if type_id > u64::from(MAX_TYPE) {
                return Err(IdError::TypeTooLarge {
                    type_id: u16::try_from(type_id).unwrap_or(u16::MAX),
                });
            }
            if local_id > MAX_LOCAL {
                return Err(IdError::LocalTooLarge { local_id });
            }
            return ObjectId {
                shard: shard as u32,
                type_id: type_id as u16,
                local_id,
            }
            .encode();
        }
        let mut id = 0u64;
        for &(name, value) in values {
            let field = self
                .field(name)
                .ok_or(IdError::NoSuchField { field: name })?;
            if value > field.max() {
                return Err(IdError::FieldTooLarge {
                    field: name,
                    value,
                    max: field.max(),
                });
            }
            id |= value << field.shift;
        }
        Ok(id)
    }

    /// SQL that mints a time-layout ID on the server for a row of `shard`
    /// in `database`: `LAST_INSERT_ID(...)` (so the OK packet carries it)
    /// of the milliseconds of `NOW(3)` since the epoch, the shard and the
    /// next value of the database's [`SEQUENCE_NAME`] sequence. A time past
    /// the field's width or before the epoch fails the statement (error
    /// 1690) rather than writing a wrong ID. `previous` is the session's
    /// last ID: when it is of the same shard, the time is at least its
    /// time + 1, but never more than 1 ms ahead of `NOW(3)`, so the
    /// session's IDs keep increasing across a wrap of the sequence within
    /// one millisecond. `None` for a composed layout.
    pub fn mint_sql(&self, shard: u32, database: &str, previous: Option<u64>) -> Option<String> {
        let time = self.field(FieldName::TimeMs)?;
        let shard_field = self.field(FieldName::Shard)?;
        let sequence = self.field(FieldName::Sequence)?;
        let epoch = self.epoch_ms;
        let now = format!("(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) - {epoch})");
        let previous_time = previous
            .filter(|&p| self.shard_of(p).ok() == Some(shard))
            .map(|p| (p >> time.shift) & time.max());
        let ms = match previous_time {
            Some(t) => format!("GREATEST({now}, LEAST({}, {now} + 1))", t + 1),
            None => now,
        };
        let seq_mask = sequence.max();
        Some(format!(
            "LAST_INSERT_ID(((({ms}) + (({ms}) >> {}) * 18446744073709551615) << {})|({shard}<<{})|((NEXTVAL(`{}`.`{SEQUENCE_NAME}`) & {seq_mask}) << {}))",
            time.bits,
            time.shift,
            shard_field.shift,
            database.replace('`', "``"),
            sequence.shift
        ))
    }

    /// The `CREATE SEQUENCE` that `fleet init` runs in every shard
    /// database of a time-layout fleet: values 0 to the sequence field's
    /// maximum, cycling. `None` for a composed layout.
    pub fn sequence_ddl(&self) -> Option<String> {
        let sequence = self.field(FieldName::Sequence)?;
        let max = sequence.max();
        let cache = max.min(1000);
        Some(format!(
            "CREATE SEQUENCE IF NOT EXISTS {SEQUENCE_NAME} START WITH 0 MINVALUE 0 MAXVALUE {max} INCREMENT BY 1 CACHE {cache} CYCLE"
        ))
    }

    /// One line describing the layout (`shard 61-46, type 45-36, local 35-0`).
    pub fn describe(&self) -> String {
        let mut text = self
            .fields
            .iter()
            .map(|f| format!("{} {}-{}", f.name, f.shift + f.bits - 1, f.shift))
            .collect::<Vec<_>>()
            .join(", ");
        if self.field(FieldName::TimeMs).is_some() {
            text.push_str(&format!(", epoch_ms {}", self.epoch_ms));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field of a test layout.
    fn field(name: FieldName, shift: u32, bits: u32) -> Field {
        Field { name, shift, bits }
    }

    fn instagram() -> IdLayout {
        IdLayout::new(
            [
                field(FieldName::TimeMs, 23, 40),
                field(FieldName::Shard, 10, 13),
                field(FieldName::Sequence, 0, 10),
            ],
            1_767_225_600_000,
        )
    }

    #[test]
    fn pinterest_layout_decodes_and_encodes_as_object_id() {
        let p = IdLayout::pinterest();
        assert!(p.check(4096).is_empty());
        assert_eq!(p.kind(), LayoutKind::Composed);
        let fields = p.decode(241294492511762325).expect("spec vector");
        assert_eq!(
            fields,
            vec![
                (FieldName::Shard, 3429),
                (FieldName::Type, 1),
                (FieldName::Local, 7075733)
            ]
        );
        assert_eq!(p.encode(&fields), Ok(241294492511762325));
        assert_eq!(p.shard_of(241294492511762325), Ok(3429));
        assert_eq!(
            p.decode(1 << 62),
            Err(IdError::ReservedBits { id: 1 << 62 })
        );
        assert_eq!(
            p.encode(&[(FieldName::Local, MAX_LOCAL + 1)]),
            Err(IdError::LocalTooLarge {
                local_id: MAX_LOCAL + 1
            })
        );
        assert_eq!(p.describe(), "shard 61-46, type 45-36, local 35-0");
        assert_eq!(p.mint_sql(1, "db00001", None), None);
    }

    #[test]
    fn time_layout_round_trips_and_sorts_by_time() {
        let l = instagram();
        assert!(l.check(16).is_empty(), "{:?}", l.check(16));
        assert_eq!(l.kind(), LayoutKind::Time);
        let early = l
            .encode(&[
                (FieldName::TimeMs, 1000),
                (FieldName::Shard, 15),
                (FieldName::Sequence, 1023),
            ])
            .expect("fits");
        let late = l
            .encode(&[
                (FieldName::TimeMs, 1001),
                (FieldName::Shard, 0),
                (FieldName::Sequence, 0),
            ])
            .expect("fits");
        assert!(late > early);
        assert_eq!(early, (1000 << 23) | (15 << 10) | 1023);
        assert_eq!(
            l.decode(early),
            Ok(vec![
                (FieldName::TimeMs, 1000),
                (FieldName::Shard, 15),
                (FieldName::Sequence, 1023)
            ])
        );
        assert_eq!(l.shard_of(early), Ok(15));
        assert_eq!(
            l.decode(1 << 63),
            Err(IdError::UnusedBits {
                id: 1 << 63,
                bit: 63
            })
        );
        assert_eq!(
            l.encode(&[(FieldName::Sequence, 1024)]),
            Err(IdError::FieldTooLarge {
                field: FieldName::Sequence,
                value: 1024,
                max: 1023
            })
        );
        assert_eq!(
            l.encode(&[(FieldName::Type, 1)]),
            Err(IdError::NoSuchField {
                field: FieldName::Type
            })
        );
    }

    fn messages(layout: &IdLayout, shards: u32) -> Vec<String> {
        layout
            .check(shards)
            .into_iter()
            .map(|p| p.message)
            .collect()
    }

    #[test]
    fn layout_checks() {
        let wide = IdLayout::new(
            [
                field(FieldName::TimeMs, 23, 41),
                field(FieldName::Shard, 10, 13),
                field(FieldName::Sequence, 0, 10),
            ],
            0,
        );
        assert_eq!(
            messages(&wide, 16),
            ["field time_ms (bits 63-23) does not fit in 63 bits: the highest bit an ID may use is 62"]
        );
        let overlap = IdLayout::new(
            [
                field(FieldName::TimeMs, 20, 40),
                field(FieldName::Shard, 10, 13),
                field(FieldName::Sequence, 0, 10),
            ],
            0,
        );
        assert_eq!(
            messages(&overlap, 16),
            ["fields time_ms (bits 59-20) and shard (bits 22-10) overlap"]
        );
        assert_eq!(
            messages(&instagram(), 8193),
            ["the shard field's 13 bits hold shards 0-8191, but the fleet has 8193 shards"]
        );
        let missing = IdLayout::new(
            [
                field(FieldName::TimeMs, 23, 40),
                field(FieldName::Shard, 10, 13),
                field(FieldName::Local, 0, 10),
            ],
            0,
        );
        assert_eq!(
            messages(&missing, 16),
            [
                "a time_ms layout needs the fields time_ms, shard, sequence; sequence is missing",
                "field local does not belong in a time_ms layout (fields time_ms, shard, sequence)"
            ]
        );
        let epoch = IdLayout {
            epoch_ms: 5,
            ..IdLayout::pinterest()
        };
        assert_eq!(
            messages(&epoch, 16),
            ["epoch_ms is set but the layout has no time_ms field"]
        );
        let zero = IdLayout::new(
            [
                field(FieldName::Shard, 40, 0),
                field(FieldName::Type, 36, 4),
                field(FieldName::Local, 0, 36),
            ],
            0,
        );
        assert_eq!(messages(&zero, 1), ["field shard has 0 bits"]);
    }

    #[test]
    fn mint_sql_text() {
        let l = instagram();
        let now = "(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) - 1767225600000)";
        assert_eq!(
            l.mint_sql(3, "pdb0003", None).expect("time layout"),
            format!(
                "LAST_INSERT_ID(((({now}) + (({now}) >> 40) * 18446744073709551615) << 23)|(3<<10)|((NEXTVAL(`pdb0003`.`shardgate_id_seq`) & 1023) << 0))"
            )
        );
        let previous = (77u64 << 23) | (3 << 10) | 5;
        let guarded = l
            .mint_sql(3, "pdb0003", Some(previous))
            .expect("time layout");
        assert!(
            guarded.contains(&format!("GREATEST({now}, LEAST(78, {now} + 1))")),
            "{guarded}"
        );
        let other_shard = (77u64 << 23) | (4 << 10) | 5;
        assert!(!l
            .mint_sql(3, "pdb0003", Some(other_shard))
            .expect("time")
            .contains("GREATEST"));
        assert_eq!(
            l.sequence_ddl().expect("time layout"),
            "CREATE SEQUENCE IF NOT EXISTS shardgate_id_seq START WITH 0 MINVALUE 0 MAXVALUE 1023 INCREMENT BY 1 CACHE 1000 CYCLE"
        );
    }
}
