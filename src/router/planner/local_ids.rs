//! An explicit `local_id` must fit the ID layout's local part (36 bits):
//! InnoDB hands out AUTO_INCREMENT values above the largest one written,
//! so one row (or one `AUTO_INCREMENT = n`) at or above 2^36 would make
//! every later INSERT on that shard write a row no ID can name. Checked
//! at planning time: literal values of an object table's `local_id` in
//! INSERT/REPLACE rows and UPDATE assignments, and the `AUTO_INCREMENT`
//! table option of a schema change on an object table.

use sqlparser::ast::{
    Assignment, AssignmentTarget, Expr, Ident, Insert, ObjectName, ObjectNamePart, SetExpr, Value,
};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::dml::{Planner, RefKind, TableRef};
use super::keys::is_marker;
use super::unsupported;
use crate::id::MAX_LOCAL;
use crate::router::plan::RouteError;
use crate::topology::{TableKind, TableRule, Topology};

fn is_local_id(ident: &Ident) -> bool {
    ident.value.eq_ignore_ascii_case("local_id")
}

/// The refusal of a `local_id` value written as `written`.
fn out_of_range(table: &str, written: &str) -> RouteError {
    unsupported(format!(
        "local_id {written} for object table {table}: an explicit local_id must be an integer literal from 1 to {MAX_LOCAL} \
         (the 36 bits of an ID's local part), or NULL / DEFAULT / 0 to let the server assign it; \
         a larger one would make the server hand out local_ids no ID can carry to every later INSERT on the shard"
    ))
}

