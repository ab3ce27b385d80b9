//! Multi-shard reads: a SELECT whose key restriction (`id IN (...)`,
//! `id = a OR id = b`, on an object ID, a mapping table's from-column or a
//! mod-shard key) spans several shards, or one with no key and an explicit
//! `/*+ SCATTER */`, becomes one statement per shard plus how the proxy
//! merges their rows ([`Merge`]).
//!
//! Each part is the client's text edited like a single-shard statement
//! (table qualified with the part's shard database, `id` composed with its
//! shard) with the key restriction keeping only the part's own keys. Only a
//! plain single-table SELECT fans out; what cannot be merged exactly
//! (joins, subqueries, DISTINCT, HAVING, AVG, COUNT(DISTINCT), window
//! functions, aggregates inside expressions, ...) is refused with a reason.
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

use std::collections::BTreeMap;
use std::ops::Range;

use sqlparser::ast::{
    Distinct, DuplicateTreatment, Expr, Function, FunctionArguments, GroupByExpr, Ident,
    LimitClause, ObjectNamePart, OrderByExpr, OrderByKind, OrderBySort, Query, Select, SelectItem,
    SetExpr, TableFactor, Value,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Span, Token, Tokenizer, Whitespace};

use super::dml::{Planner, Pred};
use super::expr::{column_ref, is_id, ColumnRef};
use super::keys::is_marker;
use super::{apply, unsupported};
use crate::router::hints::{Hint, Hints};
use crate::router::plan::{
    Aggregation, Merge, MergeColumn, MultiShardQuery, Plan, RouteError, ShardQuery, SortKey,
    StatementKind,
};
use crate::router::text::{Edits, Source};
use crate::topology::{TableKind, TableRule};

