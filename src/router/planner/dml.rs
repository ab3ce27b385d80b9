//! The planner of SELECT, INSERT, UPDATE and DELETE (and EXPLAIN of them).
//!
//! [`Planner`] walks the statement's AST once, collecting what routing needs
//! (the tables it names, its `id` columns, its `key = literal` restrictions,
//! what an UPDATE assigns, the key values of INSERT rows); then
//! [`Planner::finish`] (in `decide`) chooses the shard and edits the text.
//! Here: what is collected, the walk's entry per statement, and how a
//! column resolves to a table's shard key through the statement's scopes.

use sqlparser::ast::{Expr, Ident, ObjectName, Query, Select, Statement};
use sqlparser::tokenizer::Span;

use super::keys::key_column;
use super::tokens::{is_private_schema, private_schema_error};
use super::{idents, is_system_schema, object_name_text, unsupported, Env};
use crate::router::hints::Hints;
use crate::router::plan::{Placement, Plan, RouteError, StatementKind};
use crate::router::text::Edits;
use crate::topology::{FleetId, TableRule};

/// How a table reference of the statement is resolved.
#[derive(Clone, Copy)]
pub(super) enum RefKind<'a> {
    /// A logical table from the config, unqualified: qualified on output.
    Logical(&'a TableRule),
    /// `dbNNNNN.t`: that shard, text unchanged.
    Physical { fleet: FleetId, shard: u32 },
    /// An unqualified table not in the config, under USE: a plain table of
    /// the current shard database, qualified on output.
    Plain,
    /// `information_schema.t` and the like: any host.
    System,
}

/// One table reference.
pub(super) struct TableRef<'a> {
    pub(super) table: &'a Ident,
    pub(super) alias: Option<&'a Ident>,
    pub(super) kind: RefKind<'a>,
    /// Whether its columns can be named in the statement (false for the
    /// table an INSERT writes to).
    pub(super) in_scope: bool,
    /// The SELECT (or UPDATE/DELETE) it belongs to.
    pub(super) scope: usize,
}

/// A reference to an `id` column (maybe of an object table).
pub(super) struct IdRef<'a> {
    pub(super) scope: usize,
    pub(super) qualifier: Option<&'a Ident>,
    pub(super) column: &'a Ident,
    /// An unaliased select item: gets `AS id` so the result column keeps
    /// its name.
    pub(super) select_item: bool,
}

/// A `*` or `t.*` of a select list.
pub(super) struct Wildcard<'a> {
    /// The SELECT whose list it is in (its FROM gives the tables of `*`).
    pub(super) select: &'a Select,
    /// The SELECT's scope.
    pub(super) scope: usize,
    /// `t` of `t.*`; `None` for `*`.
    pub(super) qualifier: Option<&'a Ident>,
    /// Where the item starts (the qualifier, or the `*`).
    pub(super) start: Span,
    /// The `*`.
    pub(super) star: Span,
}

/// `col = literal` or `col IN (literals)` in a position that restricts
/// the whole statement (a top-level AND of WHERE or ON), or an OR of such
/// restrictions on the same column (`id = a OR id = b`). When preparing, a
/// `?` marker counts as a literal (see `Env::key_value`).
pub(super) struct Pred<'a> {
    pub(super) scope: usize,
    pub(super) qualifier: Option<&'a Ident>,
    /// The column (of the first restriction of an OR).
    pub(super) column: &'a Ident,
    /// The literal(s): one for `=`, the list for `IN`.
    pub(super) values: &'a [Expr],
    /// The other restrictions of an OR: their column (as written, the
    /// same name) and values. Empty for a single `=` or `IN`.
    pub(super) or_rest: Vec<(&'a Ident, &'a [Expr])>,
    /// The whole restriction (the `=`, the `IN` or the OR), for rewriting
    /// it per shard when its values span several shards.
    pub(super) expr: &'a Expr,
    /// In the ON of an outer join: the tables (indexes into `tables`) whose
    /// rows it restricts (the null-supplying side); `None` elsewhere.
    pub(super) restricts: Option<std::ops::Range<usize>>,
}

impl<'a> Pred<'a> {
    /// Every value expression, in text order.
    pub(super) fn all_values(&self) -> impl Iterator<Item = &'a Expr> + '_ {
        self.values
            .iter()
            .chain(self.or_rest.iter().flat_map(|(_, values)| values.iter()))
    }

