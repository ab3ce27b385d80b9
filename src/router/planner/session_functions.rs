//! `DATABASE()`, `SCHEMA()` and `LAST_INSERT_ID()` inside a statement sent
//! to a backend: the pooled connection knows neither the session's
//! database nor its composed 64-bit insert ID, so each call is replaced by
//! the session's value as a literal. A call that is a whole select-list
//! item keeps the column name a server gives it (the call as written).

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::Env;
use crate::router::text::Edits;

/// Which session function a call names.
enum Function {
    Database,
    LastInsertId,
}

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
    /// The replacement of every argument-less `DATABASE()`, `SCHEMA()` and
    /// `LAST_INSERT_ID()` call by the session's value (`'dbNNNNN'` or NULL,
    /// the 64-bit ID), with `` AS `<call>` `` after a call that is a whole
    /// select-list item; `None` when the statement calls none of them.
    pub(super) fn session_function_edits(&self, tokens: &[TokenWithSpan]) -> Option<Edits> {
        let mut edits = Edits::default();
        let mut found = false;
        let significant: Vec<&TokenWithSpan> = tokens
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .collect();
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
            let Some(function) = session_function(&significant, i) else {
                continue;
            };
            let (Some(start), Some(end)) = (
                self.src.offset(token.span.start),
                significant
                    .get(i + 2)
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
            };
            let previous = i
                .checked_sub(1)
                .and_then(|p| significant.get(p))
                .map(|t| &t.token);
            let next = significant.get(i + 3).map(|t| &t.token);
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
            found = true;
        }
        found.then_some(edits)
    }
}

/// The session function called at `significant[i]`: an unquoted,
/// unqualified `DATABASE`, `SCHEMA` or `LAST_INSERT_ID` followed by `()`.
fn session_function(significant: &[&TokenWithSpan], i: usize) -> Option<Function> {
    let Token::Word(word) = &significant.get(i)?.token else {
        return None;
    };
    if word.quote_style.is_some()
        || !matches!(significant.get(i + 1)?.token, Token::LParen)
        || !matches!(significant.get(i + 2)?.token, Token::RParen)
    {
        return None;
    }
    if i > 0 && matches!(significant.get(i - 1)?.token, Token::Period) {
        return None;
    }
    let name = word.value.as_str();
    if name.eq_ignore_ascii_case("DATABASE") || name.eq_ignore_ascii_case("SCHEMA") {
        Some(Function::Database)
    } else if name.eq_ignore_ascii_case("LAST_INSERT_ID") {
        Some(Function::LastInsertId)
    } else {
        None
    }
}
