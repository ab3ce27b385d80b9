//! The admin command parser: text in, [`Command`] out. Pure. Keywords are
//! case-insensitive; surrounding whitespace and trailing `;` are ignored.

use std::fmt;

use crate::ops::split::state::Phase;
use crate::stats::digest::DigestOrder;
use crate::stats::shards::ShardOrder;

/// Rows of `SHOW SHARD STATS` without `TOP`.
pub const DEFAULT_SHARD_STATS_TOP: usize = 20;

/// `SHOW SHARDS`.
pub const SHOW_SHARDS: &str = "SHOW SHARDS [LIKE '<pattern>']";
/// `SHOW SHARD`.
pub const SHOW_SHARD: &str = "SHOW SHARD <n> [IN <fleet>]";
/// `SHOW HOSTS`.
pub const SHOW_HOSTS: &str = "SHOW HOSTS";
/// `SHOW STATS`.
pub const SHOW_STATS: &str = "SHOW STATS";
/// `SHOW CONFIG`.
pub const SHOW_CONFIG: &str = "SHOW CONFIG";
/// `SHOW PROXIES`.
pub const SHOW_PROXIES: &str = "SHOW PROXIES";
/// `RELOAD CONFIG`.
pub const RELOAD_CONFIG: &str = "RELOAD CONFIG [FORCE]";
/// `EXPLAIN ROUTE`.
pub const EXPLAIN_ROUTE: &str = "EXPLAIN ROUTE <statement>";
/// `DECODE ID`.
pub const DECODE_ID: &str = "DECODE ID <id>";
/// `ENCODE ID`.
pub const ENCODE_ID: &str = "ENCODE ID <shard> <type> <local id>";
/// `DECODE ID ... IN fleet`.
pub const DECODE_ID_IN: &str = "DECODE ID <id> IN <fleet>";
/// `ENCODE ID ... IN fleet`.
pub const ENCODE_ID_IN: &str = "ENCODE ID <shard> <field 2> <field 3> IN <fleet>";
/// `PROMOTE REPLICA`.
pub const PROMOTE_REPLICA: &str = "PROMOTE REPLICA <master> [STOP REPLICATION]";
/// `PAUSE SHARDS`.
pub const PAUSE_SHARDS: &str = "PAUSE SHARDS <a>[-<b>] [IN <fleet>]";
/// `RESUME SHARDS`.
pub const RESUME_SHARDS: &str = "RESUME SHARDS <a>[-<b>] [IN <fleet>] [FORCE]";
/// `MOVE SHARDS`.
pub const MOVE_SHARDS: &str = "MOVE SHARDS <a>-<b> [IN <fleet>] TO <host:port> [DRY RUN]";
/// `VERIFY FLEET`.
pub const VERIFY_FLEET: &str = "VERIFY FLEET";
/// `VERIFY SHARDS ... ROWS AGAINST`.
pub const VERIFY_SHARDS_ROWS: &str =
    "VERIFY SHARDS <a>-<b> [IN <fleet>] ROWS AGAINST <host:port> [MAX <n> ROWS PER SECOND]";
/// `SPLIT SHARDS`.
pub const SPLIT_SHARDS: &str =
    "SPLIT SHARDS <a>-<b> [IN <fleet>] TO <host:port> [DRY RUN] [RESUME] \
     [MAX <n> ROWS PER SECOND] [KEEP MOVED] [GRACE <n> SECONDS] [STOP AFTER <phase>]";
/// `SHOW SPLITS`.
pub const SHOW_SPLITS: &str = "SHOW SPLITS";
/// `SHOW DIGESTS`.
pub const SHOW_DIGESTS: &str = "SHOW DIGESTS [ORDER BY <c>] [LIMIT <n>]";
/// `RESET DIGESTS`.
pub const RESET_DIGESTS: &str = "RESET DIGESTS";
/// `SHOW SHARD STATS`.
pub const SHOW_SHARD_STATS: &str = "SHOW SHARD STATS [TOP <n>] [ORDER BY <c>]";
/// `SHOW COMMANDS` / `HELP`.
pub const SHOW_COMMANDS: &str = "SHOW COMMANDS | HELP";

