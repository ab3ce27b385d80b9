//! MariaDB's lexical reading of a statement, over its bytes.
//!
//! [`lex`] scans the statement as the server's lexer (`sql/sql_lex.cc`) will
//! for the session's [`LexMode`]: string literals (backslash escapes unless
//! NO_BACKSLASH_ESCAPES, doubled quotes), `"..."` as an identifier under
//! ANSI_QUOTES, backtick identifiers, `#`, `-- ` and `/* */` comments,
//! executable comments (`/*!`, `/*!NNNNN`, `/*M!`, `/*M!NNNNNN`) expanded or
//! skipped as the server's version decides, and the multibyte characters of
//! big5, gbk and sjis stepped over whole (a trail byte 0x5C is not a
//! backslash; in an unquoted identifier each becomes U+0080, an identifier
//! character of the same length).
//!
//! Its product is a *shadow* of the text: valid UTF-8 with exactly as many
//! bytes, on which sqlparser reads what the server will read, at the same
//! offsets. Executed comment markers, skipped comments and ordinary comments
//! are blanked (our `/*+ ... */` hint comments are kept for the hint
//! scanner); an ANSI_QUOTES identifier becomes a backtick identifier; bytes
//! sqlparser could misread become [`PLACEHOLDER`]. The literals found here are
//! later checked against sqlparser's (see [`check_tokens`]).
//!
//! Anything whose reading is uncertain is refused rather than guessed.

use std::borrow::Cow;
use std::cell::Cell;
use std::ops::Range;

use super::plan::{ClientCharset, LexMode, RouteError, TrailCharset};

mod check;
mod comments;
#[cfg(test)]
mod tests;

pub(crate) use check::check_tokens;
pub use comments::skip_blanks_and_comments;

/// The byte that stands in the shadow for a byte sqlparser must not read as
/// itself (non-ASCII bytes of a non-UTF-8 text, every byte of a big5 / gbk /
/// sjis multibyte character, a `\` that is an ordinary character). SUB:
/// an ordinary character inside a literal, a syntax error anywhere else.
pub(crate) const PLACEHOLDER: u8 = 0x1A;

/// What a big5 / gbk / sjis multibyte character of an unquoted identifier
/// becomes in the shadow: U+0080, two bytes as the character is, an
/// identifier character to sqlparser. No name in a config can hold it (YAML
/// has no C1 control characters), so such an identifier never reads as a
/// table or column the router knows; the server gets the original bytes.
const IDENT_MULTIBYTE: [u8; 2] = [0xC2, 0x80];

/// A statement as the server reads it.
#[derive(Debug)]
pub(crate) struct Lexed<'a> {
    /// The text sqlparser reads (same length and offsets as the statement):
    /// the statement itself, not a copy, when it is UTF-8 that needs no
    /// change (no comment to blank, no byte to stand in for).
    pub shadow: Cow<'a, str>,
    /// Byte ranges of every string literal and quoted identifier, from its
    /// opening quote to after its closing one, in order.
    pub literals: Vec<Range<usize>>,
    /// Byte ranges of the `/*+ ... */` comments kept in the shadow.
    pub hints: Vec<Range<usize>>,
    /// Byte ranges of the `?` parameter markers.
    pub markers: Vec<Range<usize>>,
    /// Every comment, in order.
    pub comments: Vec<Comment>,
    /// The statements of the text: ranges between top-level `;`, trimmed
    /// of blanks, without the pieces that hold no token.
    pub statements: Vec<Range<usize>>,
    /// Tokens counted (literals, words, numbers, operator characters).
    pub tokens: u64,
    /// The plain value literals, in order: `'...'` strings (no prefix) and
    /// decimal integers (digits only), what a statement's shape masks
    /// (the router's fast path).
    pub values: Vec<ValueLiteral>,
}

/// A value literal of a statement ([`Lexed::values`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValueLiteral {
    /// From its first byte to after its last (quotes included).
    pub range: Range<usize>,
    /// Which kind.
    pub kind: ValueKind,
}

/// The kinds of [`ValueLiteral`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ValueKind {
    /// Digits only, read as a number.
    Digits,
    /// A single-quoted string without a prefix (`N`, `X`, `B`); a charset
    /// introducer before it is a word of its own.
    Quoted,
}

