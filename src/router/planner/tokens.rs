//! Checks on the token stream, before sqlparser sees it: the first word
//! (for dispatch), empty queries, `LOCK IN SHARE MODE` (which sqlparser does
//! not parse) and statements nested deep enough to overflow the stack.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::router::plan::RouteError;

/// The first significant token of the statement, for dispatch and messages.
pub(super) fn first_significant(tokens: &[TokenWithSpan]) -> Option<&TokenWithSpan> {
    tokens
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)))
}

/// Whether the statement is only whitespace, comments and semicolons.
pub(super) fn is_empty(tokens: &[TokenWithSpan]) -> bool {
    tokens
        .iter()
        .all(|t| matches!(t.token, Token::Whitespace(_) | Token::SemiColon))
}

/// Removes a trailing `LOCK IN SHARE MODE` (which sqlparser does not parse)
/// from the tokens; true if there was one.
pub(super) fn strip_lock_in_share_mode(tokens: &mut Vec<TokenWithSpan>) -> bool {
    let mut significant = tokens.iter().enumerate().rev().filter(|(_, t)| {
        !matches!(
            t.token,
            Token::Whitespace(_) | Token::EOF | Token::SemiColon
        )
    });
    let mut lock_at = None;
    for word in ["MODE", "SHARE", "IN", "LOCK"] {
        match significant.next() {
            Some((i, t)) if matches!(&t.token, Token::Word(w) if w.value.eq_ignore_ascii_case(word)) => {
                lock_at = Some(i)
            }
            _ => return false,
        }
    }
    match lock_at {
        Some(i) => {
            tokens.truncate(i);
            true
        }
        None => false,
    }
}

/// Deepest the syntax tree of a statement may get, as estimated by
/// [`nesting_too_deep`]. sqlparser builds operator chains (`a OR b OR ...`,
/// `x IS NULL IS NULL ...`, `UNION`s) left-deep in a loop, whatever their
/// length, and dropping the tree recurses once per level (about 100 bytes
/// of stack each in a debug build): 2,000 levels stay far below a runtime
/// worker's 2 MiB stack. Long OR lists of keys belong in `IN (...)`.
pub(crate) const MAX_DEPTH: u32 = 2_000;

/// Deepest one select-list item, ORDER BY, GROUP BY or LIMIT expression may
/// get: the planner also measures (sqlparser's `Spanned`), compares and
/// prints these recursively, at several KiB of stack per level in a debug
/// build.
pub(crate) const MAX_DEPTH_LISTED: u32 = 64;

/// Which bound [`nesting_too_deep`] found exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TooDeep {
    /// [`MAX_DEPTH`].
    Statement,
    /// [`MAX_DEPTH_LISTED`].
    Listed,
}

impl TooDeep {
    /// The error the client gets.
    pub(super) fn error(self) -> RouteError {
        RouteError::TooDeep(match self {
            TooDeep::Statement => format!(
                "more than {MAX_DEPTH} operators nested in one expression or chain (UNION, AND, OR, IS NULL, ...); split the statement, and write long OR lists of keys as IN (...)"
            ),
            TooDeep::Listed => format!(
                "a select-list, ORDER BY, GROUP BY or LIMIT expression nests more than {MAX_DEPTH_LISTED} operators (subqueries included)"
            ),
        })
    }
}

/// One parenthesis (or `CASE ... END`) level of [`nesting_too_deep`]'s scan.
///
/// A level holds segments (split by commas, and by WHEN/THEN/ELSE inside a
/// CASE); a segment is a chain of AND/OR/XOR whose operands are chains of
/// other operators. The depth of a segment is bounded by the number of
/// logical operators plus the deepest operand; a level's by its set
/// operations (UNION, ...) plus its deepest segment. A closed level counts
/// as one more level of the operand it appears in.
#[derive(Default)]
struct Level {
    case: bool,
    /// Inside a select list, ORDER BY, GROUP BY or LIMIT of this level.
    listed: bool,
    set_operations: u32,
    deepest_segment: u32,
    logical: u32,
    operand: u32,
    deepest_operand: u32,
}

