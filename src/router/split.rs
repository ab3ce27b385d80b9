//! Scanning a text for its statements (a multi-statement COM_QUERY) and its
//! parameter markers (COM_STMT_PREPARE), with the lexer [`route`](super::route)
//! uses (MariaDB's reading for the session's [`LexMode`]): a `;` or `?`
//! inside a string, a quoted identifier or a comment is neither.

use std::ops::Range;

use super::lex::{self, Comment, LexError};
use super::plan::{LexMode, RouteError};

/// The byte ranges of the statements of a multi-statement text, split at
/// top-level `;` (not inside strings, comments or quoted identifiers, as
/// MariaDB reads them in `mode`), without the `;` and trimmed of blanks;
/// pieces with no statement in them (only blanks and comments) are dropped.
///
/// Compound statements (`BEGIN ... END`) are split naively at their `;`.
/// A text the lexer refuses (an unterminated string, a `;` inside an
/// executable comment, ...) is one piece, so that routing it reports why.
pub fn split_statements(sql: &(impl AsRef<[u8]> + ?Sized), mode: &LexMode) -> Vec<Range<usize>> {
    let sql = sql.as_ref();
    match lex::lex(sql, mode, u64::MAX) {
        Ok(lexed) => lexed.statements,
        Err(_) => {
            let start = sql
                .iter()
                .position(|&b| !lex::is_space(b))
                .unwrap_or(sql.len());
            let end = sql
                .iter()
                .rposition(|&b| !lex::is_space(b))
                .map_or(0, |i| i + 1);
            if start < end {
                std::iter::once(start..end).collect()
            } else {
                Vec::new()
            }
        }
    }
}

/// Where a text's statements, quoted parts and comments are, as MariaDB
/// reads it: what a tool reading a SQL file (the schema file) needs to
/// split it and to look at its words without its own scanner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outline {
    /// The statements, as [`split_statements`] gives them (a leading
    /// comment is part of its statement).
    pub statements: Vec<Range<usize>>,
    /// Every string literal and quoted identifier, quotes included, in order.
    pub quoted: Vec<Range<usize>>,
    /// Every comment, in order.
    pub comments: Vec<Comment>,
}

/// The [`Outline`] of `sql` read in `mode`, or the lexer's refusal (an
/// unterminated string or comment, ...) with the byte offset it names.
pub fn outline(sql: &(impl AsRef<[u8]> + ?Sized), mode: &LexMode) -> Result<Outline, LexError> {
    let lexed = lex::lex_located(sql.as_ref(), mode, u64::MAX)?;
    Ok(Outline {
        statements: lexed.statements,
        quoted: lexed.literals,
        comments: lexed.comments,
    })
}

/// The byte ranges of the `?` parameter markers of a statement, in order
/// (a `?` inside a string, a comment or a quoted identifier is not one;
/// one inside an executed `/*! ... */` comment is), as MariaDB reads the
/// text in `mode`.
///
/// At execute time the bound values, written as SQL literals (numbers,
/// quoted strings, `X'..'`, `NULL`), replace these ranges and the text is
/// routed with [`route`](super::route).
///
/// Errors: a text the lexer refuses (1064 or 1105), and `?` followed by a
/// name or digits (`?1` is not MySQL; 1064).
pub fn placeholders(
    sql: &(impl AsRef<[u8]> + ?Sized),
    mode: &LexMode,
) -> Result<Vec<Range<usize>>, RouteError> {
    let bytes = sql.as_ref();
    let lexed = lex::lex(bytes, mode, u64::MAX)?;
    for marker in &lexed.markers {
        if let Some(&next) = bytes.get(marker.end) {
            if next.is_ascii_alphanumeric() || next == b'_' || next == b'$' || next >= 0x80 {
                return Err(RouteError::Syntax(format!(
                    "parameter marker at byte {} followed by a name or digits: markers are a plain ?",
                    marker.start
                )));
            }
        }
    }
    Ok(lexed.markers)
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
            // No space around markers (but not before a name: see below).
            ("SELECT a FROM t WHERE a=?)AND b=?", &[24, 32]),
            // LIMIT, functions, executable comments without markers.
            (
                "SELECT /*!40001 SQL_NO_CACHE */ a FROM t LIMIT ?, ?",
                &[47, 50],
            ),
            ("SELECT CONCAT(?, 'x?')", &[14]),
            // Inside an executed executable comment: a marker, in place.
            ("SELECT /*!50000 ? */ 1", &[16]),
            ("SELECT 1 /*!99999 ? */", &[]),
        ];
        for (sql, starts) in cases {
            let ranges =
                placeholders(sql, &LexMode::default()).unwrap_or_else(|e| panic!("{sql}: {e}"));
            let got: Vec<usize> = ranges.iter().map(|r| r.start).collect();
            assert_eq!(&got, starts, "{sql}");
            for r in &ranges {
                assert_eq!(&sql[r.clone()], "?", "{sql}: {r:?}");
            }
        }
        for (sql, kind) in [
            ("SELECT 'unterminated ?", "Syntax"),
            ("SELECT ?1", "Syntax"),
            ("SELECT 1 -- ?\n, ?a", "Syntax"),
            // MariaDB: a marker directly before a name is a syntax error.
            ("SELECT a FROM t WHERE a=?AND b=?", "Syntax"),
            ("SELECT /*! ? ; */ 1", "Unsupported"),
        ] {
            let got = placeholders(sql, &LexMode::default());
            let ok = matches!(
                (&got, kind),
                (Err(RouteError::Syntax(_)), "Syntax")
                    | (Err(RouteError::Unreadable(_)), "Unsupported")
            );
            assert!(ok, "{sql}: {got:?}");
        }
    }

    #[test]
    fn outline_of_a_file() {
        let sql =
            "-- head\nCREATE TABLE a (x INT DEFAULT ';' /* c; */) /*!50100 ENGINE=InnoDB */;\n\
                   /*+ SHARD(1) */ SELECT `q``;` # end";
        let got = outline(sql, &LexMode::default()).unwrap();
        assert_eq!(
            texts(sql, &got.statements),
            [
                "-- head\nCREATE TABLE a (x INT DEFAULT ';' /* c; */) /*!50100 ENGINE=InnoDB */",
                "/*+ SHARD(1) */ SELECT `q``;` # end"
            ]
        );
        assert_eq!(texts(sql, &got.quoted), ["';'", "`q``;`"]);
        let comments: Vec<(&str, bool)> = got
            .comments
            .iter()
            .map(|c| (&sql[c.range.clone()], c.plain))
            .collect();
        assert_eq!(
            comments,
            [
                ("-- head", true),
                ("/* c; */", true),
                ("/*!50100 ENGINE=InnoDB */", false),
                ("/*+ SHARD(1) */", false),
                ("# end", true)
            ]
        );
        for (sql, at) in [
            ("SELECT 1;\nSELECT 'oops", 17),
            ("SELECT 1 /* oops", 9),
            ("SELECT /*!50100 1", 7),
        ] {
            let e = outline(sql, &LexMode::default()).unwrap_err();
            assert_eq!(e.at, at, "{sql}: {e:?}");
            assert!(matches!(e.error, RouteError::Syntax(_)), "{sql}: {e:?}");
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
            let ranges = split_statements(sql, &LexMode::default());
            assert_eq!(&texts(sql, &ranges), pieces, "{sql:?}");
        }
    }
}
