//! An independent scanner of MariaDB's lexical rules, for the oracles:
//! where the executable comments of a text are, and whether a rendered
//! value is exactly one literal (and which bytes it stands for).
//!
//! Rules (MariaDB 10.11 `sql_lex.cc`, the manual's "Comment Syntax" and
//! "String Literals"):
//! - `'...'` is a string; `"..."` a string, or an identifier under
//!   ANSI_QUOTES; `` `...` `` an identifier. Inside, the quote doubled is
//!   one quote; in strings `\` escapes the next character unless
//!   NO_BACKSLASH_ESCAPES.
//! - `#` and `--` followed by whitespace, a control character or the end
//!   of the text start a comment up to the end of the line.
//! - `/*!`, `/*!NNNNN`, `/*M!` and `/*M!NNNNNN` start an executable
//!   comment, whose content is read as SQL up to the `*/` that closes it;
//!   any other `/*` starts a comment up to the next `*/`.
//! - In the big5, gbk, sjis and cp932 character sets a lead byte and a
//!   valid trail byte are one character, whatever the trail byte is
//!   (0x5C `\` among them).

use std::ops::Range;

/// A multibyte character set whose trail bytes can be ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrailCharset {
    /// big5.
    Big5,
    /// gbk.
    Gbk,
    /// sjis, cp932.
    Sjis,
}

impl TrailCharset {
    fn is_lead(self, b: u8) -> bool {
        match self {
            TrailCharset::Big5 => (0xA1..=0xF9).contains(&b),
            TrailCharset::Gbk => (0x81..=0xFE).contains(&b),
            TrailCharset::Sjis => (0x81..=0x9F).contains(&b) || (0xE0..=0xFC).contains(&b),
        }
    }

    fn is_trail(self, b: u8) -> bool {
        match self {
            TrailCharset::Big5 => (0x40..=0x7E).contains(&b) || (0xA1..=0xFE).contains(&b),
            TrailCharset::Gbk => (0x40..=0x7E).contains(&b) || (0x80..=0xFE).contains(&b),
            TrailCharset::Sjis => (0x40..=0x7E).contains(&b) || (0x80..=0xFC).contains(&b),
        }
    }
}

/// How the server reads the text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexFlags {
    /// sql_mode NO_BACKSLASH_ESCAPES.
    pub no_backslash_escapes: bool,
    /// sql_mode ANSI_QUOTES.
    pub ansi_quotes: bool,
    /// The connection's character set, if its trail bytes can be ASCII.
    pub trail: Option<TrailCharset>,
}

impl LexFlags {
    /// Length of the character at the front of `bytes`: 2 for a lead and
    /// trail byte pair of a [`TrailCharset`], else 1.
    fn char_len(&self, bytes: &[u8]) -> usize {
        match (self.trail, bytes) {
            (Some(cs), [lead, trail, ..]) if cs.is_lead(*lead) && cs.is_trail(*trail) => 2,
            _ => 1,
        }
    }
}

/// Where the quoted text starting at `start` (on its opening quote) ends:
/// just past the closing quote, or `None` if it is not closed.
fn quoted_end(
    text: &[u8],
    start: usize,
    quote: u8,
    backslash: bool,
    flags: &LexFlags,
) -> Option<usize> {
    let mut i = start + 1;
    while i < text.len() {
        let step = flags.char_len(&text[i..]);
        if step > 1 {
            i += step;
            continue;
        }
        let b = text[i];
        if backslash && b == b'\\' {
            i += 2;
        } else if b == quote {
            if text.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return Some(i + 1);
            }
        } else {
            i += 1;
        }
    }
    None
}

fn line_end(text: &[u8], from: usize) -> usize {
    text[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |p| from + p + 1)
}

fn is_space_or_control(b: u8) -> bool {
    b.is_ascii_whitespace() || b == 0x0B || b < 0x20 || b == 0x7F
}

