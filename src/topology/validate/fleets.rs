//! Fleet sections: shard counts, host ranges, database name formats and
//! formats of two fleets that could name the same database.

use std::collections::HashMap;

use crate::id::layout::Field;
use crate::id::{FieldName, IdLayout, MAX_SHARD};
use crate::topology::config::{Config, FleetConfig, DEFAULT_DATABASE, DEFAULT_MOD_DATABASE};
use crate::topology::lines::LineIndex;
use crate::topology::{parse_format, DatabaseFormat, Fleet, Host, HostId, HostRange};

use super::{check_address, Errors};

pub(super) fn fleet_order(config: &Config, lines: &LineIndex) -> Vec<String> {
    let mut names: Vec<String> = config.fleets.keys().cloned().collect();
    names.sort_by_key(|name| {
        let line = lines.line(&["fleets", name]);
        (line == 0, line)
    });
    names
}

/// The fleet's database format: as written, else `msdb{:05}` for a fleet
/// holding only mod-shard (`key`) tables and `db{:05}` for any other.
pub(super) fn database_spec(config: &Config, name: &str, fc: &FleetConfig) -> String {
    if let Some(spec) = &fc.database {
        return spec.clone();
    }
    let mut on_fleet = config
        .tables
        .values()
        .filter(|t| t.fleet == name)
        .peekable();
    let has_tables = on_fleet.peek().is_some();
    if has_tables && on_fleet.all(|t| t.key.is_some() && t.object.is_none() && t.from.is_none()) {
        DEFAULT_MOD_DATABASE.to_owned()
    } else {
        DEFAULT_DATABASE.to_owned()
    }
}

/// The fleet's ID layout (Pinterest's without `id_layout`); each problem
/// is reported on the line of the field it concerns.
fn check_layout(
    name: &str,
    fc: &FleetConfig,
    count: u32,
    lines: &LineIndex,
    errors: &mut Errors,
) -> IdLayout {
    let Some(config) = &fc.id_layout else {
        return IdLayout::pinterest();
    };
    let at = |field: Option<&str>| {
        let mut path = vec!["fleets", name, "id_layout"];
        if let Some(field) = field {
            path.extend(["fields", field]);
        }
        lines.line(&path)
    };
    let mut fields = Vec::new();
    for (field, fc) in &config.fields {
        match FieldName::parse(field) {
            Some(n) => fields.push(Field {
                name: n,
                shift: fc.shift,
                bits: fc.bits,
            }),
            None => errors.push(
                at(Some(field)),
                format!(
                    "fleet {name}: id_layout field `{field}` is not one of shard, type, local, time_ms, sequence"
                ),
            ),
        }
    }
    let layout = IdLayout::new(fields, config.epoch_ms);
    for problem in layout.check(count) {
        errors.push(
            at(problem.field.map(FieldName::as_str)),
            format!("fleet {name}: id_layout: {}", problem.message),
        );
    }
    layout
}

fn shard_span(first: u32, last: u32) -> String {
    if first == last {
        format!("shard {first}")
    } else {
        format!("shards {first}-{last}")
    }
}

fn gap_message(fleet: &str, first: u32, last: u32) -> String {
    if first == last {
        format!("shard {first} of fleet {fleet} has no host")
    } else {
        format!("shards {first}-{last} of fleet {fleet} have no host")
    }
}

