//! `DATABASE()`, `SCHEMA()`, `LAST_INSERT_ID()` (and `@@identity`,
//! `@@last_insert_id`), `ROW_COUNT()`, `CONNECTION_ID()`, `@@autocommit`
//! and `@@in_transaction` inside a statement sent to a backend: the pooled
//! connection knows neither the session's database, nor its insert ID (the
//! composed 64-bit one of object tables), nor what its previous statement
//! did, nor its id, nor its transaction state, so each is replaced by the
//! session's value as a literal. `FOUND_ROWS()` and `SQL_CALC_FOUND_ROWS`
//! are refused ([`counts_found_rows`]). One that is a
//! whole select-list item keeps the column name a server gives it (as
//! written). `@@max_allowed_packet`
//! reads the proxy's own packet limit (`limits.max_allowed_packet`): a
//! driver that sizes its packets by it must not size them by the servers'.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use std::ops::Range;

use super::Env;
use crate::router::text::Edits;

/// Which session value a call or variable names.
enum Function {
    Database,
    LastInsertId,
    RowCount,
    ConnectionId,
    Autocommit,
    InTransaction,
    MaxAllowedPacket,
    Version,
}

/// The session values [`Env::session_function_edits`] put in a statement.
pub(super) struct Substitution {
    /// The replacements.
    pub edits: Edits,
    /// The byte range of each replaced call or variable, and whether it
    /// was a whole select-list item (then already named as written).
    pub replaced: Vec<(Range<usize>, bool)>,
    /// The byte ranges of the items of the statement's top-level select
    /// list (from `SELECT` at its start), in order, aliases included.
    pub items: Vec<Range<usize>>,
}

/// Words between `SELECT` and its first item.
const MODIFIERS: [&str; 11] = [
    "ALL",
    "DISTINCT",
    "DISTINCTROW",
    "HIGH_PRIORITY",
    "STRAIGHT_JOIN",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "SQL_BUFFER_RESULT",
    "SQL_CACHE",
    "SQL_NO_CACHE",
    "SQL_CALC_FOUND_ROWS",
];

/// Words that end a select list at its nesting depth.
const CLAUSES: [Keyword; 12] = [
    Keyword::FROM,
    Keyword::WHERE,
    Keyword::GROUP,
    Keyword::HAVING,
    Keyword::ORDER,
    Keyword::LIMIT,
    Keyword::INTO,
    Keyword::UNION,
    Keyword::EXCEPT,
    Keyword::INTERSECT,
    Keyword::FOR,
    Keyword::WINDOW,
];

fn keyword(token: Option<&Token>) -> Keyword {
    match token {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    }
}

