//! Edits of the config file's text that keep the operator's comments and
//! layout: the master/replica swap written by `PROMOTE REPLICA`, and the
//! split of a host entry written by `MOVE SHARDS` ([`move_shards`]).
//!
//! Only the `master:` and `replica:` values of the host entries concerned
//! change (plus a comment line above each entry saying what happened). The
//! edited text is parsed again and must yield exactly the intended
//! [`Config`]; when it does not, or when an entry is written in a shape the
//! edit does not handle, nothing is produced and the error says how to make
//! the change by hand.

mod moves;

use std::ops::Range;

use super::config::Config;
use super::lines::LineIndex;
use super::validate::{self, ConfigErrors};

pub use moves::{move_in_config, move_shards, Moved, MovedRange};

/// One host entry whose replica became its master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotedEntry {
    /// Fleet of the entry.
    pub fleet: String,
    /// First shard of the entry's range.
    pub first: u32,
    /// Last shard of the entry's range.
    pub last: u32,
    /// The former master, as written.
    pub master: String,
    /// The former replica, now the master.
    pub replica: String,
}

impl std::fmt::Display for PromotedEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "fleet {} shards {}-{} promoted from {} to {}",
            self.fleet, self.first, self.last, self.master, self.replica
        )
    }
}

/// The edited config text and what it now says.
#[derive(Debug, Clone)]
pub struct Promoted {
    /// The new file text.
    pub text: String,
    /// The config the new text parses to (checked equal to the intended one).
    pub config: Config,
    /// The entries changed, in file order of their fleets.
    pub entries: Vec<PromotedEntry>,
}

/// Why the config text could not be edited.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    /// The text does not parse.
    #[error("the config file does not parse:\n{0}")]
    Invalid(ConfigErrors),
    /// No host entry has this master.
    #[error("{master} is not the master of any shard range (masters: {})", masters.join(", "))]
    NotAMaster {
        /// The address asked for.
        master: String,
        /// Every master the file names.
        masters: Vec<String>,
    },
    /// An entry of the master has no replica.
    #[error("fleet {fleet}: shards {first}-{last} on master {master} have no replica to promote")]
    NoReplica {
        /// Fleet of the entry.
        fleet: String,
        /// First shard of the entry.
        first: u32,
        /// Last shard of the entry.
        last: u32,
        /// The master.
        master: String,
    },
    /// An entry is written in a shape this edit does not handle.
    #[error(
        "cannot edit the host entry for shards {first}-{last} of fleet {fleet} (line {line}) \
         automatically: {why}. Edit it by hand (`master: {replica}`, no `replica:`) and reload"
    )]
    Unsupported {
        /// Fleet of the entry.
        fleet: String,
        /// First shard of the entry.
        first: u32,
        /// Last shard of the entry.
        last: u32,
        /// Line of the entry (0 when it could not be found).
        line: usize,
        /// What is in the way.
        why: String,
        /// The replica that should become the master.
        replica: String,
    },
    /// A `MOVE SHARDS` that cannot be written (unknown fleet, a range not
    /// inside one host entry, the shards already on the target).
    #[error("cannot move shards {first}-{last} of fleet {fleet}: {why}")]
    NotMovable {
        /// Fleet asked for.
        fleet: String,
        /// First shard asked for.
        first: u32,
        /// Last shard asked for.
        last: u32,
        /// Why.
        why: String,
    },
    /// The edited text would not load as the intended config.
    #[error(
        "the edited config file would not load as intended ({why}), so it was not written; \
         edit the host entries by hand (master = the replica, no replica) and reload"
    )]
    Unproven {
        /// How it differs.
        why: String,
    },
}