/// Validates one fleet; returns it (host ids still unset) when it is sound.
pub(super) fn check_fleet(
    name: &str,
    fc: &FleetConfig,
    database: &str,
    lines: &LineIndex,
    errors: &mut Errors,
) -> Option<(Fleet, Vec<usize>)> {
    let fleet_line = lines.line(&["fleets", name]);
    let before = errors.list.len();
    let max_count = MAX_SHARD + 1;
    let count_ok = (1..=max_count).contains(&fc.shards);
    if !count_ok {
        errors.push(
            lines.line(&["fleets", name, "shards"]),
            format!(
                "fleet {name}: shards is {}; it must be 1-{max_count}",
                fc.shards
            ),
        );
    }
    let format = match parse_format(database) {
        Ok(format) => {
            if count_ok && format.width > 0 {
                let needed = digits(fc.shards - 1);
                if needed > format.width {
                    errors.push(
                        lines.line(&["fleets", name, "database"]),
                        format!(
                            "fleet {name}: database format `{database}` is too narrow for {} shards: shard {} needs {needed} digits",
                            fc.shards,
                            fc.shards - 1
                        ),
                    );
                }
            }
            Some(format)
        }
        Err(why) => {
            errors.push(
                lines.line(&["fleets", name, "database"]),
                format!("fleet {name}: database format `{database}` {why}"),
            );
            None
        }
    };
    let count = if count_ok { fc.shards } else { max_count };

    if let Some([first, last]) = fc.open {
        if first > last || last >= count {
            errors.push(
                lines.line(&["fleets", name, "open"]),
                format!(
                    "fleet {name}: open [{first}, {last}] must be a range inside 0-{}",
                    count - 1
                ),
            );
        }
    }

    if fc.hosts.is_empty() {
        errors.push(
            fleet_line,
            format!(
                "fleet {name} has no hosts; add `hosts: [{{ range: [0, {}], master: host:port }}]`",
                count - 1
            ),
        );
    }
    let mut usable: Vec<(u32, u32, usize)> = Vec::new();
    for (i, host) in fc.hosts.iter().enumerate() {
        let item = format!("#{i}");
        let line = lines.line(&["fleets", name, "hosts", &item]);
        let [first, last] = host.range;
        if first > last {
            errors.push(
                line,
                format!(
                    "fleet {name}: range [{first}, {last}] is reversed; write [{last}, {first}]"
                ),
            );
        } else if last >= count {
            errors.push(
                line,
                format!(
                    "fleet {name}: range [{first}, {last}] goes beyond the fleet's {count} shards (last shard is {})",
                    count - 1
                ),
            );
            if first < count {
                usable.push((first, count - 1, i));
            }
        } else {
            usable.push((first, last, i));
        }
        if host.master.is_empty() {
            errors.push(
                line,
                format!("fleet {name}: range [{first}, {last}] has no master"),
            );
        } else if let Err(e) = check_address(&host.master, false) {
            errors.push(line, format!("fleet {name}: master: {e}"));
        }
        if let Some(replica) = &host.replica {
            if let Err(e) = check_address(replica, false) {
                errors.push(line, format!("fleet {name}: replica: {e}"));
            } else if *replica == host.master {
                errors.push(
                    line,
                    format!("fleet {name}: replica {replica} is the same host as the master"),
                );
            }
        }
    }

    usable.sort_by_key(|&(first, last, _)| (first, last));
    let hosts_line = lines.line(&["fleets", name, "hosts"]);
    let mut next = 0u32;
    let mut prev: Option<(u32, u32, usize)> = None;
    for &(first, last, i) in &usable {
        if let Some((pfirst, plast, pi)) = prev {
            if first <= plast {
                let pline = lines.line(&["fleets", name, "hosts", &format!("#{pi}")]);
                errors.push(
                    lines.line(&["fleets", name, "hosts", &format!("#{i}")]),
                    format!(
                        "fleet {name}: range [{first}, {last}] overlaps range [{pfirst}, {plast}] on line {pline} ({} on both)",
                        shard_span(first, last.min(plast))
                    ),
                );
            }
        }
        if first > next {
            errors.push(hosts_line, gap_message(name, next, first - 1));
        }
        next = next.max(last.saturating_add(1));
        if prev.is_none_or(|(_, plast, _)| last > plast) {
            prev = Some((first, last, i));
        }
    }
    if next < count && !usable.is_empty() {
        errors.push(hosts_line, gap_message(name, next, count - 1));
    }

    let layout = check_layout(name, fc, count, lines, errors);

    if errors.list.len() != before {
        return None;
    }
    let format = format?;
    let order: Vec<usize> = usable.iter().map(|&(_, _, i)| i).collect();
    let fleet = Fleet {
        name: name.to_owned(),
        shard_count: fc.shards,
        database: format,
        open: fc.open.map(|[a, b]| (a, b)),
        ranges: usable
            .iter()
            .map(|&(first, last, _)| HostRange {
                first,
                last,
                master: 0,
                replica: None,
            })
            .collect(),
        layout,
    };
    Some((fleet, order))
}

pub(super) fn intern_hosts(
    (mut fleet, order): (Fleet, Vec<usize>),
    fc: &FleetConfig,
    hosts: &mut Vec<Host>,
    host_ids: &mut HashMap<String, HostId>,
) -> Fleet {
    let mut intern = |addr: &str| -> HostId {
        *host_ids.entry(addr.to_owned()).or_insert_with(|| {
            hosts.push(Host {
                addr: addr.to_owned(),
            });
            hosts.len() - 1
        })
    };
    for (range, &i) in fleet.ranges.iter_mut().zip(&order) {
        let host = &fc.hosts[i];
        range.master = intern(&host.master);
        range.replica = host.replica.as_deref().map(&mut intern);
    }
    fleet
}

fn digits(mut n: u32) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Two fleets whose database names could be the same string are ambiguous.
pub(super) fn check_format_collisions(fleets: &[Fleet], lines: &LineIndex, errors: &mut Errors) {
    for (i, a) in fleets.iter().enumerate() {
        for b in &fleets[i + 1..] {
            if formats_collide(a, b) {
                errors.push(
                    lines.line(&["fleets", &b.name, "database"]),
                    format!(
                        "fleets {} and {} have database names that can be the same ({} and {}); give them different `database` formats",
                        a.name,
                        b.name,
                        a.database_name(0),
                        b.database_name(0)
                    ),
                );
            }
        }
    }
}

fn formats_collide(a: &Fleet, b: &Fleet) -> bool {
    let widths = |f: &Fleet| -> Vec<usize> {
        let max = digits(f.shard_count.saturating_sub(1));
        if f.database.width > 0 {
            vec![f.database.width.max(max)]
        } else {
            (1..=max).collect()
        }
    };
    let pattern = |f: &DatabaseFormat, w: usize| -> Vec<Option<u8>> {
        f.prefix
            .bytes()
            .map(|c| Some(c.to_ascii_lowercase()))
            .chain(std::iter::repeat_n(None, w))
            .chain(f.suffix.bytes().map(|c| Some(c.to_ascii_lowercase())))
            .collect()
    };
    widths(a).into_iter().any(|wa| {
        widths(b).into_iter().any(|wb| {
            let pa = pattern(&a.database, wa);
            let pb = pattern(&b.database, wb);
            pa.len() == pb.len()
                && pa.iter().zip(&pb).all(|(x, y)| match (x, y) {
                    (Some(x), Some(y)) => x == y,
                    (Some(c), None) | (None, Some(c)) => c.is_ascii_digit(),
                    (None, None) => true,
                })
        })
    })
}