impl Level {
    fn segment(&self) -> u32 {
        self.logical
            .saturating_add(self.deepest_operand.max(self.operand))
    }

    fn depth(&self) -> u32 {
        self.set_operations
            .saturating_add(self.deepest_segment.max(self.segment()))
    }

    /// Ends the current segment; false if it was a listed one too deep.
    fn end_segment(&mut self) -> bool {
        let segment = self.segment();
        self.deepest_segment = self.deepest_segment.max(segment);
        self.logical = 0;
        self.operand = 0;
        self.deepest_operand = 0;
        !(self.listed && segment > MAX_DEPTH_LISTED)
    }
}

/// Keywords that start a clause: they end the segment before them, and say
/// whether the clause is a list the planner handles recursively.
fn clause(keyword: Keyword) -> Option<bool> {
    match keyword {
        Keyword::SELECT | Keyword::ORDER | Keyword::GROUP | Keyword::LIMIT => Some(true),
        Keyword::FROM
        | Keyword::WHERE
        | Keyword::HAVING
        | Keyword::ON
        | Keyword::USING
        | Keyword::INTO
        | Keyword::SET
        | Keyword::VALUES
        | Keyword::VALUE
        | Keyword::WINDOW
        | Keyword::QUALIFY
        | Keyword::FOR
        | Keyword::LOCK
        | Keyword::OFFSET
        | Keyword::JOIN
        | Keyword::RETURNING => Some(false),
        _ => None,
    }
}

/// Keywords that add a level to the tree (prefix, infix and postfix
/// operators other than AND/OR/XOR).
fn deepens(keyword: Keyword) -> bool {
    matches!(
        keyword,
        Keyword::NOT
            | Keyword::IS
            | Keyword::IN
            | Keyword::BETWEEN
            | Keyword::LIKE
            | Keyword::ILIKE
            | Keyword::RLIKE
            | Keyword::REGEXP
            | Keyword::MATCH
            | Keyword::GLOB
            | Keyword::SIMILAR
            | Keyword::MEMBER
            | Keyword::OVERLAPS
            | Keyword::OPERATOR
            | Keyword::DIV
            | Keyword::MOD
            | Keyword::COLLATE
            | Keyword::AT
            | Keyword::ESCAPE
            | Keyword::BINARY
            | Keyword::INTERVAL
            | Keyword::EXISTS
            | Keyword::ANY
            | Keyword::ALL
            | Keyword::SOME
            | Keyword::NOTNULL
    )
}