/// Byte ranges of the executable comments of `text` (from `/*` to just
/// past `*/`, or to the end if unclosed) outside strings, quoted
/// identifiers and ordinary comments. A `/*` inside an executable comment
/// is read as an ordinary comment.
pub fn executable_comments(text: &[u8], flags: &LexFlags) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut open: Option<usize> = None;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let step = flags.char_len(rest);
        if step > 1 {
            i += step;
            continue;
        }
        i = match rest {
            [b'\'', ..] => {
                quoted_end(text, i, b'\'', !flags.no_backslash_escapes, flags).unwrap_or(text.len())
            }
            [b'"', ..] => quoted_end(
                text,
                i,
                b'"',
                !flags.no_backslash_escapes && !flags.ansi_quotes,
                flags,
            )
            .unwrap_or(text.len()),
            [b'`', ..] => quoted_end(text, i, b'`', false, flags).unwrap_or(text.len()),
            [b'#', ..] => line_end(text, i),
            [b'-', b'-'] => text.len(),
            [b'-', b'-', next, ..] if is_space_or_control(*next) => line_end(text, i),
            [b'*', b'/', ..] if open.is_some() => {
                if let Some(start) = open.take() {
                    found.push(start..i + 2);
                }
                i + 2
            }
            [b'/', b'*', b'!', ..] if open.is_none() => {
                open = Some(i);
                i + 3
            }
            [b'/', b'*', b'M', b'!', ..] if open.is_none() => {
                open = Some(i);
                i + 4
            }
            [b'/', b'*', ..] => text[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(text.len(), |p| i + 2 + p + 2),
            _ => i + 1,
        };
    }
    if let Some(start) = open {
        found.push(start..text.len());
    }
    found
}

/// What a rendered value stands for, if it is exactly one literal token.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `NULL`.
    Null,
    /// A number, as written.
    Number(String),
    /// A quoted string or hex literal (with an optional character-set
    /// introducer or DATE/TIME/TIMESTAMP keyword): the bytes it holds.
    Bytes {
        /// The introducer (`_binary`, `_utf8mb4`) or keyword, if any, lower case.
        prefix: Option<String>,
        /// The value's bytes.
        bytes: Vec<u8>,
        /// Written as `X'..'` or `0x..`.
        hex: bool,
    },
}

/// Reads `text` as exactly one literal as the server would, or `None` if
/// it is anything else (several tokens, an unclosed quote, a comment...).
pub fn single_literal(text: &[u8], flags: &LexFlags) -> Option<Literal> {
    if text.eq_ignore_ascii_case(b"NULL") {
        return Some(Literal::Null);
    }
    if is_number(text) {
        return Some(Literal::Number(String::from_utf8(text.to_vec()).ok()?));
    }
    let (prefix, body) = split_prefix(text);
    if let Some(bytes) = hex_literal(body) {
        return Some(Literal::Bytes {
            prefix,
            bytes,
            hex: true,
        });
    }
    let quote = *body.first()?;
    if quote != b'\'' && !(quote == b'"' && !flags.ansi_quotes) {
        return None;
    }
    let end = quoted_end(body, 0, quote, !flags.no_backslash_escapes, flags)?;
    if end != body.len() {
        return None;
    }
    Some(Literal::Bytes {
        prefix,
        bytes: unescape(&body[1..body.len() - 1], quote, flags),
        hex: false,
    })
}