impl Env<'_> {
    /// The replacement of every argument-less `DATABASE()`, `SCHEMA()`,
    /// `LAST_INSERT_ID()` and `CONNECTION_ID()` call and every read of
    /// `@@autocommit` / `@@in_transaction` / `@@max_allowed_packet` (also
    /// `@@session.`, `@@local.`) by the session's value (`'dbNNNNN'` or
    /// NULL, the 64-bit ID, the session id, 1 or 0, the packet limit), with
    /// `` AS `<as written>` `` after one that is a whole select-list item;
    /// `None` when the statement reads none of them.
    pub(super) fn session_function_edits(&self, tokens: &[TokenWithSpan]) -> Option<Edits> {
        self.session_substitution(tokens).map(|s| s.edits)
    }

    /// [`Env::session_function_edits`], with the ranges replaced.
    pub(super) fn session_substitution(&self, tokens: &[TokenWithSpan]) -> Option<Substitution> {
        let mut edits = Edits::default();
        let mut replaced = Vec::new();
        let significant: Vec<&TokenWithSpan> = tokens
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .collect();
        // In a SET, a variable followed by `=` or `:=` is assigned, not read.
        let is_set = matches!(
            significant.first().map(|t| &t.token),
            Some(Token::Word(w)) if w.quote_style.is_none() && w.keyword == Keyword::SET
        );
        // Per nesting depth: whether a select list is being read there.
        let mut in_list = vec![false];
        for (i, token) in significant.iter().enumerate() {
            match &token.token {
                Token::LParen => in_list.push(false),
                Token::RParen if in_list.len() > 1 => {
                    in_list.pop();
                }
                Token::Word(w) if w.quote_style.is_none() => {
                    if let Some(level) = in_list.last_mut() {
                        if w.keyword == Keyword::SELECT {
                            *level = true;
                        } else if CLAUSES.contains(&w.keyword) {
                            *level = false;
                        }
                    }
                }
                _ => {}
            }
            let Some((function, last)) = session_reference(&significant, i) else {
                continue;
            };
            let assigned = matches!(
                significant.get(last + 1).map(|t| &t.token),
                Some(Token::Eq | Token::Assignment)
            );
            if is_set && assigned {
                continue;
            }
            let (Some(start), Some(end)) = (
                self.src.offset(token.span.start),
                significant
                    .get(last)
                    .and_then(|close| self.src.offset(close.span.end)),
            ) else {
                continue;
            };
            let value = match function {
                Function::Database => self
                    .ctx
                    .current_db
                    .and_then(|(fleet, shard)| {
                        self.topo.fleet(fleet).map(|f| f.database_name(shard))
                    })
                    .map_or_else(
                        || "NULL".to_owned(),
                        |name| format!("'{}'", name.replace('\'', "''")),
                    ),
                Function::LastInsertId => self.ctx.last_insert_id.to_string(),
                Function::RowCount => self.ctx.row_count.to_string(),
                Function::ConnectionId => self.ctx.connection_id.to_string(),
                Function::Autocommit => u8::from(self.ctx.autocommit).to_string(),
                Function::InTransaction => u8::from(self.ctx.in_transaction).to_string(),
                Function::MaxAllowedPacket => {
                    self.topo.config.limits.max_allowed_packet.to_string()
                }
                Function::Version => format!("'{}'", proxy_version(self.ctx.lex.server_version)),
            };
            let previous = i
                .checked_sub(1)
                .and_then(|p| significant.get(p))
                .map(|t| &t.token);
            let next = significant.get(last + 1).map(|t| &t.token);
            let whole_item = in_list.last() == Some(&true)
                && (matches!(previous, Some(Token::Comma))
                    || matches!(
                        keyword(previous),
                        Keyword::SELECT | Keyword::DISTINCT | Keyword::ALL
                    ))
                && (matches!(
                    next,
                    None | Some(Token::Comma | Token::SemiColon | Token::RParen | Token::EOF)
                ) || CLAUSES.contains(&keyword(next)));
            let written = self.src.original_text(start..end).unwrap_or_default();
            let text = if whole_item && !written.is_empty() {
                format!("{value} AS `{}`", written.replace('`', "``"))
            } else {
                value
            };
            edits.replace(start..end, text);
            replaced.push((start..end, whole_item));
        }
        let items = self.select_items(&significant);
        (!replaced.is_empty()).then_some(Substitution {
            edits,
            replaced,
            items,
        })
    }

    /// The byte ranges of the items of the select list of a statement that
    /// starts with `SELECT`: split at the commas outside parentheses, up to
    /// the first clause keyword outside parentheses; empty when the
    /// statement does not start with `SELECT`.
    fn select_items(&self, significant: &[&TokenWithSpan]) -> Vec<Range<usize>> {
        let mut items = Vec::new();
        if keyword(significant.first().map(|t| &t.token)) != Keyword::SELECT {
            return items;
        }
        let mut rest = significant.get(1..).unwrap_or_default();
        while let Some((first, after)) = rest.split_first() {
            match &first.token {
                Token::Word(w)
                    if w.quote_style.is_none()
                        && MODIFIERS.iter().any(|m| m.eq_ignore_ascii_case(&w.value)) =>
                {
                    rest = after
                }
                _ => break,
            }
        }
        let mut depth = 0usize;
        let mut start: Option<&TokenWithSpan> = None;
        let mut last: Option<&TokenWithSpan> = None;
        let mut close = |start: Option<&TokenWithSpan>, last: Option<&TokenWithSpan>| {
            if let (Some(start), Some(last)) = (start, last) {
                if let (Some(a), Some(b)) = (
                    self.src.offset(start.span.start),
                    self.src.offset(last.span.end),
                ) {
                    items.push(a..b);
                }
            }
        };
        for token in rest {
            match &token.token {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                Token::Comma if depth == 0 => {
                    close(start.take(), last.take());
                    continue;
                }
                Token::SemiColon | Token::EOF if depth == 0 => break,
                _ if depth == 0 && CLAUSES.contains(&keyword(Some(&token.token))) => break,
                _ => {}
            }
            start.get_or_insert(token);
            last = Some(token);
        }
        close(start, last);
        items
    }
}

