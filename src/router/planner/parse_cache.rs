//! sqlparser's reading of a statement, reused for the next statement of the
//! same shape.
//!
//! Applications repeat a few statement shapes with different literals
//! (`SELECT data FROM pins WHERE id = 1234`). The router still lexes every
//! statement (MariaDB's reading and sqlparser's tokens, checked against
//! each other) and plans it from its syntax tree, so every decision that
//! depends on a literal (the shard of an ID, the type and 36-bit checks) is
//! made again from the new literal. Only sqlparser's parser is skipped: the
//! tree parsed for an earlier statement is cloned and its literals replaced
//! by the new statement's.
//!
//! That is sound when the tree depends on the tokens alone and the literals
//! only give values. A tree is reused only when:
//! - every token of the new statement equals the cached statement's, span
//!   included (same text layout, so every span in the tree is right), except
//!   literal tokens: plain decimal integers (digits only) and single-quoted
//!   strings, which may differ in content but not in kind or span;
//! - when the tree was cached, each such literal token was found as exactly
//!   one value in the tree, with its span, holding exactly that token's
//!   value (a literal that sqlparser read as a name, a type argument, a
//!   concatenated string, or anything else than a plain value makes the
//!   statement not cacheable).
//!
//! The cache is per thread (the router is called from the runtime's worker
//! threads), bounded in entries and in tokens per statement, and emptied
//! when full.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::ops::ControlFlow;

use sqlparser::ast::{Statement, Value, ValueWithSpan, Visit, VisitMut, Visitor, VisitorMut};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Span, Token, TokenWithSpan, Whitespace};

/// Most shapes kept per thread.
const MAX_ENTRIES: usize = 256;
/// Longest statement, in tokens, whose tree is kept.
const MAX_TOKENS: usize = 128;
/// Most bytes of token text (literals included) of a statement whose tree
/// is kept: a short statement with a huge literal would otherwise be held
/// twice per thread (tokens and tree) after it ran, and cloned on reuse.
const MAX_TEXT_BYTES: usize = 4096;

/// One cached reading.
struct Entry {
    /// The tokens it was parsed from.
    tokens: Vec<TokenWithSpan>,
    /// The tree.
    statements: Vec<Statement>,
}

thread_local! {
    static CACHE: RefCell<HashMap<u64, Entry>> = RefCell::new(HashMap::new());
}

/// sqlparser's statements for `tokens`, from the cache when a statement of
/// the same shape was parsed on this thread before.
pub(super) fn parse_statements(tokens: Vec<TokenWithSpan>) -> Result<Vec<Statement>, ParserError> {
    if tokens.len() > MAX_TOKENS || text_bytes(&tokens) > MAX_TEXT_BYTES {
        return parse_long_literals_aside(tokens);
    }
    let key = shape_hash(&tokens);
    let cached = CACHE.with(|cache| {
        let cache = cache.borrow();
        let entry = cache.get(&key)?;
        same_shape(&entry.tokens, &tokens).then(|| entry.statements.clone())
    });
    if let Some(mut statements) = cached {
        let mut literals = Literals {
            tokens: &tokens,
            found: 0,
        };
        let _ = VisitMut::visit(&mut statements, &mut literals);
        if literals.found == tokens.iter().filter(|t| is_literal(&t.token)).count() {
            // Every routing test that repeats a shape checks the reuse.
            #[cfg(test)]
            assert_eq!(Ok(&statements), parse(tokens.clone()).as_ref());
            return Ok(statements);
        }
        return parse(tokens);
    }
    let kept = tokens.clone();
    let statements = parse(tokens)?;
    if cacheable(&kept, &statements) {
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if cache.len() >= MAX_ENTRIES {
                cache.clear();
            }
            cache.insert(
                key,
                Entry {
                    tokens: kept,
                    statements: statements.clone(),
                },
            );
        });
    }
    Ok(statements)
}

/// String literals longer than this are parsed with their content set
/// aside ([`parse_long_literals_aside`]).
const LONG_LITERAL_BYTES: usize = 1024;
/// The bytes of a set-aside literal's content that stay in its token (what
/// a syntax error near it shows).
const SET_ASIDE_KEPT_BYTES: usize = 32;

