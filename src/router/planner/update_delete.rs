//! Walking UPDATE and DELETE (single- and multi-table forms) and the
//! assignments of UPDATE and INSERT ... ON DUPLICATE KEY UPDATE. What an
//! UPDATE assigns is recorded: a row's shard key must not change.

use sqlparser::ast::{
    Assignment, AssignmentTarget, Delete, Expr, FromTable, ObjectName, ObjectNamePart, OrderByExpr,
    Update, UpdateTableFromKind,
};

use super::dml::Planner;

impl<'a> Planner<'a> {
    pub(super) fn walk_update(&mut self, update: &'a Update) {
        self.walk_table_with_joins(&update.table);
        if let Some(from) = &update.from {
            let (UpdateTableFromKind::BeforeSet(from) | UpdateTableFromKind::AfterSet(from)) = from;
            for twj in from {
                self.walk_table_with_joins(twj);
            }
        }
        self.walk_assignments(&update.assignments, true);
        self.check_update_local_ids(&update.assignments);
        self.walk_where_order_limit(&update.selection, &update.order_by, &update.limit);
    }

    pub(super) fn walk_delete(&mut self, delete: &'a Delete) {
        let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &delete.from;
        for twj in from {
            self.walk_table_with_joins(twj);
        }
        for twj in delete.using.iter().flatten() {
            self.walk_table_with_joins(twj);
        }
        // `DELETE p FROM pins p ...`: names in the list that are not
        // aliases are tables, and get qualified like the others.
        for name in &delete.tables {
            let is_alias = match name.0.as_slice() {
                [ObjectNamePart::Identifier(ident)] => self.tables.iter().any(|t| {
                    t.alias
                        .is_some_and(|a| a.value.eq_ignore_ascii_case(&ident.value))
                }),
                _ => false,
            };
            if !is_alias {
                self.add_table(name, None, false);
            }
        }
        self.walk_where_order_limit(&delete.selection, &delete.order_by, &delete.limit);
    }

    /// The WHERE, ORDER BY and LIMIT of an UPDATE or DELETE.
    fn walk_where_order_limit(
        &mut self,
        selection: &'a Option<Expr>,
        order_by: &'a [OrderByExpr],
        limit: &'a Option<Expr>,
    ) {
        if let Some(selection) = selection {
            self.walk_cond(selection);
        }
        self.walk_order_by(order_by);
        if let Some(limit) = limit {
            self.walk_expr(limit);
        }
    }

    /// `SET a = x, b = y` of UPDATE (and ON DUPLICATE KEY UPDATE); with
    /// `record`, the assigned columns are kept in `assigned`.
    pub(super) fn walk_assignments(&mut self, assignments: &'a [Assignment], record: bool) {
        for assignment in assignments {
            if record {
                let names: &[ObjectName] = match &assignment.target {
                    AssignmentTarget::ColumnName(name) => std::slice::from_ref(name),
                    AssignmentTarget::Tuple(names) => names,
                };
                for name in names {
                    match name.0.as_slice() {
                        [ObjectNamePart::Identifier(c)] => self.assigned.push((None, c)),
                        [ObjectNamePart::Identifier(q), ObjectNamePart::Identifier(c)] => {
                            self.assigned.push((Some(q), c))
                        }
                        _ => {}
                    }
                }
            }
            self.walk_expr(&assignment.value);
        }
    }
}
