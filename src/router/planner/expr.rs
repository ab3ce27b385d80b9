//! Walking expressions: the `key = literal` and `key IN (literals)`
//! restrictions of WHERE and ON, references to `id` columns anywhere, and
//! every subquery. Long left-deep chains (`a AND b AND ...`, UNIONs) are
//! walked in a loop, not by recursion, so they cannot overflow the stack.

use sqlparser::ast::{
    BinaryOperator, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArguments, Ident, OrderByExpr, WindowType,
};

use super::dml::{IdRef, KeyJoin, Planner, Pred};

/// A column as written: its qualifier, if any, and its name.
pub(super) type ColumnRef<'a> = (Option<&'a Ident>, &'a Ident);

/// `col` or `q.col` (not `@var` / `@@var`).
pub(super) fn column_ref(expr: &Expr) -> Option<ColumnRef<'_>> {
    match expr {
        Expr::Identifier(ident) if !ident.value.starts_with('@') || ident.quote_style.is_some() => {
            Some((None, ident))
        }
        Expr::CompoundIdentifier(parts) => match parts.as_slice() {
            [q, c] if !q.value.starts_with('@') || q.quote_style.is_some() => Some((Some(q), c)),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn is_id(ident: &Ident) -> bool {
    ident.value.eq_ignore_ascii_case("id")
}

impl<'a> Planner<'a> {
    /// Walks a left-deep chain (`a AND b AND c`, `x UNION y UNION z`)
    /// along its spine in a loop: `split` gives a node's two sides while
    /// the node is part of the chain; `walk` is called on the leftmost
    /// operand, then on each right-hand one, left to right.
    pub(super) fn walk_chain<T>(
        &mut self,
        node: &'a T,
        split: impl Fn(&'a T) -> Option<(&'a T, &'a T)>,
        mut walk: impl FnMut(&mut Self, &'a T),
    ) {
        let mut rights = Vec::new();
        let mut node = node;
        while let Some((left, right)) = split(node) {
            rights.push(right);
            node = left;
        }
        walk(self, node);
        for right in rights.into_iter().rev() {
            walk(self, right);
        }
    }

    pub(super) fn add_id_ref(
        &mut self,
        qualifier: Option<&'a Ident>,
        column: &'a Ident,
        select_item: bool,
    ) {
        self.id_refs.push(IdRef {
            scope: self.scope,
            qualifier,
            column,
            select_item,
        });
    }

    /// Records `column = value` or `column IN (values)` (the expression
    /// `expr`) as restricting the statement.
    fn add_pred(
        &mut self,
        (qualifier, column): (Option<&'a Ident>, &'a Ident),
        values: &'a [Expr],
        expr: &'a Expr,
    ) {
        self.preds.push(Pred {
            scope: self.scope,
            qualifier,
            column,
            values,
            or_rest: Vec::new(),
            expr,
            restricts: self.outer_on.clone(),
        });
    }

    /// `column = value` / `value = column` / `column IN (values)` with key
    /// values: the column and the values.
    fn key_restriction(&self, expr: &'a Expr) -> Option<(ColumnRef<'a>, &'a [Expr])> {
        let env = self.env;
        match expr {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => match (column_ref(left), env.key_value(right)) {
                (Some(c), Some(_)) => Some((c, std::slice::from_ref(right.as_ref()))),
                _ => match (env.key_value(left), column_ref(right)) {
                    (Some(_), Some(c)) => Some((c, std::slice::from_ref(left.as_ref()))),
                    _ => None,
                },
            },
            Expr::InList {
                expr: column,
                list,
                negated: false,
            } if !list.is_empty() && list.iter().all(|e| env.key_value(e).is_some()) => {
                column_ref(column).map(|c| (c, list.as_slice()))
            }
            _ => None,
        }
    }

    /// `a = x OR a = y OR a IN (z, w) ...` (parenthesised at will), every
    /// restriction on the same column: recorded like an IN list. `None`
    /// (nothing recorded) if the OR is anything else.
    fn or_pred(&mut self, expr: &'a Expr) -> Option<()> {
        let mut leaves: Vec<(ColumnRef<'a>, &'a [Expr])> = Vec::new();
        // Operands still to look at: right-hand ones of the spine, and the
        // insides of parentheses.
        let mut pending: Vec<&'a Expr> = vec![expr];
        while let Some(mut node) = pending.pop() {
            loop {
                match node {
                    Expr::BinaryOp {
                        left,
                        op: BinaryOperator::Or,
                        right,
                    } => {
                        pending.push(right);
                        node = left;
                    }
                    Expr::Nested(inner) => node = inner,
                    _ => {
                        leaves.push(self.key_restriction(node)?);
                        break;
                    }
                }
            }
        }
        let (&((qualifier, column), values), rest) = leaves.split_first()?;
        let same = |(q, c): ColumnRef<'a>| {
            c.value.eq_ignore_ascii_case(&column.value)
                && match (q, qualifier) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a.value.eq_ignore_ascii_case(&b.value),
                    _ => false,
                }
        };
        if !rest.iter().all(|&(c, _)| same(c)) {
            return None;
        }
        self.preds.push(Pred {
            scope: self.scope,
            qualifier,
            column,
            values,
            or_rest: rest.iter().map(|&((_, c), v)| (c, v)).collect(),
            expr,
            restricts: self.outer_on.clone(),
        });
        Some(())
    }

    /// An expression whose top-level ANDs each restrict the statement.
    pub(super) fn walk_cond(&mut self, expr: &'a Expr) {
        self.nested(|planner| planner.walk_cond_node(expr));
    }

    fn walk_cond_node(&mut self, expr: &'a Expr) {
        match expr {
            Expr::BinaryOp {
                op: BinaryOperator::And,
                ..
            } => self.walk_chain(
                expr,
                |node| match node {
                    Expr::BinaryOp {
                        left,
                        op: BinaryOperator::And,
                        right,
                    } => Some((left.as_ref(), right.as_ref())),
                    _ => None,
                },
                Self::walk_cond,
            ),
            Expr::Nested(inner) => self.walk_cond(inner),
            Expr::BinaryOp {
                op: BinaryOperator::Or,
                ..
            } => {
                if self.or_pred(expr).is_none() {
                    self.walk_expr(expr)
                }
            }
            Expr::BinaryOp {
                op: BinaryOperator::Eq,
                ..
            }
            | Expr::InList { .. } => match self.key_restriction(expr) {
                Some((column, values)) => self.add_pred(column, values, expr),
                None => {
                    if let Expr::BinaryOp { left, right, .. } = expr {
                        if let (Some(left), Some(right)) = (column_ref(left), column_ref(right)) {
                            self.key_joins.push(KeyJoin {
                                scope: self.scope,
                                left,
                                right,
                                restricts: self.outer_on.clone(),
                            });
                        }
                    }
                    self.walk_expr(expr)
                }
            },
            _ => self.walk_expr(expr),
        }
    }

    pub(super) fn walk_exprs(&mut self, exprs: &'a [Expr]) {
        for e in exprs {
            self.walk_expr(e);
        }
    }

    pub(super) fn walk_expr(&mut self, expr: &'a Expr) {
        self.nested(|planner| planner.walk_expr_node(expr));
    }

    fn walk_expr_node(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                if let Some((qualifier, column)) = column_ref(expr) {
                    if is_id(column) {
                        self.add_id_ref(qualifier, column, false);
                    }
                }
            }
            Expr::BinaryOp { .. } => self.walk_chain(
                expr,
                |node| match node {
                    Expr::BinaryOp { left, right, .. } => Some((left.as_ref(), right.as_ref())),
                    _ => None,
                },
                Self::walk_expr,
            ),
            Expr::AnyOp { left, right, .. }
            | Expr::AllOp { left, right, .. }
            | Expr::IsDistinctFrom(left, right)
            | Expr::IsNotDistinctFrom(left, right) => {
                self.walk_expr(left);
                self.walk_expr(right);
            }
            Expr::UnaryOp { expr, .. }
            | Expr::Nested(expr)
            | Expr::IsFalse(expr)
            | Expr::IsNotFalse(expr)
            | Expr::IsTrue(expr)
            | Expr::IsNotTrue(expr)
            | Expr::IsNull(expr)
            | Expr::IsNotNull(expr)
            | Expr::IsUnknown(expr)
            | Expr::IsNotUnknown(expr)
            | Expr::Cast { expr, .. }
            | Expr::Extract { expr, .. }
            | Expr::Ceil { expr, .. }
            | Expr::Floor { expr, .. }
            | Expr::Collate { expr, .. }
            | Expr::Prefixed { value: expr, .. }
            | Expr::Named { expr, .. } => self.walk_expr(expr),
            Expr::Convert { expr, styles, .. } => {
                self.walk_expr(expr);
                self.walk_exprs(styles);
            }
            Expr::AtTimeZone {
                timestamp,
                time_zone,
            } => {
                self.walk_expr(timestamp);
                self.walk_expr(time_zone);
            }
            Expr::InList { expr, list, .. } => {
                self.walk_expr(expr);
                self.walk_exprs(list);
            }
            Expr::InSubquery { expr, subquery, .. } => {
                self.walk_expr(expr);
                self.walk_query(subquery);
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                self.walk_expr(expr);
                self.walk_expr(low);
                self.walk_expr(high);
            }
            Expr::Like {
                expr,
                pattern,
                escape_char,
                ..
            }
            | Expr::ILike {
                expr,
                pattern,
                escape_char,
                ..
            }
            | Expr::SimilarTo {
                expr,
                pattern,
                escape_char,
                ..
            } => {
                self.walk_expr(expr);
                self.walk_expr(pattern);
                if let Some(e) = escape_char {
                    self.walk_expr(e);
                }
            }
            Expr::RLike { expr, pattern, .. } => {
                self.walk_expr(expr);
                self.walk_expr(pattern);
            }
            Expr::Position { expr, r#in } => {
                self.walk_expr(expr);
                self.walk_expr(r#in);
            }
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                self.walk_expr(expr);
                for e in [substring_from, substring_for].into_iter().flatten() {
                    self.walk_expr(e);
                }
            }
            Expr::Trim {
                expr,
                trim_what,
                trim_characters,
                ..
            } => {
                self.walk_expr(expr);
                if let Some(e) = trim_what {
                    self.walk_expr(e);
                }
                if let Some(chars) = trim_characters {
                    self.walk_exprs(chars);
                }
            }
            Expr::Overlay {
                expr,
                overlay_what,
                overlay_from,
                overlay_for,
            } => {
                self.walk_expr(expr);
                self.walk_expr(overlay_what);
                self.walk_expr(overlay_from);
                if let Some(e) = overlay_for {
                    self.walk_expr(e);
                }
            }
            Expr::Function(function) => self.walk_function(function),
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                if let Some(e) = operand {
                    self.walk_expr(e);
                }
                for when in conditions {
                    self.walk_expr(&when.condition);
                    self.walk_expr(&when.result);
                }
                if let Some(e) = else_result {
                    self.walk_expr(e);
                }
            }
            Expr::Exists { subquery, .. } => {
                self.in_exists += 1;
                self.walk_query(subquery);
                self.in_exists -= 1;
            }
            Expr::Subquery(subquery) => self.walk_query(subquery),
            Expr::Tuple(exprs) => self.walk_exprs(exprs),
            Expr::GroupingSets(sets) | Expr::Cube(sets) | Expr::Rollup(sets) => {
                for set in sets {
                    self.walk_exprs(set);
                }
            }
            Expr::Interval(interval) => self.walk_expr(&interval.value),
            Expr::MemberOf(member) => {
                self.walk_expr(&member.value);
                self.walk_expr(&member.array);
            }
            Expr::Array(array) => self.walk_exprs(&array.elem),
            _ => {}
        }
    }

    fn walk_function(&mut self, function: &'a Function) {
        for args in [&function.parameters, &function.args] {
            match args {
                FunctionArguments::None => {}
                FunctionArguments::Subquery(query) => self.walk_query(query),
                FunctionArguments::List(list) => {
                    for arg in &list.args {
                        let (FunctionArg::Named { arg, .. }
                        | FunctionArg::ExprNamed { arg, .. }
                        | FunctionArg::Unnamed(arg)) = arg;
                        if let FunctionArgExpr::Expr(e) = arg {
                            self.walk_expr(e);
                        }
                    }
                    for clause in &list.clauses {
                        match clause {
                            FunctionArgumentClause::OrderBy(order) => self.walk_order_by(order),
                            FunctionArgumentClause::Where(e) | FunctionArgumentClause::Limit(e) => {
                                self.walk_expr(e)
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        if let Some(filter) = &function.filter {
            self.walk_expr(filter);
        }
        self.walk_order_by(&function.within_group);
        if let Some(WindowType::WindowSpec(spec)) = &function.over {
            self.walk_exprs(&spec.partition_by);
            self.walk_order_by(&spec.order_by);
        }
    }

    pub(super) fn walk_order_by(&mut self, exprs: &'a [OrderByExpr]) {
        for o in exprs {
            self.walk_expr(&o.expr);
        }
    }
}
