//! Checks on the token stream, before sqlparser sees it: the first word
//! (for dispatch), empty queries, `LOCK IN SHARE MODE` (which sqlparser does
//! not parse) and operator chains long enough to overflow its recursion.

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

/// The first significant token of the statement, for dispatch and messages.
pub(super) fn first_significant(tokens: &[TokenWithSpan]) -> Option<&TokenWithSpan> {
    tokens
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)))
}

/// Whether the statement is only whitespace, comments and semicolons.
pub(super) fn is_empty(tokens: &[TokenWithSpan]) -> bool {
    tokens
        .iter()
        .all(|t| matches!(t.token, Token::Whitespace(_) | Token::SemiColon))
}

/// Removes a trailing `LOCK IN SHARE MODE` (which sqlparser does not parse)
/// from the tokens; true if there was one.
pub(super) fn strip_lock_in_share_mode(tokens: &mut Vec<TokenWithSpan>) -> bool {
    let mut significant = tokens.iter().enumerate().rev().filter(|(_, t)| {
        !matches!(
            t.token,
            Token::Whitespace(_) | Token::EOF | Token::SemiColon
        )
    });
    let mut lock_at = None;
    for word in ["MODE", "SHARE", "IN", "LOCK"] {
        match significant.next() {
            Some((i, t)) if matches!(&t.token, Token::Word(w) if w.value.eq_ignore_ascii_case(word)) => {
                lock_at = Some(i)
            }
            _ => return false,
        }
    }
    match lock_at {
        Some(i) => {
            tokens.truncate(i);
            true
        }
        None => false,
    }
}

/// Most binary operators (or UNIONs) one expression may chain. sqlparser
/// builds such chains left-deep and recurses over them; tens of thousands
/// overflow a 2 MiB thread stack, which would take the whole proxy down.
pub(super) const MAX_CHAIN: u32 = 16_000;

/// Whether some expression chains more than [`MAX_CHAIN`] operators: counts
/// operators per comma-separated segment of each parenthesis level, so long
/// flat lists (bulk INSERT rows, IN lists) are not affected.
pub(super) fn chain_too_long(tokens: &[TokenWithSpan]) -> bool {
    let mut counts: Vec<u32> = vec![0];
    for t in tokens {
        let operator = match &t.token {
            Token::LParen => {
                counts.push(0);
                continue;
            }
            Token::RParen => {
                if counts.len() > 1 {
                    counts.pop();
                }
                continue;
            }
            Token::Comma | Token::SemiColon => {
                if let Some(c) = counts.last_mut() {
                    *c = 0;
                }
                continue;
            }
            Token::Word(w) => matches!(
                w.keyword,
                Keyword::AND
                    | Keyword::OR
                    | Keyword::XOR
                    | Keyword::DIV
                    | Keyword::MOD
                    | Keyword::LIKE
                    | Keyword::REGEXP
                    | Keyword::RLIKE
                    | Keyword::UNION
                    | Keyword::EXCEPT
                    | Keyword::INTERSECT
            ),
            Token::Whitespace(_)
            | Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::Period
            | Token::EOF => false,
            _ => true,
        };
        if operator {
            if let Some(c) = counts.last_mut() {
                *c += 1;
                if *c > MAX_CHAIN {
                    return true;
                }
            }
        }
    }
    false
}
