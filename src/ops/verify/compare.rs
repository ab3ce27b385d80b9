//! What the hosts hold compared with what the topology and the schema expect:
//! the problems, without I/O.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{kind, ExpectedSchema, FleetTables, HostCatalog, Problem};
use crate::topology::{FleetId, HostId, TableKind, Topology};

/// Whether a collation compares strings by their bytes, as the mod-shard
/// hash (md5 of the key's bytes) does: `binary`, or a `_nopad_bin` one.
/// A `_bin` collation still ignores trailing spaces (PAD SPACE); `_ci`,
/// `_ai` and the others equate different bytes.
fn compares_bytes(collation: &str) -> bool {
    let collation = collation.to_ascii_lowercase();
    collation == "binary" || collation.ends_with("_nopad_bin")
}

/// One warning per mod-shard table whose key column has, on a master of
/// its fleet, a collation that equates different bytes
/// ([`compares_bytes`]): keys the server takes as one (`A@x.com`,
/// `a@x.com`, `a@x.com `) hash to different shards, so a unique key does
/// not hold across the fleet and a lookup spelt differently misses.
pub(super) fn mod_key_warnings(
    topology: &Topology,
    found: &[(HostId, Result<HostCatalog, String>)],
) -> Vec<String> {
    let mut tables: Vec<_> = topology.tables.values().collect();
    tables.sort_by(|a, b| a.name.cmp(&b.name));
    let mut warnings = Vec::new();
    for rule in tables {
        let TableKind::ModShard { key_column } = &rule.kind else {
            continue;
        };
        let Some(fleet) = topology.fleets.get(rule.fleet) else {
            continue;
        };
        let masters: HashSet<HostId> = fleet.ranges.iter().map(|r| r.master).collect();
        let key = (rule.name.to_lowercase(), key_column.to_lowercase());
        let mut seen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (hid, catalog) in found {
            let (true, Ok(catalog)) = (masters.contains(hid), catalog) else {
                continue;
            };
            for collation in catalog.collations.get(&key).into_iter().flatten() {
                if !compares_bytes(collation) {
                    seen.entry(collation)
                        .or_default()
                        .push(&topology.hosts[*hid].addr);
                }
            }
        }
        for (collation, hosts) in seen {
            warnings.push(format!(
                "mod-shard key {}.{key_column} has collation {collation} (on {}): the server \
                 takes keys that differ in case, accents or trailing spaces as equal, shardgate \
                 hashes the key's bytes, so such keys land on different shards (a unique key \
                 does not hold across the fleet; a lookup spelt otherwise misses). Normalise \
                 the keys in the application, or make the column VARBINARY or a _nopad_bin \
                 collation",
                rule.name,
                hosts.join(", ")
            ));
        }
    }
    warnings
}

/// Every problem in what the hosts hold (`Err` = the host's error), unsorted.
pub(super) fn compare(
    topology: &Topology,
    schema: Option<&ExpectedSchema>,
    found: &[(HostId, Result<HostCatalog, String>)],
) -> Vec<Problem> {
    let addr = |h: HostId| topology.hosts[h].addr.clone();
    let mut problems = Vec::new();
    let mut catalogs: HashMap<HostId, &HostCatalog> = HashMap::new();
    for (hid, result) in found {
        match result {
            Ok(catalog) => {
                catalogs.insert(*hid, catalog);
            }
            Err(error) => problems.push(Problem {
                host: addr(*hid),
                database: String::new(),
                kind: kind::UNREACHABLE_HOST,
                detail: error.clone(),
            }),
        }
    }
    let present: HashMap<HostId, HashSet<&str>> = catalogs
        .iter()
        .map(|(h, c)| (*h, c.databases.iter().map(String::as_str).collect()))
        .collect();

    for (fid, fleet) in topology.fleets.iter().enumerate() {
        let no_tables = FleetTables::default();
        let tables = schema.map(|s| s.get(&fid).unwrap_or(&no_tables));
        for range in &fleet.ranges {
            let (Some(catalog), Some(dbs)) =
                (catalogs.get(&range.master), present.get(&range.master))
            else {
                continue;
            };
            for shard in range.first..=range.last {
                let database = fleet.database_name(shard);
                if !dbs.contains(database.as_str()) {
                    problems.push(Problem {
                        host: addr(range.master),
                        database,
                        kind: kind::MISSING_DATABASE,
                        detail: format!(
                            "shard {shard} of fleet {} (range {}-{}) is served by this host \
                             (`shardgate fleet init` creates it)",
                            fleet.name, range.first, range.last
                        ),
                    });
                    continue;
                }
                if let Some(expected) = tables {
                    let found = catalog.tables.as_ref().and_then(|t| t.get(&database));
                    for (kind, detail) in table_problems(topology, fid, expected, found) {
                        problems.push(Problem {
                            host: addr(range.master),
                            database: database.clone(),
                            kind,
                            detail,
                        });
                    }
                }
            }
        }
    }

    // Masters each host replicates (by the config), for orphans' copies.
    let mut replicates: HashMap<HostId, Vec<HostId>> = HashMap::new();
    for range in topology.fleets.iter().flat_map(|f| &f.ranges) {
        if let Some(r) = range.replica {
            let list = replicates.entry(r).or_default();
            if range.master != r && !list.contains(&range.master) {
                list.push(range.master);
            }
        }
    }
    for (hid, catalog) in &catalogs {
        for database in &catalog.databases {
            let Some((fid, shard)) = topology.parse_database(database) else {
                continue;
            };
            let fleet = &topology.fleets[fid];
            let Some(range) = fleet.range_of(shard) else {
                continue;
            };
            let canonical = fleet.database_name(shard);
            let detail = if *database != canonical {
                format!(
                    "named like shard {shard} of fleet {}, but the proxy uses `{canonical}`",
                    fleet.name
                )
            } else if range.master == *hid || range.replica == Some(*hid) {
                continue;
            } else {
                let mut detail = format!(
                    "shard {shard} of fleet {} belongs on {} (left behind by a shard move? \
                     drop it once nothing uses it)",
                    fleet.name,
                    addr(range.master)
                );
                for master in replicates.get(hid).into_iter().flatten() {
                    if present
                        .get(master)
                        .is_some_and(|dbs| dbs.contains(database.as_str()))
                    {
                        detail.push_str(&format!(
                            "; a replicated copy: {} (whose replica this is) has it too, \
                             dropping it there drops it here",
                            addr(*master)
                        ));
                    }
                }
                detail
            };
            problems.push(Problem {
                host: addr(*hid),
                database: database.clone(),
                kind: kind::ORPHAN_DATABASE,
                detail,
            });
        }
    }
    problems
}

