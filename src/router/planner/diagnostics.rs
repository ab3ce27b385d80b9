//! Statements about the previous statement's diagnostics: `SHOW WARNINGS`,
//! `SHOW ERRORS` (with or without `LIMIT`), `SHOW COUNT(*) WARNINGS`,
//! `SHOW COUNT(*) ERRORS`, and `SELECT @@warning_count` /
//! `@@error_count` (also `@@session.` and `@@local.`). They must run on the
//! backend connection that ran the previous statement, which the engine
//! knows: the router recognises them and says what they ask
//! ([`Plan::Diagnostics`]), so the engine can answer for a previous
//! statement that left nothing without reading the text again.

use sqlparser::ast::{Expr, Query, SelectItem, SetExpr};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan};

use crate::router::plan::{Diagnostics, DiagnosticsArea, Plan};
use crate::router::text::Source;

/// The plan of a diagnostics statement: its original text and what it
/// asks.
pub(super) fn plan(sql: &[u8], asked: Diagnostics) -> Plan {
    Plan::Diagnostics {
        sql: sql.into(),
        asked,
    }
}

/// What a SHOW statement's tokens ask if they are `SHOW WARNINGS|ERRORS
/// [LIMIT ..]` or `SHOW COUNT(*) WARNINGS|ERRORS` (one statement: no `;`
/// but a last one).
pub(super) fn show_diagnostics(tokens: &[TokenWithSpan]) -> Option<Diagnostics> {
    let mut significant: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
        .collect();
    if let Some(Token::SemiColon) = significant.last() {
        significant.pop();
    }
    if significant.contains(&&Token::SemiColon) {
        return None;
    }
    if !matches!(significant.first(), Some(Token::Word(w)) if w.keyword == Keyword::SHOW) {
        return None;
    }
    let area = |i: usize| match significant.get(i) {
        Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("WARNINGS") => {
            Some(DiagnosticsArea::Warnings)
        }
        Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("ERRORS") => {
            Some(DiagnosticsArea::Errors)
        }
        _ => None,
    };
    if let Some(area) = area(1) {
        return Some(Diagnostics::List(area));
    }
    let is_count = matches!(significant.get(1), Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("COUNT"))
        && matches!(
            significant.get(2..),
            Some([Token::LParen, Token::Mul, Token::RParen, _])
        );
    if !is_count {
        return None;
    }
    area(5).map(Diagnostics::Count)
}

/// What a diagnostics `SELECT` asks: its select list as written (from
/// the end of `select`, the span of its `SELECT` keyword, without a
/// trailing `;`) names the one column of the proxy's own answer.
pub(super) fn select_diagnostics(src: &Source<'_>, select: Option<Span>) -> Diagnostics {
    let start = select
        .and_then(|span| src.offset(span.end))
        .unwrap_or(0)
        .min(src.original.len());
    let text = String::from_utf8_lossy(&src.original[start..]);
    let column = text.trim();
    let column = column.strip_suffix(';').unwrap_or(column).trim_end();
    Diagnostics::Select {
        column: column.to_owned(),
    }
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
pub(super) fn system_variable(expr: &Expr) -> Option<&str> {
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

#[cfg(test)]
#[path = "diagnostics_tests.rs"]
mod tests;
