//! The `tables` section: each table on a known fleet, with a known object
//! type or a key column.

use std::collections::HashMap;

use crate::id::MAX_TYPE;
use crate::topology::config::Config;
use crate::topology::lines::LineIndex;
use crate::topology::{TableKind, TableRule};

use super::Errors;

pub(super) fn check_tables(
    config: &Config,
    fleet_ids: &HashMap<&str, usize>,
    lines: &LineIndex,
    errors: &mut Errors,
) -> HashMap<String, TableRule> {
    let mut tables: HashMap<String, TableRule> = HashMap::new();
    let mut first_line: HashMap<String, (usize, &str)> = HashMap::new();
    let mut names: Vec<&String> = config.tables.keys().collect();
    names.sort_by_key(|name| lines.line(&["tables", name.as_str()]));
    let known_types = config.types.keys().cloned().collect::<Vec<_>>().join(", ");
    let known_fleets = config.fleets.keys().cloned().collect::<Vec<_>>().join(", ");
    for name in names {
        let Some(tc) = config.tables.get(name) else {
            continue;
        };
        let line = lines.line(&["tables", name]);
        let at = |key: &str| lines.line(&["tables", name, key]);
        let lower = name.to_ascii_lowercase();
        if name.is_empty() {
            errors.push(line, "a table has an empty name");
        }
        if let Some((first, spelled)) = first_line.get(&lower) {
            errors.push(
                line,
                format!("duplicate table `{name}`: same as `{spelled}` on line {first} (table names are case-insensitive)"),
            );
        } else {
            first_line.insert(lower.clone(), (line, name));
        }

        let fleet = if tc.fleet.is_empty() {
            errors.push(line, format!("table {name}: `fleet` is missing"));
            None
        } else if let Some(&id) = fleet_ids.get(tc.fleet.as_str()) {
            Some(id)
        } else {
            errors.push(
                at("fleet"),
                format!(
                    "table {name}: unknown fleet `{}` (fleets: {known_fleets})",
                    tc.fleet
                ),
            );
            None
        };

        let given = [&tc.object, &tc.from, &tc.key]
            .iter()
            .filter(|v| v.is_some())
            .count();
        let kind = if given != 1 {
            errors.push(
                line,
                format!("table {name}: give exactly one of `object: <type>`, `from: <column>` or `key: <column>`"),
            );
            None
        } else if let Some(type_name) = &tc.object {
            match config.types.get(type_name) {
                Some(&id) => u16::try_from(id)
                    .ok()
                    .filter(|&id| id <= MAX_TYPE)
                    .map(|type_id| TableKind::Object { type_id }),
                None => {
                    errors.push(
                        at("object"),
                        format!("table {name}: unknown type `{type_name}` (types: {known_types})"),
                    );
                    None
                }
            }
        } else if let Some(column) = &tc.from {
            column_kind(name, "from", column, at("from"), errors)
                .map(|c| TableKind::Mapping { from_column: c })
        } else if let Some(column) = &tc.key {
            column_kind(name, "key", column, at("key"), errors)
                .map(|c| TableKind::ModShard { key_column: c })
        } else {
            None
        };

        if let (Some(fleet), Some(kind)) = (fleet, kind) {
            tables.entry(lower.clone()).or_insert(TableRule {
                name: lower,
                fleet,
                kind,
            });
        }
    }
    tables
}

fn column_kind(
    table: &str,
    key: &str,
    column: &str,
    line: usize,
    errors: &mut Errors,
) -> Option<String> {
    if column.trim().is_empty() {
        errors.push(line, format!("table {table}: `{key}` names no column"));
        None
    } else {
        Some(column.to_ascii_lowercase())
    }
}