/// Every command the admin port accepts: its form and what it answers.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        SHOW_SHARDS,
        "every shard (or those whose number or database matches the pattern): fleet, shard, database, range, master, replica, master health, paused",
    ),
    (SHOW_SHARD, "one shard, a row per fleet that has it"),
    (
        SHOW_HOSTS,
        "every backend host: role, health, last check, pool use, queries, errors",
    ),
    (
        SHOW_STATS,
        "per statement kind and per host: count, errors, p50/p99 latency",
    ),
    (
        SHOW_DIGESTS,
        "per statement shape (literals masked), ORDER BY total_time (default), count, p99 or errors: count, errors, total/max/p50/p99 time, rows, shards, how it routed, first/last seen",
    ),
    (RESET_DIGESTS, "forget every statement digest"),
    (
        SHOW_SHARD_STATS,
        "the busiest virtual shards (default: top 20), ORDER BY statements (default), errors or time: statements, errors, time",
    ),
    (
        SHOW_CONFIG,
        "the config file in force, its version, the last reload and the paused ranges",
    ),
    (
        SHOW_PROXIES,
        "every proxy registered under the config znode: addresses, config version, whether it runs the znode's (a file-sourced proxy: itself)",
    ),
    (
        RELOAD_CONFIG,
        "re-read the config file and swap it in if valid; FORCE also loads one that re-homes existing data",
    ),
    (
        EXPLAIN_ROUTE,
        "where a statement would go and the SQL each shard would get",
    ),
    (DECODE_ID, "the shard, type and local id of a 64-bit ID"),
    (
        ENCODE_ID,
        "the 64-bit ID of a shard, a type (id or name from the config) and a local id",
    ),
    (DECODE_ID_IN, "the fields of a 64-bit ID in that fleet's id_layout"),
    (
        ENCODE_ID_IN,
        "the 64-bit ID of those fields in that fleet's id_layout (shard, time_ms, sequence for a time layout)",
    ),
    (
        PROMOTE_REPLICA,
        "point the ranges of a master (host:port) at its replica (config file rewritten)",
    ),
    (
        PAUSE_SHARDS,
        "new statements for those shards wait (bounded) while running ones finish",
    ),
    (RESUME_SHARDS, "release the statements waiting on paused shards"),
    (
        MOVE_SHARDS,
        "give shards a new master (a GTID replica of theirs): check, pause, catch up, write the map, resume; DRY RUN checks only",
    ),
    (
        VERIFY_FLEET,
        "every shard database on its master only, with the tables of the schema",
    ),
    (
        VERIFY_SHARDS_ROWS,
        "compare every row of the shards between their master and another server (a replica, a split target): a row per differing chunk with its keys",
    ),
    (
        SPLIT_SHARDS,
        "take shards of one master to an empty server in the background (prepare, copy, verify, cutover, cleanup; resumable from its state record): answers at once with the split's id; DRY RUN lists what it would do",
    ),
    (
        SHOW_SPLITS,
        "the splits started on this proxy: phase, progress, ETA, elapsed, last error, state record",
    ),
    (SHOW_COMMANDS, "this list"),
];

/// A shard range of `PAUSE SHARDS` / `RESUME SHARDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRange {
    /// First shard (inclusive).
    pub first: u32,
    /// Last shard (inclusive).
    pub last: u32,
    /// The fleet named with `IN`; `None` means every fleet.
    pub fleet: Option<String>,
}

/// One expression of a client's `SELECT` that the admin port answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectItem {
    /// `@@name` (a `session.`, `global.` or `local.` scope is dropped).
    Variable {
        /// Lower-case variable name.
        name: String,
        /// The expression as written (the column name).
        column: String,
    },
    /// `DATABASE()`, `USER()`, `VERSION()`, `CONNECTION_ID()`, ...
    Function {
        /// Lower-case function name.
        name: String,
        /// The expression as written (the column name).
        column: String,
    },
}

