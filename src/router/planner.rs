//! [`route`]: one statement, the topology and the session context in, a
//! [`Plan`] out.
//!
//! The statement is tokenized once; the tokens give the hints (comments) and
//! then go to sqlparser, whose AST says what the statement touches. The text
//! sent to a backend is the client's text with a few byte ranges edited
//! (table names qualified, `id` turned into `local_id` or the composing
//! expression, our hints removed); sqlparser's re-serialisation is never
//! used, as it is not faithful to the original.

use std::fmt;
use std::ops::Range;

use sqlparser::ast::{
    Assignment, AssignmentTarget, Expr, FromTable, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentClause, FunctionArguments, GroupByExpr, Ident, Insert, JoinConstraint,
    JoinOperator, LimitClause, ObjectName, ObjectNamePart, OnInsert, OrderByKind, Query,
    SelectItem, SetExpr, ShowCreateObject, ShowStatementIn, ShowStatementOptions, Statement,
    TableFactor, TableObject, TableWithJoins, UpdateTableFromKind, Use, Value, ValueWithSpan,
    WindowType,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan, Tokenizer};

use super::hints::{self, Hint, Hints};
use super::plan::{
    Placement, Plan, RouteContext, RouteError, SessionAction, ShardQuery, StatementKind, Target,
};
use super::set;
use super::text::{Edits, Source};
use crate::id::{mod_shard, ObjectId};
use crate::topology::{Fleet, FleetId, TableKind, TableRule, Topology};

/// Routes one statement.
///
/// `sql` is the statement as the client sent it (COM_QUERY text), `topo` the
/// routing table in force, `ctx` what the session has selected with `USE`,
/// and `placement` chooses the shard of an object INSERT that names none.
/// Pure: no I/O, no clock; the only randomness is `placement`'s.
///
/// Never panics on any input: what cannot be routed becomes
/// [`Plan::Reject`] with the error the client should see.
pub fn route(
    sql: &str,
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
) -> Plan {
    match route_inner(sql, topo, ctx, placement) {
        Ok(plan) => plan,
        Err(error) => Plan::Reject(error),
    }
}

/// Schemas every MySQL server has; tables in them may be read on any host.
const SYSTEM_SCHEMAS: [&str; 4] = ["information_schema", "mysql", "performance_schema", "sys"];

