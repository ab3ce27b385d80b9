//! How the rows of a multi-shard read's parts merge, decided from the
//! SELECT: what a plain single-table SELECT fanned out over shards keeps
//! exact, and refusals with a reason for the rest.
//!
//! Merging:
//! - `ORDER BY` on selected columns (name, alias or position): every part
//!   keeps its ORDER BY and the proxy merges the sorted streams; a plain
//!   column that is not selected is appended to every part's select list
//!   as a hidden column (dropped by the proxy). With `SELECT *` the
//!   positions are unknown, so ORDER BY is refused.
//! - `LIMIT n OFFSET m` (or `LIMIT m, n`): every part is asked for `n + m`
//!   rows; the proxy skips `m` and keeps `n`.
//! - `COUNT`, `SUM`, `MIN`, `MAX` standing alone in the select list, with or
//!   without `GROUP BY`: each part aggregates its shard, the proxy merges
//!   the groups (a GROUP BY column that is not selected is appended as a
//!   hidden group key). Groups span shards, so the parts get no LIMIT; the
//!   proxy orders and limits the merged groups.

use std::ops::Range;

use sqlparser::ast::{
    DuplicateTreatment, Expr, Function, FunctionArguments, GroupByExpr, Ident, LimitClause,
    ObjectNamePart, OrderByExpr, OrderByKind, OrderBySort, Query, Select, SelectItem, Value,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Span, Token, Tokenizer, Whitespace};

use super::dml::Planner;
use super::expr::{column_ref, is_id, ColumnRef};
use super::keys::is_marker;
use super::unsupported;
use crate::router::plan::{Aggregation, Merge, MergeColumn, RouteError, SortKey};
use crate::router::text::Source;
use crate::topology::TableKind;

/// A read over several shards.
pub(super) fn multi(what: impl std::fmt::Display) -> RouteError {
    unsupported(format!("{what} in a read over several shards"))
}

/// Aggregate functions of MySQL/MariaDB: only COUNT, SUM, MIN and MAX
/// are merged.
const AGGREGATES: [&str; 18] = [
    "AVG",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "COUNT",
    "GROUP_CONCAT",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
    "MAX",
    "MIN",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "SUM",
    "VAR_POP",
    "VAR_SAMP",
    "VARIANCE",
];

fn is_aggregate(name: &str) -> bool {
    AGGREGATES.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// The function calls of an expression that matter for merging: the
/// first aggregate it calls, and whether it has a window (`OVER`).
/// Found in the expression's tokens, so no expression form is missed.
struct Calls {
    aggregate: Option<String>,
    window: bool,
}

fn calls_in(expr: &Expr) -> Calls {
    let text = expr.to_string();
    let tokens = Tokenizer::new(&MySqlDialect {}, &text)
        .tokenize()
        .unwrap_or_default();
    let mut significant = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .peekable();
    let mut calls = Calls {
        aggregate: None,
        window: false,
    };
    while let Some(token) = significant.next() {
        let Token::Word(word) = token else {
            continue;
        };
        if word.keyword == Keyword::OVER {
            calls.window = true;
        }
        let call = matches!(significant.peek(), Some(Token::LParen));
        if call && word.quote_style.is_none() && is_aggregate(&word.value) {
            calls
                .aggregate
                .get_or_insert_with(|| word.value.to_ascii_uppercase());
        }
    }
    calls
}

/// The name of a function called by an unqualified name.
fn function_name(function: &Function) -> Option<&str> {
    match function.name.0.as_slice() {
        [ObjectNamePart::Identifier(ident)] if ident.quote_style.is_none() => {
            Some(ident.value.as_str())
        }
        _ => None,
    }
}

/// How a select-list item that is an aggregate call merges; `None` if the
/// item is not an aggregate call; refused if it cannot merge exactly.
fn top_aggregate(expr: &Expr) -> Result<Option<MergeColumn>, RouteError> {
    let Expr::Function(function) = expr else {
        return Ok(None);
    };
    let Some(name) = function_name(function).filter(|n| is_aggregate(n)) else {
        return Ok(None);
    };
    let name = name.to_ascii_uppercase();
    if function.over.is_some() {
        return Err(window());
    }
    if function.filter.is_some() || !function.within_group.is_empty() {
        return Err(multi(format!("{name}(...) with FILTER or WITHIN GROUP")));
    }
    let distinct = match &function.args {
        FunctionArguments::List(list) => {
            if !list.clauses.is_empty() && name != "GROUP_CONCAT" {
                return Err(multi(format!(
                    "{name}(...) with ORDER BY, LIMIT or SEPARATOR"
                )));
            }
            matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct))
        }
        _ => false,
    };
    Ok(Some(match name.as_str() {
        "COUNT" if distinct => {
            return Err(unsupported(
                "COUNT(DISTINCT ...) over several shards cannot be merged exactly: a value may be counted on several shards",
            ))
        }
        "SUM" if distinct => {
            return Err(unsupported(
                "SUM(DISTINCT ...) over several shards cannot be merged exactly: a value may be summed on several shards",
            ))
        }
        "COUNT" => MergeColumn::Count,
        "SUM" => MergeColumn::Sum,
        "MIN" => MergeColumn::Min,
        "MAX" => MergeColumn::Max,
        "AVG" => {
            return Err(unsupported(
                "AVG over several shards cannot be merged exactly (an average of averages is wrong); select SUM(x) and COUNT(x) and divide",
            ))
        }
        _ => {
            return Err(unsupported(format!(
                "{name} over several shards cannot be merged exactly; only COUNT, SUM, MIN and MAX are merged"
            )))
        }
    }))
}

