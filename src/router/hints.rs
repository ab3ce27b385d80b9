//! shardgate's routing hints: `/*+ SHARD(n) */`, `/*+ COLOCATE(id) */` and
//! `/*+ SCATTER */`, anywhere in a statement.
//!
//! A hint comment may also carry real MySQL optimizer hints
//! (`/*+ SHARD(7) MAX_EXECUTION_TIME(100) */`): ours are taken out and the
//! others are kept; a comment left empty is removed with one of the spaces
//! around it.

use std::ops::Range;

use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

use super::plan::RouteError;
use super::text::{Edits, Source};

/// One of our hints, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hint {
    /// `SHARD(n)`: the shard number.
    Shard(u32),
    /// `COLOCATE(id)`: the 64-bit ID whose shard to use.
    Colocate(u64),
    /// `SCATTER`: a read with no shard key runs on every shard of its
    /// table's fleet (ignored when something else names the shard).
    Scatter,
}

/// The hints of a statement.
#[derive(Debug, Default)]
pub(crate) struct Hints {
    /// Every hint found, in text order.
    pub hints: Vec<Hint>,
}

impl Hints {
    /// Whether there is a `SCATTER` hint.
    pub fn scatter(&self) -> bool {
        self.hints.contains(&Hint::Scatter)
    }
}

/// An item of a hint comment: a word and, if present, its parenthesised
/// argument text; with its byte range inside the comment body.
struct Item<'c> {
    name: &'c str,
    arg: Option<&'c str>,
    range: Range<usize>,
}

/// Splits a hint comment body (after `+`) into items. Anything that is not
/// `word` or `word(...)` becomes an item with an empty name (kept as is).
fn items(body: &str) -> Vec<Item<'_>> {
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() || b == b',' {
            i += 1;
            continue;
        }
        let start = i;
        if b.is_ascii_alphabetic() || b == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let name_end = i;
            let mut j = i;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let mut arg = None;
            if j < bytes.len() && bytes[j] == b'(' {
                let mut depth = 0usize;
                let mut k = j;
                while k < bytes.len() {
                    match bytes[k] {
                        b'(' => depth += 1,
                        b')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                // Unclosed: the argument runs to the end.
                let close = k.min(bytes.len());
                arg = body.get(j + 1..close);
                i = (close + 1).min(bytes.len());
            }
            out.push(Item {
                name: body.get(start..name_end).unwrap_or_default(),
                arg,
                range: start..i,
            });
        } else {
            // Not a hint word: keep the run up to the next separator.
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b',' {
                i += 1;
            }
            out.push(Item {
                name: "",
                arg: None,
                range: start..i,
            });
        }
    }
    out
}

fn bad_hint(hint: &str, reason: impl Into<String>) -> RouteError {
    RouteError::BadHint {
        hint: hint.trim().to_owned(),
        reason: reason.into(),
    }
}

/// Parses one of our hints from its item.
fn parse_item(item: &Item<'_>, raw: &str) -> Result<Option<Hint>, RouteError> {
    let name = item.name;
    let arg = item.arg.map(str::trim);
    if name.eq_ignore_ascii_case("SHARD") {
        let arg = arg.ok_or_else(|| bad_hint(raw, "expected SHARD(n) with a shard number"))?;
        let shard = arg
            .parse::<u32>()
            .map_err(|_| bad_hint(raw, format!("'{arg}' is not a shard number")))?;
        Ok(Some(Hint::Shard(shard)))
    } else if name.eq_ignore_ascii_case("COLOCATE") {
        let arg = arg.ok_or_else(|| bad_hint(raw, "expected COLOCATE(id) with a 64-bit ID"))?;
        let unquoted = strip_quotes(arg);
        let id = unquoted.parse::<u64>().map_err(|_| RouteError::BadId {
            id: arg.to_owned(),
            reason: "COLOCATE needs a 64-bit ID written as a decimal number".to_owned(),
        })?;
        Ok(Some(Hint::Colocate(id)))
    } else if name.eq_ignore_ascii_case("SCATTER") {
        match arg {
            None => Ok(Some(Hint::Scatter)),
            Some(_) => Err(bad_hint(raw, "SCATTER takes no argument")),
        }
    } else {
        Ok(None)
    }
}

