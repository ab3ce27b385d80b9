//! Table schema changes sqlparser cannot parse but MariaDB accepts
//! (partition maintenance, `PARTITION BY RANGE ... VALUES LESS THAN`,
//! column types such as `LONG BYTE`, `ZEROFILL`, `FLOAT SIGNED`), read
//! from MariaDB's tokens and passed to one shard.
//!
//! Only a statement the tokens prove to be one table schema change
//! (`CREATE [OR REPLACE] TABLE`, `ALTER [ONLINE] [IGNORE] TABLE`,
//! `DROP TABLE`, `TRUNCATE [TABLE]`, `RENAME TABLE`) is passed, and only
//! when every name it could reach is read: the table names where the
//! grammar puts them (after the verb, in a `DROP`/`RENAME` list, after
//! `LIKE`, `REFERENCES`, `RENAME [TO|AS]`, `WITH TABLE`) and every
//! qualified name anywhere (`db.t`, `db.f(...)`, `db.t.col`). They go
//! through the parsed schema change's planning (`ddl::plan`): one shard
//! database, agreeing with the hint and USE, no system schema, the
//! unqualified table names qualified. The token scan of `CREATE`/`ALTER`
//! (`ddl::scan`: `ENGINE`s, `UNION=`, `DIRECTORY`, `CONNECTION=`) has run
//! before. A backend connection has no default database, so a name not
//! read here that the server resolves without a database fails there.
//!
//! Refused (1064 with the parser's message and the reason): a second
//! statement, an executable comment (`/*! */`, `/*M! */`, whose reading
//! depends on the server's version), a `SELECT` anywhere, a `.` that is
//! not between two names, a temporary table. Anything else stays the
//! parser's 1064.

use sqlparser::ast::{Ident, ObjectName, ObjectNamePart};
use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use super::{ddl, Env};
use crate::router::hints::Hints;
use crate::router::lex::{Lexed, PLACEHOLDER};
use crate::router::plan::{Placement, Plan, RouteError};
use crate::router::text::Edits;

/// What the lexer saw of the whole text, beyond the tokens of the
/// statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Whole {
    /// Statements in the text (pieces between top-level `;` holding a
    /// token).
    pub(super) statements: usize,
    /// An executable comment (`/*!`, `/*M!`, run or skipped) is in it.
    pub(super) executable_comment: bool,
}

impl Whole {
    /// Reads the lexer's product.
    pub(super) fn of(lexed: &Lexed) -> Whole {
        Whole {
            statements: lexed.statements.len(),
            executable_comment: lexed
                .comments
                .iter()
                .any(|c| !c.plain && !lexed.hints.contains(&c.range)),
        }
    }
}

/// A table schema change read from its tokens: its verb for access errors
/// and the table names it names.
#[derive(Debug, PartialEq)]
pub(super) struct Read {
    /// `CREATE`, `ALTER` or `DROP`, as [`ddl::tables`] gives it.
    pub(super) command: &'static str,
    /// Every table name, as a parsed statement's would be (spans in the
    /// text).
    pub(super) names: Vec<ObjectName>,
}

/// Why a statement that could not be parsed is not passed to a shard.
fn refused(parse_error: &RouteError, why: &str) -> RouteError {
    match parse_error {
        RouteError::Syntax(message) => RouteError::Syntax(format!(
            "{message} (shardgate passes a statement it cannot parse to a shard only when it is one table schema change on one shard database: {why})"
        )),
        other => other.clone(),
    }
}

/// Plans a statement sqlparser failed on (`parse_error`): a table schema
/// change [`read`] proves goes to its shard like a parsed one, its table
/// names qualified; anything else is refused with `parse_error`. The
/// statement's shadow is tokenized again (the tokens went to the parser:
/// only a statement that failed pays for a second reading).
pub(super) fn plan(
    env: Env<'_>,
    whole: Whole,
    edits: Edits,
    hints: &Hints,
    placement: &mut dyn Placement,
    parse_error: RouteError,
) -> Result<Plan, RouteError> {
    let Ok(tokens) = Tokenizer::new(&MySqlDialect {}, env.src.sql).tokenize_with_location() else {
        return Err(parse_error);
    };
    let read = match read(&tokens, whole) {
        Ok(Some(read)) => read,
        Ok(None) => return Err(parse_error),
        Err(why) => return Err(refused(&parse_error, why)),
    };
    let names: Vec<&ObjectName> = read.names.iter().collect();
    ddl::plan(env, read.command, &names, edits, hints, placement)
}

/// The significant tokens (no whitespace, no comments) of a statement.
struct Words<'t> {
    tokens: Vec<&'t TokenWithSpan>,
}

impl<'t> Words<'t> {
    fn new(tokens: &'t [TokenWithSpan]) -> Self {
        Words {
            tokens: tokens
                .iter()
                .filter(|t| !matches!(t.token, Token::Whitespace(_)))
                .collect(),
        }
    }