pub(super) fn window() -> RouteError {
    unsupported(
        "window functions (OVER, WINDOW, QUALIFY) over several shards: each shard sees only its own rows",
    )
}

/// The expression of a select-list item and its alias (`None` for `*`).
fn item_expr(item: &SelectItem) -> Option<(&Expr, Option<&Ident>)> {
    match item {
        SelectItem::UnnamedExpr(expr) => Some((expr, None)),
        SelectItem::ExprWithAlias { expr, alias } => Some((expr, Some(alias))),
        SelectItem::ExprWithAliases { expr, aliases } => Some((expr, aliases.first())),
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => None,
    }
}

/// The select-list position an ORDER BY or GROUP BY expression names: a
/// position (`2`), an alias, a selected column, or a selected expression
/// written the same way. `Ok(None)` if it names none.
fn position(items: &[SelectItem], expr: &Expr, clause: &str) -> Result<Option<usize>, RouteError> {
    if let Expr::Value(v) = expr {
        if let Value::Number(n, _) = &v.value {
            return match n.parse::<usize>() {
                Ok(p) if (1..=items.len()).contains(&p) => Ok(Some(p - 1)),
                _ => Err(unsupported(format!(
                    "{clause} {n}: the select list has {} columns",
                    items.len()
                ))),
            };
        }
    }
    let exprs = || {
        items
            .iter()
            .enumerate()
            .filter_map(|(i, it)| Some((i, item_expr(it)?)))
    };
    if let Some((qualifier, column)) = column_ref(expr) {
        if qualifier.is_none() {
            let alias = exprs().find(|(_, (_, alias))| {
                alias.is_some_and(|a| a.value.eq_ignore_ascii_case(&column.value))
            });
            if let Some((i, _)) = alias {
                return Ok(Some(i));
            }
        }
        let named = exprs().find(|(_, (e, _))| {
            column_ref(e).is_some_and(|(_, c)| c.value.eq_ignore_ascii_case(&column.value))
        });
        if let Some((i, _)) = named {
            return Ok(Some(i));
        }
    }
    Ok(exprs().find(|(_, (e, _))| *e == expr).map(|(i, _)| i))
}

/// The number of a LIMIT or OFFSET: `Some` for a number, `None` for a
/// `?` marker (when preparing); anything else is refused.
fn limit_number(expr: &Expr) -> Result<Option<u64>, RouteError> {
    if let Expr::Value(v) = expr {
        if let Value::Number(n, _) = &v.value {
            if let Ok(n) = n.parse::<u64>() {
                return Ok(Some(n));
            }
        }
        if is_marker(v) {
            return Ok(None);
        }
    }
    Err(multi(format!("LIMIT {expr} (LIMIT takes numbers)")))
}

/// The span of a LIMIT or OFFSET value.
fn value_span(expr: &Expr) -> Option<Span> {
    match expr {
        Expr::Value(v) => Some(v.span),
        _ => None,
    }
}

/// A query's LIMIT: rows to skip and keep, and the byte range of its
/// values in the text.
pub(super) struct Limit {
    pub(super) offset: u64,
    pub(super) limit: u64,
    pub(super) values: Range<usize>,
}

/// Where clauses of the top-level SELECT are in the text, from its
/// tokens: where the select list ends (before `FROM`), and where the
/// `LIMIT` clause starts (with the blanks before it).
#[derive(Default)]
pub(super) struct Clauses {
    pub(super) select_end: Option<usize>,
    pub(super) limit_start: Option<usize>,
}

