//! Walking INSERT: the target table, the refusal of an object INSERT that
//! sets `id` (IDs are composed from the shard and `local_id`), and the
//! literal shard-key values of the rows of a mapping or mod-shard table.

use sqlparser::ast::{
    Assignment, AssignmentTarget, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    Insert, ObjectName, ObjectNamePart, OnInsert, SetExpr, TableObject,
};

use super::dml::{MintSites, Planner};
use super::expr::is_id;
use super::keys::key_column;
use super::unsupported;
use crate::topology::{TableKind, TableRule};

/// The column an INSERT names: `c` of `c` or `t.c`.
fn column_name(name: &ObjectName) -> Option<&Ident> {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => Some(ident),
        _ => None,
    }
}

/// `c` of an expression naming column `c` or `t.c`.
fn expr_column(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Identifier(ident) => Some(ident),
        Expr::CompoundIdentifier(parts) => parts.last(),
        _ => None,
    }
}

/// Whether `value` is `VALUES(column)` / `VALUE(column)`: the value the
/// row would have been inserted with, which for the shard key is the
/// value the row already has.
fn is_values_of(value: &Expr, column: &Ident) -> bool {
    let Expr::Function(function) = value else {
        return false;
    };
    let named = matches!(function.name.0.as_slice(), [ObjectNamePart::Identifier(n)]
        if n.value.eq_ignore_ascii_case("VALUES") || n.value.eq_ignore_ascii_case("VALUE"));
    let FunctionArguments::List(list) = &function.args else {
        return false;
    };
    named
        && matches!(list.args.as_slice(), [FunctionArg::Unnamed(FunctionArgExpr::Expr(e))]
            if expr_column(e).is_some_and(|c| c.value.eq_ignore_ascii_case(&column.value)))
}

/// The shard-key column (for an object table `id` or `local_id`) an ON
/// DUPLICATE KEY UPDATE assigns a value other than `VALUES(column)`: the
/// row would stay on its shard under a key that routes elsewhere.
fn moved_key<'s>(rule: &TableRule, assignments: &'s [Assignment]) -> Option<&'s Ident> {
    let is_key = |c: &Ident| match rule.kind {
        TableKind::Object { .. } => is_id(c) || c.value.eq_ignore_ascii_case("local_id"),
        _ => c.value.eq_ignore_ascii_case(key_column(rule)),
    };
    assignments.iter().find_map(|a| {
        let names: &[ObjectName] = match &a.target {
            AssignmentTarget::ColumnName(name) => std::slice::from_ref(name),
            AssignmentTarget::Tuple(names) => names,
        };
        names
            .iter()
            .filter_map(column_name)
            .find(|c| is_key(c) && !is_values_of(&a.value, c))
    })
}

impl<'a> Planner<'a> {
    pub(super) fn walk_insert(&mut self, insert: &'a Insert) {
        let TableObject::TableName(name) = &insert.table else {
            self.fail(unsupported("INSERT INTO a table function"));
            return;
        };
        self.insert_target = self.add_table(name, None, false);
        if let Some(rule) = self.insert_key_rule() {
            if let Some(OnInsert::DuplicateKeyUpdate(assignments)) = &insert.on {
                if let Some(column) = moved_key(rule, assignments) {
                    self.fail(unsupported(format!(
                        "ON DUPLICATE KEY UPDATE of {}.{}: the row's shard depends on it; delete the row and insert it again",
                        rule.name, column.value
                    )));
                    return;
                }
            }
        }
        if let Some(rule) = self.insert_rule() {
            let sets_id = matches!(rule.kind, TableKind::Object { .. })
                && (insert.columns.iter().filter_map(column_name).any(is_id)
                    || insert.assignments.iter().any(|a| {
                        matches!(&a.target, AssignmentTarget::ColumnName(n)
                            if column_name(n).is_some_and(is_id))
                    }));
            if sets_id {
                self.fail(unsupported(format!(
                    "INSERT into {} that sets id: ids are composed from the shard and the row's local_id; \
                     leave id out and choose the shard with a /*+ SHARD(n) */ or /*+ COLOCATE(id) */ hint",
                    rule.name
                )));
                return;
            }
        }
        self.check_insert_local_ids(insert);
        if let Err(message) = self.mint_sites(insert) {
            self.fail(unsupported(message));
            return;
        }
        if let Some(rule) = self.insert_key_rule() {
            if !matches!(rule.kind, TableKind::Object { .. }) {
                self.collect_insert_keys(insert, key_column(rule));
            }
        }
        if let Some(source) = &insert.source {
            self.walk_query(source);
        }
        self.walk_assignments(&insert.assignments, false);
        if let Some(OnInsert::DuplicateKeyUpdate(assignments)) = &insert.on {
            self.walk_assignments(assignments, false);
        }
    }