    fn get(&self, i: usize) -> Option<&'t Token> {
        self.tokens.get(i).map(|t| &t.token)
    }

    /// Whether token `i` is the unquoted word `word`.
    fn is(&self, i: usize, word: &str) -> bool {
        matches!(self.get(i), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
    }

    /// Whether tokens from `i` are the unquoted words `words`.
    fn are(&self, i: usize, words: &[&str]) -> bool {
        words.iter().enumerate().all(|(k, w)| self.is(i + k, w))
    }

    /// The identifier of token `i`, if it is a word.
    fn ident(&self, i: usize) -> Option<Ident> {
        let token = self.tokens.get(i)?;
        match &token.token {
            Token::Word(w) => Some(Ident {
                value: w.value.clone(),
                quote_style: w.quote_style,
                span: token.span,
            }),
            _ => None,
        }
    }

    /// The table name at `i` (`t` or `db.t`) and the index after it.
    fn name(&self, i: usize) -> Result<(ObjectName, usize), &'static str> {
        let first = self.ident(i).ok_or("a table name shardgate cannot read")?;
        if !matches!(self.get(i + 1), Some(Token::Period)) {
            return Ok((ObjectName(vec![ObjectNamePart::Identifier(first)]), i + 1));
        }
        let second = self
            .ident(i + 2)
            .ok_or("a table name shardgate cannot read")?;
        Ok((
            ObjectName(vec![
                ObjectNamePart::Identifier(first),
                ObjectNamePart::Identifier(second),
            ]),
            i + 3,
        ))
    }

    /// After `IF [NOT] EXISTS` at `i`, if present.
    fn skip_if_exists(&self, i: usize) -> usize {
        if self.are(i, &["IF", "NOT", "EXISTS"]) {
            i + 3
        } else if self.are(i, &["IF", "EXISTS"]) {
            i + 2
        } else {
            i
        }
    }
}

/// The statement's verb and where its first table name is, when it is a
/// table schema change; `Err` for a temporary table.
fn verb(words: &Words<'_>) -> Result<Option<(&'static str, usize)>, &'static str> {
    let mut i = 1;
    let command = if words.is(0, "CREATE") {
        if words.are(i, &["OR", "REPLACE"]) {
            i += 2;
        }
        if words.is(i, "TEMPORARY") {
            return Err("a temporary table");
        }
        if !words.is(i, "TABLE") {
            return Ok(None);
        }
        "CREATE"
    } else if words.is(0, "ALTER") {
        while words.is(i, "ONLINE") || words.is(i, "IGNORE") {
            i += 1;
        }
        if !words.is(i, "TABLE") {
            return Ok(None);
        }
        "ALTER"
    } else if words.is(0, "DROP") {
        if words.is(i, "TEMPORARY") {
            return Err("a temporary table");
        }
        if !(words.is(i, "TABLE") || words.is(i, "TABLES")) {
            return Ok(None);
        }
        "DROP"
    } else if words.is(0, "TRUNCATE") {
        if !words.is(i, "TABLE") {
            // `TRUNCATE t`: no TABLE to step over.
            return Ok(Some(("DROP", i)));
        }
        "DROP"
    } else if words.is(0, "RENAME") {
        if !(words.is(i, "TABLE") || words.is(i, "TABLES")) {
            return Ok(None);
        }
        "ALTER"
    } else {
        return Ok(None);
    };
    Ok(Some((command, words.skip_if_exists(i + 1))))
}

