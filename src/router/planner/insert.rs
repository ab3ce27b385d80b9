//! Walking INSERT: the target table, the refusal of an object INSERT that
//! sets `id` (IDs are composed from the shard and `local_id`), and the
//! literal shard-key values of the rows of a mapping or mod-shard table.

use sqlparser::ast::{
    AssignmentTarget, Ident, Insert, ObjectName, ObjectNamePart, OnInsert, SetExpr, TableObject,
};

use super::dml::Planner;
use super::expr::is_id;
use super::keys::key_column;
use super::unsupported;
use crate::topology::TableKind;

/// The column an INSERT names: `c` of `c` or `t.c`.
fn column_name(name: &ObjectName) -> Option<&Ident> {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => Some(ident),
        _ => None,
    }
}

impl<'a> Planner<'a> {
    pub(super) fn walk_insert(&mut self, insert: &'a Insert) {
        let TableObject::TableName(name) = &insert.table else {
            self.fail(unsupported("INSERT INTO a table function"));
            return;
        };
        self.insert_target = self.add_table(name, None, false);
        if let Some(rule) = self.insert_rule() {
            let key = key_column(rule);
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
            if !matches!(rule.kind, TableKind::Object { .. }) {
                self.collect_insert_keys(insert, key);
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