pub(super) fn clauses(src: &Source<'_>) -> Result<Clauses, RouteError> {
    let tokens = Tokenizer::new(&MySqlDialect {}, src.sql)
        .tokenize_with_location()
        .map_err(|_| unsupported("shardgate could not tokenize the statement again"))?;
    let mut out = Clauses::default();
    let mut depth = 0usize;
    // The last significant token, and whether only blanks came after it.
    let mut previous: Option<usize> = None;
    let mut blanks_only = true;
    for (i, t) in tokens.iter().enumerate() {
        match &t.token {
            Token::Whitespace(w) => {
                if !matches!(w, Whitespace::Space | Whitespace::Tab | Whitespace::Newline) {
                    blanks_only = false;
                }
                continue;
            }
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(w) if depth == 0 && w.quote_style.is_none() => {
                let before = previous.map(|p| tokens[p].span.end);
                if w.keyword == Keyword::FROM && out.select_end.is_none() {
                    out.select_end = before.and_then(|loc| src.offset(loc));
                } else if w.keyword == Keyword::LIMIT {
                    let start = match before {
                        Some(loc) if blanks_only => src.offset(loc),
                        _ => src.offset(t.span.start),
                    };
                    out.limit_start = start;
                }
            }
            _ => {}
        }
        previous = Some(i);
        blanks_only = true;
    }
    Ok(out)
}

