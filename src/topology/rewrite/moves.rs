//! The config edit written by `MOVE SHARDS a-b TO host`: the host entry
//! holding the range is split around it, and the moved part gets the new
//! master.
//!
//! The entry's own lines are replaced by one `- { range: .., master: .. }`
//! line per part, under a comment saying what happened; every other line
//! (the operator's comments included) stays as written. The new text must
//! parse to exactly the intended config, as for a promotion.

use super::super::config::{Config, HostConfig};
use super::super::validate;
use super::{after_item_markers, prove, same_address, RewriteError, TextLines};

/// A shard range given a new master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedRange {
    /// Fleet of the range.
    pub fleet: String,
    /// First shard moved.
    pub first: u32,
    /// Last shard moved.
    pub last: u32,
    /// The master the shards were on, as written.
    pub from: String,
    /// The new master, as asked.
    pub to: String,
    /// The range of the host entry the shards came from.
    pub entry: [u32; 2],
    /// The entry's replica when it is the new master: dropped from the
    /// parts of the entry that stay on the old master.
    pub replica_dropped: Option<String>,
}

/// The edited config text and what it now says.
#[derive(Debug, Clone)]
pub struct Moved {
    /// The new text.
    pub text: String,
    /// The config the new text parses to (checked equal to the intended one).
    pub config: Config,
    /// What moved.
    pub moved: MovedRange,
}

/// Rewrites `text` so shards `first..=last` of `fleet` have `target` as
/// master: the one host entry holding them is replaced by up to three
/// entries (the part before, the moved part, the part after). `source`
/// names the text in errors.
pub fn move_shards(
    text: &str,
    source: &str,
    fleet: &str,
    first: u32,
    last: u32,
    target: &str,
) -> Result<Moved, RewriteError> {
    let (config, lines) = validate::parse(text, source).map_err(RewriteError::Invalid)?;
    let split = plan(&config, fleet, first, last, target)?;
    let item = format!("#{}", split.index);
    let path = ["fleets", fleet, "hosts", item.as_str()];
    let unsupported = |line: usize, why: &str| RewriteError::NotMovable {
        fleet: fleet.to_owned(),
        first,
        last,
        why: format!(
            "the host entry at line {line} cannot be edited automatically ({why}); \
             split it by hand into the ranges {} and reload",
            describe_parts(&split.parts)
        ),
    };
    let Some(at) = lines.exact_line(&path) else {
        return Err(unsupported(
            lines.line(&path[..3]),
            "the `hosts` list is not written one `- ` item per entry",
        ));
    };
    let mut file = TextLines::split(text);
    let first_line = file.content(at).to_owned();
    let body = after_item_markers(&first_line);
    let dash = first_line.len() - first_line.trim_start_matches(' ').len();
    if !first_line[dash..].starts_with('-') || first_line[dash + 1..body].contains('-') {
        return Err(unsupported(at, "the entry is not a single `- ` list item"));
    }
    let indent = first_line[..dash].to_owned();
    let extent = item_extent(&file, at, dash);
    let mut kept_comments = Vec::new();
    for line in at + 1..=extent {
        let content = file.content(line);
        if content.trim_start().starts_with('#') {
            kept_comments.push(content.to_owned());
        }
    }
    let trailing = if extent == at {
        trailing_comment(&first_line)
    } else {
        None
    };
    let moved = &split.moved;
    let mut replacement = vec![format!(
        "{indent}# MOVE SHARDS {}-{}: from {} to {} (entry {}-{} split, written by shardgate)",
        moved.first, moved.last, moved.from, moved.to, moved.entry[0], moved.entry[1]
    )];
    replacement.extend(kept_comments);
    for (n, part) in split.parts.iter().enumerate() {
        let mut line = format!("{indent}- {}", flow_entry(part));
        if n == 0 {
            if let Some(comment) = trailing {
                line.push_str("   ");
                line.push_str(comment);
            }
        }
        replacement.push(line);
    }
    for line in (at..=extent).rev() {
        file.remove(line);
    }
    for line in replacement.into_iter().rev() {
        file.insert(at, line);
    }
    let text = file.join();
    let config = prove(&text, source, &split.intended)?;
    Ok(Moved {
        text,
        config,
        moved: split.moved,
    })
}

/// The same change on a config in memory.
pub fn move_in_config(
    config: &Config,
    fleet: &str,
    first: u32,
    last: u32,
    target: &str,
) -> Result<(Config, MovedRange), RewriteError> {
    let split = plan(config, fleet, first, last, target)?;
    Ok((split.intended, split.moved))
}

/// The intended config and the entries replacing the one split.
struct Split {
    intended: Config,
    moved: MovedRange,
    index: usize,
    parts: Vec<HostConfig>,
}

