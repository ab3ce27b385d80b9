//! Config changes that would send existing data to another shard: the
//! comparison behind the reload and push guard rails. Pure.
//!
//! A row lives where the config in force says: its fleet's shard count and
//! database pattern name its database, an object ID carries its type's
//! number, a mod-shard row hashes its `key` column. Changing any of these
//! re-homes rows that are already stored, so a reload or push that does
//! must be forced. Moving a shard range between hosts (MOVE, PROMOTE) keeps
//! every row on its shard and is not a re-homing change.

use std::fmt;

use super::{DatabaseFormat, Topology};

/// One change that re-homes existing data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rehoming {
    /// A fleet's shard count changed: `md5(key) % shards` and the open
    /// shards of every ID-keyed row mean other shards.
    ShardCount {
        /// The fleet.
        fleet: String,
        /// Shard count in force.
        before: u32,
        /// Shard count of the new document.
        after: u32,
    },
    /// A fleet's database name pattern changed: every shard's database has
    /// another name.
    DatabasePattern {
        /// The fleet.
        fleet: String,
        /// Pattern in force (`db{:05}`).
        before: String,
        /// Pattern of the new document.
        after: String,
    },
    /// An object type got another number: stored IDs carry the old one.
    TypeNumber {
        /// The type name.
        name: String,
        /// Number in force.
        before: u32,
        /// Number in the new document.
        after: u32,
    },
    /// A mod-shard table hashes another column (or is no longer a
    /// mod-shard table): its rows hash to other shards.
    ModKey {
        /// The table.
        table: String,
        /// Key column in force.
        before: String,
        /// Key column of the new document; `None`: no longer keyed.
        after: Option<String>,
    },
    /// A fleet's ID layout changed: stored IDs decode to other shards.
    IdLayout {
        /// The fleet.
        fleet: String,
        /// Layout in force ([`crate::id::IdLayout::describe`]).
        before: String,
        /// Layout of the new document.
        after: String,
    },
    /// A table moved to another fleet: its rows stay on the old one.
    TableFleet {
        /// The table.
        table: String,
        /// Fleet in force.
        before: String,
        /// Fleet of the new document.
        after: String,
    },
}

impl fmt::Display for Rehoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rehoming::ShardCount {
                fleet,
                before,
                after,
            } => write!(f, "fleet {fleet}: shard count {before} -> {after}"),
            Rehoming::DatabasePattern {
                fleet,
                before,
                after,
            } => write!(f, "fleet {fleet}: database pattern {before} -> {after}"),
            Rehoming::TypeNumber {
                name,
                before,
                after,
            } => write!(f, "object type {name}: number {before} -> {after}"),
            Rehoming::ModKey {
                table,
                before,
                after: Some(after),
            } => write!(f, "table {table}: key column {before} -> {after}"),
            Rehoming::ModKey {
                table,
                before,
                after: None,
            } => write!(
                f,
                "table {table}: no longer a mod-shard table (key column was {before})"
            ),
            Rehoming::TableFleet {
                table,
                before,
                after,
            } => write!(f, "table {table}: fleet {before} -> {after}"),
            Rehoming::IdLayout {
                fleet,
                before,
                after,
            } => write!(f, "fleet {fleet}: ID layout {before} -> {after}"),
        }
    }
}

/// Every change from `old` to `new` that would send existing data to
/// another shard, fleets first, then types, then tables (each by name).
/// Additions, removals, host moves and settings are not re-homing.
pub fn rehoming_changes(old: &Topology, new: &Topology) -> Vec<Rehoming> {
    let mut changes = Vec::new();
    for fleet in &new.fleets {
        let Some(previous) = old.fleets.iter().find(|f| f.name == fleet.name) else {
            continue;
        };
        if previous.shard_count != fleet.shard_count {
            changes.push(Rehoming::ShardCount {
                fleet: fleet.name.clone(),
                before: previous.shard_count,
                after: fleet.shard_count,
            });
        }
        if previous.database != fleet.database {
            changes.push(Rehoming::DatabasePattern {
                fleet: fleet.name.clone(),
                before: pattern(&previous.database),
                after: pattern(&fleet.database),
            });
        }
        if previous.layout != fleet.layout {
            changes.push(Rehoming::IdLayout {
                fleet: fleet.name.clone(),
                before: previous.layout.describe(),
                after: fleet.layout.describe(),
            });
        }
    }
    for (name, &after) in &new.config.types {
        if let Some(&before) = old.config.types.get(name) {
            if before != after {
                changes.push(Rehoming::TypeNumber {
                    name: name.clone(),
                    before,
                    after,
                });
            }
        }
    }
    for (table, now) in &new.config.tables {
        let Some(was) = old.config.tables.get(table) else {
            continue;
        };
        if was.fleet != now.fleet {
            changes.push(Rehoming::TableFleet {
                table: table.clone(),
                before: was.fleet.clone(),
                after: now.fleet.clone(),
            });
        }
        if let Some(before) = &was.key {
            if was.key != now.key {
                changes.push(Rehoming::ModKey {
                    table: table.clone(),
                    before: before.clone(),
                    after: now.key.clone(),
                });
            }
        }
    }
    changes
}

