//! Statements about the previous statement's diagnostics: `SHOW WARNINGS`,
//! `SHOW ERRORS` (with or without `LIMIT`), `SHOW COUNT(*) WARNINGS`,
//! `SHOW COUNT(*) ERRORS`, and `SELECT @@warning_count` /
//! `@@error_count` (also `@@session.` and `@@local.`). They must run on the
//! backend connection that ran the previous statement, which the engine
//! knows: the router only recognises them ([`Plan::Diagnostics`]).

use sqlparser::ast::{Expr, Query, SelectItem, SetExpr};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::router::plan::Plan;

/// The plan of a diagnostics statement: its original text.
pub(super) fn plan(sql: &[u8]) -> Plan {
    Plan::Diagnostics { sql: sql.into() }
}

/// Whether a SHOW statement's tokens are `SHOW WARNINGS|ERRORS [LIMIT ..]`
/// or `SHOW COUNT(*) WARNINGS|ERRORS` (one statement: no `;` but a last one).
pub(super) fn is_show_diagnostics(tokens: &[TokenWithSpan]) -> bool {
    let mut significant: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
        .collect();
    if let Some(Token::SemiColon) = significant.last() {
        significant.pop();
    }
    if significant.contains(&&Token::SemiColon) {
        return false;
    }
    let is_word = |i: usize, words: &[&str]| matches!(significant.get(i), Some(Token::Word(w)) if words.iter().any(|x| w.value.eq_ignore_ascii_case(x)));
    let what = ["WARNINGS", "ERRORS"];
    if !matches!(significant.first(), Some(Token::Word(w)) if w.keyword == Keyword::SHOW) {
        return false;
    }
    if is_word(1, &what) {
        return true;
    }
    is_word(1, &["COUNT"])
        && matches!(
            significant.get(2..),
            Some([Token::LParen, Token::Mul, Token::RParen, _])
        )
        && is_word(5, &what)
}

/// Whether a query is a table-less `SELECT` of system variables and
/// literals reading `@@warning_count` or `@@error_count` (in any scope
/// that is the session's).
pub(super) fn is_select_diagnostics(query: &Query) -> bool {
    if query.with.is_some() || query.order_by.is_some() {
        return false;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return false;
    };
    if !select.from.is_empty()
        || select.selection.is_some()
        || select.having.is_some()
        || select.into.is_some()
    {
        return false;
    }
    let mut reads_diagnostics = false;
    for item in &select.projection {
        let expr = match item {
            SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => expr,
            _ => return false,
        };
        match system_variable(expr) {
            Some(name) => {
                reads_diagnostics |= name.eq_ignore_ascii_case("warning_count")
                    || name.eq_ignore_ascii_case("error_count");
            }
            None if matches!(expr, Expr::Value(_)) => {}
            None => return false,
        }
    }
    reads_diagnostics
}

/// The name of a session system variable read as `@@name`,
/// `@@session.name` or `@@local.name`.
fn system_variable(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Identifier(ident) if ident.quote_style.is_none() => ident.value.strip_prefix("@@"),
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [scope, name]
                if scope.quote_style.is_none()
                    && (scope.value.eq_ignore_ascii_case("@@session")
                        || scope.value.eq_ignore_ascii_case("@@local")) =>
            {
                Some(name.value.as_str())
            }
            _ => None,
        },
        _ => None,
    }
}