fn plan(
    config: &Config,
    fleet: &str,
    first: u32,
    last: u32,
    target: &str,
) -> Result<Split, RewriteError> {
    let refuse = |why: String| RewriteError::NotMovable {
        fleet: fleet.to_owned(),
        first,
        last,
        why,
    };
    let Some(fc) = config.fleets.get(fleet) else {
        let names: Vec<&str> = config.fleets.keys().map(String::as_str).collect();
        return Err(refuse(format!(
            "there is no fleet {fleet} (fleets: {})",
            names.join(", ")
        )));
    };
    if first > last {
        return Err(refuse(format!("{first} is after {last}")));
    }
    if last >= fc.shards {
        return Err(refuse(format!(
            "the fleet has shards 0-{}",
            fc.shards.saturating_sub(1)
        )));
    }
    let target = target.trim();
    if target.is_empty() {
        return Err(refuse("no target host given".to_owned()));
    }
    let Some(index) = fc
        .hosts
        .iter()
        .position(|h| h.range[0] <= first && last <= h.range[1])
    else {
        let entries: Vec<String> = fc
            .hosts
            .iter()
            .filter(|h| h.range[0] <= last && first <= h.range[1])
            .map(|h| format!("{}-{} on {}", h.range[0], h.range[1], h.master))
            .collect();
        return Err(refuse(format!(
            "they are not inside one host entry (they overlap {}); move each entry's part on its own",
            if entries.is_empty() {
                "no entry".to_owned()
            } else {
                entries.join(", ")
            }
        )));
    };
    let entry = &fc.hosts[index];
    if same_address(&entry.master, target) {
        return Err(refuse(format!("their master is {target} already")));
    }
    let [entry_first, entry_last] = entry.range;
    let replica_is_target = entry
        .replica
        .as_deref()
        .is_some_and(|replica| same_address(replica, target));
    let staying = |range: [u32; 2]| HostConfig {
        range,
        master: entry.master.clone(),
        replica: if replica_is_target {
            None
        } else {
            entry.replica.clone()
        },
    };
    let mut parts = Vec::new();
    if entry_first < first {
        parts.push(staying([entry_first, first - 1]));
    }
    parts.push(HostConfig {
        range: [first, last],
        master: target.to_owned(),
        replica: None,
    });
    if last < entry_last {
        parts.push(staying([last + 1, entry_last]));
    }
    let keeps_old_master = parts.len() > 1;
    let moved = MovedRange {
        fleet: fleet.to_owned(),
        first,
        last,
        from: entry.master.clone(),
        to: target.to_owned(),
        entry: entry.range,
        replica_dropped: entry
            .replica
            .clone()
            .filter(|_| replica_is_target && keeps_old_master),
    };
    let mut intended = config.clone();
    if let Some(fc) = intended.fleets.get_mut(fleet) {
        fc.hosts.splice(index..=index, parts.iter().cloned());
    }
    Ok(Split {
        intended,
        moved,
        index,
        parts,
    })
}

/// The last line of the list item starting at `at` whose `-` is at column
/// `dash`: the lines after it indented deeper, up to the next line that is
/// not.
fn item_extent(file: &TextLines, at: usize, dash: usize) -> usize {
    let mut end = at;
    let mut line = at + 1;
    while line <= file.lines.len() {
        let content = file.content(line);
        let trimmed = content.trim_start_matches(' ');
        if trimmed.is_empty() {
            line += 1;
            continue;
        }
        if content.len() - trimmed.len() <= dash {
            break;
        }
        end = line;
        line += 1;
    }
    end
}

/// The ` # comment` ending a one-line entry, outside quotes and brackets.
fn trailing_comment(line: &str) -> Option<&str> {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') if previous == ' ' || previous == '\t' => return Some(&line[i..]),
            _ => {}
        }
        previous = c;
    }
    None
}

/// One host entry as a one-line flow mapping.
fn flow_entry(host: &HostConfig) -> String {
    let mut text = format!(
        "{{ range: [{}, {}], master: {}",
        host.range[0],
        host.range[1],
        scalar(&host.master)
    );
    if let Some(replica) = &host.replica {
        text.push_str(&format!(", replica: {}", scalar(replica)));
    }
    text.push_str(" }");
    text
}

/// An address as a YAML flow scalar: plain when it is only letters,
/// digits, `.`, `:`, `-` and `_`; double-quoted otherwise.
fn scalar(value: &str) -> String {
    let plain = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '-' | '_'));
    if plain {
        value.to_owned()
    } else {
        serde_json::Value::String(value.to_owned()).to_string()
    }
}

fn describe_parts(parts: &[HostConfig]) -> String {
    parts
        .iter()
        .map(|p| format!("{}-{} on {}", p.range[0], p.range[1], p.master))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
