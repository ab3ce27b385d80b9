//! Statements the proxy answers itself, from the session's state: USE,
//! BEGIN / COMMIT / ROLLBACK, savepoints (kept for the transaction's
//! connection), `SELECT DATABASE()` and `SELECT LAST_INSERT_ID()`. (SET is
//! parsed in `router::set`.)

use sqlparser::ast::{
    Expr, Function, FunctionArguments, ObjectNamePart, Query, SelectItem, SetExpr, Statement, Use,
};

use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::{object_name_text, unsupported, Env};
use crate::router::plan::{Plan, RouteError, SessionAction, SessionValue};

/// BEGIN, COMMIT, ROLLBACK, savepoints (`SAVEPOINT x`, `ROLLBACK [WORK]
/// TO [SAVEPOINT] x`, `RELEASE SAVEPOINT x`), and the AND CHAIN forms, not
/// supported. Called with those statements only.
pub(super) fn transaction(statement: &Statement, sql: &[u8]) -> Result<Plan, RouteError> {
    match statement {
        Statement::StartTransaction { .. } => {
            Ok(Plan::Session(SessionAction::Begin { sql: sql.into() }))
        }
        Statement::Commit { chain: false, .. } => Ok(Plan::Session(SessionAction::Commit)),
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => Ok(Plan::Session(SessionAction::Rollback)),
        Statement::Rollback {
            chain: false,
            savepoint: Some(_),
        }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. } => {
            Ok(Plan::Session(SessionAction::Savepoint { sql: sql.into() }))
        }
        Statement::Commit { .. } | Statement::Rollback { chain: true, .. } => {
            Err(unsupported("COMMIT/ROLLBACK AND CHAIN"))
        }
        _ => Err(unsupported("this transaction statement")),
    }
}

/// `START TRANSACTION WITH CONSISTENT SNAPSHOT` (with `READ ONLY` or
/// `READ WRITE` in any order), which sqlparser does not read: a BEGIN sent
/// as written when the transaction binds. `None` for any other text
/// (sqlparser reads it, or answers its syntax error).
pub(super) fn start_with_snapshot(tokens: &[TokenWithSpan], sql: &[u8]) -> Option<Plan> {
    let words: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
        .collect();
    let body = match words.as_slice() {
        [start, transaction, rest @ ..] if is(start, "START") && is(transaction, "TRANSACTION") => {
            match rest {
                [body @ .., Token::SemiColon] => body,
                body => body,
            }
        }
        _ => return None,
    };
    let (mut snapshot, mut access_modes) = (false, 0);
    for characteristic in body.split(|t| matches!(t, Token::Comma)) {
        match characteristic {
            [with, consistent, snap]
                if is(with, "WITH") && is(consistent, "CONSISTENT") && is(snap, "SNAPSHOT") =>
            {
                snapshot = true
            }
            [read, mode] if is(read, "READ") && (is(mode, "ONLY") || is(mode, "WRITE")) => {
                access_modes += 1
            }
            _ => return None,
        }
    }
    (snapshot && access_modes <= 1).then(|| Plan::Session(SessionAction::Begin { sql: sql.into() }))
}

/// Whether `token` is the unquoted word `text`.
fn is(token: &Token, text: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text))
}

/// `SELECT DATABASE()`, `SELECT SCHEMA()`, `SELECT LAST_INSERT_ID()`,
/// answered by the proxy.
pub(super) fn special_select(query: &Query) -> Option<SessionAction> {
    if query.with.is_some() || query.order_by.is_some() || query.limit_clause.is_some() {
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
    if let Some(columns) = session_values(&select.projection) {
        return Some(SessionAction::SelectSessionValues { columns });
    }
    let [item] = select.projection.as_slice() else {
        return None;
    };
    let (SelectItem::UnnamedExpr(Expr::Function(function))
    | SelectItem::ExprWithAlias {
        expr: Expr::Function(function),
        ..
    }) = item
    else {
        return None;
    };
    let name = argless_function_name(function)?;
    let column = match item {
        SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
        _ => function.to_string(),
    };
    if name.eq_ignore_ascii_case("DATABASE") || name.eq_ignore_ascii_case("SCHEMA") {
        Some(SessionAction::SelectDatabase { column })
    } else if name.eq_ignore_ascii_case("LAST_INSERT_ID") {
        Some(SessionAction::SelectLastInsertId { column })
    } else {
        None
    }
}

/// The name of a call without arguments and without `OVER` (`DATABASE()`,
/// `CONNECTION_ID()`), unqualified.
pub(super) fn argless_function_name(function: &Function) -> Option<&str> {
    let [ObjectNamePart::Identifier(name)] = function.name.0.as_slice() else {
        return None;
    };
    let no_args = match &function.args {
        FunctionArguments::None => true,
        FunctionArguments::List(list) => list.args.is_empty(),
        FunctionArguments::Subquery(_) => false,
    };
    (no_args && function.over.is_none()).then_some(name.value.as_str())
}

/// The columns of a select list that reads only `@@autocommit` and
/// `@@in_transaction` (also `@@session.` / `@@local.`), named as a server
/// names them (the alias, or the expression as written).
fn session_values(projection: &[SelectItem]) -> Option<Vec<(String, SessionValue)>> {
    projection
        .iter()
        .map(|item| {
            let (expr, alias) = match item {
                SelectItem::UnnamedExpr(expr) => (expr, None),
                SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
                _ => return None,
            };
            let name = super::diagnostics::system_variable(expr)?;
            let value = if name.eq_ignore_ascii_case("autocommit") {
                SessionValue::Autocommit
            } else if name.eq_ignore_ascii_case("in_transaction") {
                SessionValue::InTransaction
            } else {
                return None;
            };
            let column = alias.map_or_else(|| expr.to_string(), |a| a.value.clone());
            Some((column, value))
        })
        .collect()
}

impl Env<'_> {
    /// `USE db`.
    pub(super) fn use_database(&self, target: &Use) -> Result<Plan, RouteError> {
        let (Use::Object(name) | Use::Database(name) | Use::Schema(name)) = target else {
            return Err(unsupported("this form of USE; write USE dbNNNNN"));
        };
        let text = object_name_text(name);
        match name.0.as_slice() {
            [ObjectNamePart::Identifier(db)] => match self.topo.parse_database(&db.value) {
                Some((fleet, shard)) => Ok(Plan::Session(SessionAction::Use { fleet, shard })),
                None => Err(RouteError::UnknownDatabase(db.value.clone())),
            },
            _ => Err(RouteError::UnknownDatabase(text)),
        }
    }
}
