//! The manual kept true, checked on the tree:
//! - every config key the config types accept is in
//!   `docs/reference/configuration.md` and every key listed there exists,
//!   and the defaults it gives for `backend`, `health`, `pause` and
//!   `limits` are the code's;
//! - every admin command the parser knows is in `docs/reference/admin.md`,
//!   and every one listed there exists; the same for the metric families
//!   of `/metrics` in `docs/reference/metrics.md`;
//! - every command of the command line (the `shardgate` root and each
//!   leaf subcommand clap knows) has a section in `docs/reference/cli.md`
//!   with each of its long flags, and every section and flag there exists;
//! - every relative link of README.md, ARCHITECTURE.md, BENCHMARKS.md,
//!   RELIABILITY.md and `docs/**/*.md` names an existing file (and heading);
//! - every decision record `docs/decisions/NNNN-*.md` has the shape of
//!   `docs/decisions/TEMPLATE.md` (a title, a `- Status:` line, then
//!   `## Context`, `## Decision`, `## Consequences`), a number of its own,
//!   and a link from `docs/decisions/README.md`.
//!
//! The accepted keys come from the serde types themselves: a deserializer
//! that answers every request with a sample value walks `Config` and
//! `Bootstrap` and records the path of every leaf it is asked for
//! (`fleets.<name>.hosts[].range`).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::Deserialize;

use crate::admin::parse::COMMANDS;
use crate::cli::Cli;
use crate::stats::{prometheus, Histogram, HostFigures, Stats};
use crate::topology::bootstrap::Bootstrap;
use crate::topology::config::Config;

type Keys = RefCell<BTreeSet<String>>;

/// The path step of an element of a fixed-size array.
const FIXED_ELEMENT: &str = "[#]";

#[derive(Debug)]
struct WalkError(String);

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

impl de::Error for WalkError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        WalkError(msg.to_string())
    }
}

/// A deserializer standing at `path`: a leaf records the path and yields a
/// sample; a struct yields each of its fields, a map one `<name>` entry, a
/// sequence one `[]` element.
struct Walker<'k> {
    path: String,
    keys: &'k Keys,
}

impl<'k> Walker<'k> {
    fn leaf(&self) {
        if self.path.contains(FIXED_ELEMENT) {
            return;
        }
        self.keys.borrow_mut().insert(self.path.clone());
    }

    fn child(&self, step: &str) -> Walker<'k> {
        let path = if self.path.is_empty() || step.starts_with('[') {
            format!("{}{step}", self.path)
        } else {
            format!("{}.{step}", self.path)
        };
        Walker {
            path,
            keys: self.keys,
        }
    }
}

macro_rules! leaf {
    ($($method:ident => $visit:ident($value:expr)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
            self.leaf();
            visitor.$visit($value)
        })*
    };
}

impl<'de, 'k> Deserializer<'de> for Walker<'k> {
    type Error = WalkError;

