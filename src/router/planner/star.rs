//! `*` and `t.*` in the select list of a SELECT over an object table: the
//! client sees the table with its 64-bit `id`, so the wildcard becomes the
//! table's columns, in the table's order, with `local_id` turned into the
//! expression composing the ID (`AS id`) and every other column as it is.
//!
//! The columns come from the routing table's reading of the servers
//! ([`crate::topology::Topology::object_columns`]); when they were not
//! read, the wildcard is refused rather than guessed. Only logical object
//! tables are expanded: a mapping or mod-shard table, a table named with
//! its shard database (`db03429.pins`, the physical table as stored), a
//! derived table or a CTE keeps its `t.*`. Writes (`INSERT ... SELECT *`)
//! and `EXISTS (SELECT * ...)` are sent as written.

use std::sync::Arc;

use sqlparser::ast::{
    Ident, JoinConstraint, JoinOperator, ObjectName, ObjectNamePart, Select,
    SelectItemQualifiedWildcardKind, Spanned, TableAlias, TableFactor, TableWithJoins,
    WildcardAdditionalOptions,
};

use sqlparser::tokenizer::Span;

use super::dml::{Planner, RefKind, TableRef, Wildcard};
use super::unsupported;
use crate::router::plan::RouteError;
use crate::router::text::Edits;
use crate::topology::TableKind;

/// An object table's columns, for one wildcard.
struct ObjectColumns {
    type_id: u16,
    columns: Arc<[String]>,
}

impl<'a> Planner<'a> {
    /// Records `*` (`qualifier` `None`) or `t.*` of `select`'s list, when
    /// the statement is a query and the item is not inside EXISTS (whose
    /// columns nobody sees). `db.t.*` and the forms MariaDB does not have
    /// (`* EXCLUDE ...`) are left as written.
    pub(super) fn add_wildcard(
        &mut self,
        select: &'a Select,
        qualified: Option<&'a SelectItemQualifiedWildcardKind>,
        options: &'a WildcardAdditionalOptions,
    ) {
        if self.query.is_none() || self.in_exists > 0 || !plain(options) {
            return;
        }
        let star = options.wildcard_token.0.span;
        let (qualifier, start) = match qualified {
            None => (None, star),
            Some(SelectItemQualifiedWildcardKind::ObjectName(name)) => match name.0.as_slice() {
                [ObjectNamePart::Identifier(q)] => (Some(q), q.span),
                _ => return,
            },
            Some(SelectItemQualifiedWildcardKind::Expr(_)) => return,
        };
        self.wildcards.push(Wildcard {
            select,
            scope: self.scope,
            qualifier,
            start,
            star,
        });
    }

    /// Replaces each recorded wildcard over an object table with its
    /// columns for `shard`.
    pub(super) fn expand_wildcards(&self, shard: u32, edits: &mut Edits) -> Result<(), RouteError> {
        let env = self.env;
        for w in &self.wildcards {
            let text = match w.qualifier {
                Some(q) => self.expand_qualified(w, q, shard)?,
                None => self.expand_all(w, shard)?,
            };
            if let Some(text) = text {
                let range = env.range(w.start)?.start..env.range(w.star)?.end;
                edits.replace(range, text);
            }
        }
        Ok(())
    }

    /// `t.*`: the columns of `t` if it is an object table of the scope.
    fn expand_qualified(
        &self,
        w: &Wildcard<'a>,
        q: &Ident,
        shard: u32,
    ) -> Result<Option<String>, RouteError> {
        let named = self
            .tables
            .iter()
            .filter(|t| t.in_scope && t.scope == w.scope)
            .find(|t| match t.alias {
                Some(alias) => alias.value.eq_ignore_ascii_case(&q.value),
                None => t.table.value.eq_ignore_ascii_case(&q.value),
            });
        let Some(object) = named.map(|t| self.object_columns(t)).transpose()?.flatten() else {
            return Ok(None);
        };
        let qualifier = self.original(q.span)?;
        Ok(Some(column_list(&object, Some(qualifier), shard)))
    }

    /// `*`: every table of the FROM clause in order, object tables
    /// expanded, the others as `t.*`; `None` (left as written) when the
    /// scope has no object table.
    fn expand_all(&self, w: &Wildcard<'a>, shard: u32) -> Result<Option<String>, RouteError> {
        let mut objects = Vec::new();
        for t in self
            .tables
            .iter()
            .filter(|t| t.in_scope && t.scope == w.scope)
        {
            if let Some(object) = self.object_columns(t)? {
                objects.push((t.table, object));
            }
        }
        if objects.is_empty() {
            return Ok(None);
        }
        let mut factors = Vec::new();
        for twj in &w.select.from {
            flatten(twj, &mut factors)?;
        }
        let alone = factors.len() == 1;
        let mut items = Vec::with_capacity(factors.len());
        for factor in factors {
            let qualifier = match factor {
                TableFactor::Table { name, alias, .. } => {
                    let table = name.0.last().and_then(ObjectNamePart::as_ident);
                    let object = objects
                        .iter()
                        .find(|(t, _)| table.is_some_and(|table| std::ptr::eq(*t, table)));
                    let qualifier = match (alias, name.0.first(), table) {
                        (Some(alias), _, _) => self.original(alias.name.span)?,
                        (None, Some(first), Some(last)) => {
                            let start = self.env.range(first.span())?.start;
                            let end = self.env.range(last.span)?.end;
                            self.env
                                .src
                                .original_text(start..end)
                                .ok_or_else(unlocated)?
                        }
                        _ => return Err(refused("this kind of table name")),
                    };
                    if let Some((_, object)) = object {
                        let qualifier = (!alone).then_some(qualifier);
                        items.push(column_list(object, qualifier, shard));
                        continue;
                    }
                    if is_dual(name) {
                        continue;
                    }
                    qualifier
                }
                TableFactor::Derived { alias, .. }
                | TableFactor::TableFunction { alias, .. }
                | TableFactor::JsonTable { alias, .. }
                | TableFactor::Function { alias, .. } => match alias {
                    Some(TableAlias { name, .. }) => self.original(name.span)?,
                    None => return Err(refused("a FROM item without an alias")),
                },
                _ => return Err(refused("this kind of FROM item")),
            };
            items.push(format!("{qualifier}.*"));
        }
        Ok(Some(items.join(", ")))
    }