impl<'a> Planner<'a> {
    /// How the parts' rows merge: ORDER BY keys, aggregation, hidden
    /// columns, LIMIT.
    pub(super) fn shape(
        &self,
        query: &'a Query,
        select: &'a Select,
    ) -> Result<Shape<'a>, RouteError> {
        let items = select.projection.as_slice();
        let wildcard = items.iter().any(|i| item_expr(i).is_none());
        let group_by: &'a [Expr] = match &select.group_by {
            GroupByExpr::Expressions(exprs, modifiers) => {
                if !modifiers.is_empty() {
                    return Err(multi("GROUP BY ... WITH ROLLUP"));
                }
                exprs
            }
            GroupByExpr::All(_) => return Err(multi("GROUP BY ALL")),
        };
        let order_by: &'a [OrderByExpr] = match &query.order_by {
            None => &[],
            Some(order) => match (&order.kind, &order.interpolate) {
                (OrderByKind::Expressions(exprs), None) => exprs,
                _ => return Err(multi("this form of ORDER BY")),
            },
        };

        // Each select-list item: an aggregate, or a plain value.
        let mut columns = Vec::with_capacity(items.len());
        let mut aggregates = false;
        for item in items {
            let Some((expr, _)) = item_expr(item) else {
                columns.push(MergeColumn::GroupKey);
                continue;
            };
            let calls = calls_in(expr);
            if calls.window {
                return Err(window());
            }
            match top_aggregate(expr)? {
                Some(column) => {
                    aggregates = true;
                    columns.push(column);
                }
                None => {
                    if calls.aggregate.is_some() {
                        return Err(unsupported(format!(
                            "an aggregate inside an expression ({expr}) over several shards: only COUNT, SUM, MIN and MAX standing alone in the select list are merged; select the aggregate and compute the rest in the application"
                        )));
                    }
                    columns.push(MergeColumn::GroupKey);
                }
            }
        }
        for o in order_by {
            if calls_in(&o.expr).window {
                return Err(window());
            }
        }
        let aggregate = aggregates || !group_by.is_empty();
        let mut hidden: Vec<ColumnRef<'a>> = Vec::new();
        let mut merge = Merge::default();

        if aggregate {
            if wildcard {
                return Err(unsupported(
                    "SELECT * with aggregates or GROUP BY over several shards; list the columns",
                ));
            }
            let mut grouped = vec![false; items.len()];
            for g in group_by {
                match position(items, g, "GROUP BY")? {
                    Some(i) => grouped[i] = true,
                    None => match column_ref(g) {
                        Some(column) => {
                            hidden.push(column);
                            columns.push(MergeColumn::GroupKey);
                        }
                        None => {
                            return Err(unsupported(format!(
                                "GROUP BY {g} over several shards: the proxy merges groups by selected columns; add it to the select list"
                            )))
                        }
                    },
                }
            }
            for (i, item) in items.iter().enumerate() {
                let Some((expr, _)) = item_expr(item) else {
                    continue;
                };
                let constant = matches!(expr, Expr::Value(_));
                if columns[i] == MergeColumn::GroupKey && !grouped[i] && !constant {
                    return Err(unsupported(format!(
                        "column {expr} is neither grouped nor aggregated: over several shards its value could come from any shard; add it to GROUP BY or aggregate it"
                    )));
                }
            }
            for o in order_by {
                let column = position(items, &o.expr, "ORDER BY")?.ok_or_else(|| {
                    unsupported(format!(
                        "ORDER BY {} in an aggregate over several shards: order by a selected column (by name, alias or position)",
                        o.expr
                    ))
                })?;
                merge.order_by.push(sort_key(o, column)?);
            }
            merge.aggregation = Some(Aggregation { columns });
        } else if !order_by.is_empty() {
            if wildcard {
                return Err(unsupported(
                    "ORDER BY with SELECT * over several shards: the proxy cannot tell the sort columns' positions; list the columns",
                ));
            }
            for o in order_by {
                let column = match position(items, &o.expr, "ORDER BY")? {
                    Some(i) => i,
                    None => {
                        let Some(column) = column_ref(&o.expr) else {
                            return Err(unsupported(format!(
                                "ORDER BY {} over several shards: the proxy merges in order by selected or plain columns; add it to the select list",
                                o.expr
                            )));
                        };
                        let same = |&(q, c): &ColumnRef<'a>| {
                            c.value.eq_ignore_ascii_case(&column.1.value)
                                && q.map(|q| &q.value) == column.0.map(|q| &q.value)
                        };
                        match hidden.iter().position(same) {
                            Some(h) => items.len() + h,
                            None => {
                                hidden.push(column);
                                items.len() + hidden.len() - 1
                            }
                        }
                    }
                };
                merge.order_by.push(sort_key(o, column)?);
            }
        }
        merge.hidden_columns = hidden.len();
        let limit = self.limit(query)?;
        Ok(Shape {
            merge,
            hidden,
            limit,
        })
    }

    /// The query's LIMIT, if it has numbers (a `?` marker when preparing
    /// leaves the text as it is).
    pub(super) fn limit(&self, query: &Query) -> Result<Option<Limit>, RouteError> {
        // The rows, the offset, and the first and last value as written.
        let (rows, skip, first, last) = match &query.limit_clause {
            None => return Ok(None),
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(multi("LIMIT ... BY"));
                }
                let Some(limit) = limit else {
                    return Err(multi("OFFSET without LIMIT"));
                };
                let offset = offset.as_ref().map(|o| &o.value);
                (limit, offset, limit, offset.unwrap_or(limit))
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                (limit, Some(offset), offset, limit)
            }
        };
        let rows = limit_number(rows)?;
        let skip = match skip {
            Some(e) => limit_number(e)?,
            None => Some(0),
        };
        let (Some(rows), Some(skip)) = (rows, skip) else {
            return Ok(None);
        };
        let env = self.env;
        let start = value_span(first).and_then(|s| env.src.range(s));
        let end = value_span(last).and_then(|s| env.src.range(s));
        let (Some(start), Some(end)) = (start, end) else {
            return Err(unsupported(
                "shardgate could not locate the LIMIT in the statement's text",
            ));
        };
        Ok(Some(Limit {
            offset: skip,
            limit: rows,
            values: start.start..end.end,
        }))
    }

    /// The text of a hidden column on a shard: the column as written, or
    /// for an object table's `id` the expression composing it.
    pub(super) fn hidden_column(
        &self,
        scope: usize,
        qualifier: Option<&'a Ident>,
        column: &'a Ident,
        shard: u32,
    ) -> Result<String, RouteError> {
        let env = self.env;
        let prefix = match qualifier {
            Some(q) => format!("{}.", env.src.text(q.span)),
            None => String::new(),
        };
        if is_id(column) {
            if let Some(rule) = self.resolve_key(scope, qualifier, column)? {
                if let TableKind::Object { type_id } = rule.kind {
                    return Ok(crate::id::compose_sql(
                        shard,
                        type_id,
                        &format!("{prefix}local_id"),
                    ));
                }
            }
        }
        Ok(format!("{prefix}{}", env.src.text(column.span)))
    }
}

/// What [`Planner::shape`] decides.
pub(super) struct Shape<'a> {
    /// The merge, but for OFFSET/LIMIT.
    pub(super) merge: Merge,
    /// Columns appended to every part's select list.
    pub(super) hidden: Vec<ColumnRef<'a>>,
    pub(super) limit: Option<Limit>,
}

fn sort_key(o: &OrderByExpr, column: usize) -> Result<SortKey, RouteError> {
    if o.options.nulls_first.is_some() || o.with_fill.is_some() {
        return Err(multi("ORDER BY ... NULLS FIRST/LAST or WITH FILL"));
    }
    let descending = match &o.options.sort {
        None | Some(OrderBySort::Asc) => false,
        Some(OrderBySort::Desc) => true,
        Some(OrderBySort::Using(_)) => return Err(multi("ORDER BY ... USING")),
    };
    Ok(SortKey { column, descending })
}
