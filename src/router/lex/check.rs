//! sqlparser's tokens of the shadow checked against the lexer's reading.

use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

use super::{unreadable, Lexed};
use crate::router::plan::RouteError;
use crate::router::text::Cursor;

/// Checks sqlparser's tokens of the shadow against the lexer's reading:
/// every string literal and quoted identifier sqlparser found must be one
/// the lexer found (same closing quote; the opening one at or after the
/// token's start, past a prefix such as `N`, `X` or `_utf8mb4`), and the
/// other way round; the only comments sqlparser may see are the hint
/// comments the lexer kept.
pub(crate) fn check_tokens(lexed: &Lexed, tokens: &[TokenWithSpan]) -> Result<(), RouteError> {
    let disagree = |what: &str| {
        unreadable(format!(
            "shardgate's parser and the server's lexer disagree on {what}; rewrite the statement"
        ))
    };
    let mut cursor = Cursor::new(&lexed.shadow);
    let mut literals = lexed.literals.iter();
    let mut hints = lexed.hints.iter();
    for token in tokens {
        let literal = match &token.token {
            Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
            | Token::TripleSingleQuotedString(_)
            | Token::TripleDoubleQuotedString(_)
            | Token::TripleSingleQuotedByteStringLiteral(_)
            | Token::TripleDoubleQuotedByteStringLiteral(_)
            | Token::TripleSingleQuotedRawStringLiteral(_)
            | Token::TripleDoubleQuotedRawStringLiteral(_)
            | Token::QuoteDelimitedStringLiteral(_)
            | Token::NationalQuoteDelimitedStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::UnicodeStringLiteral(_)
            | Token::DollarQuotedString(_)
            | Token::SingleQuotedRawStringLiteral(_)
            | Token::DoubleQuotedRawStringLiteral(_) => true,
            Token::Word(w) => w.quote_style.is_some(),
            Token::Whitespace(Whitespace::MultiLineComment(_)) => {
                let range = cursor
                    .range(token.span)
                    .ok_or_else(|| disagree("a comment's position"))?;
                if hints.next() != Some(&range) {
                    return Err(disagree("where a comment is"));
                }
                continue;
            }
            Token::Whitespace(Whitespace::SingleLineComment { .. }) => {
                return Err(disagree("where a comment is"))
            }
            _ => false,
        };
        if !literal {
            continue;
        }
        let range = cursor
            .range(token.span)
            .ok_or_else(|| disagree("a literal's position"))?;
        let text = lexed
            .shadow
            .as_bytes()
            .get(range.clone())
            .unwrap_or_default();
        if matches!(token.token, Token::HexStringLiteral(_)) && text.starts_with(b"0x") {
            // `0x41`: a number to both.
            continue;
        }
        let Some(found) = literals.next() else {
            return Err(disagree("where a string or quoted name is"));
        };
        let prefix = lexed
            .shadow
            .as_bytes()
            .get(range.start..found.start.max(range.start))
            .unwrap_or_default();
        let prefix_ok = found.start >= range.start
            && prefix
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'_');
        if found.end != range.end || !prefix_ok {
            return Err(disagree("where a string or quoted name is"));
        }
    }
    if literals.next().is_some() {
        return Err(disagree("where a string or quoted name is"));
    }
    if hints.next().is_some() {
        return Err(disagree("where a comment is"));
    }
    Ok(())
}