/// [`parse`], with the content of every string literal longer than
/// [`LONG_LITERAL_BYTES`] taken out of its token and put back into the tree
/// once parsed. sqlparser clones a token each time it looks at it and
/// formats a literal into the error of every alternative it tries (an
/// expression is first tried as `type 'string'`), so a huge literal cost
/// several copies of itself; set aside it costs none. The tree is the one a
/// parse of the whole tokens gives when every set-aside literal comes back
/// as exactly one string value with its span, as the cache requires;
/// otherwise (sqlparser read it as a name, joined it with another, ...) the
/// tokens are parsed again whole.
fn parse_long_literals_aside(
    mut tokens: Vec<TokenWithSpan>,
) -> Result<Vec<Statement>, ParserError> {
    let mut aside = Vec::new();
    for token in &mut tokens {
        if let Some(text) = string_content(&mut token.token) {
            if text.len() > LONG_LITERAL_BYTES {
                let mut kept = SET_ASIDE_KEPT_BYTES;
                while !text.is_char_boundary(kept) {
                    kept -= 1;
                }
                let stub = format!("{}...", &text[..kept]);
                aside.push(SetAside {
                    span: token.span,
                    content: std::mem::replace(text, stub),
                    found: false,
                });
            }
        }
    }
    if aside.is_empty() || !spans_ascend(&tokens) {
        restore_tokens(&mut tokens, &mut aside);
        return parse(tokens);
    }
    let stubbed = tokens.clone();
    let mut statements = parse(tokens)?;
    let mut check = FindAside {
        aside: &mut aside,
        stubs: &stubbed,
        complete: true,
    };
    let _ = VisitMut::visit(&mut statements, &mut check);
    let complete = check.complete && aside.iter().all(|a| a.found);
    if complete {
        let mut put_back = PutBack { aside: &mut aside };
        let _ = VisitMut::visit(&mut statements, &mut put_back);
        return Ok(statements);
    }
    let mut tokens = stubbed;
    restore_tokens(&mut tokens, &mut aside);
    parse(tokens)
}

/// A long literal's content, taken out of its token.
struct SetAside {
    span: Span,
    content: String,
    /// Found as a string value of the tree, with its span.
    found: bool,
}

/// The text of a string literal token (quoted, national or hex).
fn string_content(token: &mut Token) -> Option<&mut String> {
    match token {
        Token::SingleQuotedString(text)
        | Token::DoubleQuotedString(text)
        | Token::HexStringLiteral(text)
        | Token::NationalStringLiteral(text) => Some(text),
        _ => None,
    }
}

/// The value sqlparser gives a string literal token.
fn string_value(token: &Token) -> Option<Value> {
    Some(match token {
        Token::SingleQuotedString(text) => Value::SingleQuotedString(text.clone()),
        Token::DoubleQuotedString(text) => Value::DoubleQuotedString(text.clone()),
        Token::HexStringLiteral(text) => Value::HexStringLiteral(text.clone()),
        Token::NationalStringLiteral(text) => Value::NationalStringLiteral(text.clone()),
        _ => return None,
    })
}

/// The set-aside literal at `span` (`aside` is in text order).
fn aside_at(aside: &mut [SetAside], span: Span) -> Option<&mut SetAside> {
    let at = aside
        .binary_search_by(|a| a.span.start.cmp(&span.start))
        .ok()?;
    aside.get_mut(at).filter(|a| a.span == span)
}

/// Puts the set-aside contents back into their tokens (`aside` was taken
/// from `tokens` in order).
fn restore_tokens(tokens: &mut [TokenWithSpan], aside: &mut [SetAside]) {
    let mut next = aside.iter_mut().peekable();
    for token in tokens.iter_mut() {
        let Some(entry) = next.next_if(|entry| entry.span == token.span) else {
            continue;
        };
        if let Some(text) = string_content(&mut token.token) {
            *text = std::mem::take(&mut entry.content);
        }
    }
}

/// Marks each set-aside literal found as exactly one string value with its
/// span and stub; `complete` turns false on a second sighting or a value
/// at a set-aside literal's span holding anything else.
struct FindAside<'a> {
    aside: &'a mut [SetAside],
    stubs: &'a [TokenWithSpan],
    complete: bool,
}

impl VisitorMut for FindAside<'_> {
    type Break = ();

    fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<()> {
        let Some(entry) = aside_at(self.aside, value.span) else {
            return ControlFlow::Continue(());
        };
        let stub = self
            .stubs
            .binary_search_by(|t| t.span.start.cmp(&value.span.start))
            .ok()
            .and_then(|at| string_value(&self.stubs[at].token));
        if entry.found || stub.as_ref() != Some(&value.value) {
            self.complete = false;
            return ControlFlow::Break(());
        }
        entry.found = true;
        ControlFlow::Continue(())
    }
}