    /// The columns of a logical object table that has a `local_id`; `None`
    /// for any other table; refused when they were not read.
    fn object_columns(&self, t: &TableRef<'a>) -> Result<Option<ObjectColumns>, RouteError> {
        let RefKind::Logical(rule) = t.kind else {
            return Ok(None);
        };
        let TableKind::Object { type_id } = rule.kind else {
            return Ok(None);
        };
        let env = self.env;
        // Read from the servers, they may change without a reload.
        super::notes::note_untemplatable();
        let Some(columns) = env.topo.object_columns(rule) else {
            if let Some(why) = env.topo.object_columns_differ(rule) {
                return Err(unsupported(format!(
                    "SELECT * on object table {table}: {why} (a schema change is rolled out \
                     part-way; finish it, e.g. with shardgate fleet migrate); meanwhile name \
                     the columns: SELECT id, ... FROM {table}",
                    table = rule.name
                )));
            }
            let fleet = env.fleet(rule.fleet)?;
            return Err(unsupported(format!(
                "SELECT * on object table {table}: shardgate has not read its columns yet (it \
                 reads them from the first reachable shard database of fleet {fleet} at start, \
                 on reload and periodically); name the columns: SELECT id, ... FROM {table}",
                table = rule.name,
                fleet = fleet.name
            )));
        };
        if !columns.iter().any(|c| is_local_id(c)) {
            return Ok(None);
        }
        if !columns.iter().all(|c| is_plain_name(c)) {
            return Err(unsupported(format!(
                "SELECT * on object table {table}: a column name is not plain ASCII \
                 ([A-Za-z0-9_$]), and shardgate writes only such names into a statement; name \
                 the columns: SELECT id, ... FROM {table}",
                table = rule.name
            )));
        }
        Ok(Some(ObjectColumns { type_id, columns }))
    }

    /// The client's text of a span, to copy into the statement sent.
    fn original(&self, span: Span) -> Result<&'a str, RouteError> {
        let range = self.env.range(span)?;
        self.env.src.original_text(range).ok_or_else(unlocated)
    }
}

/// The object table's columns as select items: `local_id` composed into
/// the 64-bit ID named `id`, the others backquoted, all qualified with
/// `qualifier` when given.
fn column_list(object: &ObjectColumns, qualifier: Option<&str>, shard: u32) -> String {
    let prefix = qualifier.map_or_else(String::new, |q| format!("{q}."));
    let items: Vec<String> = object
        .columns
        .iter()
        .map(|column| {
            if is_local_id(column) {
                let local_id = format!("{prefix}{column}");
                format!(
                    "{} AS id",
                    crate::id::compose_sql(shard, object.type_id, &local_id)
                )
            } else {
                format!("{prefix}`{}`", column.replace('`', "``"))
            }
        })
        .collect();
    items.join(", ")
}

/// The FROM items of a FROM list entry, in order (nested joins opened);
/// `*` over a NATURAL join or one with USING merges columns, so it is
/// refused.
fn flatten<'s>(twj: &'s TableWithJoins, out: &mut Vec<&'s TableFactor>) -> Result<(), RouteError> {
    factor(&twj.relation, out)?;
    for join in &twj.joins {
        if merges_columns(&join.join_operator) {
            return Err(refused("a NATURAL join or a join with USING"));
        }
        factor(&join.relation, out)?;
    }
    Ok(())
}

fn factor<'s>(f: &'s TableFactor, out: &mut Vec<&'s TableFactor>) -> Result<(), RouteError> {
    match f {
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => flatten(table_with_joins, out),
        _ => {
            out.push(f);
            Ok(())
        }
    }
}

fn merges_columns(op: &JoinOperator) -> bool {
    let constraint = match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::StraightJoin(c) => c,
        _ => return false,
    };
    matches!(
        constraint,
        JoinConstraint::Natural | JoinConstraint::Using(_)
    )
}

fn unlocated() -> RouteError {
    unsupported("shardgate could not locate a part of the statement in its text")
}

fn refused(what: &str) -> RouteError {
    unsupported(format!(
        "SELECT * over an object table with {what}: name the columns (id, ...) or qualify the \
         wildcard (t.*)"
    ))
}

/// No EXCLUDE, EXCEPT, REPLACE, RENAME, ILIKE or alias after the `*`.
fn plain(options: &WildcardAdditionalOptions) -> bool {
    options.opt_ilike.is_none()
        && options.opt_exclude.is_none()
        && options.opt_except.is_none()
        && options.opt_replace.is_none()
        && options.opt_rename.is_none()
        && options.opt_alias.is_none()
}

/// A column name made of `[A-Za-z0-9_$]` only: read the same in every
/// client character set, so it can be written into the statement sent.
fn is_plain_name(column: &str) -> bool {
    !column.is_empty()
        && column
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

fn is_local_id(column: &str) -> bool {
    column.eq_ignore_ascii_case("local_id")
}

/// `dual`, unquoted: no columns.
fn is_dual(name: &ObjectName) -> bool {
    matches!(name.0.as_slice(), [ObjectNamePart::Identifier(i)] if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("dual"))
}