fn is_system_schema(name: &str) -> bool {
    SYSTEM_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

fn unsupported(what: impl Into<String>) -> RouteError {
    RouteError::Unsupported(what.into())
}

fn syntax(error: impl fmt::Display) -> RouteError {
    let message = error.to_string();
    let message = message
        .strip_prefix("sql parser error: ")
        .unwrap_or(&message)
        .to_owned();
    RouteError::Syntax(message)
}

const SCHEMA_CHANGE: &str =
    "schema changes are not routed; they go through `shardgate fleet init` (every shard database at once)";

/// The first significant token of the statement, for dispatch and messages.
fn first_token(tokens: &[TokenWithSpan]) -> Option<&Token> {
    tokens
        .iter()
        .map(|t| &t.token)
        .find(|t| !matches!(t, Token::Whitespace(_)))
}

/// Removes a trailing `LOCK IN SHARE MODE` (which sqlparser does not parse)
/// from the tokens; true if there was one.
fn strip_lock_in_share_mode(tokens: &mut Vec<TokenWithSpan>) -> bool {
    let mut significant = tokens.iter().enumerate().rev().filter(|(_, t)| {
        !matches!(
            t.token,
            Token::Whitespace(_) | Token::EOF | Token::SemiColon
        )
    });
    let mut lock_at = None;
    for word in ["MODE", "SHARE", "IN", "LOCK"] {
        match significant.next() {
            Some((i, t)) if matches!(&t.token, Token::Word(w) if w.value.eq_ignore_ascii_case(word)) => {
                lock_at = Some(i)
            }
            _ => return false,
        }
    }
    match lock_at {
        Some(i) => {
            tokens.truncate(i);
            true
        }
        None => false,
    }
}

/// Most binary operators (or UNIONs) one expression may chain. sqlparser
/// builds such chains left-deep and recurses over them; tens of thousands
/// overflow a 2 MiB thread stack, which would take the whole proxy down.
const MAX_CHAIN: u32 = 16_000;

/// Whether some expression chains more than [`MAX_CHAIN`] operators: counts
/// operators per comma-separated segment of each parenthesis level, so long
/// flat lists (bulk INSERT rows, IN lists) are not affected.
fn chain_too_long(tokens: &[TokenWithSpan]) -> bool {
    let mut counts: Vec<u32> = vec![0];
    for t in tokens {
        let operator = match &t.token {
            Token::LParen => {
                counts.push(0);
                continue;
            }
            Token::RParen => {
                if counts.len() > 1 {
                    counts.pop();
                }
                continue;
            }
            Token::Comma | Token::SemiColon => {
                if let Some(c) = counts.last_mut() {
                    *c = 0;
                }
                continue;
            }
            Token::Word(w) => matches!(
                w.keyword,
                Keyword::AND
                    | Keyword::OR
                    | Keyword::XOR
                    | Keyword::DIV
                    | Keyword::MOD
                    | Keyword::LIKE
                    | Keyword::REGEXP
                    | Keyword::RLIKE
                    | Keyword::UNION
                    | Keyword::EXCEPT
                    | Keyword::INTERSECT
            ),
            Token::Whitespace(_)
            | Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::Period
            | Token::EOF => false,
            _ => true,
        };
        if operator {
            if let Some(c) = counts.last_mut() {
                *c += 1;
                if *c > MAX_CHAIN {
                    return true;
                }
            }
        }
    }
    false
}

fn route_inner(
    sql: &str,
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
) -> Result<Plan, RouteError> {
    let dialect = MySqlDialect {};
    let mut tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(syntax)?;
    let src = Source::new(sql);
    let mut edits = Edits::default();
    let hints = hints::scan(&tokens, &src, &mut edits)?;
    let first = first_token(&tokens);
    if first.is_none_or(|t| *t == Token::SemiColon)
        && tokens
            .iter()
            .all(|t| matches!(t.token, Token::Whitespace(_) | Token::SemiColon))
    {
        return Err(RouteError::Syntax("Query was empty".to_owned()));
    }
    let keyword = match first {
        Some(Token::Word(w)) => w.keyword,
        _ => Keyword::NoKeyword,
    };
    // Names the statement in messages about ones shardgate does not handle.
    let first_span = tokens
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)))
        .map(|t| t.span);
    if keyword == Keyword::SET {
        return set::plan(&tokens, sql);
    }
    if chain_too_long(&tokens) {
        return Err(unsupported(format!(
            "an expression chaining more than {MAX_CHAIN} operators; split the statement"
        )));
    }
    let show = keyword == Keyword::SHOW;
    let lock_share = strip_lock_in_share_mode(&mut tokens);
    // SHOW TABLES needs the position of its TABLES keyword; a SHOW that
    // sqlparser does not know goes to the shard database it names, if any.
    let (tables_keyword_end, show_db) = if show {
        let end = tokens
            .iter()
            .find(|t| matches!(&t.token, Token::Word(w) if w.keyword == Keyword::TABLES || w.value.eq_ignore_ascii_case("STATUS")))
            .and_then(|t| src.offset(t.span.end));
        let db = tokens.iter().find_map(|t| match &t.token {
            Token::Word(w) => topo.parse_database(&w.value),
            _ => None,
        });
        (end, db)
    } else {
        (None, None)
    };
    let parsed = Parser::new(&dialect)
        .with_tokens_with_locations(tokens)
        .parse_statements();
    let statements = match parsed {
        Ok(statements) => statements,
        // sqlparser does not know every SHOW; they touch no table data.
        Err(_) if show => return show_fallback(topo, sql, show_db, edits),
        Err(error) => return Err(syntax(error)),
    };
    let statement = match statements.as_slice() {
        [] => return Err(RouteError::Syntax("Query was empty".to_owned())),
        [one] => one,
        _ => {
            return Err(unsupported(
                "several statements in one query; send them one at a time",
            ))
        }
    };
    let env = Env {
        topo,
        ctx,
        src: &src,
    };
    match statement {
        Statement::Query(query) => {
            if let Some(action) = special_select(query) {
                return Ok(Plan::Session(action));
            }
            let kind = if lock_share || !query.locks.is_empty() {
                StatementKind::LockingRead
            } else {
                StatementKind::Read
            };
            let mut planner = Planner::new(env);
            planner.walk_statement(statement);
            planner.finish(kind, edits, &hints, placement)
        }
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
            let mut planner = Planner::new(env);
            planner.walk_statement(statement);
            planner.finish(StatementKind::Write, edits, &hints, placement)
        }
        Statement::Explain { statement, .. } => {
            let mut planner = Planner::new(env);
            if !planner.walk_statement(statement) {
                return Err(unsupported("EXPLAIN of this statement"));
            }
            planner.finish(StatementKind::Read, edits, &hints, placement)
        }
        Statement::ExplainTable { table_name, .. } => env.table_statement(table_name, None, edits),
        Statement::StartTransaction { .. } => Ok(Plan::Session(SessionAction::Begin {
            sql: sql.to_owned(),
        })),
        Statement::Commit { chain: false, .. } => Ok(Plan::Session(SessionAction::Commit)),
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => Ok(Plan::Session(SessionAction::Rollback)),
        Statement::Commit { .. } | Statement::Rollback { chain: true, .. } => {
            Err(unsupported("COMMIT/ROLLBACK AND CHAIN"))
        }
        Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. } => Err(unsupported("savepoints (not yet)")),
        Statement::Use(target) => env.use_database(target),
        Statement::ShowTables { show_options, .. } => {
            env.show_in_database(show_options, tables_keyword_end, edits)
        }
        Statement::ShowColumns { show_options, .. } => match &show_options.show_in {
            Some(ShowStatementIn {
                parent_name: Some(name),
                ..
            }) => env.table_statement(name, None, edits),
            _ => Err(RouteError::Syntax(
                "SHOW COLUMNS needs FROM <table>".to_owned(),
            )),
        },
        Statement::ShowCreate {
            obj_type: ShowCreateObject::Table | ShowCreateObject::View,
            obj_name,
        } => env.table_statement(obj_name, None, edits),
        Statement::ShowVariable { variable } => {
            env.show_other(variable, tables_keyword_end, show_db, edits)
        }
        Statement::ShowFunctions { .. }
        | Statement::ShowStatus { .. }
        | Statement::ShowVariables { .. }
        | Statement::ShowCreate { .. }
        | Statement::ShowCatalogs { .. }
        | Statement::ShowDatabases { .. }
        | Statement::ShowProcessList { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowCharset(_)
        | Statement::ShowObjects(_)
        | Statement::ShowViews { .. }
        | Statement::ShowCollation { .. } => any_host(sql, edits),
        Statement::CreateTable { .. }
        | Statement::CreateVirtualTable { .. }
        | Statement::CreateIndex { .. }
        | Statement::CreateView { .. }
        | Statement::CreateSchema { .. }
        | Statement::CreateDatabase { .. }
        | Statement::CreateFunction { .. }
        | Statement::CreateProcedure { .. }
        | Statement::CreateTrigger { .. }
        | Statement::CreateSequence { .. }
        | Statement::AlterTable { .. }
        | Statement::AlterIndex { .. }
        | Statement::AlterView { .. }
        | Statement::AlterSchema { .. }
        | Statement::Drop { .. }
        | Statement::DropFunction { .. }
        | Statement::DropProcedure { .. }
        | Statement::DropTrigger { .. }
        | Statement::Truncate { .. }
        | Statement::RenameTable { .. } => Err(unsupported(SCHEMA_CHANGE)),
        _ => {
            let word = first_span.map(|span| src.text(span)).unwrap_or_default();
            Err(unsupported(format!(
                "{} statements",
                word.to_ascii_uppercase()
            )))
        }
    }
}