/// Whether two `host:port` addresses name the same server as the config
/// compares them: the text as written, ignoring surrounding spaces and the
/// case of a host name.
pub fn same_address(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Rewrites `text` so every host entry whose master is `master` has its
/// replica as master and no replica. `source` names the file in errors.
pub fn promote_replica(text: &str, source: &str, master: &str) -> Result<Promoted, RewriteError> {
    let (config, lines) = validate::parse(text, source).map_err(RewriteError::Invalid)?;
    let (intended, edits) = plan(&config, master)?;
    let mut file = TextLines::split(text);
    let mut located = edits
        .iter()
        .map(|edit| locate(edit, &lines).map(|at| (at, edit)))
        .collect::<Result<Vec<_>, _>>()?;
    located.sort_by_key(|(at, _)| std::cmp::Reverse(at.item));
    for (at, edit) in located {
        apply(&mut file, &at, edit)?;
    }
    let text = file.join();
    let config = prove(&text, source, &intended)?;
    Ok(Promoted {
        text,
        config,
        entries: edits.into_iter().map(|e| e.entry).collect(),
    })
}

/// The same change on a config in memory: every entry whose master is
/// `master` gets its replica as master and no replica.
pub fn promote_in_config(
    config: &Config,
    master: &str,
) -> Result<(Config, Vec<PromotedEntry>), RewriteError> {
    let (intended, edits) = plan(config, master)?;
    Ok((intended, edits.into_iter().map(|e| e.entry).collect()))
}

fn plan(config: &Config, master: &str) -> Result<(Config, Vec<Edit>), RewriteError> {
    let mut intended = config.clone();
    let mut edits = Vec::new();
    for (fleet, fc) in intended.fleets.iter_mut() {
        for (index, host) in fc.hosts.iter_mut().enumerate() {
            if !same_address(&host.master, master) {
                continue;
            }
            let [first, last] = host.range;
            let Some(replica) = host.replica.take() else {
                return Err(RewriteError::NoReplica {
                    fleet: fleet.clone(),
                    first,
                    last,
                    master: host.master.clone(),
                });
            };
            let old_master = std::mem::replace(&mut host.master, replica.clone());
            edits.push(Edit {
                entry: PromotedEntry {
                    fleet: fleet.clone(),
                    first,
                    last,
                    master: old_master,
                    replica,
                },
                index,
            });
        }
    }
    if edits.is_empty() {
        let mut masters: Vec<String> = config
            .fleets
            .values()
            .flat_map(|fc| fc.hosts.iter().map(|h| h.master.clone()))
            .collect();
        masters.sort();
        masters.dedup();
        return Err(RewriteError::NotAMaster {
            master: master.trim().to_owned(),
            masters,
        });
    }
    Ok((intended, edits))
}

/// Parses `text` and checks it is exactly `intended`.
fn prove(text: &str, source: &str, intended: &Config) -> Result<Config, RewriteError> {
    let (config, lines) =
        validate::parse(text, source).map_err(|errors| RewriteError::Unproven {
            why: format!("it does not parse: {errors}"),
        })?;
    if let Some(dup) = lines.duplicates().first() {
        return Err(RewriteError::Unproven {
            why: format!(
                "key `{}` would be written twice (line {})",
                dup.key, dup.line
            ),
        });
    }
    if config != *intended {
        return Err(RewriteError::Unproven {
            why: describe_difference(&config, intended),
        });
    }
    Ok(config)
}

fn describe_difference(got: &Config, intended: &Config) -> String {
    let fleets: Vec<&String> = intended
        .fleets
        .iter()
        .filter(|(name, fc)| got.fleets.get(*name) != Some(*fc))
        .map(|(name, _)| name)
        .collect();
    if fleets.is_empty() {
        "a section other than `fleets` would change".to_owned()
    } else {
        let names: Vec<&str> = fleets.iter().map(|s| s.as_str()).collect();
        format!("the hosts of fleet {} would differ", names.join(", "))
    }
}

struct Edit {
    entry: PromotedEntry,
    index: usize,
}

impl Edit {
    fn unsupported(&self, line: usize, why: impl Into<String>) -> RewriteError {
        RewriteError::Unsupported {
            fleet: self.entry.fleet.clone(),
            first: self.entry.first,
            last: self.entry.last,
            line,
            why: why.into(),
            replica: self.entry.replica.clone(),
        }
    }
}

/// 1-based lines of one host entry.
struct Located {
    item: usize,
    master: Option<usize>,
    replica: Option<usize>,
}

fn locate(edit: &Edit, lines: &LineIndex) -> Result<Located, RewriteError> {
    let item = format!("#{}", edit.index);
    let path = ["fleets", edit.entry.fleet.as_str(), "hosts", item.as_str()];
    let Some(line) = lines.exact_line(&path) else {
        let near = lines.line(&path[..3]);
        return Err(edit.unsupported(
            near,
            "the `hosts` list is not written one `- ` item per entry",
        ));
    };
    let key = |k: &str| lines.exact_line(&[path[0], path[1], path[2], path[3], k]);
    Ok(Located {
        item: line,
        master: key("master"),
        replica: key("replica"),
    })
}

fn apply(file: &mut TextLines, at: &Located, edit: &Edit) -> Result<(), RewriteError> {
    let item_text = file.content(at.item).to_owned();
    let body = after_item_markers(&item_text);
    if item_text[body..].starts_with('{') {
        let edited =
            edit_flow_entry(&item_text, body).map_err(|why| edit.unsupported(at.item, why))?;
        file.set(at.item, edited);
    } else {
        let (Some(master_line), Some(replica_line)) = (at.master, at.replica) else {
            return Err(edit.unsupported(
                at.item,
                "its `master:` and `replica:` are not each on a line of their own",
            ));
        };
        if replica_line == at.item {
            return Err(edit.unsupported(at.item, "`replica:` is the entry's first key"));
        }
        let replica_text = file.content(replica_line).to_owned();
        let replica_value = block_value(&replica_text, "replica").ok_or_else(|| {
            edit.unsupported(
                replica_line,
                "its `replica:` value is not a plain one-line value",
            )
        })?;
        let master_text = file.content(master_line).to_owned();
        let master_value = block_value(&master_text, "master").ok_or_else(|| {
            edit.unsupported(
                master_line,
                "its `master:` value is not a plain one-line value",
            )
        })?;
        let mut edited = master_text.clone();
        edited.replace_range(master_value, &replica_text[replica_value]);
        file.set(master_line, edited);
        file.remove(replica_line);
    }
    let indent = &item_text[..item_text.len() - item_text.trim_start_matches(' ').len()];
    file.insert(
        at.item,
        format!(
            "{indent}# PROMOTE REPLICA {}: its replica {} became the master of shards {}-{} (written by shardgate)",
            edit.entry.master, edit.entry.replica, edit.entry.first, edit.entry.last
        ),
    );
    Ok(())
}

/// Byte offset after the indentation and the `- ` markers of a line.
fn after_item_markers(line: &str) -> usize {
    let mut at = line.len() - line.trim_start_matches(' ').len();
    while line[at..].starts_with("- ") {
        at += 1;
        at += line[at..].len() - line[at..].trim_start_matches(' ').len();
    }
    at
}

/// The range of `key`'s value on a block-style line (`  key: value  # c`).
fn block_value(line: &str, key: &str) -> Option<Range<usize>> {
    let start = after_item_markers(line);
    let rest = &line[start..];
    let after_key = strip_key(rest, key)?;
    let colon = start + (rest.len() - after_key.len());
    let after = after_key.strip_prefix(':')?;
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let value_start = colon + 1 + (after.len() - after.trim_start().len());
    let tail = &line[value_start..];
    let end = tail.find(" #").unwrap_or(tail.len());
    let value = tail[..end].trim_end();
    if value.is_empty() || value.starts_with(['|', '>', '&', '*', '!', '{', '[']) {
        return None;
    }
    Some(value_start..value_start + value.len())
}

/// `text` after a leading `key` (plain or quoted) and spaces, if it starts so.
fn strip_key<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = ["\"", "'", ""].iter().find_map(|quote| {
        text.strip_prefix(quote)?
            .strip_prefix(key)?
            .strip_prefix(quote)
    })?;
    Some(rest.trim_start_matches([' ', '\t']))
}

