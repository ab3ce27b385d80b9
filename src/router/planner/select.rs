//! Walking queries: WITH, SELECT (each one a scope its columns resolve in),
//! set operations, FROM and JOIN, ORDER BY and LIMIT.

use sqlparser::ast::{
    GroupByExpr, JoinConstraint, JoinOperator, LimitClause, OrderByKind, Query, Select, SelectItem,
    SetExpr, TableFactor, TableWithJoins,
};

use super::dml::Planner;
use super::expr::{column_ref, is_id};
use super::unsupported;

impl<'a> Planner<'a> {
    pub(super) fn walk_query(&mut self, query: &'a Query) {
        self.nested(|planner| planner.walk_query_node(query));
    }

    fn walk_query_node(&mut self, query: &'a Query) {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.push(&cte.alias.name.value);
            }
            for cte in &with.cte_tables {
                self.walk_query(&cte.query);
            }
        }
        // ORDER BY and LIMIT of a plain SELECT see its tables.
        let outer = self.scope;
        if let Some(inner) = self.walk_set_expr(&query.body) {
            self.scope = inner;
        }
        if let Some(order_by) = &query.order_by {
            if let OrderByKind::Expressions(exprs) = &order_by.kind {
                self.walk_order_by(exprs);
            }
        }
        match &query.limit_clause {
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if let Some(limit) = limit {
                    self.walk_expr(limit);
                }
                if let Some(offset) = offset {
                    self.walk_expr(&offset.value);
                }
                self.walk_exprs(limit_by);
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                self.walk_expr(offset);
                self.walk_expr(limit);
            }
            None => {}
        }
        self.scope = outer;
    }

    /// Walks a query body; returns the scope of a plain SELECT.
    fn walk_set_expr(&mut self, body: &'a SetExpr) -> Option<usize> {
        match body {
            SetExpr::Select(select) => return Some(self.walk_select(select)),
            SetExpr::Query(query) => self.walk_query(query),
            SetExpr::SetOperation { .. } => self.walk_chain(
                body,
                |node| match node {
                    SetExpr::SetOperation { left, right, .. } => Some((left, right)),
                    _ => None,
                },
                |planner, node| {
                    planner.walk_set_expr(node);
                },
            ),
            SetExpr::Values(values) => {
                for row in &values.rows {
                    self.walk_exprs(&row.content);
                }
            }
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
                self.fail(unsupported("a write nested in a query"))
            }
            SetExpr::Table(_) => self.fail(unsupported("TABLE statements; use SELECT")),
        }
        None
    }

    /// Walks a SELECT in a new scope (inside the current one); returns it.
    fn walk_select(&mut self, select: &'a Select) -> usize {
        // A subquery's own WHERE and ON restrict its own tables.
        let outer_on = self.outer_on.take();
        let outer = self.scope;
        self.scopes.push(Some(outer));
        self.scope = self.scopes.len() - 1;
        for twj in &select.from {
            self.walk_table_with_joins(twj);
        }
        for item in &select.projection {
            match item {
                SelectItem::UnnamedExpr(expr) => match column_ref(expr) {
                    Some((qualifier, column)) if is_id(column) => {
                        self.add_id_ref(qualifier, column, true)
                    }
                    _ => {
                        self.unnamed_items.push(expr);
                        self.walk_expr(expr)
                    }
                },
                SelectItem::ExprWithAlias { expr, .. }
                | SelectItem::ExprWithAliases { expr, .. } => self.walk_expr(expr),
                SelectItem::QualifiedWildcard(kind, options) => {
                    self.add_wildcard(select, Some(kind), options)
                }
                SelectItem::Wildcard(options) => self.add_wildcard(select, None, options),
            }
        }
        if let Some(selection) = &select.selection {
            self.walk_cond(selection);
        }
        if let GroupByExpr::Expressions(exprs, _) = &select.group_by {
            self.walk_exprs(exprs);
        }
        if let Some(having) = &select.having {
            self.walk_expr(having);
        }
        self.walk_order_by(&select.sort_by);
        if let Some(qualify) = &select.qualify {
            self.walk_expr(qualify);
        }
        let inner = self.scope;
        self.scope = outer;
        self.outer_on = outer_on;
        inner
    }

    pub(super) fn walk_table_with_joins(&mut self, twj: &'a TableWithJoins) {
        self.nested(|planner| planner.walk_joins_node(twj));
    }

    fn walk_joins_node(&mut self, twj: &'a TableWithJoins) {
        let first = self.tables.len();
        self.walk_table_factor(&twj.relation);
        for join in &twj.joins {
            let before = self.tables.len();
            self.walk_table_factor(&join.relation);
            let after = self.tables.len();
            // The ON of an outer join keeps every row of the preserved side:
            // it restricts (and locates) only the other side's tables.
            let restricts = match &join.join_operator {
                JoinOperator::Left(_) | JoinOperator::LeftOuter(_) => Some(before..after),
                JoinOperator::Right(_) | JoinOperator::RightOuter(_) => Some(first..before),
                JoinOperator::FullOuter(_) => Some(before..before),
                _ => None,
            };
            if let JoinOperator::AsOf {
                match_condition, ..
            } = &join.join_operator
            {
                self.walk_expr(match_condition);
            }
            if let Some(JoinConstraint::On(on)) = join_constraint(&join.join_operator) {
                let outer = std::mem::replace(&mut self.outer_on, restricts);
                self.walk_cond(on);
                self.outer_on = outer;
            }
        }
    }

    fn walk_table_factor(&mut self, factor: &'a TableFactor) {
        match factor {
            TableFactor::Table { name, alias, .. } => {
                self.add_table(name, alias.as_ref().map(|a| &a.name), true);
            }
            TableFactor::Derived { subquery, .. } => self.walk_query(subquery),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.walk_table_with_joins(table_with_joins),
            TableFactor::TableFunction { expr, .. } => self.walk_expr(expr),
            TableFactor::JsonTable { json_expr, .. } => self.walk_expr(json_expr),
            _ => {}
        }
    }
}

fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c)
        | JoinOperator::StraightJoin(c) => Some(c),
        JoinOperator::AsOf { constraint, .. } => Some(constraint),
        _ => None,
    }
}