/// A SHOW shardgate does not understand: on the shard database it names,
/// else anywhere; text unchanged but for hints.
fn show_fallback(
    topo: &Topology,
    sql: &str,
    db: Option<(FleetId, u32)>,
    edits: Edits,
) -> Result<Plan, RouteError> {
    let Some((fleet, shard)) = db else {
        return any_host(sql, edits);
    };
    let host = topo
        .master_of(fleet, shard)
        .ok_or_else(|| unsupported(format!("no host serves shard {shard} of fleet {fleet}")))?;
    Ok(Plan::Shard(ShardQuery {
        target: Target { fleet, shard, host },
        sql: apply(edits, sql)?,
        kind: StatementKind::Read,
        compose_insert_id: None,
    }))
}

/// A table-less statement: run anywhere, text unchanged but for hints.
fn any_host(sql: &str, edits: Edits) -> Result<Plan, RouteError> {
    Ok(Plan::AnyHost {
        sql: apply(edits, sql)?,
    })
}

fn apply(edits: Edits, sql: &str) -> Result<String, RouteError> {
    edits
        .apply(sql)
        .map_err(|_| unsupported("shardgate could not rewrite this statement (overlapping edits)"))
}

/// `SELECT DATABASE()`, `SELECT SCHEMA()`, `SELECT LAST_INSERT_ID()`,
/// answered by the proxy.
fn special_select(query: &Query) -> Option<SessionAction> {
    if query.with.is_some() || query.order_by.is_some() || query.limit_clause.is_some() {
        return None;
    }
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    if !select.from.is_empty()
        || select.selection.is_some()
        || select.having.is_some()
        || select.into.is_some()
    {
        return None;
    }
    let [item] = select.projection.as_slice() else {
        return None;
    };
    let (SelectItem::UnnamedExpr(Expr::Function(function))
    | SelectItem::ExprWithAlias {
        expr: Expr::Function(function),
        ..
    }) = item
    else {
        return None;
    };
    let [ObjectNamePart::Identifier(name)] = function.name.0.as_slice() else {
        return None;
    };
    let no_args = match &function.args {
        FunctionArguments::None => true,
        FunctionArguments::List(list) => list.args.is_empty(),
        FunctionArguments::Subquery(_) => false,
    };
    if !no_args || function.over.is_some() {
        return None;
    }
    let name = name.value.as_str();
    if name.eq_ignore_ascii_case("DATABASE") || name.eq_ignore_ascii_case("SCHEMA") {
        Some(SessionAction::SelectDatabase)
    } else if name.eq_ignore_ascii_case("LAST_INSERT_ID") {
        Some(SessionAction::SelectLastInsertId)
    } else {
        None
    }
}

/// What every part of the planning reads.
#[derive(Clone, Copy)]
struct Env<'a> {
    topo: &'a Topology,
    ctx: &'a RouteContext,
    src: &'a Source<'a>,
}