/// A parsed admin command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `SHOW COMMANDS` / `HELP`.
    Help,
    /// `SHOW SHARDS [LIKE 'pattern']`.
    ShowShards {
        /// The LIKE pattern, unquoted.
        like: Option<String>,
    },
    /// `SHOW SHARD n [IN fleet]`.
    ShowShard {
        /// Shard number.
        shard: u32,
        /// Fleet, if named.
        fleet: Option<String>,
    },
    /// `SHOW HOSTS`.
    ShowHosts,
    /// `SHOW STATS`.
    ShowStats,
    /// `SHOW DIGESTS [ORDER BY ...] [LIMIT n]`.
    ShowDigests {
        /// The order (descending).
        order: DigestOrder,
        /// Most rows.
        limit: Option<usize>,
    },
    /// `RESET DIGESTS`.
    ResetDigests,
    /// `SHOW SHARD STATS [TOP n] [ORDER BY ...]`.
    ShowShardStats {
        /// Most rows.
        top: usize,
        /// The order (descending).
        order: ShardOrder,
    },
    /// `SHOW CONFIG`.
    ShowConfig,
    /// `SHOW PROXIES`.
    ShowProxies,
    /// `RELOAD CONFIG [FORCE]`.
    ReloadConfig {
        /// `FORCE`: load a file even if it re-homes existing data.
        force: bool,
    },
    /// `EXPLAIN ROUTE <statement>`.
    ExplainRoute {
        /// The statement, as written.
        statement: String,
    },
    /// `DECODE ID n`.
    DecodeId {
        /// The 64-bit ID.
        id: u64,
    },
    /// `ENCODE ID shard type local`.
    EncodeId {
        /// Shard number (range-checked when encoding).
        shard: u64,
        /// Type id or type name, as written.
        object_type: String,
        /// Local id.
        local_id: u64,
    },
    /// `DECODE ID n IN fleet`: with that fleet's ID layout.
    DecodeIdIn {
        /// The 64-bit ID.
        id: u64,
        /// The fleet whose layout reads it.
        fleet: String,
    },
    /// `ENCODE ID a b c IN fleet`: shard, type, local id of a composed
    /// layout, or shard, time_ms, sequence of a time layout.
    EncodeIdIn {
        /// Shard number.
        shard: u64,
        /// Type (id or name) or time_ms, as written.
        second: String,
        /// Local id or sequence.
        third: u64,
        /// The fleet whose layout composes it.
        fleet: String,
    },
    /// `PROMOTE REPLICA <master> [STOP REPLICATION]`.
    PromoteReplica {
        /// The master's address as in the config.
        master: String,
        /// Stop replication on the promoted replica.
        stop_replication: bool,
    },
    /// `PAUSE SHARDS a-b [IN fleet]`.
    PauseShards(ShardRange),
    /// `RESUME SHARDS a-b [IN fleet] [FORCE]`.
    ResumeShards {
        /// The range.
        range: ShardRange,
        /// Resume also what a running cutover holds.
        force: bool,
    },
    /// `MOVE SHARDS a-b [IN fleet] TO host:port [DRY RUN]`.
    MoveShards {
        /// The shards (and the fleet, if named).
        range: ShardRange,
        /// The new master.
        target: String,
        /// Check and describe only.
        dry_run: bool,
    },
    /// `VERIFY FLEET`.
    VerifyFleet,
    /// `VERIFY SHARDS a-b [IN fleet] ROWS AGAINST host:port [MAX n ROWS PER SECOND]`.
    VerifyShardRows {
        /// The shards (and the fleet, if named).
        range: ShardRange,
        /// The server compared with the shards' master.
        against: String,
        /// Source rows read per second at most (0: no limit); `None`: the default.
        max_rows_per_second: Option<u64>,
    },
    /// `SPLIT SHARDS a-b [IN fleet] TO host:port [options]`.
    SplitShards(SplitCommand),
    /// `SHOW SPLITS`.
    ShowSplits,
    /// A client's own `SELECT @@var, DATABASE(), ...` (the `mariadb` CLI
    /// and drivers send these when they connect).
    Select(Vec<SelectItem>),
    /// A client's `SET ...` (accepted and ignored).
    Set,
}

/// `SPLIT SHARDS`: the range, the new master and the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitCommand {
    /// The shards (and the fleet, if named).
    pub range: ShardRange,
    /// The new master, `host:port`.
    pub target: String,
    /// `DRY RUN`: the checks and what each phase would do; nothing changes.
    pub dry_run: bool,
    /// `RESUME`: continue the split its state record holds.
    pub resume: bool,
    /// `MAX n ROWS PER SECOND` (0: no limit); `None`: the default.
    pub max_rows_per_second: Option<u64>,
    /// `KEEP MOVED`: the source keeps the range's databases as `_moved_<name>`.
    pub keep_moved: bool,
    /// `GRACE n SECONDS` between the cutover and the cleanup; `None`: the default.
    pub grace_seconds: Option<u64>,
    /// `STOP AFTER prepare|copy|verify|cutover`.
    pub stop_after: Option<Phase>,
}

