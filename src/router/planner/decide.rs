//! Deciding where a SELECT/INSERT/UPDATE/DELETE runs, once it is walked.
//!
//! Every reason it has to run on some shard (a key restriction, the key
//! values of INSERT rows, a shard database it names, a hint, USE) becomes a
//! [`Constraint`], and they must all agree. When preparing, a key given as
//! a `?` marker allows any shard of its fleet: with nothing else deciding,
//! the statement is prepared on a representative shard. A read's key
//! restriction whose values span several shards, or a keyless read with
//! `/*+ SCATTER */`, is planned per shard (`multi`); a write's or locking
//! read's is refused (writes never fan out). An object INSERT that names
//! no shard is placed; a statement with no sharded table runs anywhere;
//! any other statement with no shard decided is refused (no key, no
//! guess).
//! Then the text is edited: tables qualified with the shard database, `id`
//! of object tables turned into the expression composing it.

use super::keys::KeyValue;

use sqlparser::ast::Spanned;

use super::dml::{Planner, Pred, RefKind};
use super::keys::{decode_id, key_column};
use super::multi::{check_scatter, Fanout};
use super::{any_host, apply, unsupported};
use crate::router::hints::{Hint, Hints};
use crate::router::plan::{Placement, Plan, RouteError, StatementKind};
use crate::router::text::Edits;
use crate::topology::{FleetId, TableKind, TableRule};

/// Why a statement must run on a shard (for conflict messages).
enum Why<'a> {
    Key {
        table: &'a str,
        column: &'a str,
        value: &'a str,
    },
    Database,
    Hint(Hint),
    Use,
}

/// A read's key restriction whose values span several shards.
struct Split<'a> {
    /// Index into the planner's `preds`.
    pred: usize,
    /// The table whose key it restricts.
    rule: &'a TableRule,
}

/// One reason the statement must run on one shard.
struct Constraint<'a> {
    fleet: FleetId,
    shard: u32,
    why: Why<'a>,
}

impl<'a> Planner<'a> {
    /// Decides the target and produces the plan.
    pub(super) fn finish(
        mut self,
        kind: StatementKind,
        mut edits: Edits,
        hints: &Hints,
        placement: &mut dyn Placement,
    ) -> Result<Plan, RouteError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        let env = self.env;
        let scatter = hints.scatter();
        if scatter {
            check_scatter(kind, hints)?;
        }
        let mut constraints: Vec<Constraint<'a>> = Vec::new();
        // Fleets of keys given only as `?` markers (when preparing).
        let mut marker_fleets: Vec<FleetId> = Vec::new();
        // Read restrictions whose values span several shards.
        let mut splits: Vec<Split<'a>> = Vec::new();
        self.key_constraints(
            kind,
            &mut edits,
            &mut constraints,
            &mut marker_fleets,
            &mut splits,
        )?;
        self.check_assignments()?;
        let insert_rule = self.insert_rule();
        if let Some(rule) = self.insert_key_rule() {
            constraints.extend(self.insert_constraint(rule, &mut edits, &mut marker_fleets)?);
        }
        // Explicit shard databases.
        for t in &self.tables {
            if let RefKind::Physical { fleet, shard } = t.kind {
                constraints.push(Constraint {
                    fleet,
                    shard,
                    why: Why::Database,
                });
            }
        }
        self.hint_constraints(hints, &mut constraints)?;
        // USE: applies to unqualified tables of the current database's fleet.
        if let Some((fleet, shard)) = env.ctx.current_db {
            let applies = self.tables.iter().any(|t| match t.kind {
                RefKind::Plain => true,
                RefKind::Logical(rule) => rule.fleet == fleet,
                _ => false,
            });
            if applies {
                constraints.push(Constraint {
                    fleet,
                    shard,
                    why: Why::Use,
                });
            }
        }
        if let Some(split) = splits.first() {
            return self.split_read(&splits, split, &constraints, edits);
        }
        let mut target = self.agreed_target(&constraints)?;
        if let (None, Some(&fleet)) = (target, marker_fleets.first()) {
            target = Some((fleet, env.representative(fleet)?));
        }
        // An explicit scatter: only when nothing else decides.
        if scatter && target.is_none() {
            if let Some(rule) = self.tables.iter().find_map(|t| t.kind.rule()) {
                return self.multi_shard(Fanout::Scatter(rule), edits);
            }
        }