/// A comment of a text, as the lexer found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// From its opening (`#`, `--`, `/*`) to the end of the line (newline
    /// excluded) or past its `*/`.
    pub range: Range<usize>,
    /// An ordinary comment (`#`, `-- `, `/* */`), which the server ignores;
    /// `false` for an executable (`/*!`, `/*M!`, executed or not) or a
    /// `/*+ ... */` hint comment.
    pub plain: bool,
}

/// A text the lexer refuses, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// Why (1064 or 1105 when routing).
    pub error: RouteError,
    /// Byte offset of the token, comment or quoted text being read when it
    /// was refused (the opening quote of an unterminated string).
    pub at: usize,
}

/// A refusal: the construct the router cannot read with certainty (1105).
fn unreadable(what: impl Into<String>) -> RouteError {
    RouteError::Unreadable(what.into())
}

fn syntax(what: impl Into<String>) -> RouteError {
    RouteError::Syntax(what.into())
}

/// Bytes MariaDB skips between tokens (`my_isspace`).
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C)
}

/// ASCII bytes of an unquoted identifier or number.
fn is_word_byte(b: u8) -> bool {
    WORD_BYTES[usize::from(b)]
}

/// [`is_word_byte`] of every byte: letters, digits, `_`, `$` and the
/// non-ASCII bytes.
const WORD_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < table.len() {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
        i += 1;
    }
    table
};

/// What the last word was, for `ident.` (MariaDB's `MY_LEX_IDENT_SEP`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Word {
    Ident,
    Number,
}

struct Scanner<'a> {
    sql: &'a [u8],
    mode: LexMode,
    /// The charset's multibyte rules when it has any (big5, gbk, sjis):
    /// without, every byte is a character of its own.
    trail: Option<TrailCharset>,
    max_tokens: u64,
    /// The shadow, once a byte of it differs from the statement's
    /// (copied then, so a statement that needs no change is not copied).
    shadow: Option<Vec<u8>>,
    out: Lexed<'a>,
    /// Start of the executed `/*! ... */` comment being read, if any.
    executable: Option<usize>,
    /// End offset of the last unquoted identifier.
    ident_end: Option<usize>,
    /// After `ident.`: the next word is an identifier whatever it starts with.
    ident_next: bool,
    /// The current statement piece: start and whether it has a token.
    piece_start: usize,
    piece_has_token: bool,
    /// Start of the token (or comment) being read: where a refusal is.
    reading: usize,
}

/// Reads `sql` as MariaDB will in `mode`; refuses past `max_tokens`.
pub(crate) fn lex<'a>(
    sql: &'a [u8],
    mode: &LexMode,
    max_tokens: u64,
) -> Result<Lexed<'a>, RouteError> {
    lex_located(sql, mode, max_tokens).map_err(|e| e.error)
}

/// [`lex`], telling where a refusal happened.
pub(crate) fn lex_located<'a>(
    sql: &'a [u8],
    mode: &LexMode,
    max_tokens: u64,
) -> Result<Lexed<'a>, LexError> {
    let as_text = std::str::from_utf8(sql).ok();
    let keep_non_ascii = mode.charset == ClientCharset::Utf8 && as_text.is_some();
    let shadow = (!keep_non_ascii && !sql.is_ascii()).then(|| {
        sql.iter()
            .map(|&b| if b >= 0x80 { PLACEHOLDER } else { b })
            .collect()
    });
    let lists = SPARE.with(Cell::take).unwrap_or_default();
    let mut scanner = Scanner {
        sql,
        mode: *mode,
        trail: match mode.charset {
            ClientCharset::AsciiTrail(charset) => Some(charset),
            ClientCharset::Utf8 | ClientCharset::AsciiSafe => None,
        },
        max_tokens,
        shadow,
        out: Lexed {
            shadow: Cow::Borrowed(""),
            literals: lists.literals,
            hints: lists.hints,
            markers: lists.markers,
            comments: lists.comments,
            statements: lists.statements,
            tokens: 0,
            values: lists.values,
        },
        executable: None,
        ident_end: None,
        ident_next: false,
        piece_start: 0,
        piece_has_token: false,
        reading: 0,
    };
    scanner.run().map_err(|error| LexError {
        error,
        at: scanner.reading,
    })?;
    let unchanged = match scanner.shadow.take() {
        Some(changed) => Err(changed),
        None => as_text.ok_or_else(|| sql.to_vec()),
    };
    let mut out = scanner.out;
    out.shadow = match unchanged {
        Ok(text) => Cow::Borrowed(text),
        Err(changed) => Cow::Owned(String::from_utf8(changed).map_err(|_| LexError {
            error: unreadable("shardgate could not make a UTF-8 reading of the statement"),
            at: 0,
        })?),
    };
    Ok(out)
}

