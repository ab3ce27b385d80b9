//! Scanning a text for its statements (a multi-statement COM_QUERY) and its
//! parameter markers (COM_STMT_PREPARE), with the same tokenizer as
//! [`route`](super::route): a `;` or `?` inside a string, a quoted
//! identifier or a comment is neither.
//!
//! sqlparser expands a MySQL executable comment (`/*! ... */`) into the
//! tokens of its content but reports their positions shifted; the text is
//! tokenized with those comments read as plain comments (same length, so
//! positions hold), and a `?` inside one is refused.

use std::borrow::Cow;
use std::ops::Range;

use sqlparser::dialect::MySqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer, TokenizerError, Whitespace};

use super::plan::RouteError;
use super::text::Cursor;

/// The tokens of `sql` with their byte ranges, executable comments read as
/// plain comments.
fn tokens(sql: &str) -> Result<Vec<(Token, Range<usize>)>, TokenizerError> {
    let masked: Cow<'_, str> = if sql.contains("/*!") {
        // Same length and line structure: positions are the original's.
        Cow::Owned(sql.replace("/*!", "/* "))
    } else {
        Cow::Borrowed(sql)
    };
    let tokens = Tokenizer::new(&MySqlDialect {}, &masked).tokenize_with_location()?;
    let mut cursor = Cursor::new(sql);
    Ok(tokens
        .into_iter()
        .filter_map(|t| {
            let range = cursor.range(t.span)?;
            Some((t.token, range))
        })
        .collect())
}

/// Characters trimmed around a statement.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}')
}

/// `range` of `sql` without blanks around it.
fn trimmed(sql: &str, range: Range<usize>) -> Range<usize> {
    let text = sql.get(range.clone()).unwrap_or_default();
    let start = range.start + (text.len() - text.trim_start_matches(is_blank).len());
    let end = range.end - (text.len() - text.trim_end_matches(is_blank).len());
    start..end.max(start)
}