/// The session value read at `significant[i]`, and the index of its last
/// token: an unquoted, unqualified `DATABASE`, `SCHEMA`, `LAST_INSERT_ID`
/// or `CONNECTION_ID` followed by `()`, or `@@autocommit` /
/// `@@in_transaction` / `@@max_allowed_packet` (also after `@@session.` /
/// `@@local.`; `@@global.` only for `max_allowed_packet`).
fn session_reference(significant: &[&TokenWithSpan], i: usize) -> Option<(Function, usize)> {
    let word = |at: usize| match &significant.get(at)?.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.as_str()),
        _ => None,
    };
    let name = word(i)?;
    if i > 0 && matches!(significant.get(i - 1)?.token, Token::Period) {
        return None;
    }
    let variable = |name: &str| {
        if name.eq_ignore_ascii_case("autocommit") {
            Some(Function::Autocommit)
        } else if name.eq_ignore_ascii_case("in_transaction") {
            Some(Function::InTransaction)
        } else if name.eq_ignore_ascii_case("max_allowed_packet") {
            Some(Function::MaxAllowedPacket)
        } else if name.eq_ignore_ascii_case("version") {
            Some(Function::Version)
        } else if name.eq_ignore_ascii_case("identity")
            || name.eq_ignore_ascii_case("last_insert_id")
        {
            Some(Function::LastInsertId)
        } else {
            None
        }
    };
    if let Some(rest) = name.strip_prefix("@@") {
        let global = rest.eq_ignore_ascii_case("global");
        if global || rest.eq_ignore_ascii_case("session") || rest.eq_ignore_ascii_case("local") {
            if !matches!(significant.get(i + 1)?.token, Token::Period) {
                return None;
            }
            return variable(word(i + 2)?)
                .filter(|f| match f {
                    Function::MaxAllowedPacket => true,
                    // A global variable: `@@session.version` is the server's error.
                    Function::Version => global,
                    _ => !global,
                })
                .map(|f| (f, i + 2));
        }
        return variable(rest).map(|f| (f, i));
    }
    if !matches!(significant.get(i + 1)?.token, Token::LParen)
        || !matches!(significant.get(i + 2)?.token, Token::RParen)
    {
        return None;
    }
    if name.eq_ignore_ascii_case("DATABASE") || name.eq_ignore_ascii_case("SCHEMA") {
        Some((Function::Database, i + 2))
    } else if name.eq_ignore_ascii_case("LAST_INSERT_ID") {
        Some((Function::LastInsertId, i + 2))
    } else if name.eq_ignore_ascii_case("ROW_COUNT") {
        Some((Function::RowCount, i + 2))
    } else if name.eq_ignore_ascii_case("CONNECTION_ID") {
        Some((Function::ConnectionId, i + 2))
    } else if name.eq_ignore_ascii_case("VERSION") {
        Some((Function::Version, i + 2))
    } else {
        None
    }
}

/// What `VERSION()` and `@@version` read through the proxy for backends of
/// version `number` (101119 gives `10.11.19-MariaDB-shardgate`), as the
/// proxy answers `SELECT VERSION()`.
pub(crate) fn proxy_version(number: u32) -> String {
    format!(
        "{}.{}.{}-MariaDB-shardgate",
        number / 10_000,
        number / 100 % 100,
        number % 100
    )
}

/// Why `FOUND_ROWS()` and `SQL_CALC_FOUND_ROWS` are refused.
pub(super) const FOUND_ROWS_REFUSED: &str = "FOUND_ROWS() and SQL_CALC_FOUND_ROWS: the count is kept by the backend connection that ran the previous SELECT, \
     which is pooled and may have served another session since; count with SELECT COUNT(*) ... instead";

/// Whether the statement calls `FOUND_ROWS()` or asks for
/// `SQL_CALC_FOUND_ROWS`.
pub(super) fn counts_found_rows(tokens: &[TokenWithSpan]) -> bool {
    let significant: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    significant.iter().enumerate().any(|(i, token)| {
        let Token::Word(w) = token else {
            return false;
        };
        if w.quote_style.is_some() || (i > 0 && matches!(significant[i - 1], Token::Period)) {
            return false;
        }
        w.value.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS")
            || (w.value.eq_ignore_ascii_case("FOUND_ROWS")
                && matches!(significant.get(i + 1), Some(Token::LParen)))
    })
}