/// Why a command was not understood. The message lists what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Not a command the admin port knows.
    Unknown(String),
    /// A known command with arguments that do not fit its form.
    BadArguments {
        /// The command's form (one of the constants of this module).
        form: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Unknown(text) if text.is_empty() => {
                write!(
                    f,
                    "empty admin command; the admin port accepts (HELP shows their arguments):"
                )?;
                write_command_list(f)
            }
            ParseError::Unknown(text) => {
                write!(
                    f,
                    "unknown admin command '{}'; the admin port accepts (HELP shows their arguments):",
                    shorten(text)
                )?;
                write_command_list(f)
            }
            ParseError::BadArguments { form, reason } => {
                write!(f, "{reason}; expected: {form}")
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// One line per command, its name only (the form without its arguments),
/// so the list stays within what the C client keeps of an error message;
/// `SHOW COMMANDS` (last) gives the forms.
fn write_command_list(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for (form, _) in COMMANDS {
        write!(f, "\n  {}", command_name(form))?;
    }
    Ok(())
}

/// A form up to its first argument: `SHOW SHARD <n> [IN <fleet>]` is `SHOW SHARD`.
pub fn command_name(form: &str) -> &str {
    let end = [" <", " ["]
        .iter()
        .filter_map(|arg| form.find(arg))
        .min()
        .unwrap_or(form.len());
    &form[..end]
}

/// The command as echoed in an error: at most 12 bytes (cut on a character
/// boundary), so the whole list fits in the 512 bytes the C client library
/// keeps of an error message whatever the characters.
fn shorten(text: &str) -> String {
    const MAX_BYTES: usize = 12;
    if text.len() <= MAX_BYTES {
        return text.to_owned();
    }
    let end = (0..=MAX_BYTES)
        .rev()
        .find(|&at| text.is_char_boundary(at))
        .unwrap_or(0);
    format!("{}...", &text[..end])
}

/// A word or a quoted string of the command text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
}

impl Token {
    fn is(&self, keyword: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(keyword))
    }

    fn text(&self) -> &str {
        match self {
            Token::Word(w) | Token::Quoted(w) => w,
        }
    }
}

/// Parses one admin command.
pub fn parse(text: &str) -> Result<Command, ParseError> {
    let text = text
        .trim()
        .trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    if let Some(statement) = after_keywords(text, &["EXPLAIN", "ROUTE"]) {
        if statement.is_empty() {
            return Err(bad(EXPLAIN_ROUTE, "EXPLAIN ROUTE needs a statement"));
        }
        return Ok(Command::ExplainRoute {
            statement: statement.to_owned(),
        });
    }
    if let Some(list) = after_keywords(text, &["SELECT"]) {
        return parse_select(list).ok_or_else(|| ParseError::Unknown(text.to_owned()));
    }
    if after_keywords(text, &["SET"]).is_some() {
        return Ok(Command::Set);
    }
    let tokens = tokenize(text).map_err(|reason| ParseError::BadArguments {
        form: form_of(text),
        reason,
    })?;
    let unknown = || ParseError::Unknown(text.to_owned());
    let Some(first) = tokens.first() else {
        return Err(unknown());
    };
    let second = tokens.get(1);
    let is = |token: Option<&Token>, keyword: &str| token.is_some_and(|t| t.is(keyword));
    let rest = tokens.get(2..).unwrap_or(&[]);
    if first.is("HELP") {
        return no_arguments(&tokens[1..], SHOW_COMMANDS, Command::Help);
    }
    if first.is("SHOW") {
        if is(second, "SHARDS") {
            return parse_show_shards(rest);
        }
        if is(second, "SHARD") && rest.first().is_some_and(|t| t.is("STATS")) {
            return parse_show_shard_stats(&rest[1..]);
        }
        if is(second, "DIGESTS") {
            return parse_show_digests(rest);
        }
        if is(second, "SHARD") {
            return parse_show_shard(rest);
        }
        if is(second, "HOSTS") {
            return no_arguments(rest, SHOW_HOSTS, Command::ShowHosts);
        }
        if is(second, "STATS") {
            return no_arguments(rest, SHOW_STATS, Command::ShowStats);
        }
        if is(second, "CONFIG") {
            return no_arguments(rest, SHOW_CONFIG, Command::ShowConfig);
        }
        if is(second, "PROXIES") {
            return no_arguments(rest, SHOW_PROXIES, Command::ShowProxies);
        }
        if is(second, "SPLITS") {
            return no_arguments(rest, SHOW_SPLITS, Command::ShowSplits);
        }
        if is(second, "COMMANDS") {
            return no_arguments(rest, SHOW_COMMANDS, Command::Help);
        }
    }
    if first.is("RESET") && is(second, "DIGESTS") {
        return no_arguments(rest, RESET_DIGESTS, Command::ResetDigests);
    }
    if first.is("RELOAD") && is(second, "CONFIG") {
        return match rest {
            [force] if force.is("FORCE") => Ok(Command::ReloadConfig { force: true }),
            _ => no_arguments(rest, RELOAD_CONFIG, Command::ReloadConfig { force: false }),
        };
    }
    if first.is("DECODE") && is(second, "ID") {
        return parse_decode(rest);
    }
    if first.is("ENCODE") && is(second, "ID") {
        return parse_encode(rest);
    }
    if first.is("PROMOTE") && is(second, "REPLICA") {
        return parse_promote(rest);
    }
    if first.is("PAUSE") && is(second, "SHARDS") {
        return parse_range(rest, PAUSE_SHARDS).map(Command::PauseShards);
    }
    if first.is("RESUME") && is(second, "SHARDS") {
        let (rest, force) = match rest.split_last() {
            Some((last, before)) if last.is("FORCE") => (before, true),
            _ => (rest, false),
        };
        return parse_range(rest, RESUME_SHARDS)
            .map(|range| Command::ResumeShards { range, force });
    }
    if first.is("MOVE") && is(second, "SHARDS") {
        return parse_move(rest);
    }
    if first.is("SPLIT") && is(second, "SHARDS") {
        return parse_split(rest).map(Command::SplitShards);
    }
    if first.is("VERIFY") && is(second, "FLEET") {
        return no_arguments(rest, VERIFY_FLEET, Command::VerifyFleet);
    }
    if first.is("VERIFY") && is(second, "SHARDS") {
        return parse_verify_rows(rest);
    }
    Err(unknown())
}

