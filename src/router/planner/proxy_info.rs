//! Statements about the proxy's own sessions and version, answered by the
//! proxy: `SELECT CONNECTION_ID()`, `SELECT VERSION()` / `@@version`,
//! `SHOW [FULL] PROCESSLIST`, `SELECT * FROM information_schema.PROCESSLIST
//! [WHERE ID = n]` and `KILL`.

use sqlparser::ast::{
    BinaryOperator, Expr, KillType, ObjectNamePart, Query, SelectItem, SetExpr, TableFactor, Value,
};

use super::session::argless_function_name;
use super::unsupported;
use crate::router::plan::{RouteError, SessionAction};

/// `SELECT CONNECTION_ID()`, `SELECT VERSION()`, `SELECT @@version` (one
/// item, alias allowed), and reads of `information_schema.PROCESSLIST`.
/// `None`: not one of them.
pub(super) fn select(query: &Query) -> Option<Result<SessionAction, RouteError>> {
    if query.with.is_some() || query.order_by.is_some() || query.limit_clause.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    if select.having.is_some() || select.into.is_some() {
        return None;
    }
    if !select.from.is_empty() {
        return processlist_table(select).map(|plan| plan.map_err(unsupported));
    }
    if select.selection.is_some() {
        return None;
    }
    let [item] = select.projection.as_slice() else {
        return None;
    };
    let (expr, alias) = match item {
        SelectItem::UnnamedExpr(expr) => (expr, None),
        SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
        _ => return None,
    };
    let column = || alias.clone().unwrap_or_else(|| expr.to_string());
    match asked(expr)? {
        Asked::ConnectionId => Some(Ok(SessionAction::SelectConnectionId { column: column() })),
        Asked::Version => Some(Ok(SessionAction::SelectVersion { column: column() })),
    }
}

/// `KILL [CONNECTION | QUERY] n`.
pub(super) fn kill(modifier: Option<KillType>, id: u64) -> Result<SessionAction, RouteError> {
    match modifier {
        None | Some(KillType::Connection) => Ok(SessionAction::Kill { query: false, id }),
        Some(KillType::Query) => Ok(SessionAction::Kill { query: true, id }),
        Some(KillType::Mutation) => Err(unsupported("KILL MUTATION")),
    }
}

enum Asked {
    ConnectionId,
    Version,
}

fn asked(expr: &Expr) -> Option<Asked> {
    match expr {
        Expr::Function(function) => {
            let name = argless_function_name(function)?;
            if name.eq_ignore_ascii_case("CONNECTION_ID") {
                Some(Asked::ConnectionId)
            } else if name.eq_ignore_ascii_case("VERSION") {
                Some(Asked::Version)
            } else {
                None
            }
        }
        Expr::Identifier(ident) if is_version_variable(&ident.value) => Some(Asked::Version),
        Expr::CompoundIdentifier(parts) => {
            let text = parts
                .iter()
                .map(|part| part.value.as_str())
                .collect::<Vec<_>>()
                .join(".");
            is_version_variable(&text).then_some(Asked::Version)
        }
        _ => None,
    }
}

/// `@@version`, `@@global.version` (`@@session.version` is the server's
/// error: the variable is global).
fn is_version_variable(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "@@version" || name == "@@global.version"
}

/// What a statement naming `information_schema.PROCESSLIST` in a form the
/// proxy does not answer is refused as.
pub(super) const PROCESSLIST_REFUSED: &str = "this read of information_schema.PROCESSLIST; shardgate answers SELECT * FROM information_schema.PROCESSLIST [WHERE ID = n] and SHOW [FULL] PROCESSLIST";

/// Why `SHOW EXPLAIN FOR n` and its kin are refused.
pub(super) const OTHER_CONNECTION_REFUSED: &str = "SHOW EXPLAIN / SHOW ANALYZE / EXPLAIN FOR CONNECTION: backend threads are shared by every client of the proxy; EXPLAIN the statement itself instead";

/// A read of `information_schema.PROCESSLIST`: `SELECT *` with no
/// condition or `WHERE ID = n` is answered; other reads of it are refused
/// (the backends' list is not the proxy's).
fn processlist_table(select: &sqlparser::ast::Select) -> Option<Result<SessionAction, String>> {
    let [from] = select.from.as_slice() else {
        return None;
    };
    let TableFactor::Table { name, .. } = &from.relation else {
        return None;
    };
    let parts: Vec<&str> = name
        .0
        .iter()
        .filter_map(|part| match part {
            ObjectNamePart::Identifier(ident) => Some(ident.value.as_str()),
            _ => None,
        })
        .collect();
    let [schema, table] = parts.as_slice() else {
        return None;
    };
    if !schema.eq_ignore_ascii_case("information_schema")
        || !table.eq_ignore_ascii_case("processlist")
    {
        return None;
    }
    let refused = || Some(Err(PROCESSLIST_REFUSED.to_owned()));
    if !from.joins.is_empty()
        || !matches!(select.projection.as_slice(), [SelectItem::Wildcard(_)])
        || select.group_by != sqlparser::ast::GroupByExpr::Expressions(vec![], vec![])
    {
        return refused();
    }
    let id = match &select.selection {
        None => None,
        Some(Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        }) => match (left.as_ref(), right.as_ref()) {
            (Expr::Identifier(column), Expr::Value(value))
                if column.value.eq_ignore_ascii_case("id") =>
            {
                match &value.value {
                    Value::Number(number, _) => match number.parse() {
                        Ok(id) => Some(id),
                        Err(_) => return refused(),
                    },
                    _ => return refused(),
                }
            }
            _ => return refused(),
        },
        Some(_) => return refused(),
    };
    Some(Ok(SessionAction::ProcessList {
        full: true,
        table: true,
        id,
    }))
}