/// Whether the statement's syntax tree could nest deeper than
/// [`MAX_DEPTH`] (or a listed expression deeper than
/// [`MAX_DEPTH_LISTED`]), estimated from its tokens before sqlparser
/// builds it: every operator counts as a level (an over-estimate: `a = 1
/// AND b = 2` counts 2 levels for 2), per segment, through parentheses,
/// CASE and subqueries. Flat lists (bulk INSERT rows, IN lists, select
/// lists) do not add up. Linear in the tokens, no recursion.
pub(super) fn nesting_too_deep(tokens: &[TokenWithSpan]) -> Option<TooDeep> {
    let mut levels: Vec<Level> = vec![Level::default()];
    for t in tokens {
        let level = levels.last_mut()?;
        match &t.token {
            Token::LParen => {
                levels.push(Level::default());
                continue;
            }
            Token::RParen => {
                // Closes the CASEs left open inside the parentheses too.
                loop {
                    if levels.len() < 2 {
                        break;
                    }
                    let Some(mut inner) = levels.pop() else { break };
                    if !inner.end_segment() {
                        return Some(TooDeep::Listed);
                    }
                    let Some(outer) = levels.last_mut() else {
                        break;
                    };
                    outer.operand = outer.operand.saturating_add(inner.depth() + 1);
                    if !inner.case {
                        break;
                    }
                }
                continue;
            }
            Token::Comma | Token::SemiColon => {
                if !level.end_segment() {
                    return Some(TooDeep::Listed);
                }
                if matches!(t.token, Token::SemiColon) {
                    level.listed = false;
                }
                continue;
            }
            Token::Word(w) if w.quote_style.is_none() => match w.keyword {
                Keyword::AND | Keyword::OR | Keyword::XOR => {
                    level.deepest_operand = level.deepest_operand.max(level.operand);
                    level.operand = 0;
                    level.logical += 1;
                }
                Keyword::UNION | Keyword::EXCEPT | Keyword::INTERSECT | Keyword::MINUS => {
                    if !level.end_segment() {
                        return Some(TooDeep::Listed);
                    }
                    level.listed = false;
                    level.set_operations += 1;
                }
                Keyword::CASE => levels.push(Level {
                    case: true,
                    listed: false,
                    ..Level::default()
                }),
                Keyword::WHEN | Keyword::THEN | Keyword::ELSE if level.case => {
                    if !level.end_segment() {
                        return Some(TooDeep::Listed);
                    }
                }
                Keyword::END if level.case => {
                    let mut inner = levels.pop()?;
                    if !inner.end_segment() {
                        return Some(TooDeep::Listed);
                    }
                    if let Some(outer) = levels.last_mut() {
                        outer.operand = outer.operand.saturating_add(inner.depth() + 1);
                    }
                }
                keyword => {
                    if let Some(listed) = clause(keyword) {
                        if !level.end_segment() {
                            return Some(TooDeep::Listed);
                        }
                        level.listed = listed;
                    } else if deepens(keyword) {
                        level.operand += 1;
                    }
                }
            },
            Token::Word(_)
            | Token::Whitespace(_)
            | Token::Number(..)
            | Token::Char(_)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
            | Token::Placeholder(_)
            | Token::Period
            | Token::EOF => {}
            _ => level.operand += 1,
        }
        if levels.last().is_some_and(|level| level.depth() > MAX_DEPTH) {
            return Some(TooDeep::Statement);
        }
    }
    // Unclosed levels (a syntax error sqlparser reports) count as closed.
    while let Some(mut inner) = levels.pop() {
        if !inner.end_segment() {
            return Some(TooDeep::Listed);
        }
        match levels.last_mut() {
            Some(outer) => outer.operand = outer.operand.saturating_add(inner.depth() + 1),
            None if inner.depth() > MAX_DEPTH => return Some(TooDeep::Statement),
            None => {}
        }
    }
    None
}

/// Whether the statement names `information_schema.PROCESSLIST` anywhere
/// (any clause, subquery, CTE, SET value; quoted or not). The backends'
/// process list shows every session's statements under the shared data
/// account: only the reads the proxy answers itself may name it.
pub(super) fn names_processlist(tokens: &[TokenWithSpan]) -> bool {
    let is = |token: &Token, wanted: &str| match token {
        Token::Word(w) => w.value.eq_ignore_ascii_case(wanted),
        // An identifier under ANSI_QUOTES.
        Token::DoubleQuotedString(s) => s.eq_ignore_ascii_case(wanted),
        _ => false,
    };
    let significant = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)));
    // 0: nothing yet, 1: after information_schema, 2: and its period.
    let mut seen = 0;
    for token in significant {
        seen = match (seen, token) {
            (1, Token::Period) => 2,
            (2, _) if is(token, "processlist") => return true,
            _ if is(token, "information_schema") => 1,
            _ => 0,
        };
    }
    false
}