/// The byte ranges of the statements of a multi-statement text, split at
/// top-level `;` (not inside strings, comments or quoted identifiers),
/// without the `;` and trimmed of blanks; pieces with no statement in them
/// (only blanks and comments) are dropped.
///
/// Compound statements (`BEGIN ... END`) are split naively at their `;`.
/// A text that does not tokenize (an unterminated string) is one piece, so
/// that routing it reports the syntax error.
pub fn split_statements(sql: &str) -> Vec<Range<usize>> {
    let whole = trimmed(sql, 0..sql.len());
    let Ok(tokens) = tokens(sql) else {
        return if whole.is_empty() {
            Vec::new()
        } else {
            vec![whole]
        };
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut significant = false;
    for (token, range) in tokens {
        match token {
            Token::SemiColon => {
                if significant {
                    out.push(trimmed(sql, start..range.start));
                }
                start = range.end;
                significant = false;
            }
            Token::Whitespace(_) | Token::EOF => {}
            _ => significant = true,
        }
    }
    if significant {
        out.push(trimmed(sql, start..sql.len()));
    }
    out
}

/// The byte ranges of the `?` parameter markers of a statement, in order
/// (a `?` inside a string, a comment or a quoted identifier is not one).
///
/// At execute time the bound values, written as SQL literals (numbers,
/// quoted strings, `X'..'`, `NULL`), replace these ranges and the text is
/// routed with [`route`](super::route).
///
/// Errors: a text that does not tokenize (1064), `?` followed by digits
/// (`?1` is not MySQL; 1064), and a `?` inside a `/*! ... */` executable
/// comment, which the server would count but shardgate cannot place.
pub fn placeholders(sql: &str) -> Result<Vec<Range<usize>>, RouteError> {
    let tokens = tokens(sql).map_err(|e| RouteError::Syntax(e.to_string()))?;
    let mut out = Vec::new();
    for (token, range) in tokens {
        match token {
            Token::Placeholder(p) if p == "?" => out.push(range),
            Token::Placeholder(p) if p.starts_with('?') => {
                return Err(RouteError::Syntax(format!(
                    "parameter marker {p}: markers are a plain ?"
                )))
            }
            Token::Whitespace(Whitespace::MultiLineComment(_))
                if sql
                    .get(range)
                    .is_some_and(|c| c.starts_with("/*!") && c.contains('?')) =>
            {
                return Err(RouteError::Unsupported(
                    "a ? parameter marker inside a /*! ... */ executable comment".to_owned(),
                ))
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of each range.
    fn texts<'s>(sql: &'s str, ranges: &[Range<usize>]) -> Vec<&'s str> {
        ranges.iter().map(|r| &sql[r.clone()]).collect()
    }

    #[test]
    fn placeholder_ranges() {
        let cases: &[(&str, &[usize])] = &[
            ("SELECT 1", &[]),
            ("SELECT ?", &[7]),
            ("SELECT data FROM pins WHERE id = ?", &[33]),
            ("SELECT a FROM t WHERE id IN (?, ?,?)", &[29, 32, 34]),
            ("INSERT INTO t (a, b) VALUES (?, ?)", &[29, 32]),
            // Not markers: strings, comments, quoted identifiers.
            ("SELECT '?', \"?\", `?`, `a?b` FROM t WHERE x = ?", &[45]),
            ("SELECT 'it''s ?', 'a\\'?' , ?", &[27]),
            ("SELECT /* ? */ ? -- ?\n, ? # ?\n", &[15, 24]),
            ("SELECT /*+ SHARD(?) */ ?", &[23]),
            ("SELECT x'3F', ?", &[14]),
            // Multi-byte text before and between markers.
            (
                "SELECT 'héllo ✓ 日本', ? FROM t WHERE a = '?' AND b = ?",
                &[28, 59],
            ),
            ("SELECT `日本?`\n, ?\n, '😀', ?", &[19, 31]),
            // No space around markers.
            ("SELECT a FROM t WHERE a=?AND b=?", &[24, 31]),
            // LIMIT, functions, executable comments without markers.
            (
                "SELECT /*!40001 SQL_NO_CACHE */ a FROM t LIMIT ?, ?",
                &[47, 50],
            ),
            ("SELECT CONCAT(?, 'x?')", &[14]),
        ];
        for (sql, starts) in cases {
            let ranges = placeholders(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let got: Vec<usize> = ranges.iter().map(|r| r.start).collect();
            assert_eq!(&got, starts, "{sql}");
            for r in &ranges {
                assert_eq!(&sql[r.clone()], "?", "{sql}: {r:?}");
            }
        }
        for (sql, kind) in [
            ("SELECT 'unterminated ?", "Syntax"),
            ("SELECT ?1", "Syntax"),
            ("SELECT /*!50000 ? */ 1", "Unsupported"),
        ] {
            let got = placeholders(sql);
            let ok = matches!(
                (&got, kind),
                (Err(RouteError::Syntax(_)), "Syntax")
                    | (Err(RouteError::Unsupported(_)), "Unsupported")
            );
            assert!(ok, "{sql}: {got:?}");
        }
    }

    #[test]
    fn statements_split() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("  ;  ; ", &[]),
            ("SELECT 1", &["SELECT 1"]),
            ("SELECT 1;", &["SELECT 1"]),
            ("SELECT 1; SELECT 2", &["SELECT 1", "SELECT 2"]),
            (
                " SELECT 1 ;\n\tSELECT 2;;\r\n SELECT 3 ; ",
                &["SELECT 1", "SELECT 2", "SELECT 3"],
            ),
            // `;` in strings, quoted identifiers and comments.
            (
                "SELECT ';', \";\", `a;b` FROM t; SELECT 'it''s;'",
                &["SELECT ';', \";\", `a;b` FROM t", "SELECT 'it''s;'"],
            ),
            (
                "SELECT 1 /* ; */; SELECT 2 -- ;\n; SELECT 3 # ;",
                &["SELECT 1 /* ; */", "SELECT 2 -- ;", "SELECT 3 # ;"],
            ),
            // Comment-only pieces are dropped; leading comments (hints) kept.
            ("SELECT 1; -- done", &["SELECT 1"]),
            (
                "/*+ SHARD(7) */ SELECT 1; /* c */ ;",
                &["/*+ SHARD(7) */ SELECT 1"],
            ),
            // Multi-byte text.
            (
                "INSERT INTO t VALUES ('日本;✓');SELECT '😀'",
                &["INSERT INTO t VALUES ('日本;✓')", "SELECT '😀'"],
            ),
            // Executable comments are kept whole.
            (
                "SELECT /*!40001 SQL_NO_CACHE */ 1; SELECT 2",
                &["SELECT /*!40001 SQL_NO_CACHE */ 1", "SELECT 2"],
            ),
            // Compound statements are split naively.
            (
                "BEGIN NOT ATOMIC SELECT 1; END",
                &["BEGIN NOT ATOMIC SELECT 1", "END"],
            ),
            // A text that does not tokenize stays one piece.
            (" SELECT 1; SELECT 'oops ", &["SELECT 1; SELECT 'oops"]),
        ];
        for (sql, pieces) in cases {
            let ranges = split_statements(sql);
            assert_eq!(&texts(sql, &ranges), pieces, "{sql:?}");
        }
    }
}