/// `[+-]digits[.digits][e[+-]digits]` (or starting with `.`).
fn is_number(text: &[u8]) -> bool {
    let unsigned = match text {
        [b'+' | b'-', rest @ ..] => rest,
        _ => text,
    };
    let (mantissa, exponent) = match unsigned.iter().position(|&b| b == b'e' || b == b'E') {
        Some(e) => (&unsigned[..e], Some(&unsigned[e + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
        None => (mantissa, &[][..]),
    };
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let exponent_ok = match exponent {
        None => true,
        Some([b'+' | b'-', rest @ ..]) => !rest.is_empty() && digits(rest),
        Some(rest) => !rest.is_empty() && digits(rest),
    };
    (!int.is_empty() || !frac.is_empty()) && digits(int) && digits(frac) && exponent_ok
}

/// Splits off a `_charset` introducer or a DATE/TIME/TIMESTAMP keyword
/// and the blanks after it.
fn split_prefix(text: &[u8]) -> (Option<String>, &[u8]) {
    let word_len = text
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .unwrap_or(text.len());
    let word = &text[..word_len];
    let is_prefix = (word.len() > 1 && word[0] == b'_')
        || [&b"date"[..], b"time", b"timestamp"]
            .iter()
            .any(|k| word.eq_ignore_ascii_case(k));
    if !is_prefix {
        return (None, text);
    }
    let rest = &text[word_len..];
    let blanks = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
    (
        Some(String::from_utf8_lossy(word).to_ascii_lowercase()),
        &rest[blanks..],
    )
}

/// `X'hex'` (even number of digits) or `0xhex`: the bytes.
fn hex_literal(text: &[u8]) -> Option<Vec<u8>> {
    let digits = match text {
        [b'x' | b'X', b'\'', inner @ .., b'\''] => inner,
        [b'0', b'x', inner @ ..] if !inner.is_empty() => inner,
        _ => return None,
    };
    if digits.len() % 2 != 0 {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            let hex = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(hex, 16).ok()
        })
        .collect()
}

/// The bytes a quoted string's inside stands for (MariaDB's escapes:
/// `\0 \b \n \r \t \Z`, `\%` and `\_` kept with their backslash, any
/// other `\x` is `x`; the quote doubled is one quote).
fn unescape(inner: &[u8], quote: u8, flags: &LexFlags) -> Vec<u8> {
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let step = flags.char_len(&inner[i..]);
        if step > 1 {
            out.extend_from_slice(&inner[i..i + step]);
            i += step;
            continue;
        }
        let b = inner[i];
        if b == b'\\' && !flags.no_backslash_escapes && i + 1 < inner.len() {
            let next = inner[i + 1];
            let next_len = flags.char_len(&inner[i + 1..]);
            match next {
                b'0' => out.push(0),
                b'b' => out.push(0x08),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'Z' => out.push(0x1A),
                b'%' | b'_' => out.extend_from_slice(&[b'\\', next]),
                _ => out.extend_from_slice(&inner[i + 1..i + 1 + next_len]),
            }
            i += 1 + next_len;
        } else if b == quote {
            // A doubled quote (a lone one would have closed the string).
            out.push(quote);
            i += 2;
        } else {
            out.push(b);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comments(text: &str, flags: LexFlags) -> Vec<&str> {
        executable_comments(text.as_bytes(), &flags)
            .into_iter()
            .map(|r| &text[r])
            .collect()
    }

    #[test]
    fn finds_executable_comments_outside_literals() {
        let plain = LexFlags::default();
        assert_eq!(
            comments(
                "SELECT /*!50000 1 */, /*M! 2*/ /* /*! no */ '/*!no*/' `/*!no*/` -- /*!no*/\n3",
                plain
            ),
            ["/*!50000 1 */", "/*M! 2*/"]
        );
        assert_eq!(comments("SELECT 1 --/*!x*/", plain), ["/*!x*/"]);
        assert_eq!(comments("SELECT '\\' /*!x*/ '", plain), Vec::<&str>::new());
        let nbe = LexFlags {
            no_backslash_escapes: true,
            ..plain
        };
        assert_eq!(comments("SELECT '\\' /*!x*/ '", nbe), ["/*!x*/"]);
        assert_eq!(comments("SELECT \"/*!x*/\"", plain), Vec::<&str>::new());
        assert_eq!(
            comments("/*!SELECT '*/' */ x", plain),
            ["/*!SELECT '*/' */"]
        );
        assert_eq!(comments("SELECT 1 /*!unclosed", plain), ["/*!unclosed"]);
        let gbk = LexFlags {
            trail: Some(TrailCharset::Gbk),
            ..plain
        };
        let text = b"SELECT '\xD5\\' /*!x*/ '";
        assert_eq!(executable_comments(text, &gbk), [12..18]);
        assert!(executable_comments(text, &plain).is_empty());
    }

    #[test]
    fn reads_single_literals() {
        let plain = LexFlags::default();
        let bytes = |b: &[u8]| Literal::Bytes {
            prefix: None,
            bytes: b.to_vec(),
            hex: false,
        };
        assert_eq!(
            single_literal(b"'a''b\\\\c\\0'", &plain),
            Some(bytes(b"a'b\\c\0"))
        );
        assert_eq!(single_literal(b"'a' 'b'", &plain), None);
        assert_eq!(single_literal(b"'a\\'", &plain), None);
        assert_eq!(
            single_literal(b"-1.5e-7", &plain),
            Some(Literal::Number("-1.5e-7".into()))
        );
        assert_eq!(single_literal(b"1 OR 1", &plain), None);
        assert_eq!(
            single_literal(b"_binary X'00ff'", &plain),
            Some(Literal::Bytes {
                prefix: Some("_binary".into()),
                bytes: vec![0, 255],
                hex: true
            })
        );
        let gbk = LexFlags {
            trail: Some(TrailCharset::Gbk),
            ..plain
        };
        assert_eq!(
            single_literal(b"'\xD5\\\\'", &plain),
            Some(bytes(b"\xD5\\"))
        );
        assert_eq!(single_literal(b"'\xD5\\\\'", &gbk), None);
    }
}