/// Moves the set-aside contents into the tree's values at their spans.
struct PutBack<'a> {
    aside: &'a mut [SetAside],
}

impl VisitorMut for PutBack<'_> {
    type Break = ();

    fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<()> {
        if let Some(entry) = aside_at(self.aside, value.span) {
            if let Value::SingleQuotedString(text)
            | Value::DoubleQuotedString(text)
            | Value::HexStringLiteral(text)
            | Value::NationalStringLiteral(text) = &mut value.value
            {
                *text = std::mem::take(&mut entry.content);
            }
        }
        ControlFlow::Continue(())
    }
}

fn parse(tokens: Vec<TokenWithSpan>) -> Result<Vec<Statement>, ParserError> {
    Parser::new(&MySqlDialect {})
        .with_tokens_with_locations(tokens)
        .parse_statements()
}

/// Bytes of text the tokens hold (strings, words, numbers, comments).
fn text_bytes(tokens: &[TokenWithSpan]) -> usize {
    tokens
        .iter()
        .map(|t| match &t.token {
            Token::SingleQuotedString(text)
            | Token::DoubleQuotedString(text)
            | Token::NationalStringLiteral(text)
            | Token::HexStringLiteral(text)
            | Token::Number(text, _) => text.len(),
            Token::Word(word) => word.value.len(),
            Token::Whitespace(
                Whitespace::MultiLineComment(text)
                | Whitespace::SingleLineComment { comment: text, .. },
            ) => text.len(),
            _ => 1,
        })
        .sum()
}

