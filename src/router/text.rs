//! Source positions and text edits.
//!
//! sqlparser reports positions as 1-based (line, column) pairs where the
//! column counts characters, not bytes. [`Source`] turns them into byte
//! offsets of the original statement, and [`Edits`] applies a list of
//! (byte range → replacement) edits to it, so the text sent to a backend is
//! the client's text with only the routed parts changed.

use std::borrow::Cow;
use std::ops::Range;

use sqlparser::tokenizer::{Location, Span};

/// The statement: the client's text, the lexer's shadow of it (what
/// sqlparser read, same byte offsets) and a line index of the shadow for
/// position lookups.
pub(crate) struct Source<'a> {
    /// The statement as the client sent it: edits apply to it, and text
    /// copied into the statement sent comes from it.
    pub original: &'a [u8],
    /// The lexer's shadow (see [`crate::router::lex`]): positions, and
    /// re-reading the tokens, are on it.
    pub sql: &'a str,
    /// Byte offset of the start of line 2, 3, ... (empty for one-line text,
    /// so the common case allocates nothing).
    later_lines: Vec<usize>,
    /// Whether the text is pure ASCII (columns are then byte offsets).
    ascii: bool,
}

impl<'a> Source<'a> {
    /// Indexes `sql`, the shadow of `original` (same length).
    pub fn new(original: &'a [u8], sql: &'a str) -> Self {
        let later_lines = sql
            .bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        Source {
            original,
            sql,
            later_lines,
            ascii: sql.is_ascii(),
        }
    }

    /// The byte offset of a location, or `None` for an empty/unknown one.
    pub fn offset(&self, loc: Location) -> Option<usize> {
        let line = usize::try_from(loc.line).ok()?;
        let column = usize::try_from(loc.column).ok()?.checked_sub(1)?;
        let start = match line {
            0 => return None,
            1 => 0,
            n => *self.later_lines.get(n - 2)?,
        };
        if self.ascii {
            let offset = start + column;
            return (offset <= self.sql.len()).then_some(offset);
        }
        let rest = self.sql.get(start..)?;
        let mut chars = rest.char_indices();
        match chars.nth(column) {
            Some((i, _)) => Some(start + i),
            // One past the last character: the end of the text.
            None => (rest.chars().count() == column).then_some(self.sql.len()),
        }
    }

    /// The byte range of a span.
    pub fn range(&self, span: Span) -> Option<Range<usize>> {
        let start = self.offset(span.start)?;
        let end = self.offset(span.end)?;
        (start <= end).then_some(start..end)
    }

    /// The shadow's text of a span (empty if the span is unknown), for
    /// messages and reading.
    pub fn text(&self, span: Span) -> &'a str {
        self.range(span)
            .and_then(|r| self.sql.get(r))
            .unwrap_or_default()
    }

    /// The client's text of a byte range, to copy into the statement sent
    /// (`None` if it is not whole characters).
    pub fn original_text(&self, range: Range<usize>) -> Option<&'a str> {
        std::str::from_utf8(self.original.get(range)?).ok()
    }
}

/// Byte offsets of locations visited in increasing order, found in one
/// pass over the text (for scanning every token of a long statement, where
/// [`Source::offset`] would rescan multi-byte lines).
pub(crate) struct Cursor<'a> {
    sql: &'a str,
    byte: usize,
    line: u64,
    column: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `sql`.
    pub fn new(sql: &'a str) -> Self {
        Cursor {
            sql,
            byte: 0,
            line: 1,
            column: 1,
        }
    }

    /// The byte offset of `loc`, which must not be before the last one
    /// sought; `None` for an unknown location or one past the text.
    pub fn seek(&mut self, loc: Location) -> Option<usize> {
        while (self.line, self.column) < (loc.line, loc.column) {
            let c = self.sql.get(self.byte..)?.chars().next()?;
            self.byte += c.len_utf8();
            if c == '\n' {
                self.line += 1;
                self.column = 1;
            } else {
                self.column += 1;
            }
        }
        ((self.line, self.column) == (loc.line, loc.column)).then_some(self.byte)
    }

    /// The byte range of a span that does not start before the last
    /// location sought.
    pub fn range(&mut self, span: Span) -> Option<Range<usize>> {
        let start = self.seek(span.start)?;
        let end = self.seek(span.end)?;
        Some(start..end)
    }
}

