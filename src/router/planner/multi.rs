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
//! How the parts' rows merge is decided in `merge`.

use std::collections::BTreeMap;
use std::ops::Range;

use sqlparser::ast::{Distinct, Expr, Query, Select, SetExpr, TableFactor};
use sqlparser::tokenizer::Span;

use super::dml::{Planner, Pred};
use super::merge::{clauses, multi, window, Clauses};
use super::{apply, unsupported};
use crate::router::hints::{Hint, Hints};
use crate::router::lex::skip_blanks_and_comments;
use crate::router::plan::{MultiShardQuery, Plan, RouteError, ShardQuery, StatementKind};
use crate::router::text::Edits;
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
        StatementKind::SchemaChange => {
            return Err(unsupported(
                "/*+ SCATTER */ on a schema change: name one shard, or change every shard database with `shardgate fleet migrate`",
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
                writes_through_function: false,
                local_infile: None,
                leaves_session_state: false,
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
                // A bound string (`_utf8mb4 X'..'`): the introducer starts
                // it, the literal ends it.
                Expr::Prefixed { prefix, value } => {
                    if end {
                        expr = value;
                    } else {
                        return self.edge_of(prefix.span, parens, end);
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
        self.edge_of(span, parens, end)
    }

    /// The start (or end) of `span` in the text, moved out over `parens`
    /// parentheses.
    fn edge_of(&self, span: Span, parens: usize, end: bool) -> Option<usize> {
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

/// Past the blanks and comments from `pos` on (between a key
/// restriction's last value and its closing parentheses).
fn skip_forward(sql: &str, pos: usize) -> usize {
    let rest = sql.as_bytes().get(pos..).unwrap_or_default();
    sql.len() - skip_blanks_and_comments(rest).len()
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