fn bad(form: &'static str, reason: impl Into<String>) -> ParseError {
    ParseError::BadArguments {
        form,
        reason: reason.into(),
    }
}

/// The form of the command `text` starts like, for an error about it.
fn form_of(text: &str) -> &'static str {
    let upper = text.to_ascii_uppercase();
    let words: Vec<&str> = upper.split_whitespace().take(2).collect();
    COMMANDS
        .iter()
        .map(|(form, _)| *form)
        .find(|form| {
            let form_words: Vec<&str> = form.split_whitespace().take(words.len()).collect();
            !words.is_empty() && form_words == words
        })
        .unwrap_or(SHOW_COMMANDS)
}

/// The text after `keywords` (each a whole word, any case, separated by
/// whitespace), trimmed; `None` when `text` does not start with them.
fn after_keywords<'t>(text: &'t str, keywords: &[&str]) -> Option<&'t str> {
    let mut rest = text;
    for keyword in keywords {
        let head = rest.get(..keyword.len())?;
        if !head.eq_ignore_ascii_case(keyword) {
            return None;
        }
        let tail = &rest[keyword.len()..];
        if !(tail.is_empty() || tail.starts_with(char::is_whitespace)) {
            return None;
        }
        rest = tail.trim_start();
    }
    Some(rest.trim_end())
}

/// Splits the text into words (at whitespace) and quoted strings (`'...'`,
/// `"..."` or `` `...` ``, with `\` escapes and doubled quotes).
fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if matches!(c, '\'' | '"' | '`') {
            chars.next();
            let mut value = String::new();
            loop {
                match chars.next() {
                    None => return Err(format!("unterminated quoted string {c}{value}")),
                    Some('\\') if c != '`' => {
                        if let Some(escaped) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    Some(q) if q == c => {
                        if chars.peek() == Some(&c) {
                            chars.next();
                            value.push(c);
                        } else {
                            break;
                        }
                    }
                    Some(other) => value.push(other),
                }
            }
            tokens.push(Token::Quoted(value));
        } else {
            let mut word = String::new();
            while let Some(&w) = chars.peek() {
                if w.is_whitespace() || matches!(w, '\'' | '"' | '`') {
                    break;
                }
                word.push(w);
                chars.next();
            }
            tokens.push(Token::Word(word));
        }
    }
    Ok(tokens)
}

fn no_arguments(
    rest: &[Token],
    form: &'static str,
    command: Command,
) -> Result<Command, ParseError> {
    match rest.first() {
        None => Ok(command),
        Some(extra) => Err(bad(
            form,
            format!("unexpected '{}' after {form}", extra.text()),
        )),
    }
}

fn parse_show_shards(rest: &[Token]) -> Result<Command, ParseError> {
    match rest {
        [] => Ok(Command::ShowShards { like: None }),
        [like, pattern] if like.is("LIKE") => Ok(Command::ShowShards {
            like: Some(pattern.text().to_owned()),
        }),
        [like] if like.is("LIKE") => Err(bad(SHOW_SHARDS, "LIKE needs a pattern")),
        _ => Err(bad(SHOW_SHARDS, format!("unexpected '{}'", rest[0].text()))),
    }
}