/// Reads a table schema change from its tokens: `Ok(None)` when it is not
/// one (the parser's error stands), `Err` with the reason when it is one
/// that must not be passed to a shard.
pub(super) fn read(tokens: &[TokenWithSpan], whole: Whole) -> Result<Option<Read>, &'static str> {
    let words = Words::new(tokens);
    let Some((command, first)) = verb(&words)? else {
        return Ok(None);
    };
    if whole.statements > 1 {
        return Err("a second statement");
    }
    if whole.executable_comment {
        return Err("an executable comment (/*! ... */ or /*M! ... */)");
    }
    if dot_inside_token(tokens) {
        return Err("a `.` that does not qualify a name");
    }
    if placeholder_in_name(tokens) {
        return Err("a name of characters shardgate cannot read in this character set next to a name or a `.`");
    }
    let (main, mut i) = words.name(first)?;
    if words.is(0, "TRUNCATE") && !truncate_tail(&words, i) {
        return Ok(None);
    }
    let mut names = vec![main];
    // Token indices where a name read above starts.
    let mut read_at = vec![first];
    let list = words.is(0, "DROP") || words.is(0, "RENAME");
    let mut depth = 0usize;
    while let Some(token) = words.get(i) {
        let at_name = match token {
            Token::LParen => {
                depth += 1;
                // `CREATE TABLE t (LIKE u)`.
                i == first_after(&read_at, &names, 0) && words.is(i + 1, "LIKE")
            }
            Token::RParen => {
                depth = depth.saturating_sub(1);
                false
            }
            Token::Comma => list && depth == 0,
            Token::Word(w) if w.quote_style.is_none() => {
                let word = w.value.to_ascii_uppercase();
                match word.as_str() {
                    "SELECT" => return Err("a SELECT"),
                    "REFERENCES" | "TABLE" => true,
                    "LIKE" => i == first_after(&read_at, &names, 0),
                    "TO" => words.is(0, "RENAME") && depth == 0,
                    // An ALTER operation: after the table name or a
                    // `,` (a column may be named `rename`).
                    "RENAME"
                        if depth == 0
                            && (i == first_after(&read_at, &names, 0)
                                || matches!(words.get(i - 1), Some(Token::Comma))) =>
                    {
                        i += 1;
                        // `RENAME TO|AS t` or `RENAME t`, not `RENAME
                        // COLUMN|INDEX|KEY`.
                        if words.is(i, "TO") || words.is(i, "AS") {
                            i += 1;
                        }
                        if ["COLUMN", "INDEX", "KEY"].iter().any(|w| words.is(i, w)) {
                            continue;
                        }
                        let (name, next) = words.name(i)?;
                        read_at.push(i);
                        names.push(name);
                        i = next;
                        continue;
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        i += 1;
        if at_name {
            if matches!(token, Token::LParen) {
                // Past `LIKE`.
                i += 1;
            }
            let (name, next) = words.name(i)?;
            read_at.push(i);
            names.push(name);
            i = next;
        }
    }
    // Every qualified name anywhere: its database is one more the
    // statement names.
    for (j, token) in words.tokens.iter().enumerate() {
        if !matches!(token.token, Token::Period) {
            continue;
        }
        let start = j
            .checked_sub(1)
            .ok_or("a `.` that does not qualify a name")?;
        if words.ident(start).is_none() || words.ident(j + 1).is_none() {
            return Err("a `.` that does not qualify a name");
        }
        // `db.t.col`: counted from its first part.
        if start >= 1 && matches!(words.get(start - 1), Some(Token::Period)) {
            continue;
        }
        if read_at.contains(&start) {
            continue;
        }
        let (name, _) = words.name(start)?;
        names.push(name);
    }
    Ok(Some(Read { command, names }))
}

/// The token index right after the `n`th name read (`names[n]`, read at
/// `read_at[n]`): one token for `t`, three for `db.t`.
fn first_after(read_at: &[usize], names: &[ObjectName], n: usize) -> usize {
    match (read_at.get(n), names.get(n)) {
        (Some(&at), Some(name)) => at + 2 * name.0.len() - 1,
        _ => usize::MAX,
    }
}

/// Whether what follows a `TRUNCATE`'s table name (from `i`) is what
/// MariaDB allows there: nothing, `WAIT n` or `NOWAIT`.
fn truncate_tail(words: &Words<'_>, i: usize) -> bool {
    let end = |at: usize| matches!(words.get(at), None | Some(Token::SemiColon));
    end(i)
        || (words.is(i, "NOWAIT") && end(i + 1))
        || (words.is(i, "WAIT")
            && matches!(words.get(i + 1), Some(Token::Number(..)))
            && end(i + 2))
}

/// Whether a character the lexer left unread ([`PLACEHOLDER`]: a
/// non-ASCII or multibyte one) touches a word, a number or a `.`: the
/// server reads them as one name, which the tokens here do not hold whole
/// (`<gbk>db00002.t` is not `db00002.t`). Alone (`(<gbk> INT, ...)`) it is
/// a name of its own, a column's.
fn placeholder_in_name(tokens: &[TokenWithSpan]) -> bool {
    let placeholder = |t: &Token| matches!(t, Token::Char(c) if *c == char::from(PLACEHOLDER));
    let part = |t: &Token| matches!(t, Token::Word(_) | Token::Number(..) | Token::Period);
    tokens.windows(2).any(|pair| {
        let (a, b) = (&pair[0].token, &pair[1].token);
        (placeholder(a) && part(b)) || (part(a) && placeholder(b))
    })
}

/// Whether a `.` is inside a word token (`.1t`) or starts a number right
/// after a word (`t.1e5` read as `t`, `.1e5`): sqlparser and MariaDB may
/// split such text differently, so a qualified name could hide in it.
fn dot_inside_token(tokens: &[TokenWithSpan]) -> bool {
    let dotted_word =
        |t: &Token| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.contains('.'));
    tokens.iter().any(|t| dotted_word(&t.token))
        || tokens.windows(2).any(|pair| {
            matches!(
                (&pair[0].token, &pair[1].token),
                (Token::Word(_), Token::Number(n, _)) if n.starts_with('.')
            )
        })
}