impl<'a> Env<'a> {
    fn fleet(&self, fleet: FleetId) -> Result<&'a Fleet, RouteError> {
        self.topo
            .fleets
            .get(fleet)
            .ok_or_else(|| unsupported(format!("fleet {fleet} is not in the topology")))
    }

    fn range(&self, span: Span) -> Result<Range<usize>, RouteError> {
        self.src.range(span).ok_or_else(|| {
            unsupported("shardgate could not locate a part of the statement in its text")
        })
    }

    /// A target for a shard, with its master.
    fn target(&self, fleet: FleetId, shard: u32) -> Result<Target, RouteError> {
        let host = self.topo.master_of(fleet, shard).ok_or_else(|| {
            unsupported(format!(
                "no host serves shard {shard} of fleet {}",
                self.fleet(fleet).map(|f| f.name.as_str()).unwrap_or("?")
            ))
        })?;
        Ok(Target { fleet, shard, host })
    }

    fn database_name(&self, fleet: FleetId, shard: u32) -> String {
        self.topo
            .fleets
            .get(fleet)
            .map(|f| f.database_name(shard))
            .unwrap_or_default()
    }

    /// `dbNNNNN` for messages.
    fn database_pattern(&self, fleet: FleetId) -> String {
        match self.topo.fleets.get(fleet) {
            Some(f) => format!(
                "{}{}{}",
                f.database.prefix,
                "N".repeat(f.database.width.max(1)),
                f.database.suffix
            ),
            None => "dbNNNNN".to_owned(),
        }
    }

    fn shard_plan(
        &self,
        fleet: FleetId,
        shard: u32,
        sql: String,
        kind: StatementKind,
        compose_insert_id: Option<u16>,
    ) -> Result<Plan, RouteError> {
        Ok(Plan::Shard(ShardQuery {
            target: self.target(fleet, shard)?,
            sql,
            kind,
            compose_insert_id,
        }))
    }

    /// `USE db`.
    fn use_database(&self, target: &Use) -> Result<Plan, RouteError> {
        let (Use::Object(name) | Use::Database(name) | Use::Schema(name)) = target else {
            return Err(unsupported("this form of USE; write USE dbNNNNN"));
        };
        let text = object_name_text(name);
        match name.0.as_slice() {
            [ObjectNamePart::Identifier(db)] => match self.topo.parse_database(&db.value) {
                Some((fleet, shard)) => Ok(Plan::Session(SessionAction::Use { fleet, shard })),
                None => Err(RouteError::UnknownDatabase(db.value.clone())),
            },
            _ => Err(RouteError::UnknownDatabase(text)),
        }
    }

    /// A statement about one table's definition (`SHOW COLUMNS FROM t`,
    /// `SHOW CREATE TABLE t`, `DESCRIBE t`, `SHOW INDEX FROM t`): the table
    /// is the same in every shard database, so it needs a database, from
    /// the statement or from USE.
    fn table_statement(
        &self,
        name: &ObjectName,
        db: Option<&Ident>,
        mut edits: Edits,
    ) -> Result<Plan, RouteError> {
        let parts = idents(name)?;
        let (db, table) = match (parts.as_slice(), db) {
            ([table], db) => (db, *table),
            ([db, table], None) => (Some(*db), *table),
            _ => {
                return Err(unsupported(format!(
                    "table name {}",
                    object_name_text(name)
                )))
            }
        };
        let sql = self.src.sql;
        if let Some(db) = db {
            if is_system_schema(&db.value) {
                return any_host(sql, edits);
            }
            let (fleet, shard) = self
                .topo
                .parse_database(&db.value)
                .ok_or_else(|| RouteError::UnknownDatabase(db.value.clone()))?;
            return self.shard_plan(fleet, shard, apply(edits, sql)?, StatementKind::Read, None);
        }
        let rule = self.topo.table(&table.value);
        let Some((fleet, shard)) = self.ctx.current_db else {
            return Err(match rule {
                Some(rule) => RouteError::NoShardKey {
                    table: rule.name.clone(),
                    expected: format!(
                        "USE {} or a qualified name (the table is the same in every shard database)",
                        self.database_pattern(rule.fleet)
                    ),
                },
                None => RouteError::UnknownTable(table.value.clone()),
            });
        };
        if let Some(rule) = rule {
            if rule.fleet != fleet {
                return Err(RouteError::CrossShard(format!(
                    "table {} lives on fleet {}, but the current database {} is on fleet {}",
                    rule.name,
                    self.fleet(rule.fleet)?.name,
                    self.database_name(fleet, shard),
                    self.fleet(fleet)?.name
                )));
            }
        }
        let at = self.range(table.span)?.start;
        edits.insert(at, format!("{}.", self.database_name(fleet, shard)));
        self.shard_plan(fleet, shard, apply(edits, sql)?, StatementKind::Read, None)
    }

    /// `SHOW [FULL] TABLES [FROM db]` and `SHOW TABLE STATUS [FROM db]`:
    /// the named database, else the current one, else any host.
    fn show_in_database(
        &self,
        options: &ShowStatementOptions,
        keyword_end: Option<usize>,
        edits: Edits,
    ) -> Result<Plan, RouteError> {
        let db = match &options.show_in {
            Some(ShowStatementIn {
                parent_name: Some(name),
                ..
            }) => match idents(name)?.as_slice() {
                [db] => Some(*db),
                _ => return Err(unsupported("SHOW with a qualified database name")),
            },
            _ => None,
        };
        self.show_in(db, keyword_end, edits)
    }

    fn show_in(
        &self,
        db: Option<&Ident>,
        keyword_end: Option<usize>,
        mut edits: Edits,
    ) -> Result<Plan, RouteError> {
        let sql = self.src.sql;
        if let Some(db) = db {
            if is_system_schema(&db.value) {
                return any_host(sql, edits);
            }
            let (fleet, shard) = self
                .topo
                .parse_database(&db.value)
                .ok_or_else(|| RouteError::UnknownDatabase(db.value.clone()))?;
            return self.shard_plan(fleet, shard, apply(edits, sql)?, StatementKind::Read, None);
        }
        match (self.ctx.current_db, keyword_end) {
            (Some((fleet, shard)), Some(at)) => {
                edits.insert(at, format!(" FROM {}", self.database_name(fleet, shard)));
                self.shard_plan(fleet, shard, apply(edits, sql)?, StatementKind::Read, None)
            }
            _ => any_host(sql, edits),
        }
    }

    /// SHOW forms sqlparser keeps as a word list: `SHOW INDEX FROM t [FROM
    /// db]`, `SHOW TABLE STATUS [FROM db]`; anything else runs on the shard
    /// database it names, or anywhere.
    fn show_other(
        &self,
        words: &[Ident],
        keyword_end: Option<usize>,
        named_db: Option<(FleetId, u32)>,
        edits: Edits,
    ) -> Result<Plan, RouteError> {
        let is = |i: usize, w: &str| {
            words
                .get(i)
                .is_some_and(|x| x.value.eq_ignore_ascii_case(w))
        };
        let from = |i: usize| is(i, "FROM") || is(i, "IN");
        if (is(0, "INDEX") || is(0, "INDEXES") || is(0, "KEYS")) && from(1) {
            // `t`, `t FROM db` or `db.t` (the period is not kept).
            let (table, db) = match (words.get(2), words.get(3)) {
                (Some(table), _) if from(3) => (Some(table), words.get(4)),
                (Some(db), Some(table)) => (Some(table), Some(db)),
                (table, _) => (table, None),
            };
            if let Some(table) = table {
                let name = ObjectName(vec![ObjectNamePart::Identifier(table.clone())]);
                return self.table_statement(&name, db, edits);
            }
        }
        if is(0, "TABLE") && is(1, "STATUS") {
            let db = if from(2) { words.get(3) } else { None };
            return self.show_in(db, keyword_end, edits);
        }
        show_fallback(self.topo, self.src.sql, named_db, edits)
    }
}

fn idents(name: &ObjectName) -> Result<Vec<&Ident>, RouteError> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => Ok(ident),
            ObjectNamePart::Function(_) => Err(unsupported("function calls in table names")),
        })
        .collect()
}

fn object_name_text(name: &ObjectName) -> String {
    let mut out = String::new();
    for (i, part) in name.0.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        if let ObjectNamePart::Identifier(ident) = part {
            out.push_str(&ident.value);
        }
    }
    out
}

/// How a table reference of the statement is resolved.
#[derive(Clone, Copy)]
enum RefKind<'a> {
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
struct TableRef<'a> {
    table: &'a Ident,
    alias: Option<&'a Ident>,
    kind: RefKind<'a>,
    /// Whether its columns can be named in the statement (false for the
    /// table an INSERT writes to).
    in_scope: bool,
    /// The SELECT (or UPDATE/DELETE) it belongs to.
    scope: usize,
}