/// Rewrites a one-line flow entry `- { range: .., master: M, replica: R }`
/// (the mapping starts at byte `open`): `master: R`, no `replica`.
fn edit_flow_entry(line: &str, open: usize) -> Result<String, String> {
    let close =
        matching_brace(line, open).ok_or("its `{ ... }` mapping does not end on the same line")?;
    let inner = &line[open + 1..close];
    let trailing = &inner[inner.trim_end().len()..];
    let mut segments: Vec<String> = split_top_level(inner.trim_end())
        .into_iter()
        .map(str::to_owned)
        .collect();
    let find = |segments: &[String], key: &str| -> Result<usize, String> {
        let mut found = segments.iter().enumerate().filter(|(_, s)| {
            strip_key(s.trim_start(), key).is_some_and(|rest| rest.starts_with(':'))
        });
        match (found.next(), found.next()) {
            (Some((i, _)), None) => Ok(i),
            (None, _) => Err(format!(
                "its `{key}:` was not found in the `{{ ... }}` mapping"
            )),
            (Some(_), Some(_)) => Err(format!("`{key}:` is written twice")),
        }
    };
    let master = find(&segments, "master")?;
    let replica = find(&segments, "replica")?;
    let replica_value = flow_value(&segments[replica], "replica")
        .map(|range| segments[replica][range].to_owned())
        .ok_or("its `replica:` has no value")?;
    let master_range =
        flow_value(&segments[master], "master").ok_or("its `master:` has no value")?;
    segments[master].replace_range(master_range, &replica_value);
    segments.remove(replica);
    if replica == 0 {
        if let Some(first) = segments.first_mut() {
            let lead = &inner[..inner.len() - inner.trim_start().len()];
            *first = format!("{lead}{}", first.trim_start());
        }
    }
    Ok(format!(
        "{}{}{trailing}{}",
        &line[..=open],
        segments.join(","),
        &line[close..]
    ))
}