    /// Every column reference (one per restriction), in text order.
    pub(super) fn columns(&self) -> impl Iterator<Item = &'a Ident> + '_ {
        std::iter::once(self.column).chain(self.or_rest.iter().map(|(column, _)| *column))
    }
}

/// `left = right` between two columns, in a top-level AND of WHERE or ON.
pub(super) struct KeyJoin<'a> {
    pub(super) scope: usize,
    pub(super) left: (Option<&'a Ident>, &'a Ident),
    pub(super) right: (Option<&'a Ident>, &'a Ident),
    /// As [`Pred::restricts`]: only these tables may be located by it.
    pub(super) restricts: Option<std::ops::Range<usize>>,
}

/// The literal values (or, when preparing, `?` markers) of an INSERT's
/// shard-key column.
#[derive(Default)]
pub(super) struct InsertKeys<'a> {
    pub(super) values: Vec<super::keys::KeyValue<'a>>,
    /// A row whose key is not a literal, or no key column at all.
    pub(super) missing: bool,
    /// Where the minted `id` goes when the table's fleet mints IDs and the
    /// INSERT names no `id`.
    pub(super) mint: Option<MintSites>,
}

/// Where an INSERT gets the `id` its server mints: before the first
/// column of the column list (or the first `SET` assignment), and after
/// the `(` of every row.
pub(super) struct MintSites {
    /// The first named column (or assigned column of the `SET` form).
    pub(super) column: Span,
    /// The `(` of every `VALUES` row (empty for the `SET` form).
    pub(super) rows: Vec<Span>,
}

/// Walks a DML statement's AST, collecting what routing needs, then decides.
pub(super) struct Planner<'a> {
    pub(super) env: Env<'a>,
    pub(super) tables: Vec<TableRef<'a>>,
    pub(super) ctes: Vec<&'a str>,
    pub(super) id_refs: Vec<IdRef<'a>>,
    /// Unaliased select items other than a bare column: when an `id` inside
    /// one is rewritten, the item gets an alias with its original text, so
    /// the result column keeps the name the client wrote (`MIN(id)`).
    pub(super) unnamed_items: Vec<&'a Expr>,
    pub(super) preds: Vec<Pred<'a>>,
    /// `*` and `t.*` of the select lists (expanded over object tables).
    pub(super) wildcards: Vec<Wildcard<'a>>,
    /// How many EXISTS subqueries the walk is in (their `*` stays).
    pub(super) in_exists: u32,
    /// `a.col = b.col` in a position that restricts the statement: when
    /// both are ID shard keys, locating one table locates the other.
    pub(super) key_joins: Vec<KeyJoin<'a>>,
    /// While walking the ON of an outer join: the tables it restricts
    /// (see [`Pred::restricts`]).
    pub(super) outer_on: Option<std::ops::Range<usize>>,
    /// Columns an UPDATE assigns (a shard key must not change).
    pub(super) assigned: Vec<(Option<&'a Ident>, &'a Ident)>,
    /// The parent of each scope (a SELECT, or the UPDATE/DELETE itself:
    /// scope 0); columns resolve in their scope, then outwards.
    pub(super) scopes: Vec<Option<usize>>,
    /// The scope being walked.
    pub(super) scope: usize,
    /// The INSERT target, as an index into `tables`.
    pub(super) insert_target: Option<usize>,
    pub(super) insert_keys: InsertKeys<'a>,
    /// The statement, when it is a query (for multi-shard reads).
    pub(super) query: Option<&'a Query>,
    /// Planning the statement of an EXPLAIN.
    pub(super) explain: bool,
    pub(super) error: Option<RouteError>,
    /// How deep the walk is in its recursion ([`Planner::nested`]).
    depth: u32,
    /// The statement's verb (`SELECT`, `INSERT`, `REPLACE`, `UPDATE`,
    /// `DELETE`), for access errors.
    command: &'static str,
    /// Without USE, the fleet whose shard database a schema change's
    /// unqualified tables not in the config belong to (its shard named by
    /// a hint): they are plain tables, qualified on output.
    pub(super) plain_fleet: Option<FleetId>,
}

/// Deepest the planner's walk recurses (expressions, conditions, queries,
/// joins): a second fence behind the token scan's estimate
/// (`tokens::nesting_too_deep`), at about 1 KiB of stack per level in a
/// debug build.
pub(crate) const MAX_WALK_DEPTH: u32 = 128;

impl<'a> RefKind<'a> {
    /// The logical table, for [`RefKind::Logical`].
    pub(super) fn rule(self) -> Option<&'a TableRule> {
        match self {
            RefKind::Logical(rule) => Some(rule),
            _ => None,
        }
    }
}