/// A reference to an `id` column (maybe of an object table).
struct IdRef<'a> {
    scope: usize,
    qualifier: Option<&'a Ident>,
    column: &'a Ident,
    /// An unaliased select item: gets `AS id` so the result column keeps
    /// its name.
    select_item: bool,
}

/// `col = literal` or `col IN (literals)` in a position that restricts
/// the whole statement (a top-level AND of WHERE or ON).
struct Pred<'a> {
    scope: usize,
    qualifier: Option<&'a Ident>,
    column: &'a Ident,
    /// The literal(s): one for `=`, the list for `IN`.
    values: &'a [Expr],
}

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

struct Constraint<'a> {
    fleet: FleetId,
    shard: u32,
    why: Why<'a>,
}

/// The literal values of an INSERT's shard-key column.
#[derive(Default)]
struct InsertKeys<'a> {
    values: Vec<&'a ValueWithSpan>,
    /// A row whose key is not a literal, or no key column at all.
    missing: bool,
}

/// Walks a DML statement's AST, collecting what routing needs, then decides.
struct Planner<'a> {
    env: Env<'a>,
    tables: Vec<TableRef<'a>>,
    ctes: Vec<&'a str>,
    id_refs: Vec<IdRef<'a>>,
    preds: Vec<Pred<'a>>,
    /// Columns an UPDATE assigns (a shard key must not change).
    assigned: Vec<(Option<&'a Ident>, &'a Ident)>,
    /// The parent of each scope (a SELECT, or the UPDATE/DELETE itself:
    /// scope 0); columns resolve in their scope, then outwards.
    scopes: Vec<Option<usize>>,
    /// The scope being walked.
    scope: usize,
    /// The INSERT target, as an index into `tables`.
    insert_target: Option<usize>,
    insert_keys: InsertKeys<'a>,
    error: Option<RouteError>,
}

/// `col` or `q.col` (not `@var` / `@@var`).
fn column_ref(expr: &Expr) -> Option<(Option<&Ident>, &Ident)> {
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

/// A number or string literal (what an ID or key can be written as).
fn literal(expr: &Expr) -> Option<&ValueWithSpan> {
    match expr {
        Expr::Value(v) if key_text(v).is_some() => Some(v),
        _ => None,
    }
}

fn key_text(value: &ValueWithSpan) -> Option<&str> {
    match &value.value {
        Value::Number(n, _) => Some(n.as_str()),
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.as_str()),
        _ => None,
    }
}