/// Most entries a recycled list of [`Lists`] keeps room for: the lists of
/// a longer statement are freed, not kept for the next one.
const MAX_SPARE_ENTRIES: usize = 64;

thread_local! {
    /// The lists of the last [`Lexed`] handed back with
    /// [`Lexed::recycle`], emptied, for the next statement lexed on this
    /// thread (so a statement on the fast path allocates none).
    static SPARE: Cell<Option<Lists>> = const { Cell::new(None) };
}

/// The lists a [`Lexed`] fills.
#[derive(Default)]
struct Lists {
    literals: Vec<Range<usize>>,
    hints: Vec<Range<usize>>,
    markers: Vec<Range<usize>>,
    comments: Vec<Comment>,
    statements: Vec<Range<usize>>,
    values: Vec<ValueLiteral>,
}

impl Lexed<'_> {
    /// Hands this reading's lists back for the next statement lexed on
    /// this thread (when none are waiting already and none is long).
    pub fn recycle(self) {
        let mut lists = Lists {
            literals: self.literals,
            hints: self.hints,
            markers: self.markers,
            comments: self.comments,
            statements: self.statements,
            values: self.values,
        };
        let small = lists.literals.capacity() <= MAX_SPARE_ENTRIES
            && lists.hints.capacity() <= MAX_SPARE_ENTRIES
            && lists.markers.capacity() <= MAX_SPARE_ENTRIES
            && lists.comments.capacity() <= MAX_SPARE_ENTRIES
            && lists.statements.capacity() <= MAX_SPARE_ENTRIES
            && lists.values.capacity() <= MAX_SPARE_ENTRIES;
        if !small {
            return;
        }
        lists.literals.clear();
        lists.hints.clear();
        lists.markers.clear();
        lists.comments.clear();
        lists.statements.clear();
        lists.values.clear();
        SPARE.with(|spare| {
            if let Some(waiting) = spare.take() {
                spare.set(Some(waiting));
            } else {
                spare.set(Some(lists));
            }
        });
    }
}