        // Placement of an object INSERT that names no shard.
        let mut compose_insert_id = None;
        if let Some(rule) = insert_rule {
            if let TableKind::Object { type_id } = rule.kind {
                compose_insert_id = Some(type_id);
                if target.is_none() {
                    target = Some((rule.fleet, self.place(rule, placement)?));
                }
            }
            if self.insert_keys.mint.is_some() && target.is_none() {
                target = Some((rule.fleet, self.place(rule, placement)?));
            }
        }

        let Some((fleet, shard)) = target else {
            // Nothing decided: fine only if no sharded table is involved.
            let logical = insert_rule.or_else(|| self.tables.iter().find_map(|t| t.kind.rule()));
            if let Some(rule) = logical {
                let expected = if kind == StatementKind::SchemaChange {
                    super::ddl::expected(&env.database_pattern(rule.fleet), &rule.name)
                } else {
                    self.expected(rule)
                };
                return Err(RouteError::NoShardKey {
                    table: rule.name.clone(),
                    expected,
                });
            }
            if kind == StatementKind::SchemaChange {
                return Err(unsupported(
                    "a schema change that names no shard database; name one (dbNNNNN.table) or USE it",
                ));
            }
            return any_host(env.src.original, edits);
        };

        // Every logical table must live on the target's fleet.
        for rule in self.tables.iter().filter_map(|t| t.kind.rule()) {
            env.check_fleet(rule, fleet, shard, |db| {
                format!("the statement goes to {db}")
            })?;
        }
        if kind != StatementKind::SchemaChange {
            self.check_located(&constraints)?;
        }