fn is_id(ident: &Ident) -> bool {
    ident.value.eq_ignore_ascii_case("id")
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

/// The key column of a logical table.
fn key_column(rule: &TableRule) -> &str {
    match &rule.kind {
        TableKind::Object { .. } => "id",
        TableKind::Mapping { from_column } => from_column,
        TableKind::ModShard { key_column } => key_column,
    }
}

impl<'a> Planner<'a> {
    fn new(env: Env<'a>) -> Self {
        Planner {
            env,
            tables: Vec::new(),
            ctes: Vec::new(),
            id_refs: Vec::new(),
            preds: Vec::new(),
            assigned: Vec::new(),
            scopes: vec![None],
            scope: 0,
            insert_target: None,
            insert_keys: InsertKeys::default(),
            error: None,
        }
    }

    fn fail(&mut self, error: RouteError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Records a table reference; returns its index.
    fn add_table(
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
                    None if self.env.ctx.current_db.is_some() => RefKind::Plain,
                    None => {
                        self.fail(RouteError::UnknownTable(value.to_owned()));
                        return None;
                    }
                };
                (*table, kind)
            }
            [db, table] => {
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

    /// Walks a SELECT, INSERT, UPDATE or DELETE; false for anything else.
    fn walk_statement(&mut self, statement: &'a Statement) -> bool {
        match statement {
            Statement::Query(query) => self.walk_query(query),
            Statement::Insert(insert) => self.walk_insert(insert),
            Statement::Update(update) => {
                self.walk_table_with_joins(&update.table);
                if let Some(from) = &update.from {
                    let (UpdateTableFromKind::BeforeSet(from)
                    | UpdateTableFromKind::AfterSet(from)) = from;
                    for twj in from {
                        self.walk_table_with_joins(twj);
                    }
                }
                self.walk_assignments(&update.assignments, true);
                if let Some(selection) = &update.selection {
                    self.walk_cond(selection);
                }
                for o in &update.order_by {
                    self.walk_expr(&o.expr);
                }
                if let Some(limit) = &update.limit {
                    self.walk_expr(limit);
                }
            }
            Statement::Delete(delete) => {
                let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) =
                    &delete.from;
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
                if let Some(selection) = &delete.selection {
                    self.walk_cond(selection);
                }
                for o in &delete.order_by {
                    self.walk_expr(&o.expr);
                }
                if let Some(limit) = &delete.limit {
                    self.walk_expr(limit);
                }
            }
            _ => return false,
        }
        true
    }

    fn walk_query(&mut self, query: &'a Query) {
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
                for o in exprs {
                    self.walk_expr(&o.expr);
                }
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
                for e in limit_by {
                    self.walk_expr(e);
                }
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
            SetExpr::Select(select) => {
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
                                self.id_refs.push(IdRef {
                                    scope: self.scope,
                                    qualifier,
                                    column,
                                    select_item: true,
                                })
                            }
                            _ => self.walk_expr(expr),
                        },
                        SelectItem::ExprWithAlias { expr, .. }
                        | SelectItem::ExprWithAliases { expr, .. } => self.walk_expr(expr),
                        SelectItem::QualifiedWildcard(..) | SelectItem::Wildcard(_) => {}
                    }
                }
                if let Some(selection) = &select.selection {
                    self.walk_cond(selection);
                }
                if let GroupByExpr::Expressions(exprs, _) = &select.group_by {
                    for e in exprs {
                        self.walk_expr(e);
                    }
                }
                if let Some(having) = &select.having {
                    self.walk_expr(having);
                }
                for o in &select.sort_by {
                    self.walk_expr(&o.expr);
                }
                if let Some(qualify) = &select.qualify {
                    self.walk_expr(qualify);
                }
                let inner = self.scope;
                self.scope = outer;
                return Some(inner);
            }
            SetExpr::Query(query) => self.walk_query(query),
            SetExpr::SetOperation { .. } => {
                // Long UNION chains are left-deep: walk the spine in a loop.
                let mut rights = Vec::new();
                let mut node = body;
                while let SetExpr::SetOperation { left, right, .. } = node {
                    rights.push(right.as_ref());
                    node = left;
                }
                self.walk_set_expr(node);
                for right in rights.into_iter().rev() {
                    self.walk_set_expr(right);
                }
            }
            SetExpr::Values(values) => {
                for row in &values.rows {
                    for e in &row.content {
                        self.walk_expr(e);
                    }
                }
            }
            SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
                self.fail(unsupported("a write nested in a query"))
            }
            SetExpr::Table(_) => self.fail(unsupported("TABLE statements; use SELECT")),
        }
        None
    }

    fn walk_table_with_joins(&mut self, twj: &'a TableWithJoins) {
        self.walk_table_factor(&twj.relation);
        for join in &twj.joins {
            self.walk_table_factor(&join.relation);
            if let JoinOperator::AsOf {
                match_condition, ..
            } = &join.join_operator
            {
                self.walk_expr(match_condition);
            }
            if let Some(JoinConstraint::On(on)) = join_constraint(&join.join_operator) {
                self.walk_cond(on);
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

    /// An expression whose top-level ANDs each restrict the statement.
    fn walk_cond(&mut self, expr: &'a Expr) {
        match expr {
            Expr::BinaryOp {
                op: sqlparser::ast::BinaryOperator::And,
                ..
            } => {
                // Long AND chains are left-deep: walk the spine in a loop.
                let mut rights = Vec::new();
                let mut node = expr;
                while let Expr::BinaryOp {
                    left,
                    op: sqlparser::ast::BinaryOperator::And,
                    right,
                } = node
                {
                    rights.push(right.as_ref());
                    node = left;
                }
                self.walk_cond(node);
                for right in rights.into_iter().rev() {
                    self.walk_cond(right);
                }
            }
            Expr::Nested(inner) => self.walk_cond(inner),
            Expr::BinaryOp {
                left,
                op: sqlparser::ast::BinaryOperator::Eq,
                right,
            } => {
                let pair = match (column_ref(left), literal(right)) {
                    (Some(c), Some(_)) => Some((c, right.as_ref())),
                    _ => match (literal(left), column_ref(right)) {
                        (Some(_), Some(c)) => Some((c, left.as_ref())),
                        _ => None,
                    },
                };
                match pair {
                    Some(((qualifier, column), value)) => self.preds.push(Pred {
                        scope: self.scope,
                        qualifier,
                        column,
                        values: std::slice::from_ref(value),
                    }),
                    None => self.walk_expr(expr),
                }
            }
            Expr::InList {
                expr: column,
                list,
                negated: false,
            } if !list.is_empty() && list.iter().all(|e| literal(e).is_some()) => {
                match column_ref(column) {
                    Some((qualifier, column)) => self.preds.push(Pred {
                        scope: self.scope,
                        qualifier,
                        column,
                        values: list,
                    }),
                    None => self.walk_expr(expr),
                }
            }
            _ => self.walk_expr(expr),
        }
    }

    fn walk_exprs(&mut self, exprs: &'a [Expr]) {
        for e in exprs {
            self.walk_expr(e);
        }
    }

    fn walk_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                if let Some((qualifier, column)) = column_ref(expr) {
                    if is_id(column) {
                        self.id_refs.push(IdRef {
                            scope: self.scope,
                            qualifier,
                            column,
                            select_item: false,
                        });
                    }
                }
            }
            Expr::BinaryOp { .. } => {
                // Long operator chains are left-deep: walk the spine in a loop.
                let mut rights = Vec::new();
                let mut node = expr;
                while let Expr::BinaryOp { left, right, .. } = node {
                    rights.push(right.as_ref());
                    node = left;
                }
                self.walk_expr(node);
                for right in rights.into_iter().rev() {
                    self.walk_expr(right);
                }
            }
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
            Expr::Exists { subquery, .. } | Expr::Subquery(subquery) => self.walk_query(subquery),
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
                            FunctionArgumentClause::OrderBy(order) => {
                                for o in order {
                                    self.walk_expr(&o.expr);
                                }
                            }
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
        for o in &function.within_group {
            self.walk_expr(&o.expr);
        }
        if let Some(WindowType::WindowSpec(spec)) = &function.over {
            self.walk_exprs(&spec.partition_by);
            for o in &spec.order_by {
                self.walk_expr(&o.expr);
            }
        }
    }

    /// `SET a = x, b = y` of UPDATE (and ON DUPLICATE KEY UPDATE).
    fn walk_assignments(&mut self, assignments: &'a [Assignment], record: bool) {
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

    fn walk_insert(&mut self, insert: &'a Insert) {
        let TableObject::TableName(name) = &insert.table else {
            self.fail(unsupported("INSERT INTO a table function"));
            return;
        };
        let target = self.add_table(name, None, false);
        self.insert_target = target;
        let rule = target.and_then(|i| match self.tables[i].kind {
            RefKind::Logical(rule) => Some(rule),
            _ => None,
        });
        let column_name = |name: &'a ObjectName| match name.0.last() {
            Some(ObjectNamePart::Identifier(ident)) => Some(ident),
            _ => None,
        };
        if let Some(rule) = rule {
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
        let keys = &mut self.insert_keys;
        if !insert.assignments.is_empty() {
            let value = insert.assignments.iter().find_map(|a| match &a.target {
                AssignmentTarget::ColumnName(n) => match n.0.last() {
                    Some(ObjectNamePart::Identifier(c)) if c.value.eq_ignore_ascii_case(key) => {
                        Some(&a.value)
                    }
                    _ => None,
                },
                AssignmentTarget::Tuple(_) => None,
            });
            match value.and_then(literal) {
                Some(v) => keys.values.push(v),
                None => keys.missing = true,
            }
            return;
        }
        let index = insert.columns.iter().position(|n| {
            matches!(n.0.last(), Some(ObjectNamePart::Identifier(c)) if c.value.eq_ignore_ascii_case(key))
        });
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
                    match row.content.get(index).and_then(literal) {
                        Some(v) => keys.values.push(v),
                        None => keys.missing = true,
                    }
                }
            }
            None => keys.missing = true,
        }
    }

    /// The table a column belongs to, if it is that table's shard key.
    fn resolve_key(
        &self,
        scope: usize,
        qualifier: Option<&Ident>,
        column: &Ident,
    ) -> Result<Option<&'a TableRule>, RouteError> {
        let mut scope = Some(scope);
        while let Some(s) = scope {
            if let Some(found) = self.resolve_key_in(s, qualifier, column)? {
                return Ok(found);
            }
            scope = self.scopes.get(s).copied().flatten();
        }
        Ok(None)
    }

    /// [`Planner::resolve_key`] in one scope: `Some(None)` when the column
    /// names a table of the scope that is not a logical table's key.
    fn resolve_key_in(
        &self,
        scope: usize,
        qualifier: Option<&Ident>,
        column: &Ident,
    ) -> Result<Option<Option<&'a TableRule>>, RouteError> {
        let is_key = |t: &TableRef<'a>| match t.kind {
            RefKind::Logical(rule) => key_column(rule).eq_ignore_ascii_case(&column.value),
            _ => false,
        };
        let rule_of = |t: &TableRef<'a>| match t.kind {
            RefKind::Logical(rule) => Some(rule),
            _ => None,
        };
        let here = |t: &&TableRef<'a>| t.in_scope && t.scope == scope;
        if let Some(q) = qualifier {
            let named = self.tables.iter().filter(here).find(|t| match t.alias {
                Some(alias) => alias.value.eq_ignore_ascii_case(&q.value),
                None => t.table.value.eq_ignore_ascii_case(&q.value),
            });
            return Ok(named.map(|t| rule_of(t).filter(|_| is_key(t))));
        }
        let mut found: Option<&'a TableRule> = None;
        for t in self.tables.iter().filter(here).filter(|t| is_key(t)) {
            let Some(rule) = rule_of(t) else { continue };
            match found {
                None => found = Some(rule),
                Some(first) if first.kind == rule.kind && first.fleet == rule.fleet => {}
                Some(first) => {
                    return Err(unsupported(format!(
                        "column {} is ambiguous between {} and {}; qualify it (t.{})",
                        column.value, first.name, rule.name, column.value
                    )))
                }
            }
        }
        Ok(found.map(Some))
    }

    /// Checks an ID literal: a decimal 64-bit number with the reserved bits
    /// clear, a shard inside the fleet, and (for object tables) the table's
    /// type.
    fn check_id(
        &self,
        value: &ValueWithSpan,
        fleet: &Fleet,
        object: Option<(&TableRule, u16)>,
    ) -> Result<ObjectId, RouteError> {
        let written = self.env.src.text(value.span);
        let bad = |reason: String| RouteError::BadId {
            id: written.to_owned(),
            reason,
        };
        let digits = key_text(value).unwrap_or_default();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(
                "an ID is a 64-bit unsigned integer written in decimal".to_owned()
            ));
        }
        let raw: u64 = digits
            .parse()
            .map_err(|_| bad("it does not fit in 64 bits".to_owned()))?;
        let id = ObjectId::decode(raw).map_err(|_| {
            bad("its reserved top bits (63-62) are set; IDs are below 2^62".to_owned())
        })?;
        if id.shard >= fleet.shard_count {
            return Err(bad(format!(
                "its shard {} is outside fleet {} (shards 0-{})",
                id.shard,
                fleet.name,
                fleet.shard_count.saturating_sub(1)
            )));
        }
        if let Some((rule, type_id)) = object {
            if id.type_id != type_id {
                return Err(bad(format!(
                    "its type is {}, but table {} holds type {}",
                    self.type_label(id.type_id),
                    rule.name,
                    self.type_label(type_id)
                )));
            }
        }
        Ok(id)
    }

    /// `1 (pin)`.
    fn type_label(&self, type_id: u16) -> String {
        let name = self
            .env
            .topo
            .config
            .types
            .iter()
            .find(|(_, &t)| t == u32::from(type_id))
            .map(|(name, _)| name.as_str());
        match name {
            Some(name) => format!("{type_id} ({name})"),
            None => type_id.to_string(),
        }
    }

    /// The shard a key literal selects on a table, rewriting object IDs to
    /// their local id.
    fn key_shard(
        &self,
        rule: &'a TableRule,
        value: &ValueWithSpan,
        edits: &mut Edits,
    ) -> Result<u32, RouteError> {
        let fleet = self.env.fleet(rule.fleet)?;
        match &rule.kind {
            TableKind::Object { type_id } => {
                let id = self.check_id(value, fleet, Some((rule, *type_id)))?;
                edits.replace(self.env.range(value.span)?, id.local_id.to_string());
                Ok(id.shard)
            }
            TableKind::Mapping { .. } => Ok(self.check_id(value, fleet, None)?.shard),
            TableKind::ModShard { .. } => {
                let key = key_text(value).unwrap_or_default();
                Ok(mod_shard(key.as_bytes(), fleet.shard_count))
            }
        }
    }

    /// Decides the target and produces the plan.
    fn finish(
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
        if hints.scatter() {
            return Err(unsupported(
                "/*+ SCATTER */: statements on every shard are not supported yet",
            ));
        }
        let mut constraints: Vec<Constraint<'a>> = Vec::new();

        // Keys in the statement.
        for pred in &self.preds {
            let Some(rule) = self.resolve_key(pred.scope, pred.qualifier, pred.column)? else {
                continue;
            };
            let mut shard = None;
            let mut first_value = None;
            let mut spread = None;
            for value in pred.values.iter().filter_map(literal) {
                let s = self.key_shard(rule, value, &mut edits)?;
                match shard {
                    None => {
                        shard = Some(s);
                        first_value = Some(value);
                    }
                    Some(first) if first != s => spread = Some((first, s)),
                    Some(_) => {}
                }
            }
            if let Some((a, b)) = spread {
                let message = format!(
                    "the IN list on {}.{} spans several shards ({} and {})",
                    rule.name,
                    pred.column.value,
                    env.database_name(rule.fleet, a),
                    env.database_name(rule.fleet, b)
                );
                return Err(match kind {
                    StatementKind::Write | StatementKind::LockingRead => {
                        RouteError::CrossShard(message)
                    }
                    StatementKind::Read => unsupported(format!(
                        "{message}; multi-shard reads are not supported yet"
                    )),
                });
            }
            let (Some(shard), Some(value)) = (shard, first_value) else {
                continue;
            };
            if matches!(rule.kind, TableKind::Object { .. }) {
                edits.replace(env.range(pred.column.span)?, "local_id");
            }
            constraints.push(Constraint {
                fleet: rule.fleet,
                shard,
                why: Why::Key {
                    table: &rule.name,
                    column: &pred.column.value,
                    value: env.src.text(value.span),
                },
            });
        }

        // An UPDATE must not move a row to another shard.
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

        // INSERT rows of a mapping or mod-shard table.
        let insert_rule = self.insert_target.and_then(|i| match self.tables[i].kind {
            RefKind::Logical(rule) => Some(rule),
            _ => None,
        });
        if let Some(rule) = insert_rule {
            let mut first: Option<(u32, &ValueWithSpan)> = None;
            for &value in &self.insert_keys.values {
                let s = self.key_shard(rule, value, &mut edits)?;
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
            if let Some((shard, value)) = first {
                if !self.insert_keys.missing {
                    constraints.push(Constraint {
                        fleet: rule.fleet,
                        shard,
                        why: Why::Key {
                            table: &rule.name,
                            column: key_column(rule),
                            value: env.src.text(value.span),
                        },
                    });
                }
            }
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

        // The fleet the statement's logical tables live on.
        let home = self.tables.iter().find_map(|t| match t.kind {
            RefKind::Logical(rule) => Some(rule.fleet),
            _ => None,
        });
        let hint_fleet = home.or_else(|| {
            self.tables.iter().find_map(|t| match t.kind {
                RefKind::Physical { fleet, .. } => Some(fleet),
                _ => None,
            })
        });
        if let Some(fleet_id) = hint_fleet {
            let fleet = env.fleet(fleet_id)?;
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
                        let bad = |reason: String| RouteError::BadId {
                            id: raw.to_string(),
                            reason,
                        };
                        let id = ObjectId::decode(raw).map_err(|_| {
                            bad("its reserved top bits (63-62) are set; IDs are below 2^62"
                                .to_owned())
                        })?;
                        if id.shard >= fleet.shard_count {
                            return Err(bad(format!(
                                "its shard {} is outside fleet {} (shards 0-{})",
                                id.shard,
                                fleet.name,
                                fleet.shard_count.saturating_sub(1)
                            )));
                        }
                        id.shard
                    }
                    Hint::Scatter => continue,
                };
                constraints.push(Constraint {
                    fleet: fleet_id,
                    shard,
                    why: Why::Hint(hint.clone()),
                });
            }
        }

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

        // All constraints must agree.
        let mut target: Option<(FleetId, u32)> = None;
        if let Some(first) = constraints.first() {
            for other in &constraints[1..] {
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
            target = Some((first.fleet, first.shard));
        }

        // Placement of an object INSERT that names no shard.
        let mut compose_insert_id = None;
        if let Some(rule) = insert_rule {
            if let TableKind::Object { type_id } = rule.kind {
                compose_insert_id = Some(type_id);
                if target.is_none() {
                    let fleet = env.fleet(rule.fleet)?;
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
                    let shard = placement.choose(first, last).clamp(first, last);
                    target = Some((rule.fleet, shard));
                }
            }
        }

        let Some((fleet, shard)) = target else {
            // Nothing decided: fine only if no sharded table is involved.
            let logical = insert_rule.or_else(|| {
                self.tables.iter().find_map(|t| match t.kind {
                    RefKind::Logical(rule) => Some(rule),
                    _ => None,
                })
            });
            if let Some(rule) = logical {
                return Err(RouteError::NoShardKey {
                    table: rule.name.clone(),
                    expected: self.expected(rule),
                });
            }
            return any_host(env.src.sql, edits);
        };

        // Every logical table must live on the target's fleet.
        for t in &self.tables {
            if let RefKind::Logical(rule) = t.kind {
                if rule.fleet != fleet {
                    return Err(RouteError::CrossShard(format!(
                        "table {} lives on fleet {}, but the statement goes to {} on fleet {}",
                        rule.name,
                        env.fleet(rule.fleet)?.name,
                        env.database_name(fleet, shard),
                        env.fleet(fleet)?.name
                    )));
                }
            }
        }

        // Qualify unqualified tables.
        let prefix = format!("{}.", env.database_name(fleet, shard));
        for t in &self.tables {
            if matches!(t.kind, RefKind::Logical(_) | RefKind::Plain) {
                edits.insert(env.range(t.table.span)?.start, prefix.clone());
            }
        }

        // `id` of object tables: the composing expression.
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
                    (q.start, env.src.sql.get(q).unwrap_or_default())
                }
                None => (column.start, ""),
            };
            let dot = if qualifier.is_empty() { "" } else { "." };
            let mut text = format!("(({shard}<<46)|({type_id}<<36)|{qualifier}{dot}local_id)");
            if r.select_item {
                text.push_str(" AS ");
                text.push_str(env.src.sql.get(column.clone()).unwrap_or("id"));
            }
            edits.replace(start..column.end, text);
        }

        let sql = apply(edits, env.src.sql)?;
        env.shard_plan(fleet, shard, sql, kind, compose_insert_id)
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