impl<'a> Planner<'a> {
    /// The object table a table reference is (a logical one, or the
    /// configured object table of the same name in a shard database).
    fn object_rule(&self, t: &TableRef<'a>) -> Option<&'a TableRule> {
        let rule = match t.kind {
            RefKind::Logical(rule) => Some(rule),
            RefKind::Physical { fleet, .. } => self
                .env
                .topo
                .table(&t.table.value)
                .filter(|rule| rule.fleet == fleet),
            _ => None,
        }?;
        matches!(rule.kind, TableKind::Object { .. }).then_some(rule)
    }

    /// Refuses a value given to `local_id` that may not fit 36 bits:
    /// anything but an integer literal (decimal, possibly quoted or bound
    /// as a string) up to [`MAX_LOCAL`], `NULL`, `DEFAULT`, or, when
    /// preparing, a `?` marker (checked again at execute).
    fn check_local_id_value(&self, table: &str, value: &Expr) -> Result<(), RouteError> {
        let env = self.env;
        match value {
            Expr::Value(v) if matches!(v.value, Value::Null) => return Ok(()),
            Expr::Value(v) if env.prepare && is_marker(v) => return Ok(()),
            Expr::Identifier(ident)
                if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("DEFAULT") =>
            {
                return Ok(())
            }
            _ => {}
        }
        let fits = env
            .key_value(value)
            .and_then(|key| env.decimal_text(&key))
            .and_then(|digits| digits.parse::<u64>().ok())
            .is_some_and(|n| n <= MAX_LOCAL);
        if fits {
            return Ok(());
        }
        let span = env
            .key_value(value)
            .map_or_else(|| sqlparser::ast::Spanned::span(value), |key| key.span);
        let written = env.src.text(span);
        Err(out_of_range(
            table,
            &match value {
                // The span of `-1` is the `1`'s.
                Expr::UnaryOp { op, .. } => format!("{op}{written}"),
                _ => written.to_owned(),
            },
        ))
    }

    /// INSERT/REPLACE into an object table: the rows' `local_id` values.
    pub(super) fn check_insert_local_ids(&mut self, insert: &'a Insert) {
        let Some(rule) = self.insert_key_rule() else {
            return;
        };
        if !matches!(rule.kind, TableKind::Object { .. }) {
            return;
        }
        if let Err(error) = self.insert_local_ids(rule, insert) {
            self.fail(error);
        }
    }

    fn insert_local_ids(&self, rule: &TableRule, insert: &'a Insert) -> Result<(), RouteError> {
        let table = rule.name.as_str();
        for a in &insert.assignments {
            if let AssignmentTarget::ColumnName(name) = &a.target {
                if last_part(name).is_some_and(is_local_id) {
                    self.check_local_id_value(table, &a.value)?;
                }
            }
        }
        if !insert.assignments.is_empty() {
            return Ok(());
        }
        let Some(source) = insert.source.as_deref() else {
            return Ok(());
        };
        let index = if insert.columns.is_empty() {
            // No column list: the table's own order.
            super::notes::note_untemplatable();
            let columns = self.env.topo.object_columns(rule).ok_or_else(|| {
                unsupported(format!(
                    "INSERT into object table {table} without a column list while shardgate has not read its columns; name the columns"
                ))
            })?;
            columns
                .iter()
                .position(|c| c.eq_ignore_ascii_case("local_id"))
        } else {
            insert
                .columns
                .iter()
                .position(|c| last_part(c).is_some_and(is_local_id))
        };
        let Some(index) = index else {
            return Ok(());
        };
        let SetExpr::Values(values) = source.body.as_ref() else {
            return Err(unsupported(format!(
                "INSERT ... SELECT that sets local_id of object table {table}: shardgate cannot check that the values fit the 36 bits of an ID's local part; \
                 insert literal rows, or leave local_id out"
            )));
        };
        for row in &values.rows {
            match row.content.get(index) {
                Some(value) => self.check_local_id_value(table, value)?,
                None => continue,
            }
        }
        Ok(())
    }

    /// UPDATE assignments of an object table's `local_id` (scope 0 tables).
    pub(super) fn check_update_local_ids(&mut self, assignments: &'a [Assignment]) {
        for a in assignments {
            let names: &[ObjectName] = match &a.target {
                AssignmentTarget::ColumnName(name) => std::slice::from_ref(name),
                AssignmentTarget::Tuple(names) => names,
            };
            for name in names {
                let (qualifier, column) = match name.0.as_slice() {
                    [ObjectNamePart::Identifier(c)] => (None, c),
                    [ObjectNamePart::Identifier(q), ObjectNamePart::Identifier(c)] => (Some(q), c),
                    _ => continue,
                };
                if !is_local_id(column) {
                    continue;
                }
                let owner = self
                    .tables
                    .iter()
                    .filter(|t| t.in_scope && t.scope == 0)
                    .filter(|t| {
                        qualifier.is_none_or(|q| {
                            t.alias
                                .unwrap_or(t.table)
                                .value
                                .eq_ignore_ascii_case(&q.value)
                        })
                    })
                    .find_map(|t| self.object_rule(t));
                if let Some(rule) = owner {
                    if let Err(error) = self.check_local_id_value(&rule.name, &a.value) {
                        self.fail(error);
                        return;
                    }
                }
            }
        }
    }
}

/// `c` of `c` or `t.c`.
fn last_part(name: &ObjectName) -> Option<&Ident> {
    match name.0.last() {
        Some(ObjectNamePart::Identifier(ident)) => Some(ident),
        _ => None,
    }
}

/// The value of an `AUTO_INCREMENT [=] n` table option in a schema
/// change's tokens, as written.
pub(super) fn auto_increment(tokens: &[TokenWithSpan]) -> Option<String> {
    let significant: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    significant.iter().enumerate().find_map(|(i, t)| {
        let Token::Word(w) = t else { return None };
        if w.quote_style.is_some() || w.keyword != Keyword::AUTO_INCREMENT {
            return None;
        }
        let mut next = i + 1;
        if matches!(significant.get(next), Some(Token::Eq)) {
            next += 1;
        }
        if matches!(significant.get(next), Some(Token::Plus)) {
            next += 1;
        }
        match significant.get(next) {
            Some(Token::Number(n, _)) => Some(n.clone()),
            _ => None,
        }
    })
}

/// Refuses an `AUTO_INCREMENT = n` option (`value`, from
/// [`auto_increment`]) above [`MAX_LOCAL`] in a schema change whose tokens
/// name an object table (read from the tokens, so it holds whether or not
/// the statement parses).
pub(super) fn check_auto_increment(
    topo: &Topology,
    value: &str,
    tokens: &[TokenWithSpan],
) -> Result<(), RouteError> {
    let fits = match value.parse::<u64>() {
        Ok(n) => n <= MAX_LOCAL,
        // 6.9e10, 68719476736.0: the server rounds; refuse what may not fit.
        Err(_) => value.parse::<f64>().is_ok_and(|n| n < MAX_LOCAL as f64),
    };
    if fits {
        return Ok(());
    }
    let object = tokens.iter().find_map(|t| match &t.token {
        Token::Word(w) => topo
            .table(&w.value)
            .filter(|rule| matches!(rule.kind, TableKind::Object { .. })),
        _ => None,
    });
    match object {
        Some(rule) => Err(unsupported(format!(
            "AUTO_INCREMENT = {value} on object table {}: above {MAX_LOCAL} (the 36 bits of an ID's local part), \
             every later INSERT on the shard would get a local_id no ID can carry",
            rule.name
        ))),
        None => Ok(()),
    }
}