fn parse_show_shard(rest: &[Token]) -> Result<Command, ParseError> {
    let (shard, fleet) = match rest {
        [shard] => (shard, None),
        [shard, keyword, fleet] if keyword.is("IN") => (shard, Some(fleet.text().to_owned())),
        [] => return Err(bad(SHOW_SHARD, "SHOW SHARD needs a shard number")),
        _ => return Err(bad(SHOW_SHARD, "unexpected arguments")),
    };
    Ok(Command::ShowShard {
        shard: shard_number(shard.text(), SHOW_SHARD)?,
        fleet,
    })
}

/// `ORDER BY <word>` at the start of `rest`: the word and what follows.
fn order_by<'r>(
    rest: &'r [Token],
    form: &'static str,
) -> Result<Option<(&'r str, &'r [Token])>, ParseError> {
    match rest {
        [order, by, word, tail @ ..] if order.is("ORDER") && by.is("BY") => {
            Ok(Some((word.text(), tail)))
        }
        [order, ..] if order.is("ORDER") => Err(bad(form, "ORDER BY needs a column")),
        _ => Ok(None),
    }
}

fn parse_show_digests(rest: &[Token]) -> Result<Command, ParseError> {
    let form = SHOW_DIGESTS;
    let (order, rest) = match order_by(rest, form)? {
        Some((word, tail)) => {
            let order = match word.to_ascii_lowercase().as_str() {
                "total_time" => DigestOrder::TotalTime,
                "count" => DigestOrder::Count,
                "p99" => DigestOrder::P99,
                "errors" => DigestOrder::Errors,
                _ => return Err(bad(form, format!("cannot order digests by '{word}'"))),
            };
            (order, tail)
        }
        None => (DigestOrder::default(), rest),
    };
    let limit = match rest {
        [] => None,
        [limit, n] if limit.is("LIMIT") => Some(count(n.text(), "LIMIT", form)?),
        [limit] if limit.is("LIMIT") => return Err(bad(form, "LIMIT needs a number")),
        [extra, ..] => return Err(bad(form, format!("unexpected '{}'", extra.text()))),
    };
    Ok(Command::ShowDigests { order, limit })
}

fn parse_show_shard_stats(rest: &[Token]) -> Result<Command, ParseError> {
    let form = SHOW_SHARD_STATS;
    let (top, rest) = match rest {
        [top, n, tail @ ..] if top.is("TOP") => (count(n.text(), "TOP", form)?, tail),
        [top] if top.is("TOP") => return Err(bad(form, "TOP needs a number")),
        _ => (DEFAULT_SHARD_STATS_TOP, rest),
    };
    let order = match order_by(rest, form)? {
        Some((word, tail)) => {
            if let Some(extra) = tail.first() {
                return Err(bad(form, format!("unexpected '{}'", extra.text())));
            }
            match word.to_ascii_lowercase().as_str() {
                "statements" => ShardOrder::Statements,
                "errors" => ShardOrder::Errors,
                "time" => ShardOrder::Time,
                _ => return Err(bad(form, format!("cannot order shards by '{word}'"))),
            }
        }
        None => match rest.first() {
            None => ShardOrder::default(),
            Some(extra) => return Err(bad(form, format!("unexpected '{}'", extra.text()))),
        },
    };
    Ok(Command::ShowShardStats { top, order })
}

/// A row count of `LIMIT` / `TOP`: a positive integer.
fn count(text: &str, what: &str, form: &'static str) -> Result<usize, ParseError> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad(
            form,
            format!("{what} needs a positive number, not '{text}'"),
        )),
    }
}

fn parse_decode(rest: &[Token]) -> Result<Command, ParseError> {
    match rest {
        [id] => Ok(Command::DecodeId {
            id: number(id.text(), "the ID", DECODE_ID)?,
        }),
        [id, keyword, fleet] if keyword.is("IN") => Ok(Command::DecodeIdIn {
            id: number(id.text(), "the ID", DECODE_ID_IN)?,
            fleet: fleet.text().to_owned(),
        }),
        [] => Err(bad(DECODE_ID, "DECODE ID needs an ID")),
        _ => Err(bad(DECODE_ID, "DECODE ID takes one ID")),
    }
}

fn parse_encode(rest: &[Token]) -> Result<Command, ParseError> {
    match rest {
        [shard, object_type, local_id] => Ok(Command::EncodeId {
            shard: number(shard.text(), "the shard", ENCODE_ID)?,
            object_type: object_type.text().to_owned(),
            local_id: number(local_id.text(), "the local id", ENCODE_ID)?,
        }),
        [shard, second, third, keyword, fleet] if keyword.is("IN") => Ok(Command::EncodeIdIn {
            shard: number(shard.text(), "the shard", ENCODE_ID_IN)?,
            second: second.text().to_owned(),
            third: number(third.text(), "the third field", ENCODE_ID_IN)?,
            fleet: fleet.text().to_owned(),
        }),
        _ => Err(bad(
            ENCODE_ID,
            format!("ENCODE ID takes three fields, got {}", rest.len()),
        )),
    }
}