        self.rewrite(fleet, shard, &mut edits)?;
        self.mint_id(fleet, shard, &mut edits)?;
        let sql = apply(edits, env.src.original)?;
        env.shard_plan(fleet, shard, sql, kind, compose_insert_id)
    }

    /// The shards the statement's `key = literal` and `key IN (literals)`
    /// restrictions select; IDs of object tables become `local_id = L`.
    /// A key given only as `?` markers adds its fleet to `marker_fleets`.
    /// A read's restriction whose values span several shards is left as
    /// it is and goes to `splits` (a multi-shard read); a write's or a
    /// locking read's is refused.
    fn key_constraints(
        &self,
        kind: StatementKind,
        edits: &mut Edits,
        constraints: &mut Vec<Constraint<'a>>,
        marker_fleets: &mut Vec<FleetId>,
        splits: &mut Vec<Split<'a>>,
    ) -> Result<(), RouteError> {
        let env = self.env;
        for (index, pred) in self.preds.iter().enumerate() {
            let Some(rule) = self.resolve_key(pred.scope, pred.qualifier, pred.column)? else {
                continue;
            };
            let mut first: Option<(u32, KeyValue<'_>)> = None;
            let mut spread = None;
            let mut markers = false;
            for value in pred.all_values().filter_map(|e| env.key_value(e)) {
                let Some(key) = env.key_shard(rule, value)? else {
                    markers = true;
                    continue;
                };
                match first {
                    None => first = Some((key.shard, value)),
                    Some((f, _)) if f != key.shard && spread.is_none() => {
                        spread = Some((f, key.shard))
                    }
                    Some(_) => {}
                }
            }
            if let Some((a, b)) = spread {
                let message = format!(
                    "{} spans several shards ({} and {})",
                    self.describe_pred(pred, rule),
                    env.database_name(rule.fleet, a),
                    env.database_name(rule.fleet, b)
                );
                match kind {
                    StatementKind::Write | StatementKind::SchemaChange => {
                        return Err(RouteError::CrossShard(format!(
                            "{message}; writes never fan out: send one statement per shard"
                        )))
                    }
                    StatementKind::LockingRead => {
                        return Err(RouteError::CrossShard(format!(
                            "{message}; locking reads (FOR UPDATE, FOR SHARE) never fan out: lock the rows of one shard at a time"
                        )))
                    }
                    StatementKind::Read => {
                        splits.push(Split { pred: index, rule });
                        continue;
                    }
                }
            }
            if first.is_none() && !markers {
                continue;
            }
            if matches!(rule.kind, TableKind::Object { .. }) {
                for column in pred.columns() {
                    edits.replace(env.range(column.span)?, "local_id");
                }
                for value in pred.all_values().filter_map(|e| env.key_value(e)) {
                    env.key_shard_edit(rule, value, edits)?;
                }
            }
            match first {
                Some((shard, value)) => constraints.push(Constraint {
                    fleet: rule.fleet,
                    shard,
                    why: Why::Key {
                        table: &rule.name,
                        column: &pred.column.value,
                        value: env.src.text(value.span),
                    },
                }),
                None => marker_fleets.push(rule.fleet),
            }
        }
        Ok(())
    }

    /// No key, no guess, per table: every sharded table of a DML statement
    /// must be located by a key of its own (a restriction on its key, the
    /// key values of an INSERT's rows, the placement of an object INSERT),
    /// or by an equality with the ID key of a table so located; a hint or
    /// USE locates them all, a shard database in the name the table it
    /// qualifies. Otherwise the statement would go to one table's shard
    /// and silently miss the other's rows on every other shard.
    fn check_located(&self, constraints: &[Constraint<'a>]) -> Result<(), RouteError> {
        if constraints
            .iter()
            .any(|c| matches!(c.why, Why::Hint(_) | Why::Use))
        {
            return Ok(());
        }
        let mut located = vec![false; self.tables.len()];
        if let Some(target) = self.insert_target {
            let object = matches!(
                self.tables[target].kind.rule().map(|r| &r.kind),
                Some(TableKind::Object { .. })
            );
            let keyed = !self.insert_keys.missing && !self.insert_keys.values.is_empty();
            located[target] = object || keyed || self.insert_keys.mint.is_some();
        }
        let may_locate = |restricts: &Option<std::ops::Range<usize>>, index: usize| {
            restricts.as_ref().is_none_or(|r| r.contains(&index))
        };
        for pred in &self.preds {
            if let Some(index) = self.resolve_key_ref(pred.scope, pred.qualifier, pred.column)? {
                located[index] |= may_locate(&pred.restricts, index);
            }
        }
        // `b.board_id = bo.id`: rows that join have equal IDs, so the same
        // shard (not for mod-shard keys: equal strings may hash apart).
        let mut joins = Vec::new();
        for join in &self.key_joins {
            let left = self.resolve_key_ref(join.scope, join.left.0, join.left.1)?;
            let right = self.resolve_key_ref(join.scope, join.right.0, join.right.1)?;
            if let (Some(a), Some(b)) = (left, right) {
                let by_id = |i: usize| {
                    self.tables[i].kind.rule().filter(|rule| {
                        matches!(
                            rule.kind,
                            TableKind::Object { .. } | TableKind::Mapping { .. }
                        )
                    })
                };
                if let (Some(ra), Some(rb)) = (by_id(a), by_id(b)) {
                    if ra.fleet == rb.fleet {
                        // (from, to): locating `from` locates `to`.
                        if may_locate(&join.restricts, b) {
                            joins.push((a, b));
                        }
                        if may_locate(&join.restricts, a) {
                            joins.push((b, a));
                        }
                    }
                }
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for &(from, to) in &joins {
                if located[from] && !located[to] {
                    located[to] = true;
                    changed = true;
                }
            }
        }
        for (index, t) in self.tables.iter().enumerate() {
            let Some(rule) = t.kind.rule() else {
                continue;
            };
            if located[index] || !(t.in_scope || self.insert_target == Some(index)) {
                continue;
            }
            let env = self.env;
            let pattern = env.database_pattern(rule.fleet);
            let name = t.alias.unwrap_or(t.table).value.as_str();
            let own = match &rule.kind {
                TableKind::Object { .. } => format!("{name}.id = <64-bit id>"),
                TableKind::Mapping { from_column } => format!("{name}.{from_column} = <id>"),
                TableKind::ModShard { key_column } => format!("{name}.{key_column} = <key>"),
            };
            let goes = constraints.first().map_or_else(String::new, |c| {
                format!(
                    " (the statement goes to {} by {}, where a join or subquery sees only that shard's {} rows)",
                    env.database_name(c.fleet, c.shard),
                    self.describe(&c.why, c.fleet, c.shard),
                    rule.name
                )
            });
            return Err(RouteError::NoShardKey {
                table: rule.name.clone(),
                expected: format!(
                    "a key of its own ({own}){goes}; to read or write one shard's {table} rows, \
                     name its database ({pattern}.{table}), a /*+ SHARD(n) */ or /*+ COLOCATE(id) */ hint, or USE {pattern}",
                    table = rule.name
                ),
            });
        }
        Ok(())
    }

    /// `the IN list on pins.id`, for messages.
    pub(super) fn describe_pred(&self, pred: &Pred<'_>, rule: &TableRule) -> String {
        let what = if pred.or_rest.is_empty() {
            "the IN list on"
        } else {
            "the OR of restrictions on"
        };
        format!("{what} {}.{}", rule.name, pred.column.value)
    }

    /// An UPDATE must not move a row to another shard.
    fn check_assignments(&self) -> Result<(), RouteError> {
        for &(qualifier, column) in &self.assigned {
            if let Some(rule) = self.resolve_key(0, qualifier, column)? {
                return Err(unsupported(match rule.kind {
                    TableKind::Object { .. } => format!(
                        "UPDATE of {}.id: ids are composed from the shard and local_id and never change",
                        rule.name
                    ),
                    _ => format!(
                        "UPDATE of {}.{}: the row's shard depends on it; delete the row and insert it again",
                        rule.name, column.value
                    ),
                }));
            }
        }
        Ok(())
    }

    /// The shard of the INSERT rows of a mapping or mod-shard table, when
    /// every row gives its key as a literal (or a `?` marker, when
    /// preparing; rows with markers only add the fleet to `marker_fleets`);
    /// rows on different shards are refused.
    fn insert_constraint(
        &self,
        rule: &'a TableRule,
        edits: &mut Edits,
        marker_fleets: &mut Vec<FleetId>,
    ) -> Result<Option<Constraint<'a>>, RouteError> {
        let env = self.env;
        let mut first: Option<(u32, KeyValue<'_>)> = None;
        let mut markers = false;
        for &value in &self.insert_keys.values {
            let Some(s) = env.key_shard_edit(rule, value, edits)? else {
                markers = true;
                continue;
            };
            match first {
                None => first = Some((s, value)),
                Some((f, fv)) if f != s => {
                    return Err(RouteError::CrossShard(format!(
                        "INSERT rows of {} are on different shards: {} = {} is on {}, {} = {} on {}; writes never scatter",
                        rule.name,
                        key_column(rule),
                        env.src.text(fv.span),
                        env.database_name(rule.fleet, f),
                        key_column(rule),
                        env.src.text(value.span),
                        env.database_name(rule.fleet, s)
                    )))
                }
                Some(_) => {}
            }
        }
        if self.insert_keys.missing {
            return Ok(None);
        }
        Ok(match first {
            Some((shard, value)) => Some(Constraint {
                fleet: rule.fleet,
                shard,
                why: Why::Key {
                    table: &rule.name,
                    column: key_column(rule),
                    value: env.src.text(value.span),
                },
            }),
            None => {
                if markers {
                    marker_fleets.push(rule.fleet);
                }
                None
            }
        })
    }

    /// SHARD(n) and COLOCATE(id) hints, on the fleet of the statement's
    /// logical tables (else of the shard databases it names).
    fn hint_constraints(
        &self,
        hints: &Hints,
        constraints: &mut Vec<Constraint<'a>>,
    ) -> Result<(), RouteError> {
        let home = self
            .tables
            .iter()
            .find_map(|t| t.kind.rule().map(|rule| rule.fleet));
        let hint_fleet = home
            .or_else(|| {
                self.tables.iter().find_map(|t| match t.kind {
                    RefKind::Physical { fleet, .. } => Some(fleet),
                    _ => None,
                })
            })
            .or_else(|| {
                // Tables of the USE database that the config does not name.
                let plain = self.tables.iter().any(|t| matches!(t.kind, RefKind::Plain));
                self.env
                    .ctx
                    .current_db
                    .map(|(fleet, _)| fleet)
                    .or(self.plain_fleet)
                    .filter(|_| plain)
            });
        let Some(fleet_id) = hint_fleet else {
            return Ok(());
        };
        let fleet = self.env.fleet(fleet_id)?;
        for hint in &hints.hints {
            let shard = match *hint {
                Hint::Shard(n) => {
                    if n >= fleet.shard_count {
                        return Err(RouteError::BadHint {
                            hint: format!("SHARD({n})"),
                            reason: format!(
                                "fleet {} has shards 0-{}",
                                fleet.name,
                                fleet.shard_count.saturating_sub(1)
                            ),
                        });
                    }
                    n
                }
                Hint::Colocate(raw) => {
                    decode_id(raw, fleet)
                        .map_err(|reason| RouteError::BadId {
                            id: raw.to_string(),
                            reason,
                        })?
                        .shard
                }
                Hint::Scatter => continue,
            };
            constraints.push(Constraint {
                fleet: fleet_id,
                shard,
                why: Why::Hint(hint.clone()),
            });
        }
        Ok(())
    }

    /// The shard every constraint names, if any; conflicting ones are
    /// refused.
    fn agreed_target(
        &self,
        constraints: &[Constraint<'a>],
    ) -> Result<Option<(FleetId, u32)>, RouteError> {
        let Some((first, others)) = constraints.split_first() else {
            return Ok(None);
        };
        let env = self.env;
        for other in others {
            if (other.fleet, other.shard) != (first.fleet, first.shard) {
                return Err(RouteError::CrossShard(format!(
                    "{} is on {}, but {} is on {}",
                    self.describe(&first.why, first.fleet, first.shard),
                    env.database_name(first.fleet, first.shard),
                    self.describe(&other.why, other.fleet, other.shard),
                    env.database_name(other.fleet, other.shard)
                )));
            }
        }
        Ok(Some((first.fleet, first.shard)))
    }

    /// A read whose key restriction spans several shards: one part per
    /// shard, if nothing else pins the statement to one shard.
    fn split_read(
        &self,
        splits: &[Split<'a>],
        split: &Split<'a>,
        constraints: &[Constraint<'a>],
        edits: Edits,
    ) -> Result<Plan, RouteError> {
        let env = self.env;
        let pred = &self.preds[split.pred];
        if splits.len() > 1 {
            return Err(unsupported(format!(
                "several key restrictions whose values span shards ({} and another); keep one IN list",
                self.describe_pred(pred, split.rule)
            )));
        }
        if let Some(other) = constraints.first() {
            return Err(RouteError::CrossShard(format!(
                "{} spans several shards, but {} is on {}",
                self.describe_pred(pred, split.rule),
                self.describe(&other.why, other.fleet, other.shard),
                env.database_name(other.fleet, other.shard)
            )));
        }
        self.multi_shard(
            Fanout::Split {
                pred,
                rule: split.rule,
            },
            edits,
        )
    }

    /// The shard a new object of `rule` goes to: one of its fleet's open
    /// shards, chosen by `placement`.
    fn place(&self, rule: &TableRule, placement: &mut dyn Placement) -> Result<u32, RouteError> {
        let fleet = self.env.fleet(rule.fleet)?;
        let Some((first, last)) = fleet.open else {
            return Err(RouteError::NoShardKey {
                table: rule.name.clone(),
                expected: format!(
                    "a /*+ SHARD(n) */ or /*+ COLOCATE(id) */ hint: fleet {} has no open shards to place new objects in",
                    fleet.name
                ),
            });
        };
        let last = last.min(fleet.shard_count.saturating_sub(1));
        Ok(placement.choose(first, last).clamp(first, last))
    }

    /// For an INSERT whose server mints the `id` (`insert_keys.mint`): the
    /// `id` column and, in every row, the SQL minting it on `shard`.
    fn mint_id(&self, fleet: FleetId, shard: u32, edits: &mut Edits) -> Result<(), RouteError> {
        let Some(sites) = &self.insert_keys.mint else {
            return Ok(());
        };
        let env = self.env;
        let layout = &env.fleet(fleet)?.layout;
        let database = env.database_name(fleet, shard);
        let mint = layout
            .mint_sql(shard, &database, Some(env.ctx.last_insert_id))
            .ok_or_else(|| unsupported("the fleet's ID layout mints no IDs"))?;
        let column = env.range(sites.column)?.start;
        if sites.rows.is_empty() {
            edits.insert(column, format!("`id` = {mint}, "));
            return Ok(());
        }
        edits.insert(column, "`id`, ");
        for &row in &sites.rows {
            edits.insert(env.range(row)?.end, format!("{mint}, "));
        }
        Ok(())
    }

    /// Edits the text for the target shard: unqualified tables get the
    /// shard database, `id` of object tables the expression composing it,
    /// `*` over an object table its columns (`star`).
    pub(super) fn rewrite(
        &self,
        fleet: FleetId,
        shard: u32,
        edits: &mut Edits,
    ) -> Result<(), RouteError> {
        let env = self.env;
        let prefix = format!("{}.", env.database_name(fleet, shard));
        for t in &self.tables {
            if matches!(t.kind, RefKind::Logical(_) | RefKind::Plain) {
                edits.insert(env.range(t.table.span)?.start, prefix.clone());
            }
        }
        self.expand_wildcards(shard, edits)?;
        let mut rewritten = Vec::new();
        for r in &self.id_refs {
            let Some(rule) = self.resolve_key(r.scope, r.qualifier, r.column)? else {
                continue;
            };
            let TableKind::Object { type_id } = rule.kind else {
                continue;
            };
            let column = env.range(r.column.span)?;
            let (start, qualifier) = match r.qualifier {
                Some(q) => {
                    let q = env.range(q.span)?;
                    (q.start, env.src.original_text(q).unwrap_or_default())
                }
                None => (column.start, ""),
            };
            let dot = if qualifier.is_empty() { "" } else { "." };
            let mut text =
                crate::id::compose_sql(shard, type_id, &format!("{qualifier}{dot}local_id"));
            if r.select_item {
                text.push_str(" AS ");
                text.push_str(env.src.original_text(column.clone()).unwrap_or("id"));
            }
            rewritten.push(start);
            edits.replace(start..column.end, text);
        }
        for item in &self.unnamed_items {
            let Ok(range) = env.range(item.span()) else {
                continue;
            };
            let range = close_parentheses(env.src.sql, range);
            if rewritten.iter().any(|at| range.contains(at)) {
                let name = env.src.original_text(range.clone()).unwrap_or_default();
                edits.insert(range.end, format!(" AS `{}`", name.replace('`', "``")));
            }
        }
        Ok(())
    }

    /// What would have routed a statement on `rule`.
    fn expected(&self, rule: &TableRule) -> String {
        let rest = format!(
            "a /*+ SHARD(n) */ or /*+ COLOCATE(id) */ hint, or USE {}",
            self.env.database_pattern(rule.fleet)
        );
        let insert = self.insert_target.is_some();
        match &rule.kind {
            TableKind::Object { .. } => format!("WHERE id = <64-bit id>, {rest}"),
            TableKind::Mapping { from_column } if insert => {
                format!("a literal {from_column} ID in every row, {rest}")
            }
            TableKind::Mapping { from_column }
                if self
                    .env
                    .topo
                    .fleets
                    .get(rule.fleet)
                    .is_some_and(|f| f.mints_ids()) =>
            {
                format!(
                    "WHERE {from_column} = <id>, {rest}; a range of {from_column}s (such as {from_column} BETWEEN <id at t1> AND <id at t2>) \
                     spans every shard of a time-sortable ID layout: add /*+ SCATTER */ to read them all or /*+ SHARD(n) */ for one"
                )
            }
            TableKind::Mapping { from_column } => format!("WHERE {from_column} = <id>, {rest}"),
            TableKind::ModShard { key_column } if insert => {
                format!("a literal {key_column} value in every row, {rest}")
            }
            TableKind::ModShard { key_column } => format!("WHERE {key_column} = <key>, {rest}"),
        }
    }

    /// A constraint's reason, for CrossShard messages.
    fn describe(&self, why: &Why<'_>, fleet: FleetId, shard: u32) -> String {
        match why {
            Why::Key {
                table,
                column,
                value,
            } => format!("{table}.{column} = {value}"),
            Why::Database => format!("table in {}", self.env.database_name(fleet, shard)),
            Why::Hint(Hint::Shard(n)) => format!("hint SHARD({n})"),
            Why::Hint(Hint::Colocate(id)) => format!("hint COLOCATE({id})"),
            Why::Hint(Hint::Scatter) => "hint SCATTER".to_owned(),
            Why::Use => format!("USE {}", self.env.database_name(fleet, shard)),
        }
    }
}

/// Extends an expression's byte range over closing parentheses its span
/// leaves out (sqlparser's span of a function call ends at its last
/// argument).
fn close_parentheses(sql: &str, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let text = sql.get(range.clone()).unwrap_or_default();
    let mut open = text
        .matches('(')
        .count()
        .saturating_sub(text.matches(')').count());
    let mut end = range.end;
    let bytes = sql.as_bytes();
    while open > 0 && end < bytes.len() {
        match bytes[end] {
            b')' => open -= 1,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => break,
        }
        end += 1;
    }
    range.start..end
}