/// One replacement of a byte range of the original text.
#[derive(Debug, Clone)]
struct Edit {
    range: Range<usize>,
    text: Cow<'static, str>,
}

/// A set of non-overlapping edits to the original text.
#[derive(Debug, Default, Clone)]
pub(crate) struct Edits {
    edits: Vec<Edit>,
}

/// Two edits touched the same text: a bug in the planner, reported as an
/// unsupported statement rather than sending wrong SQL.
#[derive(Debug)]
pub(crate) struct Overlap;

impl Edits {
    /// Replaces `range` with `text`.
    pub fn replace(&mut self, range: Range<usize>, text: impl Into<Cow<'static, str>>) {
        self.edits.push(Edit {
            range,
            text: text.into(),
        });
    }

    /// Inserts `text` at byte offset `at`.
    pub fn insert(&mut self, at: usize, text: impl Into<Cow<'static, str>>) {
        self.replace(at..at, text);
    }

    /// Whether no edit was made.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// The edited text (the original, copied once, if there are no edits).
    pub fn apply(mut self, sql: &[u8]) -> Result<Vec<u8>, Overlap> {
        if self.edits.is_empty() {
            return Ok(sql.to_vec());
        }
        // Stable: insertions at the same offset keep their order.
        self.edits.sort_by_key(|e| (e.range.start, e.range.end));
        let extra: usize = self.edits.iter().map(|e| e.text.len()).sum();
        let mut out = Vec::with_capacity(sql.len() + extra);
        let mut pos = 0;
        for edit in &self.edits {
            if edit.range.start < pos || edit.range.end > sql.len() {
                return Err(Overlap);
            }
            out.extend_from_slice(sql.get(pos..edit.range.start).ok_or(Overlap)?);
            out.extend_from_slice(edit.text.as_bytes());
            pos = edit.range.end;
        }
        out.extend_from_slice(sql.get(pos..).ok_or(Overlap)?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_ascii_and_multibyte() {
        let src = Source::new("SELECT 'é'\n, x".as_bytes(), "SELECT 'é'\n, x");
        assert_eq!(src.offset(Location::new(1, 1)), Some(0));
        // 'é' is two bytes: column 10 (the closing quote) is byte 10.
        assert_eq!(src.offset(Location::new(1, 10)), Some(10));
        assert_eq!(src.offset(Location::new(1, 11)), Some(11));
        assert_eq!(src.offset(Location::new(2, 3)), Some(14));
        assert_eq!(src.offset(Location::new(2, 4)), Some(15));
        assert_eq!(src.offset(Location::new(2, 5)), None);
        assert_eq!(src.offset(Location::new(0, 0)), None);
    }

    #[test]
    fn cursor_matches_source() {
        let sql = "SELECT 'é'\n, x ✓\r\n;";
        let src = Source::new(sql.as_bytes(), sql);
        let mut cursor = Cursor::new(sql);
        for (line, column) in [
            (1, 1),
            (1, 10),
            (1, 11),
            (2, 1),
            (2, 5),
            (2, 6),
            (2, 7),
            (3, 1),
            (3, 2),
        ] {
            let loc = Location::new(line, column);
            assert_eq!(cursor.seek(loc), src.offset(loc), "{line}:{column}");
        }
        assert_eq!(cursor.seek(Location::new(3, 3)), None);
        assert_eq!(Cursor::new(sql).seek(Location::new(0, 0)), None);
    }

    #[test]
    fn edits_apply_in_order() {
        let mut e = Edits::default();
        e.replace(7..9, "local_id");
        e.insert(0, "<");
        e.insert(0, "!");
        assert_eq!(e.apply(b"SELECT id").unwrap(), b"<!SELECT local_id");
        let mut e = Edits::default();
        e.replace(0..3, "a");
        e.replace(2..4, "b");
        assert!(e.apply(b"abcdef").is_err());
    }
}