/// A literal token whose content may change without changing the tree.
fn is_literal(token: &Token) -> bool {
    match token {
        Token::Number(digits, false) => {
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
        Token::SingleQuotedString(_) => true,
        _ => false,
    }
}

/// The value sqlparser gives a literal token.
fn literal_value(token: &Token) -> Option<Value> {
    match token {
        Token::Number(digits, false) => Some(Value::Number(digits.clone(), false)),
        Token::SingleQuotedString(text) => Some(Value::SingleQuotedString(text.clone())),
        _ => None,
    }
}

/// Hash of the tokens with the literals' contents left out.
fn shape_hash(tokens: &[TokenWithSpan]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tokens.len().hash(&mut hasher);
    for token in tokens {
        token.span.hash(&mut hasher);
        if is_literal(&token.token) {
            std::mem::discriminant(&token.token).hash(&mut hasher);
        } else {
            token.token.hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// What a statement's digest is made of, in order: its tokens without
/// blanks and comments, each literal as a mark, and a run of literals
/// separated by commas (an `IN` list, a `VALUES` row) as its first one
/// followed by one "more" mark, so lists of any length share a digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DigestPiece<'a> {
    /// A token kept as it is.
    Token(&'a Token),
    /// A literal, masked.
    Literal,
    /// Further literals of a comma-separated run.
    More,
}

/// A literal a digest masks: those the cache treats as literals, and every
/// other number and quoted string (they only give values).
fn is_masked(token: &Token) -> bool {
    is_literal(token)
        || matches!(
            token,
            Token::Number(..)
                | Token::DoubleQuotedString(_)
                | Token::NationalStringLiteral(_)
                | Token::HexStringLiteral(_)
        )
}

/// Calls `piece` for every [`DigestPiece`] of `tokens`.
pub(super) fn digest_pieces<'a>(
    tokens: &'a [TokenWithSpan],
    mut piece: impl FnMut(DigestPiece<'a>),
) {
    let mut after_literal = false;
    let mut pending_comma: Option<&Token> = None;
    let mut collapsed = false;
    for token in tokens.iter().map(|t| &t.token) {
        if matches!(token, Token::Whitespace(_)) {
            continue;
        }
        let masked = is_masked(token);
        if let Some(comma) = pending_comma.take() {
            if masked {
                if !collapsed {
                    piece(DigestPiece::More);
                    collapsed = true;
                }
                continue;
            }
            piece(DigestPiece::Token(comma));
        }
        if masked {
            piece(DigestPiece::Literal);
            after_literal = true;
            collapsed = false;
        } else if after_literal && *token == Token::Comma {
            pending_comma = Some(token);
        } else {
            piece(DigestPiece::Token(token));
            after_literal = false;
        }
    }
    if let Some(comma) = pending_comma {
        piece(DigestPiece::Token(comma));
    }
}

/// The digest of a statement's tokens: a hash of its [`DigestPiece`]s.
/// Unlike the cache's shape, spans and blanks do not count, so
/// `id = 1` and `id  =  12345` share a digest.
pub(super) fn digest(tokens: &[TokenWithSpan]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    digest_pieces(tokens, |piece| match piece {
        DigestPiece::Token(token) => token.hash(&mut hasher),
        DigestPiece::Literal => 1u8.hash(&mut hasher),
        DigestPiece::More => 2u8.hash(&mut hasher),
    });
    hasher.finish()
}

/// The statement as its digest sees it, at most `max_bytes` long (cut on a
/// character boundary): literals as `?`, a run of them as `?, ...`, tokens
/// separated by one blank.
pub(super) fn masked_text(tokens: &[TokenWithSpan], max_bytes: usize) -> String {
    use std::fmt::Write;
    let mut text = String::new();
    let mut glue = false;
    digest_pieces(tokens, |piece| {
        if text.len() > max_bytes {
            return;
        }
        let tight_before = matches!(
            piece,
            DigestPiece::Token(Token::Comma | Token::RParen | Token::Period | Token::SemiColon)
                | DigestPiece::More
        );
        if glue && !tight_before {
            text.push(' ');
        }
        match piece {
            DigestPiece::Token(token) => {
                let _ = write!(text, "{token}");
            }
            DigestPiece::Literal => text.push('?'),
            DigestPiece::More => text.push_str(", ..."),
        }
        glue = !matches!(piece, DigestPiece::Token(Token::LParen | Token::Period));
    });
    if text.len() > max_bytes {
        let end = (0..=max_bytes)
            .rev()
            .find(|&at| text.is_char_boundary(at))
            .unwrap_or(0);
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// Whether `new` has `cached`'s shape: the same tokens and spans, literals
/// of the same kind aside.
fn same_shape(cached: &[TokenWithSpan], new: &[TokenWithSpan]) -> bool {
    cached.len() == new.len()
        && cached.iter().zip(new).all(|(old, new)| {
            old.span == new.span
                && if is_literal(&old.token) {
                    is_literal(&new.token)
                        && std::mem::discriminant(&old.token) == std::mem::discriminant(&new.token)
                } else {
                    old.token == new.token
                }
        })
}

/// The position of the literal token at `span`, if any.
fn literal_at(tokens: &[TokenWithSpan], span: Span) -> Option<usize> {
    let at = tokens
        .binary_search_by(|t| t.span.start.cmp(&span.start))
        .ok()?;
    let token = tokens.get(at)?;
    (token.span == span && is_literal(&token.token)).then_some(at)
}

/// Whether every literal token of `tokens` is exactly one value of
/// `statements`, with its span and its value.
fn cacheable(tokens: &[TokenWithSpan], statements: &[Statement]) -> bool {
    if !spans_ascend(tokens) {
        return false;
    }
    let literals = tokens.iter().filter(|t| is_literal(&t.token)).count();
    let mut check = Check {
        tokens,
        seen: vec![false; tokens.len()],
        found: 0,
    };
    let complete = statements
        .iter()
        .all(|statement| Visit::visit(statement, &mut check).is_continue());
    complete && check.found == literals
}

/// Whether the tokens' spans strictly ascend (what [`literal_at`]'s search
/// needs).
fn spans_ascend(tokens: &[TokenWithSpan]) -> bool {
    tokens
        .windows(2)
        .all(|pair| pair[0].span.start < pair[1].span.start)
}

/// Matches a freshly parsed tree's values to the literal tokens.
struct Check<'a> {
    tokens: &'a [TokenWithSpan],
    seen: Vec<bool>,
    found: usize,
}

impl Visitor for Check<'_> {
    type Break = ();

    fn pre_visit_value(&mut self, value: &ValueWithSpan) -> ControlFlow<()> {
        let Some(at) = literal_at(self.tokens, value.span) else {
            return ControlFlow::Continue(());
        };
        let token = &self.tokens[at].token;
        if self.seen[at] || literal_value(token).as_ref() != Some(&value.value) {
            return ControlFlow::Break(());
        }
        self.seen[at] = true;
        self.found += 1;
        ControlFlow::Continue(())
    }
}

/// Puts a new statement's literals into a cached tree.
struct Literals<'a> {
    tokens: &'a [TokenWithSpan],
    found: usize,
}

impl VisitorMut for Literals<'_> {
    type Break = ();

    fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<()> {
        if let Some(new) =
            literal_at(self.tokens, value.span).and_then(|at| literal_value(&self.tokens[at].token))
        {
            value.value = new;
            self.found += 1;
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::tokenizer::Tokenizer;

    fn tokens(sql: &str) -> Vec<TokenWithSpan> {
        Tokenizer::new(&MySqlDialect {}, sql)
            .tokenize_with_location()
            .expect("tokenizes")
    }

    /// Parses `first`, then `second` (same shape), and compares the cached
    /// reading of `second` with a fresh one.
    fn reuse(first: &str, second: &str) -> bool {
        CACHE.with(|cache| cache.borrow_mut().clear());
        let _ = parse_statements(tokens(first));
        let hit = CACHE.with(|cache| {
            let key = shape_hash(&tokens(second));
            cache
                .borrow()
                .get(&key)
                .is_some_and(|entry| same_shape(&entry.tokens, &tokens(second)))
        });
        let cached = parse_statements(tokens(second));
        let fresh = parse(tokens(second));
        assert_eq!(cached, fresh, "{first} / {second}");
        hit
    }

    fn digest_of(sql: &str) -> (u64, String) {
        let tokens = tokens(sql);
        (digest(&tokens), masked_text(&tokens, 1024))
    }

    #[test]
    fn digests_mask_literals_and_ignore_layout() {
        let (a, text) = digest_of("SELECT data FROM pins WHERE id = 1234");
        assert_eq!(text, "SELECT data FROM pins WHERE id = ?");
        let (b, _) = digest_of("SELECT  data FROM pins\n WHERE id = 99999999 /* note */");
        assert_eq!(a, b);
        let (c, _) = digest_of("SELECT data FROM pins WHERE id = 'x'");
        assert_eq!(a, c, "a string and a number are both a literal");
        let (d, _) = digest_of("SELECT data FROM pins WHERE local_id = 1234");
        assert_ne!(a, d);
        let (e, _) = digest_of("SELECT data FROM boards WHERE id = 1234");
        assert_ne!(a, e);
    }

    #[test]
    fn literal_lists_of_any_length_share_a_digest() {
        let (a, text) = digest_of("SELECT data FROM pins WHERE id IN (1, 2, 3)");
        assert_eq!(text, "SELECT data FROM pins WHERE id IN (?, ...)");
        let (b, _) = digest_of("SELECT data FROM pins WHERE id IN (7,8)");
        let (c, _) = digest_of("SELECT data FROM pins WHERE id IN (7)");
        assert_eq!(a, b);
        assert_ne!(a, c, "one value is not a list");
        let (d, text) = digest_of("INSERT INTO pins (id, data) VALUES (1, 'a'), (2, 'b')");
        assert_eq!(
            text,
            "INSERT INTO pins (id, data) VALUES (?, ...), (?, ...)"
        );
        let (e, _) = digest_of("INSERT INTO pins (id, data) VALUES (3, 'c'), (4, 'd')");
        assert_eq!(d, e);
        let (_, text) = digest_of("SELECT f(1, x), 2");
        assert_eq!(text, "SELECT f (?, x), ?");
    }

    #[test]
    fn masked_text_is_bounded() {
        let long = format!("SELECT {}", vec!["col"; 1000].join(", "));
        let text = masked_text(&tokens(&long), 100);
        assert!(text.len() <= 103, "{}", text.len());
        assert!(text.ends_with("..."));
    }

    #[test]
    fn point_lookups_reuse_the_tree_with_the_new_literal() {
        assert!(reuse(
            "SELECT data FROM pins WHERE id = 1234567",
            "SELECT data FROM pins WHERE id = 7654321",
        ));
        assert!(reuse(
            "UPDATE pins SET data = 'abc' WHERE id = 12 LIMIT 5",
            "UPDATE pins SET data = 'xyz' WHERE id = 98 LIMIT 7",
        ));
        assert!(reuse(
            "SELECT a FROM t WHERE id IN (11, 22, 33) AND b = 'q'",
            "SELECT a FROM t WHERE id IN (44, 55, 66) AND b = 'r'",
        ));
    }

    /// A short statement with a long literal is not kept: the cache would
    /// hold its text twice per thread after it ran.
    #[test]
    fn statements_with_long_literals_are_not_kept() {
        let long = |c: char| {
            format!(
                "SELECT data FROM pins WHERE data = '{}'",
                c.to_string().repeat(MAX_TEXT_BYTES)
            )
        };
        assert!(!reuse(&long('a'), &long('b')));
        CACHE.with(|cache| cache.borrow_mut().clear());
        let _ = parse_statements(tokens(&long('a')));
        assert!(CACHE.with(|cache| cache.borrow().is_empty()));
        let short = |c: char| {
            format!(
                "SELECT data FROM pins WHERE data = '{}'",
                c.to_string().repeat(MAX_TEXT_BYTES / 2)
            )
        };
        assert!(reuse(&short('a'), &short('b')));
    }

    /// Long string literals parsed with their content set aside give the
    /// tree of a whole parse, where they are plain values and where they
    /// are not (names, LIKE filters, joined strings), and a syntax error
    /// stays one.
    #[test]
    fn long_literals_set_aside_give_the_same_tree() {
        let long = "é\\'x".repeat(LONG_LITERAL_BYTES);
        let other = "y".repeat(LONG_LITERAL_BYTES + 1);
        let cases = [
            format!("SELECT LENGTH('{long}')"),
            format!("SELECT '{long}', '{other}', 'short', 12"),
            format!("INSERT INTO pins (id, data) VALUES (1, '{long}'), (2, '{other}')"),
            format!("UPDATE pins SET data = '{long}' WHERE id = 7"),
            format!("SELECT data FROM pins WHERE data = '{long}' OR data LIKE '{other}'"),
            format!("SELECT DATE '{long}'"),
            format!("SELECT '{long}' '{other}'"),
            format!("SHOW TABLES LIKE '{long}'"),
            format!("SELECT 1 AS '{long}'"),
            format!("SELECT * FROM t WHERE a = '{long}' ORDER BY '{other}'"),
            format!(
                "SELECT LENGTH(_binary X'{}'), X'{}'",
                "AB".repeat(LONG_LITERAL_BYTES),
                "0F".repeat(LONG_LITERAL_BYTES)
            ),
            format!("SELECT _utf8mb4'{long}', N'{other}', \"{other}\""),
        ];
        for sql in &cases {
            let set_aside = parse_statements(tokens(sql));
            assert_eq!(set_aside, parse(tokens(sql)), "{}", &sql[..40]);
            assert!(set_aside.is_ok(), "{}", &sql[..40]);
        }
        let broken = format!("SELECT ('{long}'");
        assert!(parse_statements(tokens(&broken)).is_err());
    }

    #[test]
    fn another_layout_or_kind_is_parsed_afresh() {
        // Longer literal: other spans.
        assert!(!reuse(
            "SELECT data FROM pins WHERE id = 12",
            "SELECT data FROM pins WHERE id = 123",
        ));
        // A number that is not a plain integer.
        assert!(!reuse("SELECT 1.5", "SELECT 2.5"));
        assert!(!reuse("SELECT 12", "SELECT .5"));
        // A string where a number was.
        assert!(!reuse("SELECT 12", "SELECT 'a'"));
        // Another word.
        assert!(!reuse(
            "SELECT a FROM t WHERE id = 1",
            "SELECT a FROM u WHERE id = 1"
        ));
    }

    #[test]
    fn literals_that_are_not_plain_values_are_not_cached() {
        // A single-quoted alias is a name, not a value.
        assert!(!reuse("SELECT 1 AS 'a'", "SELECT 1 AS 'b'"));
        // Adjacent strings are concatenated into one value.
        assert!(!reuse("SELECT 'a' 'b'", "SELECT 'c' 'd'"));
        assert!(!reuse("SELECT 'a' ''", "SELECT 'c' ''"));
        // Type arguments are not values.
        assert!(!reuse(
            "SELECT CAST(a AS CHAR(10))",
            "SELECT CAST(a AS CHAR(99))"
        ));
        // Whether reused or not, the reading is the fresh one.
        reuse("SELECT DATE '2020-01-01'", "SELECT DATE '2021-02-02'");
        reuse(
            "SELECT a FROM t WHERE b LIKE 'x%' ESCAPE '!'",
            "SELECT a FROM t WHERE b LIKE 'y%' ESCAPE '#'",
        );
        reuse("SELECT INTERVAL '1' DAY + d", "SELECT INTERVAL '2' DAY + d");
    }

    #[test]
    fn literal_lookup_needs_the_exact_span() {
        let tokens = tokens("SELECT 12");
        let number = tokens.last().expect("a token");
        assert_eq!(literal_at(&tokens, number.span), Some(tokens.len() - 1));
        let mut other = number.span;
        other.end.column += 1;
        assert_eq!(literal_at(&tokens, other), None);
    }
}