fn strip_quotes(s: &str) -> &str {
    for q in ['\'', '"'] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// Finds our hints in the statement's comments and records the edits that
/// take them out of the text sent to the backend.
pub(crate) fn scan(
    tokens: &[TokenWithSpan],
    src: &Source<'_>,
    edits: &mut Edits,
) -> Result<Hints, RouteError> {
    let mut hints = Hints::default();
    for token in tokens {
        let Token::Whitespace(Whitespace::MultiLineComment(comment)) = &token.token else {
            continue;
        };
        let Some(body) = comment.strip_prefix('+') else {
            continue;
        };
        let items = items(body);
        let mut ours = 0;
        for item in &items {
            let raw = body.get(item.range.clone()).unwrap_or_default();
            if let Some(hint) = parse_item(item, raw)? {
                hints.hints.push(hint);
                ours += 1;
            }
        }
        if ours == 0 {
            continue;
        }
        let Some(range) = src.range(token.span) else {
            continue;
        };
        if ours == items.len() {
            remove_comment(src.original, range, edits);
        } else {
            let mut kept = String::from("/*+");
            for item in &items {
                let raw = body.get(item.range.clone()).unwrap_or_default();
                if parse_item(item, raw).ok().flatten().is_none() {
                    kept.push(' ');
                    kept.push_str(raw);
                }
            }
            kept.push_str(" */");
            edits.replace(range, kept);
        }
    }
    Ok(hints)
}

/// Removes a comment, with one side's spaces so no double space is left,
/// or leaving one space where it separated two tokens.
fn remove_comment(bytes: &[u8], range: Range<usize>, edits: &mut Edits) {
    let blank = |b: u8| b == b' ' || b == b'\t';
    let space_before = range.start == 0 || bytes.get(range.start - 1).is_some_and(|&b| blank(b));
    let space_after = bytes.get(range.end).is_none_or(|&b| blank(b));
    let mut start = range.start;
    let mut end = range.end;
    if space_before && space_after {
        while end < bytes.len() && blank(bytes[end]) {
            end += 1;
        }
        if end == bytes.len() {
            while start > 0 && blank(bytes[start - 1]) {
                start -= 1;
            }
        }
        edits.replace(start..end, "");
    } else if space_before || space_after {
        edits.replace(start..end, "");
    } else {
        edits.replace(start..end, " ");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::tokenizer::Tokenizer;

    fn run(sql: &str) -> Result<(Vec<Hint>, String), RouteError> {
        let tokens = Tokenizer::new(&MySqlDialect {}, sql)
            .tokenize_with_location()
            .expect("tokenizes");
        let src = Source::new(sql.as_bytes(), sql);
        let mut edits = Edits::default();
        let hints = scan(&tokens, &src, &mut edits)?;
        let text = edits.apply(sql.as_bytes()).expect("no overlap");
        Ok((hints.hints, String::from_utf8(text).expect("UTF-8")))
    }

    #[test]
    fn hints_found_and_removed() {
        let cases: &[(&str, &[Hint], &str)] = &[
            (
                "INSERT /*+ SHARD(3429) */ INTO pins (data) VALUES ('x')",
                &[Hint::Shard(3429)],
                "INSERT INTO pins (data) VALUES ('x')",
            ),
            (
                "SELECT 1 /*+ shard( 7 ) scatter */",
                &[Hint::Shard(7), Hint::Scatter],
                "SELECT 1",
            ),
            (
                "SELECT/*+ COLOCATE('241294492511762325') */1",
                &[Hint::Colocate(241294492511762325)],
                "SELECT 1",
            ),
            (
                "SELECT /*+ SHARD(1) MAX_EXECUTION_TIME(100) */ 1",
                &[Hint::Shard(1)],
                "SELECT /*+ MAX_EXECUTION_TIME(100) */ 1",
            ),
            (
                "SELECT /*+ MAX_EXECUTION_TIME(100) */ 1 /* plain */",
                &[],
                "SELECT /*+ MAX_EXECUTION_TIME(100) */ 1 /* plain */",
            ),
            ("SELECT '/*+ SHARD(1) */'", &[], "SELECT '/*+ SHARD(1) */'"),
        ];
        for (sql, hints, out) in cases {
            let (h, text) = run(sql).expect("valid hints");
            assert_eq!(&h, hints, "{sql}");
            assert_eq!(&text, out, "{sql}");
        }
    }

    #[test]
    fn bad_hints_rejected() {
        for sql in [
            "SELECT /*+ SHARD(x) */ 1",
            "SELECT /*+ SHARD */ 1",
            "SELECT /*+ SCATTER(1) */ 1",
        ] {
            assert!(matches!(run(sql), Err(RouteError::BadHint { .. })), "{sql}");
        }
        assert!(matches!(
            run("SELECT /*+ COLOCATE(abc) */ 1"),
            Err(RouteError::BadId { .. })
        ));
    }
}