impl Scanner<'_> {
    fn at(&self, i: usize) -> Option<u8> {
        self.sql.get(i).copied()
    }

    /// How many bytes from `i` on are `in_run`.
    fn run_of(&self, i: usize, in_run: impl Fn(u8) -> bool) -> usize {
        self.sql
            .get(i..)
            .unwrap_or_default()
            .iter()
            .take_while(|&&c| in_run(c))
            .count()
    }

    fn starts_with(&self, i: usize, pattern: &[u8]) -> bool {
        self.sql
            .get(i..)
            .is_some_and(|rest| rest.starts_with(pattern))
    }

    fn blank(&mut self, range: Range<usize>) {
        for i in range {
            if self.at(i).is_some_and(|b| b != b'\n') {
                self.set(i, b' ');
            }
        }
    }

    fn set(&mut self, i: usize, b: u8) {
        if self.shadow.is_none() && self.at(i).is_none_or(|now| now == b) {
            return;
        }
        let sql = self.sql;
        let shadow = self.shadow.get_or_insert_with(|| sql.to_vec());
        if let Some(slot) = shadow.get_mut(i) {
            *slot = b;
        }
    }

    fn token(&mut self) -> Result<(), RouteError> {
        self.out.tokens += 1;
        self.piece_has_token = true;
        if self.out.tokens > self.max_tokens {
            return Err(RouteError::Unsupported(format!(
                "a statement of more than {} tokens (limits.max_statement_tokens); split it",
                self.max_tokens
            )));
        }
        Ok(())
    }

    /// The length of the multibyte character of a big5 / gbk / sjis text
    /// starting at `i` (2), or `None` for a single-byte one. Its bytes
    /// become placeholders in the shadow.
    #[inline]
    fn multibyte(&mut self, i: usize) -> Option<usize> {
        let charset = self.trail?;
        self.multibyte_of(charset, i)
    }

    /// [`Scanner::multibyte`] in a charset with multibyte characters.
    fn multibyte_of(&mut self, charset: TrailCharset, i: usize) -> Option<usize> {
        let lead = self.at(i)?;
        let trail = self.at(i + 1)?;
        let (lead_ok, trail_ok) = match charset {
            TrailCharset::Big5 => (
                (0xA1..=0xF9).contains(&lead),
                (0x40..=0x7E).contains(&trail) || (0xA1..=0xFE).contains(&trail),
            ),
            TrailCharset::Gbk => (
                (0x81..=0xFE).contains(&lead),
                (0x40..=0x7E).contains(&trail) || (0x80..=0xFE).contains(&trail),
            ),
            TrailCharset::Sjis => (
                (0x81..=0x9F).contains(&lead) || (0xE0..=0xFC).contains(&lead),
                (0x40..=0x7E).contains(&trail) || (0x80..=0xFC).contains(&trail),
            ),
        };
        if !(lead_ok && trail_ok) {
            return None;
        }
        self.set(i, PLACEHOLDER);
        self.set(i + 1, PLACEHOLDER);
        Some(2)
    }

    fn run(&mut self) -> Result<(), RouteError> {
        let mut i = 0;
        while let Some(&b) = self.sql.get(i) {
            // A blank is a token of nothing (as `step` reads it).
            if is_space(b) {
                i += 1;
                continue;
            }
            self.reading = i;
            i = self.step(i)?;
        }
        if let Some(start) = self.executable {
            self.reading = start;
            return Err(syntax(format!(
                "unterminated executable comment at byte {start}"
            )));
        }
        self.end_piece(self.sql.len());
        Ok(())
    }

    fn end_piece(&mut self, end: usize) {
        if self.piece_has_token {
            let mut start = self.piece_start;
            let mut end = end;
            while start < end && self.at(start).is_some_and(is_space) {
                start += 1;
            }
            while end > start && self.at(end - 1).is_some_and(is_space) {
                end -= 1;
            }
            self.out.statements.push(start..end);
        }
        self.piece_has_token = false;
    }

    /// Reads the token (or blank, or comment) at `i`; returns where the
    /// next one starts.
    fn step(&mut self, i: usize) -> Result<usize, RouteError> {
        let Some(b) = self.at(i) else {
            return Ok(i + 1);
        };
        let next = self.at(i + 1);
        if self.multibyte_at(i) {
            return self.word(i);
        }
        match b {
            _ if is_space(b) => Ok(i + 1),
            0 => Err(unreadable(
                "a NUL byte outside a string literal (the server ends a comment or identifier there)",
            )),
            b'\'' => self.string(i, i, b'\''),
            b'"' if self.mode.ansi_quotes => self.quoted_ident(i, b'"'),
            b'"' => self.string(i, i, b'"'),
            b'`' => self.quoted_ident(i, b'`'),
            b'#' => self.line_comment(i, "#"),
            b'-' if next == Some(b'-') => match self.at(i + 2) {
                // MariaDB: `--` then a space or a control character (the
                // end of the text included) starts a comment.
                None => self.line_comment(i, "--"),
                Some(c) if c <= b' ' || c == 0x7F => self.line_comment(i, "--"),
                Some(_) => Err(unreadable(
                    "`--` not followed by a blank (a double minus; write `- -`)",
                )),
            },
            b'/' if next == Some(b'*') => self.comment(i),
            b'*' if next == Some(b'/') && self.executable.is_some() => {
                self.blank(i..i + 2);
                if let Some(start) = self.executable.take() {
                    self.out.comments.push(Comment {
                        range: start..i + 2,
                        plain: false,
                    });
                }
                Ok(i + 2)
            }
            b'?' => {
                self.out.markers.push(i..i + 1);
                self.token()?;
                Ok(i + 1)
            }
            b';' => {
                if self.executable.is_some() {
                    return Err(unreadable("a `;` inside a /*! ... */ executable comment"));
                }
                self.end_piece(i);
                self.piece_start = i + 1;
                self.ident_next = false;
                Ok(i + 1)
            }
            b'.' => self.dot(i),
            b'x' | b'X' | b'b' | b'B' if next == Some(b'\'') && !self.ident_next => {
                self.bit_string(i, b)
            }
            b'n' | b'N' if next == Some(b'\'') && !self.ident_next => self.string(i, i + 1, b'\''),
            _ if is_word_byte(b) => self.word(i),
            _ => {
                self.token()?;
                Ok(i + 1)
            }
        }
    }

    /// Whether a big5 / gbk / sjis multibyte character starts at `i`
    /// (without marking it).
    fn multibyte_at(&self, i: usize) -> bool {
        self.trail.is_some() && self.at(i).is_some_and(|b| b >= 0x80)
    }

    /// A string literal whose opening quote is at `quote` (`start` is
    /// before an `N` prefix). MariaDB's `get_text`: multibyte characters are
    /// skipped whole, `\` escapes exactly one byte (unless
    /// NO_BACKSLASH_ESCAPES), a doubled quote is one quote.
    fn string(&mut self, start: usize, quote_at: usize, quote: u8) -> Result<usize, RouteError> {
        let mut p = quote_at + 1;
        loop {
            if self.trail.is_none() {
                // Single-byte characters: only a quote or `\` matters.
                p += self.run_of(p, |c| c != quote && c != b'\\');
            } else if self.multibyte(p).is_some() {
                p += 2;
                continue;
            }
            let Some(c) = self.at(p) else {
                return Err(syntax(format!(
                    "unterminated string starting at byte {start}"
                )));
            };
            if c == b'\\' {
                if self.mode.no_backslash_escapes {
                    self.set(p, PLACEHOLDER);
                    p += 1;
                } else {
                    if p + 1 >= self.sql.len() {
                        return Err(syntax(format!(
                            "unterminated string starting at byte {start}"
                        )));
                    }
                    p += 2;
                }
                continue;
            }
            if c == quote {
                if self.at(p + 1) == Some(quote) {
                    p += 2;
                    continue;
                }
                self.out.literals.push(quote_at..p + 1);
                if quote == b'\'' && start == quote_at {
                    self.out.values.push(ValueLiteral {
                        range: quote_at..p + 1,
                        kind: ValueKind::Quoted,
                    });
                }
                self.ident_end = None;
                self.token()?;
                return Ok(p + 1);
            }
            p += 1;
        }
    }

    /// A backtick identifier, or a `"` one under ANSI_QUOTES (MariaDB's
    /// `scan_ident_delimited`), which becomes a backtick one in the shadow.
    fn quoted_ident(&mut self, start: usize, quote: u8) -> Result<usize, RouteError> {
        let mut p = start + 1;
        loop {
            if self.multibyte(p).is_some() {
                p += 2;
                continue;
            }
            match self.at(p) {
                None => {
                    return Err(syntax(format!(
                        "unterminated quoted identifier starting at byte {start}"
                    )))
                }
                Some(0) => return Err(unreadable("a NUL byte inside a quoted identifier")),
                Some(c) if c == quote => {
                    if self.at(p + 1) == Some(quote) {
                        if quote == b'"' {
                            return Err(unreadable(
                                "a doubled \" inside an ANSI_QUOTES identifier",
                            ));
                        }
                        p += 2;
                        continue;
                    }
                    break;
                }
                Some(b'`') if quote == b'"' => {
                    return Err(unreadable("a ` inside an ANSI_QUOTES \"identifier\""))
                }
                Some(_) => p += 1,
            }
        }
        if quote == b'"' {
            self.set(start, b'`');
            self.set(p, b'`');
        }
        self.out.literals.push(start..p + 1);
        self.ident_end = None;
        self.token()?;
        Ok(p + 1)
    }

    /// `X'..'` or `B'..'`: hex or binary digits, then the closing quote
    /// (anything else is a syntax error on the server).
    fn bit_string(&mut self, start: usize, prefix: u8) -> Result<usize, RouteError> {
        let hex = matches!(prefix, b'x' | b'X');
        let mut p = start + 2;
        while self.at(p).is_some_and(|c| {
            if hex {
                c.is_ascii_hexdigit()
            } else {
                c == b'0' || c == b'1'
            }
        }) {
            p += 1;
        }
        if self.at(p) != Some(b'\'') {
            return Err(syntax(format!(
                "malformed {} literal at byte {start}",
                if hex { "X'...'" } else { "B'...'" }
            )));
        }
        self.out.literals.push(start + 1..p + 1);
        self.ident_end = None;
        self.token()?;
        Ok(p + 1)
    }

    /// `.`: between two parts of a name, or the start of a number.
    fn dot(&mut self, i: usize) -> Result<usize, RouteError> {
        self.token()?;
        let next = self.at(i + 1);
        if self.ident_end == Some(i) && next.is_some_and(is_word_byte) {
            // `name.x`: x is read as an identifier even if it starts with
            // digits (MY_LEX_IDENT_SEP).
            self.ident_next = true;
            return Ok(i + 1);
        }
        if next.is_some_and(|c| c.is_ascii_digit()) {
            return self.real(i);
        }
        Ok(i + 1)
    }

    /// The fraction and exponent of a decimal number from its `.` at `dot`
    /// (MariaDB's MY_LEX_REAL). An exponent without digits (`1.5e`, `1.e+`)
    /// makes the server drop the number and take the next character as a
    /// token of its own (a quote or comment start included): refused.
    fn real(&mut self, dot: usize) -> Result<usize, RouteError> {
        let mut p = dot + 1;
        while self.at(p).is_some_and(|c| c.is_ascii_digit()) {
            p += 1;
        }
        if matches!(self.at(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(self.at(p), Some(b'+' | b'-')) {
                p += 1;
            }
            if !self.at(p).is_some_and(|c| c.is_ascii_digit()) {
                return Err(unreadable(format!(
                    "a decimal number with an exponent but no exponent digits at byte {dot}"
                )));
            }
            while self.at(p).is_some_and(|c| c.is_ascii_digit()) {
                p += 1;
            }
        }
        self.ident_end = None;
        Ok(p)
    }

    /// An unquoted identifier, keyword or number starting at `start`.
    fn word(&mut self, start: usize) -> Result<usize, RouteError> {
        self.token()?;
        let mut p = start;
        if self.trail.is_none() {
            p += self.run_of(start, is_word_byte);
        }
        loop {
            if self.multibyte(p).is_some() {
                self.set(p, IDENT_MULTIBYTE[0]);
                self.set(p + 1, IDENT_MULTIBYTE[1]);
                p += 2;
                continue;
            }
            match self.at(p) {
                Some(c) if is_word_byte(c) => p += 1,
                _ => break,
            }
        }
        let as_ident = std::mem::take(&mut self.ident_next);
        let run = self.sql.get(start..p).unwrap_or_default();
        let kind = if as_ident || !run.first().is_some_and(|c| c.is_ascii_digit()) {
            Word::Ident
        } else if run.iter().all(|c| c.is_ascii_digit()) {
            if self.at(p) == Some(b'.') && self.at(p + 1) != Some(b'.') {
                return self.real(p);
            }
            self.out.values.push(ValueLiteral {
                range: start..p,
                kind: ValueKind::Digits,
            });
            Word::Number
        } else if is_number(run) {
            Word::Number
        } else if let Some(end) = self.signed_exponent(run, p) {
            self.ident_end = None;
            return Ok(end);
        } else {
            Word::Ident
        };
        self.ident_end = (kind == Word::Ident).then_some(p);
        Ok(p)
    }

    /// `1e+5` / `1e-5`: the run is digits and `e`, followed by a sign and
    /// digits; the end of the number.
    fn signed_exponent(&self, run: &[u8], end: usize) -> Option<usize> {
        let (last, digits) = run.split_last()?;
        if !matches!(last, b'e' | b'E') || !digits.iter().all(|c| c.is_ascii_digit()) {
            return None;
        }
        if !matches!(self.at(end), Some(b'+' | b'-')) {
            return None;
        }
        let mut p = end + 1;
        if !self.at(p).is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
        while self.at(p).is_some_and(|c| c.is_ascii_digit()) {
            p += 1;
        }
        Some(p)
    }
}

/// A run MariaDB reads as a number: `0x` hex digits, `0b` binary digits, or
/// digits `e` digits.
fn is_number(run: &[u8]) -> bool {
    if let Some(hex) = run.strip_prefix(b"0x") {
        return !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit);
    }
    if let Some(bin) = run.strip_prefix(b"0b") {
        return !bin.is_empty() && bin.iter().all(|c| matches!(c, b'0' | b'1'));
    }
    let Some(e) = run.iter().position(|c| matches!(c, b'e' | b'E')) else {
        return false;
    };
    let (mantissa, exponent) = run.split_at(e);
    let exponent = exponent.get(1..).unwrap_or_default();
    !mantissa.is_empty()
        && mantissa.iter().all(u8::is_ascii_digit)
        && !exponent.is_empty()
        && exponent.iter().all(u8::is_ascii_digit)
}