/// The changes as one line: `fleet main: shard count 4096 -> 8192; ...`.
pub fn describe(changes: &[Rehoming]) -> String {
    changes
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A database format as written in the config (`db{:05}`).
fn pattern(format: &DatabaseFormat) -> String {
    let number = if format.width == 0 {
        "{}".to_owned()
    } else {
        format!("{{:0{}}}", format.width)
    };
    format!("{}{number}{}", format.prefix, format.suffix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};

    struct Case {
        what: &'static str,
        from: &'static str,
        to: &'static str,
        expected: &'static [&'static str],
    }

    const CASES: &[Case] = &[
        Case {
            what: "shard count",
            from: "shards: 4096\n    database: \"msdb{:05}\"\n    hosts:\n      - { range: [0, 4095]",
            to: "shards: 8192\n    database: \"msdb{:05}\"\n    hosts:\n      - { range: [0, 8191]",
            expected: &["fleet mod: shard count 4096 -> 8192"],
        },
        Case {
            what: "database pattern",
            from: "database: \"db{:05}\"",
            to: "database: \"pins{:04}_x\"",
            expected: &["fleet main: database pattern db{:05} -> pins{:04}_x"],
        },
        Case {
            what: "renumbered type",
            from: "types: { pin: 1, board: 2, user: 3 }",
            to: "types: { pin: 1, board: 7, user: 3 }",
            expected: &["object type board: number 2 -> 7"],
        },
        Case {
            what: "mod-shard key column",
            from: "user_by_email:   { fleet: mod,  key: email }",
            to: "user_by_email:   { fleet: mod,  key: login }",
            expected: &["table user_by_email: key column email -> login"],
        },
        Case {
            what: "table to another fleet",
            from: "user_likes_pins: { fleet: main, from: user_id }",
            to: "user_likes_pins: { fleet: mod, from: user_id }",
            expected: &["table user_likes_pins: fleet main -> mod"],
        },
        Case {
            what: "ID layout",
            from: "shards: 4096\n    database: \"msdb{:05}\"\n",
            to: "shards: 4096\n    database: \"msdb{:05}\"\n    id_layout: { epoch_ms: 1, fields: { time_ms: { shift: 23, bits: 40 }, shard: { shift: 10, bits: 13 }, sequence: { shift: 0, bits: 10 } } }\n",
            expected: &["fleet mod: ID layout shard 61-46, type 45-36, local 35-0 -> time_ms 62-23, shard 22-10, sequence 9-0, epoch_ms 1"],
        },
        Case {
            what: "a fleet added",
            from: "tables:\n",
            to: "  extra:\n    shards: 16\n    database: \"x{:02}\"\n    hosts:\n      - { range: [0, 15], master: 127.0.0.1:3311 }\ntables:\n",
            expected: &[],
        },
        Case {
            what: "a type added",
            from: "types: { pin: 1, board: 2, user: 3 }",
            to: "types: { pin: 1, board: 2, user: 3, comment: 4 }",
            expected: &[],
        },
        Case {
            what: "a table added",
            from: "tables:\n",
            to: "tables:\n  likes: { fleet: main, from: user_id }\n",
            expected: &[],
        },
        Case {
            what: "a range moved to another host",
            from: "range: [2048, 4095], master: 127.0.0.1:3308 }",
            to: "range: [2048, 4095], master: 127.0.0.1:3311 }",
            expected: &[],
        },
        Case {
            what: "a range split over two hosts",
            from: "      - { range: [2048, 4095], master: 127.0.0.1:3308 }",
            to: "      - { range: [2048, 3000], master: 127.0.0.1:3308 }\n      - { range: [3001, 4095], master: 127.0.0.1:3311 }",
            expected: &[],
        },
        Case {
            what: "pool size",
            from: "pool_max_per_host: 64 }\n",
            to: "pool_max_per_host: 8 }\n",
            expected: &[],
        },
        Case {
            what: "open shards",
            from: "open: [0, 4095]",
            to: "open: [0, 100]",
            expected: &[],
        },
    ];

    #[test]
    fn each_kind_is_detected_and_harmless_changes_are_not() {
        let old = load(SPEC_YAML);
        for case in CASES {
            assert!(
                SPEC_YAML.contains(case.from),
                "{}: no {:?}",
                case.what,
                case.from
            );
            let new = load(&SPEC_YAML.replace(case.from, case.to));
            let found: Vec<String> = rehoming_changes(&old, &new)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(found, case.expected, "{}", case.what);
        }
    }

    #[test]
    fn several_changes_are_all_listed_in_order() {
        let old = load(SPEC_YAML);
        let text = SPEC_YAML
            .replace(
                "user_by_email:   { fleet: mod,  key: email }",
                "user_by_email:   { fleet: mod,  object: user }",
            )
            .replace("  main:\n    shards: 4096", "  main:\n    shards: 8192")
            .replace("range: [2048, 4095], master", "range: [2048, 8191], master")
            .replace("types: { pin: 1,", "types: { pin: 9,");
        let changes = rehoming_changes(&old, &load(&text));
        assert_eq!(
            changes,
            [
                Rehoming::ShardCount {
                    fleet: "main".into(),
                    before: 4096,
                    after: 8192
                },
                Rehoming::TypeNumber {
                    name: "pin".into(),
                    before: 1,
                    after: 9
                },
                Rehoming::ModKey {
                    table: "user_by_email".into(),
                    before: "email".into(),
                    after: None
                },
            ]
        );
        assert_eq!(
            describe(&changes),
            "fleet main: shard count 4096 -> 8192; object type pin: number 1 -> 9; \
             table user_by_email: no longer a mod-shard table (key column was email)"
        );
        assert!(rehoming_changes(&old, &load(SPEC_YAML)).is_empty());
    }
}