    /// For an INSERT into a table of a fleet that mints IDs that names no
    /// `id`: where the minted `id` goes (`insert_keys.mint`); an INSERT it
    /// cannot be added to is refused with the reason.
    fn mint_sites(&mut self, insert: &'a Insert) -> Result<(), String> {
        let Some(rule) = self.insert_rule() else {
            return Ok(());
        };
        let TableKind::Mapping { from_column } = &rule.kind else {
            return Ok(());
        };
        let mints = self
            .env
            .topo
            .fleets
            .get(rule.fleet)
            .is_some_and(|f| f.mints_ids());
        let names_key = |n: &ObjectName| {
            column_name(n).is_some_and(|c| c.value.eq_ignore_ascii_case(from_column))
        };
        let sets_key = insert.columns.iter().any(names_key)
            || insert
                .assignments
                .iter()
                .any(|a| matches!(&a.target, AssignmentTarget::ColumnName(n) if names_key(n)));
        if !mints || sets_key {
            return Ok(());
        }
        let refused = |why: &str| {
            format!(
                "INSERT into {} {why}: its fleet's IDs are minted by the server at INSERT;                  write INSERT INTO {} (col, ...) VALUES (...) or INSERT INTO {} SET col = ...",
                rule.name, rule.name, rule.name
            )
        };
        // A minted id that collides must fail (1062), never replace or
        // be ignored (decision 0033).
        if insert.replace_into {
            return Err(refused("with REPLACE"));
        }
        if insert.ignore {
            return Err(refused("with IGNORE"));
        }
        if let Some(first) = insert.assignments.first() {
            let AssignmentTarget::ColumnName(name) = &first.target else {
                return Err(refused("with a tuple assignment"));
            };
            let column = column_name(name).ok_or_else(|| refused("with an unnamed column"))?;
            self.insert_keys.mint = Some(MintSites {
                column: column.span,
                rows: Vec::new(),
            });
            return Ok(());
        }
        let Some(first) = insert.columns.first().and_then(column_name) else {
            return Err(refused("without a column list"));
        };
        let rows = match insert.source.as_deref().map(|q| q.body.as_ref()) {
            Some(SetExpr::Values(values)) => values
                .rows
                .iter()
                .map(|row| row.opening_token.0.span)
                .collect(),
            _ => return Err(refused("from a SELECT")),
        };
        self.insert_keys.mint = Some(MintSites {
            column: first.span,
            rows,
        });
        Ok(())
    }

    /// The values an INSERT gives its table's shard-key column.
    fn collect_insert_keys(&mut self, insert: &'a Insert, key: &str) {
        let is_key = |name: &ObjectName| {
            column_name(name).is_some_and(|c| c.value.eq_ignore_ascii_case(key))
        };
        let env = self.env;
        let keys = &mut self.insert_keys;
        if !insert.assignments.is_empty() {
            let value = insert.assignments.iter().find_map(|a| match &a.target {
                AssignmentTarget::ColumnName(n) if is_key(n) => Some(&a.value),
                _ => None,
            });
            match value.and_then(|v| env.key_value(v)) {
                Some(v) => keys.values.push(v),
                None => keys.missing = true,
            }
            return;
        }
        let index = insert.columns.iter().position(is_key);
        let rows = match (index, insert.source.as_deref()) {
            (Some(index), Some(query)) => match query.body.as_ref() {
                SetExpr::Values(values) => Some((index, &values.rows)),
                _ => None,
            },
            _ => None,
        };
        match rows {
            Some((index, rows)) => {
                for row in rows {
                    match row.content.get(index).and_then(|v| env.key_value(v)) {
                        Some(v) => keys.values.push(v),
                        None => keys.missing = true,
                    }
                }
            }
            None => keys.missing = true,
        }
    }
}