    leaf! {
        deserialize_any => visit_str("sample"),
        deserialize_str => visit_str("sample"),
        deserialize_string => visit_str("sample"),
        deserialize_identifier => visit_str("sample"),
        deserialize_bool => visit_bool(false),
        deserialize_u8 => visit_u8(1),
        deserialize_u16 => visit_u16(1),
        deserialize_u32 => visit_u32(1),
        deserialize_u64 => visit_u64(1),
        deserialize_i8 => visit_i8(1),
        deserialize_i16 => visit_i16(1),
        deserialize_i32 => visit_i32(1),
        deserialize_i64 => visit_i64(1),
        deserialize_f32 => visit_f32(1.0),
        deserialize_f64 => visit_f64(1.0),
        deserialize_char => visit_char('x'),
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        self.leaf();
        visitor.visit_unit()
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        self.leaf();
        visitor.visit_bytes(b"sample")
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        self.deserialize_tuple(1, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        if len > 1 {
            // A fixed-size array (`range: [a, b]`) is one key.
            self.leaf();
        }
        visitor.visit_seq(Elements {
            walker: self,
            left: len,
            fixed: len > 1,
        })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        let entry = self.child("<name>");
        visitor.visit_map(Fields {
            names: vec!["<name>"],
            next: 0,
            walker: self,
            entry: Some(entry),
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        visitor.visit_map(Fields {
            names: fields.to_vec(),
            next: 0,
            walker: self,
            entry: None,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, WalkError> {
        self.leaf();
        let first = variants.first().copied().unwrap_or_default();
        visitor.visit_enum(first.into_deserializer())
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, WalkError> {
        visitor.visit_unit()
    }
}

/// The elements of a walked sequence.
struct Elements<'k> {
    walker: Walker<'k>,
    left: usize,
    fixed: bool,
}

impl<'de, 'k> SeqAccess<'de> for Elements<'k> {
    type Error = WalkError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, WalkError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let walker = if self.fixed {
            // The elements of `[a, b]` are not keys of their own.
            self.walker.child(FIXED_ELEMENT)
        } else {
            self.walker.child("[]")
        };
        seed.deserialize(walker).map(Some)
    }
}

/// The fields of a walked struct, or the one entry of a walked map.
struct Fields<'k> {
    names: Vec<&'static str>,
    next: usize,
    walker: Walker<'k>,
    entry: Option<Walker<'k>>,
}

impl<'de, 'k> MapAccess<'de> for Fields<'k> {
    type Error = WalkError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, WalkError> {
        let Some(name) = self.names.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize((*name).into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, WalkError> {
        let name = self.names[self.next];
        self.next += 1;
        let walker = match &self.entry {
            Some(entry) => Walker {
                path: entry.path.clone(),
                keys: entry.keys,
            },
            None => self.walker.child(name),
        };
        seed.deserialize(walker)
    }
}

/// Every leaf key `T` accepts, as dotted paths.
fn accepted_keys<'de, T: Deserialize<'de>>() -> BTreeSet<String> {
    let keys = Keys::default();
    let walker = Walker {
        path: String::new(),
        keys: &keys,
    };
    if let Err(error) = T::deserialize(walker) {
        panic!("walking the config types failed: {error}");
    }
    keys.into_inner()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The cells of every table row of `text` under the heading that starts
/// with `heading`, up to the next heading of that level or higher (`\\|`
/// read as `|`, the header and separator rows included).
fn table_rows(text: &str, heading: &str) -> Vec<Vec<String>> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut inside = false;
    let mut rows = Vec::new();
    for line in text.lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes > 0 && line[hashes..].starts_with(' ') {
            if line.starts_with(heading) {
                inside = true;
                continue;
            }
            if hashes <= level {
                inside = false;
            }
        }
        if !inside || !line.starts_with('|') {
            continue;
        }
        let row = line.replace("\\|", "\u{0}");
        let cells = row.trim().trim_matches('|').split('|');
        rows.push(
            cells
                .map(|cell| cell.trim().replace('\u{0}', "|"))
                .collect(),
        );
    }
    rows
}

/// The first cell of every table row under `heading` (see [`table_rows`])
/// when it is one code span, its backticks removed.
fn first_cells(text: &str, heading: &str) -> BTreeSet<String> {
    table_rows(text, heading)
        .iter()
        .filter_map(|row| row.first())
        .filter_map(|cell| cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')))
        .map(str::to_owned)
        .collect()
}

fn compare(what: &str, code: &BTreeSet<String>, documented: &BTreeSet<String>, doc: &str) {
    let undocumented: Vec<_> = code.difference(documented).collect();
    let unknown: Vec<_> = documented.difference(code).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "{doc}: {what} in the code but not in the doc: {undocumented:?}; \
         in the doc but not in the code: {unknown:?}"
    );
}

const CONFIGURATION: &str = "docs/reference/configuration.md";
const ADMIN: &str = "docs/reference/admin.md";
const METRICS: &str = "docs/reference/metrics.md";
const CLI: &str = "docs/reference/cli.md";

#[test]
fn every_config_key_is_documented_and_every_documented_key_exists() {
    let text = read(CONFIGURATION);
    let config = accepted_keys::<Config>();
    assert!(config.contains("fleets.<name>.hosts[].range"), "{config:?}");
    assert!(config.contains("limits.max_merge_bytes"), "{config:?}");
    compare(
        "config keys",
        &config,
        &first_cells(&text, "## The config file"),
        CONFIGURATION,
    );
    compare(
        "bootstrap keys",
        &accepted_keys::<Bootstrap>(),
        &first_cells(&text, "## The bootstrap file"),
        CONFIGURATION,
    );
}

/// The config sections that are always there (not `Option`s): a default
/// documented for one of their keys is what an empty file gives.
const SECTIONS_WITH_DEFAULTS: &[&str] = &["backend", "health", "pause", "limits"];

#[test]
fn documented_defaults_are_the_code_defaults() {
    let text = read(CONFIGURATION);
    let mut sections: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in table_rows(&text, "## The config file") {
        let (Some(key), Some(default)) = (row.first(), row.get(1)) else {
            continue;
        };
        let Some((section, field)) = key.trim_matches('`').split_once('.') else {
            continue;
        };
        let value = default.split_whitespace().next().unwrap_or("");
        let scalar = value.parse::<u64>().is_ok() || value == "true" || value == "false";
        if SECTIONS_WITH_DEFAULTS.contains(&section) && scalar {
            sections
                .entry(section.to_owned())
                .or_default()
                .push(format!("  {field}: {value}"));
        }
    }
    let count: usize = sections.values().map(Vec::len).sum();
    assert!(count >= 20, "only {count} documented defaults found");
    let yaml: String = sections
        .iter()
        .map(|(section, fields)| format!("{section}:\n{}\n", fields.join("\n")))
        .collect();
    let documented: Config = serde_yaml::from_str(&yaml).unwrap_or_else(|e| {
        panic!("{CONFIGURATION}: the documented defaults do not parse: {e}\n{yaml}")
    });
    let empty: Config = serde_yaml::from_str("{}").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        documented.backend, empty.backend,
        "{CONFIGURATION}: backend defaults"
    );
    assert_eq!(
        documented.health, empty.health,
        "{CONFIGURATION}: health defaults"
    );
    assert_eq!(
        documented.pause, empty.pause,
        "{CONFIGURATION}: pause defaults"
    );
    assert_eq!(
        documented.limits, empty.limits,
        "{CONFIGURATION}: limits defaults"
    );
}

#[test]
fn every_admin_command_is_documented_and_every_documented_one_exists() {
    let code: BTreeSet<String> = COMMANDS.iter().map(|(form, _)| form.to_string()).collect();
    compare(
        "admin commands",
        &code,
        &first_cells(&read(ADMIN), "## Commands"),
        ADMIN,
    );
}

/// The metric families `/metrics` exports (its `# TYPE` lines), for one
/// host.
fn exported_families() -> BTreeSet<String> {
    let host = HostFigures {
        addr: "127.0.0.1:3307".to_owned(),
        statements: Histogram::new().snapshot(),
        up: true,
        check_latency: None,
        checks: 0,
        check_failures: 0,
        checkouts: 0,
        errors: 0,
        in_use: 0,
        idle: 0,
    };
    prometheus(&Stats::new(), &[host])
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_metric_is_documented_and_every_documented_one_exists() {
    let families = exported_families();
    assert!(families.contains("shardgate_host_up"), "{families:?}");
    let text = read(METRICS);
    // The first cell of each table row: one or more `name`s, comma-separated.
    let documented: BTreeSet<String> = text
        .lines()
        .filter(|line| line.starts_with('|'))
        .flat_map(|row| row.split('|').nth(1).unwrap_or("").split(','))
        .map(|name| name.trim().trim_matches('`').to_owned())
        .filter(|name| name.starts_with("shardgate_"))
        .collect();
    compare("metric families", &families, &documented, METRICS);
}

/// The commands of the command line, as `shardgate fleet move` (the root
/// and every command without subcommands of its own), each with its long
/// flags as `shardgate fleet move --dry-run`; the global flags belong to
/// the root.
fn cli_commands_and_flags() -> BTreeSet<String> {
    fn walk(command: &clap::Command, path: &str, out: &mut BTreeSet<String>) {
        let mut leaf = true;
        for sub in command.get_subcommands() {
            leaf = false;
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
        if leaf || path == "shardgate" {
            out.insert(path.to_owned());
            for long in command.get_arguments().filter_map(clap::Arg::get_long) {
                out.insert(format!("{path} --{long}"));
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(
        &<Cli as clap::CommandFactory>::command(),
        "shardgate",
        &mut out,
    );
    out
}

/// The commands `docs/reference/cli.md` documents (its `` ### `shardgate
/// ...` `` headings under `## Every command and flag`) and the long flags
/// of each (the lines of its section's help text that start with a flag),
/// as [`cli_commands_and_flags`] writes them; `--help` and `--version`,
/// which clap adds to every command, are left out.
fn documented_commands_and_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut inside = false;
    let mut command: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("## ") {
            inside = line == "## Every command and flag";
            command = None;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(heading) = line.strip_prefix("### ") {
            let name = heading.trim().trim_matches('`').to_owned();
            out.insert(name.clone());
            command = Some(name);
            continue;
        }
        let Some(command) = &command else { continue };
        let flag = line
            .trim_start()
            .split([',', ' ', '='])
            .find(|word| word.starts_with("--"));
        if line.trim_start().starts_with('-') {
            if let Some(flag) = flag.filter(|f| *f != "--help" && *f != "--version") {
                out.insert(format!("{command} {flag}"));
            }
        }
    }
    out
}

#[test]
fn every_cli_command_and_flag_is_documented_and_every_documented_one_exists() {
    let code = cli_commands_and_flags();
    assert!(
        code.contains("shardgate fleet migrate --concurrency-per-host")
            && code.contains("shardgate --zk-auth-file")
            && code.contains("shardgate config get"),
        "{code:?}"
    );
    compare(
        "commands and flags",
        &code,
        &documented_commands_and_flags(&read(CLI)),
        CLI,
    );
}

/// The anchor GitHub gives a heading: lower case, punctuation but `-` and
/// `_` dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings (outside code blocks), with
/// GitHub's `-1`, `-2` suffixes for repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || hashes == 0 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = anchor(&line[hashes..]);
        let mut name = base.clone();
        let mut n = 0;
        while seen.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        seen.insert(name);
    }
    seen
}

/// The targets of the inline links `](target)` of a markdown text, outside
/// code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = outside_code.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            found.push(rest[..end].trim().to_owned());
            rest = &rest[end..];
        }
    }
    found
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "BENCHMARKS.md",
        "RELIABILITY.md",
    ]
    .iter()
    .map(|name| root().join(name))
    .collect();
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// What is wrong with one link of `file`, if anything.
fn broken(file: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        file.parent().unwrap_or(Path::new(".")).join(path)
    };
    if !resolved.exists() {
        return Some(format!("{target}: no such file"));
    }
    let fragment = fragment?;
    if resolved.extension().is_some_and(|e| e == "md") {
        let text = fs::read_to_string(&resolved).ok()?;
        if !anchors(&text).contains(fragment) {
            return Some(format!("{target}: no heading with anchor #{fragment}"));
        }
    }
    None
}

#[test]
fn every_relative_link_resolves() {
    let files = markdown_files();
    assert!(files.len() > 10, "the docs tree is missing: {files:?}");
    let mut problems = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_default();
        for target in links(&text) {
            if let Some(problem) = broken(file, &target) {
                let shown = file.strip_prefix(root()).unwrap_or(file);
                problems.push(format!("{}: {problem}", shown.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn anchors_follow_github() {
    assert_eq!(
        anchor(" Cutover pause: `PAUSE SHARDS` / `RESUME SHARDS`"),
        "cutover-pause-pause-shards--resume-shards"
    );
    assert_eq!(
        anchors("# A\n## A\n```\n# not\n```\n"),
        BTreeSet::from(["a".to_owned(), "a-1".to_owned()])
    );
    assert_eq!(
        links("see [x](a.md#b) and `[y](no)`"),
        vec!["a.md#b".to_owned()]
    );
}

const DECISIONS: &str = "docs/decisions";

/// The `##` headings every decision record has, in this order.
const RECORD_SECTIONS: [&str; 3] = ["## Context", "## Decision", "## Consequences"];

/// Whether `name` is a decision record's file name: `NNNN-words.md`.
fn is_record(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > 8
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && name.ends_with(".md")
}

/// What keeps the decision record `text` (shown as `file`) from the
/// template's shape, one line per problem.
fn record_shape_problems(file: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    if !lines.next().is_some_and(|line| line.starts_with("# ")) {
        problems.push(format!(
            "{file}: the first line is not a `# <title>` heading"
        ));
    }
    let mut fenced = false;
    let mut found: Vec<(usize, &str)> = Vec::new();
    let mut status = None;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(heading) = RECORD_SECTIONS.iter().find(|h| line.trim_end() == **h) {
            found.push((number + 1, heading));
        }
        if status.is_none()
            && line
                .strip_prefix("- Status:")
                .is_some_and(|rest| !rest.trim().is_empty())
        {
            status = Some(number + 1);
        }
    }
    match status {
        None => problems.push(format!(
            "{file}: no `- Status: accepted (<date, commit>)` line under the title"
        )),
        Some(line) if found.first().is_some_and(|(first, _)| *first < line) => {
            problems.push(format!(
                "{file}: the `- Status:` line (line {line}) comes after `{}`, not under the title",
                found[0].1
            ))
        }
        Some(_) => {}
    }
    for heading in RECORD_SECTIONS {
        match found.iter().filter(|(_, h)| *h == heading).count() {
            0 => problems.push(format!("{file}: no `{heading}` heading")),
            1 => {}
            n => problems.push(format!("{file}: `{heading}` appears {n} times")),
        }
    }
    // Compared only when no heading repeats (a repeat is reported above).
    let order: Vec<&str> = found.iter().map(|(_, h)| *h).collect();
    let present: Vec<&str> = RECORD_SECTIONS
        .iter()
        .copied()
        .filter(|h| order.contains(h))
        .collect();
    if order.len() == present.len() && order != present {
        let at: Vec<String> = found
            .iter()
            .map(|(line, h)| format!("`{h}` (line {line})"))
            .collect();
        problems.push(format!(
            "{file}: the headings are out of order: {}; the order is {}",
            at.join(", "),
            RECORD_SECTIONS.join(", ")
        ));
    }
    problems
}

#[test]
fn every_decision_record_has_the_template_shape_and_is_listed() {
    let dir = root().join(DECISIONS);
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| is_record(name))
        .collect();
    names.sort();
    assert!(names.len() >= 31, "{DECISIONS}: only {names:?}");
    let index_name = format!("{DECISIONS}/README.md");
    let index = read(&index_name);
    let listed: BTreeSet<String> = links(&index)
        .into_iter()
        .map(|target| target.split('#').next().unwrap_or("").to_owned())
        .collect();
    let mut problems = Vec::new();
    let mut numbers: BTreeMap<&str, &str> = BTreeMap::new();
    for name in &names {
        let file = format!("{DECISIONS}/{name}");
        problems.extend(record_shape_problems(&file, &read(&file)));
        if !listed.contains(name.as_str()) {
            problems.push(format!(
                "{file}: not linked from {index_name} (add `- [{}]({name}) <title>`)",
                &name[..4]
            ));
        }
        if let Some(other) = numbers.insert(&name[..4], name) {
            problems.push(format!(
                "{file}: number {} is also {DECISIONS}/{other}; take the next free number",
                &name[..4]
            ));
        }
    }
    for target in links(&index) {
        if let Some(problem) = broken(&root().join(&index_name), &target) {
            problems.push(format!("{index_name}: {problem}"));
        }
    }
    assert!(
        problems.is_empty(),
        "decision records not in the shape of {DECISIONS}/TEMPLATE.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn record_shape_problems_name_what_is_missing() {
    let good = "# T\n\n- Status: accepted (2026-11-29, abc1234)\n\n## Context\n\nx\n\n\
                ## Decision\n\ny\n\n## Consequences\n\nz\n";
    assert_eq!(record_shape_problems("f.md", good), Vec::<String>::new());
    let old = "# T\n\n**T** is so.\n";
    assert_eq!(
        record_shape_problems("f.md", old),
        vec![
            "f.md: no `- Status: accepted (<date, commit>)` line under the title".to_owned(),
            "f.md: no `## Context` heading".to_owned(),
            "f.md: no `## Decision` heading".to_owned(),
            "f.md: no `## Consequences` heading".to_owned(),
        ]
    );
    let swapped = good
        .replace("## Context", "## Tmp")
        .replace("## Decision", "## Context");
    let swapped = swapped.replace("## Tmp", "## Decision");
    let problems = record_shape_problems("f.md", &swapped);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("out of order"), "{problems:?}");
    let fenced = good.replace("## Consequences", "```\n## Consequences\n```");
    assert_eq!(
        record_shape_problems("f.md", &fenced),
        vec!["f.md: no `## Consequences` heading".to_owned()]
    );
    assert!(is_record("0032-x.md") && !is_record("README.md") && !is_record("TEMPLATE.md"));
}
