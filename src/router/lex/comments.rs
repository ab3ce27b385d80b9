//! Comments as MariaDB reads them: `#` and `-- ` line comments, `/* */`,
//! executable `/*! */` and `/*M! */` comments, and the hint comments kept.

use super::{is_space, syntax, unreadable, Comment, Scanner};
use crate::router::plan::RouteError;

impl Scanner<'_> {
    /// `#` or `-- ` to the end of the line.
    pub(super) fn line_comment(&mut self, start: usize, kind: &str) -> Result<usize, RouteError> {
        if self.executable.is_some() {
            return Err(unreadable(format!(
                "a `{kind}` comment inside a /*! ... */ executable comment"
            )));
        }
        let end = self
            .sql
            .get(start..)
            .and_then(|rest| rest.iter().position(|&c| c == b'\n' || c == 0))
            .map_or(self.sql.len(), |n| start + n);
        if self.at(end) == Some(0) {
            return Err(unreadable("a NUL byte inside a comment"));
        }
        self.blank(start..end);
        self.out.comments.push(Comment {
            range: start..end,
            plain: true,
        });
        Ok(end)
    }

    /// Where the `*/` closing a comment whose body starts at `from` is
    /// (its offset), refusing a nested `/*` when `nested_refused` names the
    /// comment.
    fn comment_end(
        &self,
        start: usize,
        from: usize,
        nested_refused: Option<&str>,
    ) -> Result<usize, RouteError> {
        let mut p = from;
        loop {
            match (self.at(p), self.at(p + 1)) {
                (None, _) | (Some(_), None) => {
                    return Err(syntax(format!(
                        "unterminated comment starting at byte {start}"
                    )))
                }
                (Some(b'*'), Some(b'/')) => return Ok(p),
                (Some(b'/'), Some(b'*')) => {
                    if let Some(what) = nested_refused {
                        return Err(unreadable(format!("a comment nested in {what}")));
                    }
                    p += 1;
                }
                _ => p += 1,
            }
        }
    }

    /// A `/*` comment: executable, hint or ordinary.
    pub(super) fn comment(&mut self, start: usize) -> Result<usize, RouteError> {
        let maria = self.starts_with(start, b"/*M!");
        if maria || self.starts_with(start, b"/*!") {
            if self.executable.is_some() {
                return Err(unreadable(
                    "a comment nested in a /*! ... */ executable comment",
                ));
            }
            let digits_at = start + if maria { 4 } else { 3 };
            let digits = (0..6)
                .take_while(|&k| self.at(digits_at + k).is_some_and(|c| c.is_ascii_digit()))
                .count();
            if digits < 5 {
                // No version: the content is always executed.
                self.blank(start..digits_at);
                self.executable = Some(start);
                return Ok(digits_at);
            }
            let version: u32 = self
                .sql
                .get(digits_at..digits_at + digits)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse().ok())
                .unwrap_or(u32::MAX);
            // MariaDB skips MySQL 5.7+ comments (50700-99999) unless /*M!.
            let executed = version <= self.mode.server_version
                && (!(50700..=99999).contains(&version) || maria);
            if executed {
                self.blank(start..digits_at + digits);
                self.executable = Some(start);
                return Ok(digits_at + digits);
            }
            let close = self.comment_end(
                start,
                digits_at + digits,
                Some("a skipped /*!NNNNN ... */ comment"),
            )?;
            self.blank(start..close + 2);
            self.out.comments.push(Comment {
                range: start..close + 2,
                plain: false,
            });
            return Ok(close + 2);
        }
        if self.executable.is_some() {
            return Err(unreadable(
                "a comment nested in a /*! ... */ executable comment",
            ));
        }
        if self.starts_with(start, b"/*+") {
            let close = self.comment_end(start, start + 3, Some("a /*+ ... */ hint comment"))?;
            self.out.hints.push(start..close + 2);
            self.out.comments.push(Comment {
                range: start..close + 2,
                plain: false,
            });
            return Ok(close + 2);
        }
        let close = self.comment_end(start, start + 2, None)?;
        self.blank(start..close + 2);
        self.out.comments.push(Comment {
            range: start..close + 2,
            plain: true,
        });
        Ok(close + 2)
    }
}

/// `sql` past its leading blanks and comments, as MariaDB reads them: `#`
/// and `-- ` (`--` then a blank or control character) to the end of the
/// line, and `/* ... */` of every kind (hints and executable comments
/// included); an unterminated comment runs to the end. A cheap look at a
/// statement's first word, without lexing the rest.
pub fn skip_blanks_and_comments(mut sql: &[u8]) -> &[u8] {
    loop {
        sql = match sql {
            [b, rest @ ..] if is_space(*b) => rest,
            [b'/', b'*', rest @ ..] => match rest.windows(2).position(|w| w == b"*/") {
                Some(end) => &rest[end + 2..],
                None => &[],
            },
            [b'#', rest @ ..] => after_line(rest),
            [b'-', b'-', rest @ ..] if rest.first().is_none_or(|&c| c <= b' ' || c == 0x7F) => {
                after_line(rest)
            }
            _ => return sql,
        }
    }
}

/// What follows the end of the line `rest` is in (nothing on the last line).
fn after_line(rest: &[u8]) -> &[u8] {
    rest.iter()
        .position(|&b| b == b'\n')
        .map_or(&[][..], |end| &rest[end + 1..])
}