fn parse_promote(rest: &[Token]) -> Result<Command, ParseError> {
    match rest {
        [master] => Ok(Command::PromoteReplica {
            master: master.text().to_owned(),
            stop_replication: false,
        }),
        [master, stop, replication] if stop.is("STOP") && replication.is("REPLICATION") => {
            Ok(Command::PromoteReplica {
                master: master.text().to_owned(),
                stop_replication: true,
            })
        }
        [] => Err(bad(
            PROMOTE_REPLICA,
            "PROMOTE REPLICA needs the address of the master whose replica takes over",
        )),
        _ => Err(bad(PROMOTE_REPLICA, "unexpected arguments")),
    }
}

fn parse_move(rest: &[Token]) -> Result<Command, ParseError> {
    let Some(to) = rest.iter().position(|t| t.is("TO")) else {
        return Err(bad(
            MOVE_SHARDS,
            "MOVE SHARDS needs TO and the new master's host:port",
        ));
    };
    let range = parse_range(&rest[..to], MOVE_SHARDS)?;
    let (target, dry_run) = match &rest[to + 1..] {
        [target] => (target, false),
        [target, dry, run] if dry.is("DRY") && run.is("RUN") => (target, true),
        [] => return Err(bad(MOVE_SHARDS, "TO needs the new master's host:port")),
        [_, extra, ..] => {
            return Err(bad(
                MOVE_SHARDS,
                format!("unexpected '{}' after the new master", extra.text()),
            ))
        }
    };
    Ok(Command::MoveShards {
        range,
        target: target.text().to_owned(),
        dry_run,
    })
}

fn parse_split(rest: &[Token]) -> Result<SplitCommand, ParseError> {
    let form = SPLIT_SHARDS;
    let Some(to) = rest.iter().position(|t| t.is("TO")) else {
        return Err(bad(
            form,
            "SPLIT SHARDS needs TO and the new master's host:port",
        ));
    };
    let range = parse_range(&rest[..to], form)?;
    let Some(target) = rest.get(to + 1) else {
        return Err(bad(form, "TO needs the new master's host:port"));
    };
    let target = target.text();
    let port_ok = target
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !port_ok {
        return Err(bad(
            form,
            format!(
                "TO needs the new master as host:port (an empty MariaDB server), not '{target}'"
            ),
        ));
    }
    let mut split = SplitCommand {
        range,
        target: target.to_owned(),
        dry_run: false,
        resume: false,
        max_rows_per_second: None,
        keep_moved: false,
        grace_seconds: None,
        stop_after: None,
    };
    let mut words = &rest[to + 2..];
    while let Some(word) = words.first() {
        words = match words {
            [dry, run, tail @ ..] if dry.is("DRY") && run.is("RUN") => {
                split.dry_run = true;
                tail
            }
            [resume, tail @ ..] if resume.is("RESUME") => {
                split.resume = true;
                tail
            }
            [keep, moved, tail @ ..] if keep.is("KEEP") && moved.is("MOVED") => {
                split.keep_moved = true;
                tail
            }
            [max, n, rows, per, second, tail @ ..]
                if max.is("MAX") && rows.is("ROWS") && per.is("PER") && second.is("SECOND") =>
            {
                split.max_rows_per_second = Some(number(n.text(), "MAX", form)?);
                tail
            }
            [max, ..] if max.is("MAX") => {
                return Err(bad(form, "the rate limit is MAX <n> ROWS PER SECOND (0: no limit)"))
            }
            [grace, n, seconds, tail @ ..] if grace.is("GRACE") && seconds.is("SECONDS") => {
                split.grace_seconds = Some(number(n.text(), "GRACE", form)?);
                tail
            }
            [grace, ..] if grace.is("GRACE") => {
                return Err(bad(form, "the grace period is GRACE <n> SECONDS"))
            }
            [stop, after, phase, tail @ ..] if stop.is("STOP") && after.is("AFTER") => {
                split.stop_after = Some(match phase.text().to_ascii_lowercase().as_str() {
                    "prepare" => Phase::Prepared,
                    "copy" => Phase::Copied,
                    "verify" => Phase::Verified,
                    "cutover" => Phase::CutOver,
                    other => {
                        return Err(bad(
                            form,
                            format!("STOP AFTER takes prepare, copy, verify or cutover, not '{other}'"),
                        ))
                    }
                });
                tail
            }
            [stop, ..] if stop.is("STOP") => {
                return Err(bad(form, "STOP AFTER needs a phase: prepare, copy, verify or cutover"))
            }
            _ => {
                return Err(bad(
                    form,
                    format!(
                        "unexpected '{}' after the new master; the options are DRY RUN, RESUME, \
                         MAX <n> ROWS PER SECOND, KEEP MOVED, GRACE <n> SECONDS, STOP AFTER <phase>",
                        word.text()
                    ),
                ))
            }
        };
    }
    Ok(split)
}