/// Which shards a multi-shard read runs on.
pub(super) enum Fanout<'p, 'a> {
    /// The shards of a key restriction's values, each with its own.
    Split {
        pred: &'p Pred<'a>,
        rule: &'a TableRule,
    },
    /// Every shard of the table's fleet (`/*+ SCATTER */`).
    Scatter(&'a TableRule),
}

/// Refuses `/*+ SCATTER */` where it can never apply: on writes and
/// locking reads, and next to a hint naming one shard.
pub(super) fn check_scatter(kind: StatementKind, hints: &Hints) -> Result<(), RouteError> {
    match kind {
        StatementKind::Write => {
            return Err(unsupported(
                "/*+ SCATTER */ on an INSERT, UPDATE or DELETE: writes never scatter; name one shard with a key or a /*+ SHARD(n) */ hint",
            ))
        }
        StatementKind::LockingRead => {
            return Err(unsupported(
                "/*+ SCATTER */ on a locking read (FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE): locking reads run on one shard",
            ))
        }
        StatementKind::Read => {}
    }
    if let Some(hint) = hints
        .hints
        .iter()
        .find(|h| matches!(h, Hint::Shard(_) | Hint::Colocate(_)))
    {
        let named = match hint {
            Hint::Shard(n) => format!("SHARD({n})"),
            Hint::Colocate(id) => format!("COLOCATE({id})"),
            Hint::Scatter => String::new(),
        };
        return Err(RouteError::BadHint {
            hint: "SCATTER".to_owned(),
            reason: format!(
                "it runs on every shard and cannot be combined with {named}; keep one of them"
            ),
        });
    }
    Ok(())
}

/// A read over several shards.
fn multi(what: impl std::fmt::Display) -> RouteError {
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

fn window() -> RouteError {
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
struct Limit {
    offset: u64,
    limit: u64,
    values: Range<usize>,
}

/// Where clauses of the top-level SELECT are in the text, from its
/// tokens: where the select list ends (before `FROM`), and where the
/// `LIMIT` clause starts (with the blanks before it).
#[derive(Default)]
struct Clauses {
    select_end: Option<usize>,
    limit_start: Option<usize>,
}

fn clauses(src: &Source<'_>) -> Result<Clauses, RouteError> {
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
    /// Plans a read over several shards.
    pub(super) fn multi_shard(
        &self,
        fanout: Fanout<'_, 'a>,
        mut edits: Edits,
    ) -> Result<Plan, RouteError> {
        let env = self.env;
        if self.explain {
            return Err(unsupported(
                "EXPLAIN of a read over several shards; EXPLAIN it with the keys of one shard or a /*+ SHARD(n) */ hint",
            ));
        }
        let (query, select) = self.single_select()?;
        let rule = match fanout {
            Fanout::Split { rule, .. } | Fanout::Scatter(rule) => rule,
        };
        let fleet = rule.fleet;
        let shape = self.shape(query, select)?;

        // Where the select list and LIMIT are, if the text needs them.
        let mut merge = shape.merge;
        let aggregate = merge.aggregation.is_some();
        let clauses = if !shape.hidden.is_empty() || (aggregate && shape.limit.is_some()) {
            clauses(env.src)?
        } else {
            Clauses::default()
        };
        // Edits common to every part: the LIMIT.
        if let Some(limit) = &shape.limit {
            merge.offset = limit.offset;
            merge.limit = Some(limit.limit);
            if aggregate {
                // Groups span shards: every part sends all its groups.
                let start = clauses.limit_start.ok_or_else(|| {
                    unsupported("shardgate could not find the LIMIT clause in the text")
                })?;
                edits.replace(start..limit.values.end, "");
            } else {
                let rows = limit.limit.saturating_add(limit.offset);
                edits.replace(limit.values.clone(), rows.to_string());
            }
        }
        let select_end = if shape.hidden.is_empty() {
            None
        } else {
            Some(clauses.select_end.ok_or_else(|| {
                unsupported("shardgate could not find the end of the select list")
            })?)
        };

        // The shards, each with the text of its key restriction.
        let scope = self.tables.first().map_or(0, |t| t.scope);
        let mut shards: Vec<(u32, Option<String>)> = Vec::new();
        let mut key_range = None;
        match fanout {
            Fanout::Split { pred, rule } => {
                key_range = Some(self.restriction_range(pred.expr).ok_or_else(|| {
                    unsupported(
                        "shardgate could not rewrite the key restriction for each shard (a comment inside it?)",
                    )
                })?);
                for (shard, text) in self.split_keys(pred, rule)? {
                    shards.push((shard, Some(text)));
                }
            }
            Fanout::Scatter(_) => {
                let count = env.fleet(fleet)?.shard_count;
                shards.extend((0..count).map(|shard| (shard, None)));
            }
        }

        // The parts' texts are copies of the statement: bounded, with the
        // merge, by limits.max_merge_bytes before any is made.
        let limit = env.topo.config.limits.max_merge_bytes;
        let common = env.src.sql.len() - key_range.as_ref().map_or(0, |r| r.len());
        let mut text_bytes = 0u64;
        for (_, key_text) in &shards {
            let part = common + key_text.as_ref().map_or(0, String::len) + 64;
            text_bytes = text_bytes.saturating_add(part as u64);
            if text_bytes > limit {
                return Err(unsupported(format!(
                    "a read of {} shards whose statement texts alone (one per shard) exceed limits.max_merge_bytes ({limit} bytes); narrow it to fewer shards or shorten it",
                    shards.len()
                )));
            }
        }

        let mut parts = Vec::with_capacity(shards.len());
        for (shard, key_text) in shards {
            let mut e = edits.clone();
            self.rewrite(fleet, shard, &mut e)?;
            if let (Some(range), Some(text)) = (&key_range, key_text) {
                e.replace(range.clone(), text);
            }
            if let Some(at) = select_end {
                let mut text = String::new();
                for &(qualifier, column) in &shape.hidden {
                    text.push_str(", ");
                    text.push_str(&self.hidden_column(scope, qualifier, column, shard)?);
                }
                e.insert(at, text);
            }
            parts.push(ShardQuery {
                target: env.target(fleet, shard)?,
                sql: apply(e, env.src.original)?,
                kind: StatementKind::Read,
                compose_insert_id: None,
            });
        }
        Ok(Plan::MultiShard(MultiShardQuery { parts, merge }))
    }

    /// The query and its SELECT, if the statement is a plain single-table
    /// SELECT that can be merged; else the reason it cannot.
    fn single_select(&self) -> Result<(&'a Query, &'a Select), RouteError> {
        let query = self
            .query
            .ok_or_else(|| multi("a statement other than SELECT"))?;
        if query.with.is_some() {
            return Err(multi("WITH (common table expressions)"));
        }
        let select = match query.body.as_ref() {
            SetExpr::Select(select) => select,
            SetExpr::SetOperation { .. } => {
                return Err(multi(
                    "UNION, INTERSECT or EXCEPT; run each SELECT on its own",
                ))
            }
            _ => return Err(multi("a parenthesised or nested query")),
        };
        let joined = match select.from.as_slice() {
            [one] => !one.joins.is_empty(),
            _ => true,
        };
        if joined {
            return Err(unsupported(
                "a join in a read over several shards: each shard would join only its own rows; read the keys first, then fetch the rows by id",
            ));
        }
        let is_table = select
            .from
            .first()
            .is_some_and(|t| matches!(t.relation, TableFactor::Table { .. }));
        if !is_table || self.scopes.len() > 2 || self.tables.len() != 1 {
            return Err(unsupported(
                "a subquery in a read over several shards: each shard would see only its own rows",
            ));
        }
        if matches!(select.distinct, Some(Distinct::Distinct | Distinct::On(_))) {
            return Err(unsupported(
                "SELECT DISTINCT over several shards: rows distinct on each shard may repeat across shards; use GROUP BY on the selected columns",
            ));
        }
        if select.having.is_some() {
            return Err(unsupported(
                "HAVING over several shards: each shard would filter its partial groups before they are merged; filter the merged rows in the application",
            ));
        }
        if !select.named_window.is_empty() || select.qualify.is_some() {
            return Err(window());
        }
        if select.into.is_some() {
            return Err(multi("SELECT ... INTO"));
        }
        if select
            .select_modifiers
            .as_ref()
            .is_some_and(|m| m.sql_calc_found_rows)
        {
            return Err(multi("SQL_CALC_FOUND_ROWS"));
        }
        let unusual = select.top.is_some()
            || select.exclude.is_some()
            || !select.lateral_views.is_empty()
            || select.prewhere.is_some()
            || !select.connect_by.is_empty()
            || !select.cluster_by.is_empty()
            || !select.distribute_by.is_empty()
            || !select.sort_by.is_empty()
            || select.value_table_mode.is_some()
            || query.fetch.is_some()
            || query.for_clause.is_some()
            || query.settings.is_some()
            || query.format_clause.is_some()
            || !query.pipe_operators.is_empty();
        if unusual {
            return Err(multi("this form of SELECT"));
        }
        Ok((query, select))
    }

    /// How the parts' rows merge: ORDER BY keys, aggregation, hidden
    /// columns, LIMIT.
    fn shape(&self, query: &'a Query, select: &'a Select) -> Result<Shape<'a>, RouteError> {
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
    fn limit(&self, query: &Query) -> Result<Option<Limit>, RouteError> {
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
    fn hidden_column(
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

    /// The shards of a key restriction's values, in shard order, each with
    /// the restriction rewritten to its own values: `local_id IN (1, 2)`,
    /// `local_id = 1`, `board_id IN (B1, B2)`. `?` markers (when
    /// preparing) go to every part.
    fn split_keys(
        &self,
        pred: &Pred<'a>,
        rule: &TableRule,
    ) -> Result<Vec<(u32, String)>, RouteError> {
        let env = self.env;
        let mut groups: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        let mut markers: Vec<&str> = Vec::new();
        for value in pred.all_values().filter_map(|e| env.key_value(e)) {
            match env.key_shard(rule, value)? {
                None => markers.push(env.src.text(value.span)),
                Some(key) => groups
                    .entry(key.shard)
                    .or_default()
                    .push(match key.local_id {
                        Some(local) => local.to_string(),
                        None => env.src.text(value.span).to_owned(),
                    }),
            }
        }
        let mut column = match pred.qualifier {
            Some(q) => format!("{}.", env.src.text(q.span)),
            None => String::new(),
        };
        if matches!(rule.kind, TableKind::Object { .. }) {
            column.push_str("local_id");
        } else {
            column.push_str(env.src.text(pred.column.span));
        }
        Ok(groups
            .into_iter()
            .map(|(shard, mut values)| {
                values.extend(markers.iter().map(|m| (*m).to_owned()));
                let text = match values.as_slice() {
                    [one] => format!("{column} = {one}"),
                    _ => format!("{column} IN ({})", values.join(", ")),
                };
                (shard, text)
            })
            .collect())
    }

    /// The byte range of a key restriction (`a = 1`, `a IN (1, 2)`, an OR
    /// of them, with their parentheses); `None` if it cannot be located.
    fn restriction_range(&self, expr: &Expr) -> Option<Range<usize>> {
        Some(self.edge(expr, false)?..self.edge(expr, true)?)
    }

    /// The start (or end) of a key restriction in the text: its leftmost
    /// (rightmost) column or value, moved out over the parentheses that
    /// open (close) before (after) it.
    fn edge(&self, mut expr: &Expr, end: bool) -> Option<usize> {
        let mut parens = 0usize;
        loop {
            match expr {
                Expr::BinaryOp { left, right, .. } => expr = if end { right } else { left },
                Expr::Nested(inner) => {
                    parens += 1;
                    expr = inner;
                }
                Expr::InList {
                    expr: column, list, ..
                } => {
                    if end {
                        parens += 1;
                        expr = list.last()?;
                    } else {
                        expr = column;
                    }
                }
                _ => break,
            }
        }
        let span = match expr {
            Expr::Identifier(ident) => ident.span,
            Expr::CompoundIdentifier(parts) if end => parts.last()?.span,
            Expr::CompoundIdentifier(parts) => parts.first()?.span,
            Expr::Value(v) => v.span,
            _ => return None,
        };
        let src = self.env.src;
        let range = src.range(span)?;
        let bytes = src.sql.as_bytes();
        let mut pos = if end { range.end } else { range.start };
        for _ in 0..parens {
            if end {
                pos = skip_forward(src.sql, pos);
                if bytes.get(pos) != Some(&b')') {
                    return None;
                }
                pos += 1;
            } else {
                pos = skip_backward(src.sql, pos);
                if pos == 0 || bytes[pos - 1] != b'(' {
                    return None;
                }
                pos -= 1;
            }
        }
        Some(pos)
    }
}

/// Past the blanks and `/* */` comments from `pos` on (between a key
/// restriction's last value and its closing parentheses).
fn skip_forward(sql: &str, mut pos: usize) -> usize {
    let bytes = sql.as_bytes();
    loop {
        while bytes.get(pos).is_some_and(u8::is_ascii_whitespace) {
            pos += 1;
        }
        match sql.get(pos..) {
            Some(rest) if rest.starts_with("/*") => match rest.find("*/") {
                Some(close) => pos += close + 2,
                None => return pos,
            },
            _ => return pos,
        }
    }
}

/// Back over the blanks and `/* */` comments before `pos` (between a key
/// restriction's opening parentheses and its first column).
fn skip_backward(sql: &str, mut pos: usize) -> usize {
    let bytes = sql.as_bytes();
    loop {
        while pos > 0 && bytes[pos - 1].is_ascii_whitespace() {
            pos -= 1;
        }
        match sql.get(..pos) {
            Some(before) if before.ends_with("*/") => match before[..pos - 2].rfind("/*") {
                Some(open) => pos = open,
                None => return pos,
            },
            _ => return pos,
        }
    }
}

/// What [`Planner::shape`] decides.
struct Shape<'a> {
    /// The merge, but for OFFSET/LIMIT.
    merge: Merge,
    /// Columns appended to every part's select list.
    hidden: Vec<ColumnRef<'a>>,
    limit: Option<Limit>,
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