impl<'a> Planner<'a> {
    fn new(env: Env<'a>) -> Self {
        Planner {
            env,
            tables: Vec::new(),
            ctes: Vec::new(),
            id_refs: Vec::new(),
            unnamed_items: Vec::new(),
            preds: Vec::new(),
            wildcards: Vec::new(),
            in_exists: 0,
            key_joins: Vec::new(),
            outer_on: None,
            assigned: Vec::new(),
            scopes: vec![None],
            scope: 0,
            insert_target: None,
            insert_keys: InsertKeys::default(),
            query: None,
            explain: false,
            error: None,
            depth: 0,
            command: "SELECT",
            plain_fleet: None,
        }
    }

    /// Runs one recursive step of the walk, or fails the statement when
    /// the walk is already [`MAX_WALK_DEPTH`] deep.
    pub(super) fn nested(&mut self, walk: impl FnOnce(&mut Self)) {
        if self.depth >= MAX_WALK_DEPTH {
            self.fail(RouteError::TooDeep(format!(
                "expressions, subqueries or joins nested more than {MAX_WALK_DEPTH} levels"
            )));
            return;
        }
        self.depth += 1;
        walk(self);
        self.depth -= 1;
    }

    /// A planner for a statement that names its tables without a walk (a
    /// schema change); `command` is its verb for access errors.
    pub(super) fn for_command(env: Env<'a>, command: &'static str) -> Self {
        let mut planner = Planner::new(env);
        planner.command = command;
        planner
    }

    pub(super) fn fail(&mut self, error: RouteError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Records a table reference; returns its index.
    pub(super) fn add_table(
        &mut self,
        name: &'a ObjectName,
        alias: Option<&'a Ident>,
        in_scope: bool,
    ) -> Option<usize> {
        let parts = match idents(name) {
            Ok(parts) => parts,
            Err(e) => {
                self.fail(e);
                return None;
            }
        };
        let (table, kind) = match parts.as_slice() {
            [table] => {
                let value = table.value.as_str();
                if self.ctes.iter().any(|c| c.eq_ignore_ascii_case(value))
                    || (table.quote_style.is_none() && value.eq_ignore_ascii_case("dual"))
                {
                    return None;
                }
                let kind = match self.env.topo.table(value) {
                    Some(rule) => RefKind::Logical(rule),
                    None if self.env.ctx.current_db.is_some() || self.plain_fleet.is_some() => {
                        RefKind::Plain
                    }
                    None => {
                        self.fail(RouteError::UnknownTable(value.to_owned()));
                        return None;
                    }
                };
                (*table, kind)
            }
            [db, table] => {
                // Writes reach only the statement's own tables (scope 0),
                // never information_schema; the private schemas are
                // refused from the tokens already, and here again.
                let written = self.command != "SELECT" && self.scope == 0;
                if is_private_schema(&db.value)
                    || (written && db.value.eq_ignore_ascii_case("information_schema"))
                {
                    self.fail(private_schema_error(self.command, &db.value, &table.value));
                    return None;
                }
                let kind = if is_system_schema(&db.value) {
                    RefKind::System
                } else if let Some((fleet, shard)) = self.env.topo.parse_database(&db.value) {
                    RefKind::Physical { fleet, shard }
                } else {
                    self.fail(RouteError::UnknownDatabase(db.value.clone()));
                    return None;
                };
                (*table, kind)
            }
            _ => {
                self.fail(unsupported(format!(
                    "table name {}",
                    object_name_text(name)
                )));
                return None;
            }
        };
        self.tables.push(TableRef {
            table,
            alias,
            kind,
            in_scope,
            scope: self.scope,
        });
        Some(self.tables.len() - 1)
    }

    /// The logical table an INSERT writes to.
    pub(super) fn insert_rule(&self) -> Option<&'a TableRule> {
        self.insert_target.and_then(|i| self.tables[i].kind.rule())
    }