/// Whether the statement reads what another connection is running: `SHOW
/// EXPLAIN | ANALYZE [FORMAT=..] FOR n` and `EXPLAIN | ANALYZE | DESCRIBE
/// [FORMAT=..] FOR CONNECTION n`. Every backend thread belongs to the one
/// data account, so the server would show any client's statement, literals
/// included, to any other.
pub(super) fn reads_another_connection(tokens: &[TokenWithSpan]) -> bool {
    let words: Vec<&str> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .map(|t| match &t.token {
            Token::Word(w) => w.value.as_str(),
            _ => "",
        })
        .collect();
    let is = |i: usize, wanted: &str| words.get(i).is_some_and(|w| w.eq_ignore_ascii_case(wanted));
    let explains = |i: usize| {
        ["EXPLAIN", "ANALYZE", "DESCRIBE", "DESC"]
            .iter()
            .any(|w| is(i, w))
    };
    if is(0, "SHOW") && (is(1, "EXPLAIN") || is(1, "ANALYZE")) {
        return true;
    }
    explains(0) && (1..words.len()).any(|i| is(i, "FOR") && is(i + 1, "CONNECTION"))
}

/// The servers' own schemas: no statement through the proxy may name them.
pub(super) const PRIVATE_SCHEMAS: [&str; 3] = ["mysql", "performance_schema", "sys"];

/// Whether `name` is one of [`PRIVATE_SCHEMAS`].
pub(super) fn is_private_schema(name: &str) -> bool {
    PRIVATE_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// The error for a statement naming `schema.table` in a schema clients
/// may not reach; `command` is the statement's first word.
pub(super) fn private_schema_error(command: &str, schema: &str, table: &str) -> RouteError {
    let command = match command.to_ascii_uppercase() {
        word if word == "WITH" || word.is_empty() => "SELECT".to_owned(),
        word => word,
    };
    let reason = if is_private_schema(schema) {
        format!(
            "the {} schema is not reachable through the proxy",
            schema.to_ascii_lowercase()
        )
    } else {
        "information_schema is read-only through the proxy".to_owned()
    };
    RouteError::SystemSchema {
        command,
        table: format!("{schema}.{table}"),
        reason,
    }
}

/// A name in the statement that reaches a private schema: `mysql.user`
/// anywhere (quoted or not, in any clause, subquery, SET value or table
/// function), or, in a SHOW, a bare `mysql` (`SHOW TABLES FROM mysql`).
/// Read from the tokens, so no statement form the planner does not walk
/// can hide one. A table alias named like a private schema is refused too.
pub(super) fn private_schema(tokens: &[TokenWithSpan], first_word: &str) -> Option<RouteError> {
    let is_show = first_word.eq_ignore_ascii_case("SHOW");
    let mut significant = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .peekable();
    if is_show {
        // SHOW GRANTS and SHOW CREATE USER print the backend account's
        // password hash, read from mysql.global_priv.
        let words: Vec<&str> = significant
            .clone()
            .skip(1)
            .take(2)
            .filter_map(|t| match t {
                Token::Word(w) => Some(w.value.as_str()),
                _ => None,
            })
            .collect();
        let is = |i: usize, word: &str| words.get(i).is_some_and(|w| w.eq_ignore_ascii_case(word));
        if is(0, "GRANTS") || (is(0, "CREATE") && is(1, "USER")) {
            return Some(RouteError::SystemSchema {
                command: "SHOW".to_owned(),
                table: "mysql.global_priv".to_owned(),
                reason: "the backend account's grants and password are not shown through the proxy"
                    .to_owned(),
            });
        }
    }
    while let Some(token) = significant.next() {
        let name = match token {
            Token::Word(w) => &w.value,
            // An identifier under ANSI_QUOTES.
            Token::DoubleQuotedString(s) => s,
            _ => continue,
        };
        if !is_private_schema(name) {
            continue;
        }
        if matches!(significant.peek(), Some(Token::Period)) {
            significant.next();
            let table = match significant.next() {
                Some(Token::Word(w)) => w.value.clone(),
                Some(Token::DoubleQuotedString(s)) => s.clone(),
                _ => "*".to_owned(),
            };
            return Some(private_schema_error(first_word, name, &table));
        }
        if is_show && matches!(token, Token::Word(_)) {
            return Some(private_schema_error(first_word, name, "*"));
        }
    }
    None
}