fn parse_verify_rows(rest: &[Token]) -> Result<Command, ParseError> {
    let form = VERIFY_SHARDS_ROWS;
    let Some(rows) = rest.iter().position(|t| t.is("ROWS")) else {
        return Err(bad(
            form,
            "VERIFY SHARDS needs ROWS AGAINST and the other server's host:port",
        ));
    };
    let range = parse_range(&rest[..rows], form)?;
    let (against, max_rows_per_second) = match &rest[rows + 1..] {
        [kw, against] if kw.is("AGAINST") => (against, None),
        [kw, against, max, n, r, per, second]
            if kw.is("AGAINST")
                && max.is("MAX")
                && r.is("ROWS")
                && per.is("PER")
                && second.is("SECOND") =>
        {
            (against, Some(number(n.text(), "MAX", form)?))
        }
        [kw] if kw.is("AGAINST") => {
            return Err(bad(form, "AGAINST needs the other server's host:port"))
        }
        _ => return Err(bad(form, "expected AGAINST <host:port> after ROWS")),
    };
    Ok(Command::VerifyShardRows {
        range,
        against: against.text().to_owned(),
        max_rows_per_second,
    })
}

fn parse_range(rest: &[Token], form: &'static str) -> Result<ShardRange, ParseError> {
    let split = rest.iter().position(|t| t.is("IN")).unwrap_or(rest.len());
    let (range, tail) = rest.split_at(split);
    let fleet = match tail {
        [] => None,
        [_, fleet] => Some(fleet.text().to_owned()),
        [_] => return Err(bad(form, "IN needs a fleet name")),
        _ => return Err(bad(form, "IN takes one fleet name")),
    };
    let range: String = range.iter().map(Token::text).collect();
    if range.is_empty() {
        return Err(bad(form, "a shard range is needed"));
    }
    let (first, last) = match range.split_once('-') {
        Some((first, last)) => (shard_number(first, form)?, shard_number(last, form)?),
        None => {
            let shard = shard_number(&range, form)?;
            (shard, shard)
        }
    };
    if first > last {
        return Err(bad(
            form,
            format!("the range {first}-{last} is backwards (first above last)"),
        ));
    }
    Ok(ShardRange { first, last, fleet })
}

fn shard_number(text: &str, form: &'static str) -> Result<u32, ParseError> {
    text.parse::<u32>()
        .map_err(|_| bad(form, format!("'{text}' is not a shard number")))
}

fn number(text: &str, what: &str, form: &'static str) -> Result<u64, ParseError> {
    text.parse::<u64>().map_err(|_| {
        bad(
            form,
            format!("{what} must be a non-negative integer, not '{text}'"),
        )
    })
}

/// A `SELECT` list of `@@variables` and argument-less functions, with an
/// optional `LIMIT n`; `None` for anything else.
fn parse_select(list: &str) -> Option<Command> {
    let lower = list.to_ascii_lowercase();
    let list = match lower.rfind(" limit ") {
        Some(at) if lower[at + 7..].trim().parse::<u64>().is_ok() => &list[..at],
        _ => list,
    };
    let mut items = Vec::new();
    for expression in list.split(',') {
        let column = expression.trim();
        if let Some(variable) = column.strip_prefix("@@") {
            let name = variable.to_ascii_lowercase();
            let name = ["session.", "global.", "local."]
                .iter()
                .find_map(|scope| name.strip_prefix(scope))
                .map(str::to_owned)
                .unwrap_or(name);
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return None;
            }
            items.push(SelectItem::Variable {
                name,
                column: column.to_owned(),
            });
        } else {
            let name = column
                .strip_suffix(')')?
                .trim_end()
                .strip_suffix('(')?
                .trim_end();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return None;
            }
            items.push(SelectItem::Function {
                name: name.to_ascii_lowercase(),
                column: column.to_owned(),
            });
        }
    }
    Some(Command::Select(items))
}

#[cfg(test)]
mod tests;