    /// The logical table whose shard key an INSERT's rows give: the
    /// [`Planner::insert_rule`], or the configured table of the same name
    /// when the INSERT names its shard database (`dbNNNNN.t`), so the rows'
    /// keys are checked against that database as under `USE`.
    pub(super) fn insert_key_rule(&self) -> Option<&'a TableRule> {
        self.insert_rule().or_else(|| {
            let target = &self.tables[self.insert_target?];
            let RefKind::Physical { fleet, .. } = target.kind else {
                return None;
            };
            self.env
                .topo
                .table(&target.table.value)
                .filter(|rule| rule.fleet == fleet)
        })
    }

    /// Plans a SELECT, INSERT, UPDATE or DELETE (see [`Planner::walks`]);
    /// `explain` when it is the statement of an EXPLAIN.
    pub(super) fn plan(
        env: Env<'a>,
        statement: &'a Statement,
        kind: StatementKind,
        explain: bool,
        edits: Edits,
        hints: &Hints,
        placement: &mut dyn Placement,
    ) -> Result<Plan, RouteError> {
        let mut planner = Planner::new(env);
        planner.explain = explain;
        planner.walk_statement(statement);
        planner.finish(kind, edits, hints, placement)
    }

    /// Whether the planner handles this kind of statement.
    pub(super) fn walks(statement: &Statement) -> bool {
        matches!(
            statement,
            Statement::Query(_)
                | Statement::Insert(_)
                | Statement::Update(_)
                | Statement::Delete(_)
        )
    }

    /// Walks a SELECT, INSERT, UPDATE or DELETE; anything else adds nothing.
    fn walk_statement(&mut self, statement: &'a Statement) {
        match statement {
            Statement::Query(query) => {
                self.query = Some(query);
                self.walk_query(query)
            }
            Statement::Insert(insert) => {
                self.command = if insert.replace_into {
                    "REPLACE"
                } else {
                    "INSERT"
                };
                self.walk_insert(insert)
            }
            Statement::Update(update) => {
                self.command = "UPDATE";
                self.walk_update(update)
            }
            Statement::Delete(delete) => {
                self.command = "DELETE";
                self.walk_delete(delete)
            }
            _ => {}
        }
    }

    /// The table a column belongs to, if it is that table's shard key.
    pub(super) fn resolve_key(
        &self,
        scope: usize,
        qualifier: Option<&Ident>,
        column: &Ident,
    ) -> Result<Option<&'a TableRule>, RouteError> {
        Ok(self
            .resolve_key_ref(scope, qualifier, column)?
            .and_then(|index| self.tables[index].kind.rule()))
    }

    /// [`Planner::resolve_key`], as the index of the table reference in
    /// `tables`.
    pub(super) fn resolve_key_ref(
        &self,
        scope: usize,
        qualifier: Option<&Ident>,
        column: &Ident,
    ) -> Result<Option<usize>, RouteError> {
        let mut scope = Some(scope);
        while let Some(s) = scope {
            if let Some(found) = self.resolve_key_in(s, qualifier, column)? {
                return Ok(found);
            }
            scope = self.scopes.get(s).copied().flatten();
        }
        Ok(None)
    }

    /// [`Planner::resolve_key_ref`] in one scope: `Some(None)` when the
    /// column names a table of the scope that is not a logical table's key.
    fn resolve_key_in(
        &self,
        scope: usize,
        qualifier: Option<&Ident>,
        column: &Ident,
    ) -> Result<Option<Option<usize>>, RouteError> {
        // The logical table of a reference whose shard key the column is.
        let key_of = |t: &TableRef<'a>| {
            t.kind
                .rule()
                .filter(|rule| key_column(rule).eq_ignore_ascii_case(&column.value))
        };
        let here = |t: &(usize, &TableRef<'a>)| t.1.in_scope && t.1.scope == scope;
        if let Some(q) = qualifier {
            let named = self
                .tables
                .iter()
                .enumerate()
                .filter(here)
                .find(|(_, t)| match t.alias {
                    Some(alias) => alias.value.eq_ignore_ascii_case(&q.value),
                    None => t.table.value.eq_ignore_ascii_case(&q.value),
                });
            return Ok(named.map(|(index, t)| key_of(t).map(|_| index)));
        }
        let mut found: Option<(usize, &'a TableRule)> = None;
        for (index, rule) in self
            .tables
            .iter()
            .enumerate()
            .filter(here)
            .filter_map(|(index, t)| key_of(t).map(|rule| (index, rule)))
        {
            match found {
                None => found = Some((index, rule)),
                Some((_, first)) if first.kind == rule.kind && first.fleet == rule.fleet => {}
                Some((_, first)) => {
                    return Err(unsupported(format!(
                        "column {} is ambiguous between {} and {}; qualify it (t.{})",
                        column.value, first.name, rule.name, column.value
                    )))
                }
            }
        }
        Ok(found.map(|(index, _)| Some(index)))
    }
}
