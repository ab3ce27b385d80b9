//! Statements that write through a function: a read (`SELECT`, `DO`, a
//! `SET` of a variable) can still change the server. Sequences
//! (`NEXTVAL(s)`, `SETVAL(s, n)`, `NEXT VALUE FOR s`, Oracle-mode
//! `s.NEXTVAL`), user-level locks (`GET_LOCK`, `RELEASE_LOCK`,
//! `RELEASE_ALL_LOCKS`) and any function that is not one of MariaDB's own:
//! a stored function (`db00001.f()`, or `f()` under `USE`) or a UDF may
//! modify data. Read from the token stream, so it holds for every kind of
//! statement, parsed or not. What only reads (`LASTVAL`, `PREVIOUS VALUE
//! FOR`, `IS_FREE_LOCK`, `IS_USED_LOCK`, `SLEEP`) is not counted.
//!
//! Known gap: a stored function named after a keyword of MariaDB's
//! grammar (`comment()`) and called without its database reads as built
//! in.

use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::function_names::{KEYWORDS, NATIVE_FUNCTIONS};

/// Built-in functions that change the server: sequences and user locks.
const WRITING_FUNCTIONS: [&str; 5] = [
    "GET_LOCK",
    "NEXTVAL",
    "RELEASE_ALL_LOCKS",
    "RELEASE_LOCK",
    "SETVAL",
];

/// Whether the statement calls a function that writes, or may write.
pub(super) fn writes_through_function(tokens: &[TokenWithSpan]) -> bool {
    // Each significant token, and whether blanks or comments came before it.
    let mut significant: Vec<(&Token, bool)> = Vec::with_capacity(tokens.len());
    let mut blank = false;
    for token in tokens {
        if let Token::Whitespace(_) = token.token {
            blank = true;
        } else {
            significant.push((&token.token, blank));
            blank = false;
        }
    }
    let closes = matching_parens(&significant);
    (0..significant.len()).any(|i| call_writes(&significant, &closes, i))
}

/// Whether the statement leaves session state on its connection: it
/// assigns a user variable (`@v := ...`, `... INTO @v`) or calls a
/// built-in that does (a user lock, a sequence's `NEXTVAL` / `SETVAL` /
/// `NEXT VALUE FOR`, which set its `LASTVAL`).
pub(super) fn leaves_session_state(tokens: &[TokenWithSpan]) -> bool {
    let significant: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let word = |at: usize| match significant.get(at) {
        Some(Token::Word(w)) if w.quote_style.is_none() => Some(w.value.as_str()),
        _ => None,
    };
    (0..significant.len()).any(|i| {
        let variable = |at: usize| {
            matches!(significant.get(at), Some(Token::AtSign))
                || word(at).is_some_and(|w| w.starts_with('@'))
        };
        let is =
            |at: usize, expected: &str| word(at).is_some_and(|w| w.eq_ignore_ascii_case(expected));
        let call = matches!(significant.get(i + 1), Some(Token::LParen))
            && word(i)
                .is_some_and(|w| WRITING_FUNCTIONS.contains(&w.to_ascii_uppercase().as_str()));
        matches!(significant[i], Token::Assignment)
            || (is(i, "INTO") && variable(i + 1))
            || (is(i, "NEXT") && is(i + 1, "VALUE") && is(i + 2, "FOR"))
            || call
    })
}

/// For each significant token that is `(`, the position of its `)`.
fn matching_parens(significant: &[(&Token, bool)]) -> Vec<Option<usize>> {
    let mut closes = vec![None; significant.len()];
    let mut open = Vec::new();
    for (at, (token, _)) in significant.iter().enumerate() {
        match token {
            Token::LParen => open.push(at),
            Token::RParen => {
                if let Some(start) = open.pop() {
                    closes[start] = Some(at);
                }
            }
            _ => {}
        }
    }
    closes
}

/// Whether significant token `i` starts a call (or sequence access) that
/// writes.
fn call_writes(significant: &[(&Token, bool)], closes: &[Option<usize>], i: usize) -> bool {
    let Some((Token::Word(word), _)) = significant.get(i) else {
        return false;
    };
    let word_at = |at: usize, expected: &str| {
        matches!(significant.get(at), Some((Token::Word(w), _))
            if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(expected))
    };
    let qualified = i > 0 && matches!(significant.get(i - 1), Some((Token::Period, _)));
    if word.quote_style.is_none() {
        if word_at(i, "NEXT") && word_at(i + 1, "VALUE") && word_at(i + 2, "FOR") {
            return true;
        }
        if qualified && word_at(i, "NEXTVAL") {
            return true;
        }
    }
    let Some((Token::LParen, spaced)) = significant.get(i + 1) else {
        return false;
    };
    if is_column_list(significant, closes, i + 1) {
        return false;
    }
    if qualified || word.quote_style.is_some() {
        // `db.f(...)`, `` `f`(...) ``: a stored function.
        return true;
    }
    let name = word.value.to_ascii_uppercase();
    if WRITING_FUNCTIONS.contains(&name.as_str()) {
        return true;
    }
    let built_in = KEYWORDS.binary_search(&name.as_str()).is_ok()
        || (!spaced && NATIVE_FUNCTIONS.binary_search(&name.as_str()).is_ok())
        || (!spaced && is_spatial(&name));
    !built_in
}

/// Spatial functions (`ST_X`, `MBRContains`): built in, listed by prefix.
fn is_spatial(name: &str) -> bool {
    name.starts_with("ST_") || name.starts_with("MBR")
}

/// Whether the parenthesis at `open` encloses a CTE's column list
/// (`WITH c (a, b) AS (...)`): its match is followed by `AS (`.
fn is_column_list(significant: &[(&Token, bool)], closes: &[Option<usize>], open: usize) -> bool {
    let Some(Some(close)) = closes.get(open) else {
        return false;
    };
    let as_follows = matches!(significant.get(close + 1), Some((Token::Word(w), _))
        if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("AS"));
    as_follows && matches!(significant.get(close + 2), Some((Token::LParen, _)))
}
