//! Statements about the previous statement's diagnostics: `SHOW WARNINGS`,
//! `SHOW ERRORS` (with or without `LIMIT`), `SHOW COUNT(*) WARNINGS`,
//! `SHOW COUNT(*) ERRORS`, and `SELECT @@warning_count` /
//! `@@error_count` (also `@@session.` and `@@local.`). They must run on the
//! backend connection that ran the previous statement, which the engine
//! knows: the router recognises them and says what they ask
//! ([`Plan::Diagnostics`]), so the engine can answer for a previous
//! statement that left nothing without reading the text again.

use sqlparser::ast::{Expr, Query, SelectItem, SetExpr, Spanned, Value};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::router::plan::{
    Diagnostics, DiagnosticsArea, DiagnosticsColumn, DiagnosticsValue, Plan, RouteError, SqlText,
};
use crate::router::text::Edits;
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

/// What a table-less `SELECT` asks if its select list reads
/// `@@warning_count` or `@@error_count` (in any scope that is the
/// session's) and otherwise only literals: one column per item, named as
/// a server names it. The fallback text (see [`Diagnostics::Select`]) is
/// not read yet: [`reroute_fallback`] routes it.
pub(super) fn select_diagnostics(
    src: &Source<'_>,
    query: &Query,
) -> Option<Result<Diagnostics, RouteError>> {
    if query.with.is_some() || query.order_by.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    if !select.from.is_empty()
        || select.selection.is_some()
        || select.having.is_some()
        || select.into.is_some()
    {
        return None;
    }
    let mut reads_diagnostics = false;
    let mut columns = Vec::new();
    let mut fallback = Edits::default();
    for item in &select.projection {
        let (expr, alias) = match item {
            SelectItem::UnnamedExpr(expr) => (expr, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
            _ => return None,
        };
        let written = || {
            src.range(expr.span())
                .and_then(|range| src.original_text(range))
                .map(str::to_owned)
        };
        let (name, value) = match (system_variable(expr), expr) {
            (Some(name), _)
                if name.eq_ignore_ascii_case("warning_count")
                    || name.eq_ignore_ascii_case("error_count") =>
            {
                let area = if name.eq_ignore_ascii_case("warning_count") {
                    DiagnosticsArea::Warnings
                } else {
                    DiagnosticsArea::Errors
                };
                reads_diagnostics = true;
                let name = written()?;
                let range = src.range(expr.span())?;
                let zero = match alias {
                    Some(_) => "0".to_owned(),
                    // Doubling a backtick keeps it inside the name only
                    // when no byte can belong to a multibyte character.
                    None if name.is_ascii() => format!("0 AS `{}`", name.replace('`', "``")),
                    None => return Some(Err(non_ascii_count())),
                };
                fallback.replace(range, zero);
                (name, DiagnosticsValue::Count(area))
            }
            (Some(_), _) => (written()?, DiagnosticsValue::Variable),
            (None, Expr::Value(value)) => match &value.value {
                Value::Number(number, _) => (written()?, DiagnosticsValue::Number(number.clone())),
                Value::SingleQuotedString(text) | Value::DoubleQuotedString(text) => {
                    (text.clone(), DiagnosticsValue::Text(text.clone()))
                }
                Value::Null => (written()?, DiagnosticsValue::Null),
                _ => return None,
            },
            (None, _) => return None,
        };
        columns.push(DiagnosticsColumn {
            name: alias.map_or(name, |alias| alias.value.clone()),
            value,
        });
    }
    if !reads_diagnostics {
        return None;
    }
    let fallback = if columns
        .iter()
        .any(|c| c.value == DiagnosticsValue::Variable)
    {
        Some(SqlText::from(fallback.apply(src.original).ok()?))
    } else {
        None
    };
    Some(Ok(Diagnostics::Select { columns, fallback }))
}

/// The refusal of a count written with non-ASCII bytes (in a comment)
/// next to another system variable: its column name cannot be copied
/// into the fallback text safely in every client character set.
fn non_ascii_count() -> RouteError {
    RouteError::Unsupported(
        "@@warning_count or @@error_count written with non-ASCII characters next to another \
         system variable; write it without comments, or give it an ASCII alias (AS c)"
            .to_owned(),
    )
}

/// `asked` with its fallback text replaced by the text `reroute` plans for
/// it (the session's values substituted), which must run on any host:
/// every byte sent is read by the router first.
pub(super) fn reroute_fallback(
    asked: Diagnostics,
    reroute: impl FnOnce(&[u8]) -> Result<Plan, RouteError>,
) -> Result<Diagnostics, RouteError> {
    let Diagnostics::Select {
        columns,
        fallback: Some(text),
    } = asked
    else {
        return Ok(asked);
    };
    match reroute(&text.0)? {
        Plan::AnyHost { sql, .. } => Ok(Diagnostics::Select {
            columns,
            fallback: Some(sql),
        }),
        Plan::Reject(error) => Err(error),
        _ => Err(RouteError::Unsupported(
            "this read of @@warning_count or @@error_count with other system variables; \
             read the counts alone"
                .to_owned(),
        )),
    }
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
mod tests;