/// The range of `key`'s value in a flow mapping segment (` key: value `).
fn flow_value(segment: &str, key: &str) -> Option<Range<usize>> {
    let after_key = strip_key(segment.trim_start(), key)?;
    let after = after_key.strip_prefix(':')?;
    let start = segment.len() - after.trim_start().len();
    let end = segment.trim_end().len();
    (start < end).then_some(start..end)
}

/// The byte offset of the `}` closing the `{` at `open`, on this line.
fn matching_brace(line: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in line[open..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '{' | '[') => depth += 1,
            (None, '}' | ']') => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (c == '}').then_some(open + i);
                }
            }
            (None, '#') if line[..open + i].ends_with(' ') => return None,
            _ => {}
        }
    }
    None
}

/// Splits at the commas outside brackets and quotes.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '{' | '[') => depth += 1,
            (None, '}' | ']') => depth = depth.saturating_sub(1),
            (None, ',') if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The file as lines, each with its own line ending.
struct TextLines {
    lines: Vec<(String, String)>,
}

impl TextLines {
    fn split(text: &str) -> Self {
        let lines = text
            .split_inclusive('\n')
            .map(|line| {
                let content = line.trim_end_matches(['\n', '\r']);
                (content.to_owned(), line[content.len()..].to_owned())
            })
            .collect();
        Self { lines }
    }

    fn ending(&self) -> String {
        self.lines
            .first()
            .map(|(_, end)| end.clone())
            .filter(|end| !end.is_empty())
            .unwrap_or_else(|| "\n".to_owned())
    }

    fn content(&self, line: usize) -> &str {
        self.lines
            .get(line.wrapping_sub(1))
            .map_or("", |(content, _)| content.as_str())
    }

    fn set(&mut self, line: usize, content: String) {
        if let Some(entry) = self.lines.get_mut(line.wrapping_sub(1)) {
            entry.0 = content;
        }
    }

    fn remove(&mut self, line: usize) {
        if (1..=self.lines.len()).contains(&line) {
            self.lines.remove(line - 1);
        }
    }

    fn insert(&mut self, line: usize, content: String) {
        let ending = self.ending();
        let at = line.saturating_sub(1).min(self.lines.len());
        self.lines.insert(at, (content, ending));
    }

    fn join(&self) -> String {
        self.lines
            .iter()
            .flat_map(|(content, end)| [content.as_str(), end.as_str()])
            .collect()
    }
}

#[cfg(test)]
mod tests;