/// The table problems of one shard database of `fleet`: `found` is its
/// tables' columns (`None`: no table at all). Names compare
/// case-insensitively.
fn table_problems(
    topology: &Topology,
    fleet: FleetId,
    expected: &FleetTables,
    found: Option<&BTreeMap<String, Vec<String>>>,
) -> Vec<(&'static str, String)> {
    let empty = BTreeMap::new();
    let found = found.unwrap_or(&empty);
    let mut problems = Vec::new();
    for table in &expected.tables {
        let here = found
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&table.name));
        match here {
            None => problems.push((
                kind::MISSING_TABLE,
                format!("`{}` (schema line {}) is absent", table.name, table.line),
            )),
            Some((name, columns)) => {
                if let Some(difference) = column_difference(&table.columns, columns) {
                    problems.push((kind::COLUMNS_DIFFER, format!("`{name}`: {difference}")));
                }
            }
        }
    }
    for name in found.keys() {
        let known = expected
            .tables
            .iter()
            .map(|t| t.name.as_str())
            .chain(expected.unchecked.iter().map(String::as_str))
            .any(|t| t.eq_ignore_ascii_case(name));
        let id_sequence = topology.fleets.get(fleet).is_some_and(|f| f.mints_ids())
            && name.eq_ignore_ascii_case(crate::id::layout::SEQUENCE_NAME);
        if known || id_sequence {
            continue;
        }
        let owner = topology
            .table(&name.to_ascii_lowercase())
            .filter(|rule| rule.fleet != fleet)
            .and_then(|rule| topology.fleet(rule.fleet));
        let detail = match owner {
            Some(owner) => format!(
                "`{name}` is a table of fleet {}, not of fleet {}",
                owner.name, topology.fleets[fleet].name
            ),
            None => format!("`{name}` is not in the schema"),
        };
        problems.push((kind::UNEXPECTED_TABLE, detail));
    }
    problems
}

/// How `found` differs from `expected` (column names in order,
/// case-insensitive), or `None` when they are the same.
pub(in crate::ops) fn column_difference(expected: &[String], found: &[String]) -> Option<String> {
    let same = |a: &String, b: &String| a.eq_ignore_ascii_case(b);
    if expected.len() == found.len() && expected.iter().zip(found).all(|(a, b)| same(a, b)) {
        return None;
    }
    let missing: Vec<String> = expected
        .iter()
        .filter(|e| !found.iter().any(|f| same(e, f)))
        .map(|e| format!("`{e}`"))
        .collect();
    let extra: Vec<String> = found
        .iter()
        .enumerate()
        .filter(|(_, f)| !expected.iter().any(|e| same(e, f)))
        .map(|(i, f)| format!("`{f}` (position {})", i + 1))
        .collect();
    let shared_expected = expected.iter().filter(|e| found.iter().any(|f| same(e, f)));
    let shared_found = found.iter().filter(|f| expected.iter().any(|e| same(e, f)));
    let reordered = !shared_expected.zip(shared_found).all(|(a, b)| same(a, b));
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        parts.push(format!("not in the schema: {}", extra.join(", ")));
    }
    if reordered {
        parts.push("columns in another order".to_string());
    }
    Some(format!(
        "{}; expected ({}), found ({})",
        parts.join("; "),
        expected.join(", "),
        found.join(", ")
    ))
}
