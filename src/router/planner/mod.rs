//! [`route`]: one statement, the topology and the session context in, a
//! [`Plan`] out.
//!
//! The statement is tokenized once; the tokens give the hints (comments) and
//! then go to sqlparser, whose AST says what the statement touches. The text
//! sent to a backend is the client's text with a few byte ranges edited
//! (table names qualified, `id` turned into `local_id` or the composing
//! expression, our hints removed); sqlparser's re-serialisation is never
//! used, as it is not faithful to the original.
//!
//! [`route_prepare`] is the same path for COM_STMT_PREPARE: a shard key
//! given as a `?` parameter marker allows any shard, and the statement is
//! planned on a representative one with the markers kept, so a backend can
//! describe its parameters and columns.
//!
//! This module holds the entry points, the dispatch by statement kind and
//! what every part reads ([`Env`]). The parts:
//!
//! - [`tokens`]: checks on the token stream before parsing;
//! - [`session`]: statements the proxy answers itself (USE, BEGIN, COMMIT,
//!   `SELECT DATABASE()`, ...) and savepoints;
//! - [`diagnostics`]: `SHOW WARNINGS` and the like, about the previous
//!   statement;
//! - [`show`]: SHOW, DESCRIBE and the other statements about a database or
//!   a table's definition;
//! - [`dml`]: the planner of SELECT, INSERT, UPDATE and DELETE, which walks
//!   the statement ([`select`], [`insert`], [`update_delete`], [`expr`]),
//!   turns key literals into shards ([`keys`]) and then decides ([`decide`]);
//!   a read whose keys span several shards, or an explicit `/*+ SCATTER */`,
//!   becomes one statement per shard and a merge ([`multi`]).

mod ddl;
mod decide;
mod diagnostics;
mod dml;
mod expr;
pub(crate) mod fast;
mod function_names;
mod function_writes;
mod insert;
mod keys;
mod load;
mod local_ids;
mod merge;
mod multi;
mod notes;
mod parse_cache;
mod proxy_info;
mod select;
mod sequences;
mod session;
mod session_functions;
mod show;
mod star;
mod tokens;
mod unparsed_ddl;
mod update_delete;

use std::cell::RefCell;
use std::fmt;
use std::ops::ControlFlow;
use std::ops::Range;

use bytes::Bytes;
use sqlparser::ast::{
    Ident, ObjectName, ObjectNamePart, Query, SelectItem, SetExpr, ShowCreateObject,
    ShowStatementIn, Statement, Visit, Visitor,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan, Tokenizer};

use super::hints;
use super::lex;
use super::plan::{
    Placement, Plan, RouteContext, RouteError, SessionAction, ShardQuery, SqlText, StatementKind,
    Target,
};
use super::set;
use super::text::{Edits, Source};
use crate::topology::{Fleet, FleetId, TableRule, Topology};
pub use ddl::{migration_table, migration_table_in, MigrationTable};
use dml::Planner;
#[cfg(test)]
pub(crate) use dml::MAX_WALK_DEPTH;
pub use keys::{is_long_value_stub, LONG_VALUE_STUB_PREFIX};
#[cfg(test)]
pub(crate) use tokens::{MAX_DEPTH, MAX_DEPTH_LISTED};

/// Routes one statement.
///
/// `sql` is the statement as the client sent it (COM_QUERY text), `topo` the
/// routing table in force, `ctx` what the session has selected with `USE`,
/// and `placement` chooses the shard of an object INSERT that names none.
/// Pure: no I/O, no clock; the only randomness is `placement`'s.
///
/// A read whose key restriction spans several shards (`id IN (...)`,
/// `id = a OR id = b`, on an object ID, a mapping from-column or a
/// mod-shard key), or a keyless read with `/*+ SCATTER */`, becomes
/// [`Plan::MultiShard`]: one statement per shard, in shard order, and how
/// the proxy merges their rows. Writes and locking reads never fan out.
///
/// Never panics on any input: what cannot be routed becomes
/// [`Plan::Reject`] with the error the client should see.
pub fn route(
    sql: &(impl AsRef<[u8]> + ?Sized),
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
) -> Plan {
    fast::route(sql.as_ref(), topo, ctx, placement)
}

/// [`route`] without the fast path: lexed, parsed and planned.
fn route_slow(
    sql: &[u8],
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
) -> Plan {
    match route_inner(sql, topo, ctx, placement, false) {
        Ok(plan) => plan,
        Err(error) => Plan::Reject(error),
    }
}

thread_local! {
    /// The statement [`route_shared`] is routing on this thread.
    static SHARED: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// [`route`] of a statement the caller holds as [`Bytes`]: a plan that
/// sends the statement (or a piece of it) without an edit shares its bytes
/// instead of copying them, so a long statement is not held twice while
/// it runs. The plan is the one [`route`] gives.
pub fn route_shared(
    sql: &Bytes,
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
) -> Plan {
    /// Forgets the statement when routing ends, however it ends.
    struct Forget;
    impl Drop for Forget {
        fn drop(&mut self) {
            SHARED.with(|shared| shared.borrow_mut().take());
        }
    }
    SHARED.with(|shared| *shared.borrow_mut() = Some(sql.clone()));
    let _forget = Forget;
    route(&sql[..], topo, ctx, placement)
}

thread_local! {
    /// The digest of the statement [`route_digested`] is routing, once its
    /// tokens are read (the outermost reading when routing recurses).
    static DIGEST: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// [`route_shared`], and the statement's digest (its shape with literals
/// masked, [`statement_digest`]'s hash) when the statement was read far
/// enough to have one; computed from the tokens routing reads anyway.
pub fn route_digested(
    sql: &Bytes,
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
) -> (Plan, Option<u64>) {
    DIGEST.with(|digest| digest.set(None));
    let plan = route_shared(sql, topo, ctx, placement);
    (plan, DIGEST.with(std::cell::Cell::take))
}

/// Longest masked text [`statement_digest`] gives, in bytes.
pub const MAX_DIGEST_TEXT_BYTES: usize = 1024;

/// A statement's digest: a hash of its shape (tokens without blanks and
/// comments, literals masked, a comma-separated run of literals counted as
/// one) and that shape as text (literals as `?`), at most
/// [`MAX_DIGEST_TEXT_BYTES`]. Reads the statement again: meant for a
/// digest seen for the first time. A statement the lexer cannot read gets
/// one digest shared by all such statements, with no text of theirs.
pub fn statement_digest(sql: &[u8], ctx: &RouteContext) -> (u64, String) {
    let tokens = lex::lex(sql, &ctx.lex, ctx.max_tokens)
        .ok()
        .and_then(|lexed| {
            let tokens = Tokenizer::new(&MySqlDialect {}, &lexed.shadow)
                .tokenize_with_location()
                .ok()?;
            lex::check_tokens(&lexed, &tokens).ok()?;
            Some(tokens)
        });
    match tokens {
        Some(tokens) => (
            parse_cache::digest(&tokens),
            parse_cache::masked_text(&tokens, MAX_DIGEST_TEXT_BYTES),
        ),
        None => (0, "(a statement shardgate could not read)".to_owned()),
    }
}

/// `sql` as a share of the statement [`route_shared`] is routing, when it
/// is part of it.
fn shared_statement(sql: &[u8]) -> Option<Bytes> {
    SHARED.with(|shared| {
        let shared = shared.borrow();
        let whole = shared.as_ref()?;
        let start = (sql.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
        let end = start.checked_add(sql.len())?;
        (end <= whole.len()).then(|| whole.slice(start..end))
    })
}

/// Plans a statement for COM_STMT_PREPARE, whose shard is known only when
/// its parameters are bound.
///
/// Routes like [`route`], except that a `?` parameter marker in a
/// shard-key position (`id = ?`, `id IN (?, ?)`, `board_id = ?`,
/// `email = ?`, the key column of an INSERT's rows) allows any shard of
/// the key's fleet. When nothing else (a literal key, a hint, a shard
/// database, USE) decides, the statement goes to a representative shard:
/// the USE database if it is on that fleet, else the fleet's first open
/// shard, else shard 0. An object INSERT that names no shard goes to the
/// first shard of the open range (no placement randomness). The text keeps
/// its `?` markers: `SELECT id FROM pins WHERE id = ?` becomes
/// `SELECT ((0<<46)|(1<<36)|(local_id + (local_id >> 36) * 18446744073709551615)) AS id FROM db00000.pins WHERE local_id = ?`.
///
/// Literal keys spanning several shards give [`Plan::MultiShard`] as with
/// [`route`], every part keeping the statement's `?` markers (a `LIMIT ?`
/// stays as written). The plan is for describing the statement (parameter
/// and column metadata); each execution is routed with [`route`] once the
/// bound values are in the text (see [`crate::router::placeholders`]), so
/// `id IN (?, ?, ?)` bound to IDs on several shards runs multi-shard.
/// Statements that cannot be routed even so (no key at all, unknown
/// table, bad syntax) are [`Plan::Reject`]ed as by [`route`].
pub fn route_prepare(
    sql: &(impl AsRef<[u8]> + ?Sized),
    topo: &Topology,
    ctx: &RouteContext,
) -> Plan {
    match route_inner(sql.as_ref(), topo, ctx, &mut FirstShard, true) {
        Ok(plan) => plan,
        Err(error) => Plan::Reject(error),
    }
}

/// The placement of prepared object INSERTs: the first shard of the range.
struct FirstShard;

impl Placement for FirstShard {
    fn choose(&mut self, first: u32, _last: u32) -> u32 {
        first
    }
}

/// [`route`] (`prepare` false) and [`route_prepare`] (true); a statement
/// that calls a function that writes, or may, is marked so
/// ([`Plan::with_function_writes`]) whatever it plans as.
fn route_inner(
    sql: &[u8],
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
    prepare: bool,
) -> Result<Plan, RouteError> {
    let (mut writes, mut assigns) = (false, false);
    let plan = route_text(
        sql,
        topo,
        ctx,
        placement,
        prepare,
        (&mut writes, &mut assigns),
    )?;
    let plan = if writes {
        plan.with_function_writes()
    } else {
        plan
    };
    Ok(if assigns {
        plan.with_session_state()
    } else {
        plan
    })
}

/// [`route_inner`]'s work; sets `writes` when the statement calls a
/// function that writes, or may, and `assigns` when it leaves session
/// state on its connection.
fn route_text(
    sql: &[u8],
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
    prepare: bool,
    (writes, assigns): (&mut bool, &mut bool),
) -> Result<Plan, RouteError> {
    notes::note_text(sql);
    let dialect = MySqlDialect {};
    // MariaDB's reading first; sqlparser reads the lexer's shadow, and the
    // two must agree on every literal and comment.
    let lexed = lex::lex(sql, &ctx.lex, ctx.max_tokens)?;
    let mut tokens = Tokenizer::new(&dialect, &lexed.shadow)
        .tokenize_with_location()
        .map_err(syntax)?;
    lex::check_tokens(&lexed, &tokens)?;
    DIGEST.with(|digest| {
        if digest.get().is_none() {
            digest.set(Some(parse_cache::digest(&tokens)));
        }
    });
    *writes = function_writes::writes_through_function(&tokens);
    *assigns = function_writes::leaves_session_state(&tokens);
    let sequences = sequences::named(&tokens, topo);
    if session_functions::counts_found_rows(&tokens) {
        return Err(unsupported(session_functions::FOUND_ROWS_REFUSED));
    }
    let src = Source::new(sql, &lexed.shadow);
    let mut edits = Edits::default();
    let hints = hints::scan(&tokens, &src, &mut edits)?;
    if tokens::is_empty(&tokens) {
        // Comments alone get a server's empty OK; nothing at all, 1065.
        return if lexed.comments.is_empty() {
            Err(RouteError::EmptyQuery)
        } else {
            any_host(sql, edits)
        };
    }
    let first_word = tokens::first_significant(&tokens)
        .map(|t| src.text(t.span))
        .unwrap_or_default();
    if first_word.eq_ignore_ascii_case("DO") {
        return plan_do(&src, &tokens, topo, ctx, placement, prepare, edits);
    }
    if let Some(error) = tokens::private_schema(&tokens, first_word) {
        return Err(error);
    }
    if ["PREPARE", "EXECUTE", "DEALLOCATE"]
        .iter()
        .any(|w| first_word.eq_ignore_ascii_case(w))
        || (first_word.eq_ignore_ascii_case("DROP") && second_word_is(&tokens, &src, "PREPARE"))
    {
        return Err(unsupported(SQL_PREPARED_STATEMENTS));
    }
    if first_word.eq_ignore_ascii_case("LOAD") {
        let env = Env {
            topo,
            ctx,
            src: &src,
            prepare,
        };
        return load::plan(env, &tokens, edits, &hints);
    }
    if first_keyword(&tokens) == Keyword::SET {
        match set::statement_prefix(&tokens)? {
            // `SET STATEMENT ... FOR <statement>`: planned as the statement
            // it wraps, the whole text sent.
            Some(wrapped_from) => {
                tokens.drain(..wrapped_from);
                if first_keyword(&tokens) == Keyword::SET {
                    return Err(unsupported("SET STATEMENT ... FOR SET"));
                }
                // The wrapper's tokens are gone: never passed unparsed.
                let plan = plan_tokens(
                    sql, tokens, src, edits, hints, topo, ctx, placement, prepare, None,
                )?;
                return match sequences::place(plan, &sequences, topo)? {
                    Plan::Session(_) => Err(unsupported(
                        "SET STATEMENT ... FOR a statement shardgate handles itself \
                         (USE, transactions, savepoints, SELECT DATABASE()); send it without SET STATEMENT",
                    )),
                    plan => Ok(plan),
                };
            }
            None if tokens::names_processlist(&tokens) => {
                return Err(unsupported(proxy_info::PROCESSLIST_REFUSED))
            }
            None => {
                // A SET is replayed on every backend connection the session
                // uses: the session's values go in as they are now.
                let env = Env {
                    topo,
                    ctx,
                    src: &src,
                    prepare,
                };
                if let Some(substituted) = env.session_function_edits(&tokens) {
                    let text = apply(substituted, sql)?;
                    return route_inner(&text.0, topo, ctx, placement, prepare);
                }
                return set::plan(&tokens, sql, &src, topo);
            }
        }
    }
    let whole = unparsed_ddl::Whole::of(&lexed);
    let plan = plan_tokens(
        sql,
        tokens,
        src,
        edits,
        hints,
        topo,
        ctx,
        placement,
        prepare,
        Some(whole),
    )?;
    sequences::place(plan, &sequences, topo)
}

/// `DO expr, ...`: evaluated and discarded by a server. Planned as the
/// `SELECT` of the same expressions; only one that names no sharded table
/// (runs on any master) is accepted, and then sent as written.
fn plan_do(
    src: &Source,
    tokens: &[TokenWithSpan],
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
    prepare: bool,
    edits: Edits,
) -> Result<Plan, RouteError> {
    let sql = src.original;
    let env = Env {
        topo,
        ctx,
        src,
        prepare,
    };
    if let Some(substituted) = env.session_function_edits(tokens) {
        let text = apply(substituted, sql)?;
        return route_inner(&text.0, topo, ctx, placement, prepare);
    }
    let after_do = tokens::first_significant(tokens)
        .and_then(|t| src.range(t.span))
        .map_or(sql.len(), |range| range.end);
    let mut as_select = b"SELECT".to_vec();
    as_select.extend_from_slice(sql.get(after_do..).unwrap_or_default());
    match route_inner(&as_select, topo, ctx, placement, prepare) {
        Ok(Plan::AnyHost { .. }) => any_host(sql, edits),
        // On the shard of a sequence or function it names, as written.
        Ok(Plan::Shard(query))
            if query.sql.0 == as_select && !sequences::named(tokens, topo).is_empty() =>
        {
            Ok(Plan::Shard(ShardQuery {
                sql: apply(edits, sql)?,
                ..query
            }))
        }
        Ok(Plan::Reject(error))
        | Err(error @ (RouteError::Syntax(_) | RouteError::Unsupported(_))) => Err(error),
        _ => Err(unsupported(
            "DO over a sharded table; send it as a SELECT the proxy can route",
        )),
    }
}

/// The substitution's edits, with `` AS `<as written>` `` after every
/// unaliased item of the top-level select list that a value was put into
/// (`CONNECTION_ID() > 0`): the server names such an item by the client's
/// text, not by the text the backend runs. Items are matched to the syntax
/// tree's only when their counts agree; otherwise none is named.
fn name_substituted_items(
    statement: &Statement,
    substituted: session_functions::Substitution,
    src: &Source<'_>,
) -> Edits {
    let session_functions::Substitution {
        mut edits,
        replaced,
        items,
    } = substituted;
    let Statement::Query(query) = statement else {
        return edits;
    };
    let mut body = query.body.as_ref();
    while let SetExpr::SetOperation { left, .. } = body {
        body = left.as_ref();
    }
    let SetExpr::Select(select) = body else {
        return edits;
    };
    if select.projection.len() != items.len() {
        return edits;
    }
    for (item, range) in select.projection.iter().zip(items) {
        if !matches!(item, SelectItem::UnnamedExpr(_)) {
            continue;
        }
        let inside = replaced
            .iter()
            .any(|(r, whole)| !whole && range.start <= r.start && r.end <= range.end);
        if inside {
            if let Some(name) = src.original_text(range.clone()) {
                edits.insert(range.end, format!(" AS `{}`", name.replace('`', "``")));
            }
        }
    }
    edits
}

/// Why a statement with a non-ASCII byte outside quotes that is not a
/// character shardgate reads (of latin1 and other single-byte character
/// sets, of a text that is not the session's character set) is refused.
const UNREADABLE_WORD: &str = "a non-ASCII byte outside quotes that shardgate cannot read in the session's character set (unquoted identifiers may hold utf8 text, or big5 / gbk / sjis multibyte characters, only); quote the identifier with backticks";

/// The keyword of the first significant token.
fn first_keyword(tokens: &[TokenWithSpan]) -> Keyword {
    match tokens::first_significant(tokens).map(|t| &t.token) {
        Some(Token::Word(w)) => w.keyword,
        _ => Keyword::NoKeyword,
    }
}

/// [`route_inner`] once the text is read: dispatch by statement kind.
/// `whole` (what the lexer saw of the whole text) allows a table schema
/// change sqlparser cannot parse to be read from its tokens instead
/// ([`unparsed_ddl`]); `None` when the tokens are not the whole text.
#[allow(clippy::too_many_arguments)]
fn plan_tokens(
    sql: &[u8],
    mut tokens: Vec<TokenWithSpan>,
    src: Source<'_>,
    edits: Edits,
    hints: hints::Hints,
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
    prepare: bool,
    whole: Option<unparsed_ddl::Whole>,
) -> Result<Plan, RouteError> {
    let first = tokens::first_significant(&tokens);
    let keyword = first_keyword(&tokens);
    // Names the statement in messages about ones shardgate does not handle.
    let first_span = first.map(|t| t.span);
    if let Some(too_deep) = tokens::nesting_too_deep(&tokens) {
        return Err(too_deep.error());
    }
    if tokens::reads_another_connection(&tokens) {
        return Err(unsupported(proxy_info::OTHER_CONNECTION_REFUSED));
    }
    let is_show = keyword == Keyword::SHOW;
    let show_diagnostics = if is_show {
        diagnostics::show_diagnostics(&tokens)
    } else {
        None
    };
    if keyword == Keyword::ANALYZE {
        return Err(unsupported(
            "ANALYZE statements: MariaDB's ANALYZE <statement> executes the statement; run the statement itself (ANALYZE TABLE: on the hosts)",
        ));
    }
    if keyword == Keyword::START {
        if let Some(begin) = session::start_with_snapshot(&tokens, sql) {
            return Ok(begin);
        }
    }
    let lock_share = tokens::strip_lock_in_share_mode(&mut tokens);
    let show_scan = if is_show {
        show::ShowScan::of(&tokens, &src, topo)
    } else {
        show::ShowScan::default()
    };
    let env = Env {
        topo,
        ctx,
        src: &src,
        prepare,
    };
    let substituted = env.session_substitution(&tokens);
    let reads_processlist = tokens::names_processlist(&tokens);
    let (references, auto_increment) = match keyword {
        Keyword::CREATE | Keyword::ALTER => {
            (ddl::scan(&tokens)?, local_ids::auto_increment(&tokens))
        }
        _ => (0, None),
    }; // Before parsing: it holds for a schema change the parser cannot read.
    if let Some(value) = &auto_increment {
        local_ids::check_auto_increment(topo, value, &tokens)?;
    }

    let unreadable_word = tokens
        .iter()
        .any(|t| t.token == Token::Char(char::from(lex::PLACEHOLDER)));
    let parsed = parse_cache::parse_statements(tokens);
    let statements = match parsed {
        Ok(statements) => statements,
        Err(_) if reads_processlist => {
            return Err(unsupported(proxy_info::PROCESSLIST_REFUSED));
        }
        Err(error) => {
            if let Some(asked) = show_diagnostics {
                return Ok(diagnostics::plan(sql, asked));
            }
            // sqlparser does not know every SHOW; they touch no table data.
            if is_show {
                return env.show_fallback(show_scan.named_db, edits);
            }
            if unreadable_word {
                return Err(unsupported(UNREADABLE_WORD));
            }
            if let Some(whole) = whole {
                return unparsed_ddl::plan(env, whole, edits, &hints, placement, syntax(error));
            }
            return Err(syntax(error));
        }
    };
    let statement = match statements.as_slice() {
        [] => return Err(RouteError::Syntax("Query was empty".to_owned())),
        [one] => one,
        _ => {
            // A server answers 1064 too (a prepared statement, or a query
            // without CLIENT_MULTI_STATEMENTS).
            return Err(RouteError::Syntax(
                "several statements in one query; send them one at a time".to_owned(),
            ));
        }
    };
    if reads_processlist {
        let answered = match statement {
            Statement::Query(query) => proxy_info::select(query),
            _ => None,
        };
        return match answered {
            Some(action) => action.map(Plan::Session),
            None => Err(unsupported(proxy_info::PROCESSLIST_REFUSED)),
        };
    }
    if let (Statement::ShowVariable { .. }, Some(asked)) = (statement, show_diagnostics) {
        return Ok(diagnostics::plan(sql, asked));
    }
    if let Some((command, names)) = ddl::tables(statement)? {
        ddl::check_references(statement, references)?;
        return ddl::plan(env, command, &names, edits, &hints, placement);
    }
    if let Statement::Query(query) = statement {
        // With a session value to substitute, the substituted text is
        // planned instead (below).
        if substituted.is_none() {
            if let Some(asked) = diagnostics::select_diagnostics(&src, query) {
                let asked = diagnostics::reroute_fallback(asked?, |text| {
                    route_inner(text, topo, ctx, placement, prepare)
                })?;
                return Ok(diagnostics::plan(sql, asked));
            }
        }
        if let Some(action) = session::special_select(query) {
            return Ok(Plan::Session(action));
        }
        if let Some(action) = proxy_info::select(query) {
            return action.map(Plan::Session);
        }
    }
    // The session's values in place of DATABASE() and LAST_INSERT_ID(),
    // then the statement is routed as written so: a key given as
    // LAST_INSERT_ID() routes by the ID.
    if let Some(substituted) = substituted {
        let edits = name_substituted_items(statement, substituted, &src);
        let text = apply(edits, sql)?;
        return route_inner(&text.0, topo, ctx, placement, prepare);
    }
    match statement {
        Statement::Query(_) => {
            let kind = if lock_share || has_locking_clause(statement) {
                StatementKind::LockingRead
            } else {
                StatementKind::Read
            };
            Planner::plan(env, statement, kind, false, edits, &hints, placement)
        }
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => Planner::plan(
            env,
            statement,
            StatementKind::Write,
            false,
            edits,
            &hints,
            placement,
        ),
        Statement::Explain {
            analyze: true,
            ..
        } => Err(unsupported(
            "EXPLAIN ANALYZE / ANALYZE <statement>: it executes the statement; run the statement itself",
        )),
        Statement::Explain { statement, .. } => {
            if !Planner::walks(statement) {
                return Err(unsupported("EXPLAIN of this statement"));
            }
            Planner::plan(
                env,
                statement,
                StatementKind::Read,
                true,
                edits,
                &hints,
                placement,
            )
        }
        Statement::ExplainTable { table_name, .. } => env.table_statement(table_name, None, edits),
        Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. } => session::transaction(statement, sql),
        Statement::Use(target) => env.use_database(target),
        Statement::ShowProcessList { full } => Ok(Plan::Session(SessionAction::ProcessList {
            full: *full,
            table: false,
            id: None,
        })),
        Statement::Kill { modifier, id } => proxy_info::kill(*modifier, *id).map(Plan::Session),
        Statement::ShowTables { show_options, .. } => {
            env.show_in_database(show_options, show_scan.keyword_end, edits)
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
        Statement::ShowVariable { variable } => env.show_other(variable, &show_scan, edits),
        Statement::ShowFunctions { .. }
        | Statement::ShowStatus { .. }
        | Statement::ShowVariables { .. }
        | Statement::ShowCreate { .. }
        | Statement::ShowCatalogs { .. }
        | Statement::ShowDatabases { .. }
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
        | Statement::RenameTable { .. } => Err(unsupported(ddl::NOT_ROUTED)),
        _ => {
            let word = first_span.map(|span| src.text(span)).unwrap_or_default();
            Err(unsupported(format!(
                "{} statements",
                word.to_ascii_uppercase()
            )))
        }
    }
}

/// Whether any query of the statement, however nested (parenthesized,
/// subquery, derived table, CTE body, UNION branch), has a locking clause
/// (`FOR UPDATE`, `FOR SHARE`): the server takes row locks for all of
/// them, so the statement is a locking read.
fn has_locking_clause(statement: &Statement) -> bool {
    struct Locks;
    impl Visitor for Locks {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            if query.locks.is_empty() {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        }
    }
    statement.visit(&mut Locks).is_break()
}

/// Schemas every MySQL server has: `information_schema` may be read on
/// any host; the others are refused earlier ([`tokens::private_schema`]).
const SYSTEM_SCHEMAS: [&str; 4] = ["information_schema", "mysql", "performance_schema", "sys"];

fn is_system_schema(name: &str) -> bool {
    SYSTEM_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Why SQL-level prepared statements are refused.
const SQL_PREPARED_STATEMENTS: &str = "PREPARE ... FROM, EXECUTE and DEALLOCATE PREPARE \
     (prepared statements in SQL): the server would keep the statement by name on a pooled \
     connection and run it where the proxy cannot see its key; use your driver's prepared \
     statements (the binary protocol), which shardgate routes on every execute";

/// Whether the statement's second significant token is `word`.
fn second_word_is(tokens: &[TokenWithSpan], src: &Source<'_>, word: &str) -> bool {
    tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .nth(1)
        .is_some_and(|t| src.text(t.span).eq_ignore_ascii_case(word))
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

/// A table-less statement: run anywhere, text unchanged but for hints.
fn any_host(sql: &[u8], edits: Edits) -> Result<Plan, RouteError> {
    Ok(Plan::AnyHost {
        sql: apply(edits, sql)?,
        writes_through_function: false,
    })
}

fn apply(edits: Edits, sql: &[u8]) -> Result<SqlText, RouteError> {
    if edits.is_empty() {
        if let Some(shared) = shared_statement(sql) {
            return Ok(SqlText(shared));
        }
    }
    edits
        .apply(sql)
        .map(SqlText::from)
        .map_err(|_| unsupported("shardgate could not rewrite this statement (overlapping edits)"))
}

/// The parts of a table name; functions in it are refused.
fn idents(name: &ObjectName) -> Result<Vec<&Ident>, RouteError> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => Ok(ident),
            ObjectNamePart::Function(_) => Err(unsupported("function calls in table names")),
        })
        .collect()
}

/// `a.b.c`, for messages.
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

/// What every part of the planning reads.
#[derive(Clone, Copy)]
struct Env<'a> {
    topo: &'a Topology,
    ctx: &'a RouteContext,
    src: &'a Source<'a>,
    /// Planning for COM_STMT_PREPARE: `?` markers are shard keys that
    /// allow any shard ([`route_prepare`]).
    prepare: bool,
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

    /// The shard a statement whose shard key is a `?` marker is prepared
    /// on: the USE database if it is on the fleet, else the fleet's first
    /// open shard, else shard 0.
    fn representative(&self, fleet: FleetId) -> Result<u32, RouteError> {
        match self.ctx.current_db {
            Some((f, shard)) if f == fleet => Ok(shard),
            _ => Ok(self.fleet(fleet)?.open.map_or(0, |(first, _)| first)),
        }
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
        sql: SqlText,
        kind: StatementKind,
        compose_insert_id: Option<u16>,
    ) -> Result<Plan, RouteError> {
        Ok(Plan::Shard(ShardQuery {
            target: self.target(fleet, shard)?,
            sql,
            kind,
            compose_insert_id,
            writes_through_function: false,
            local_infile: None,
            leaves_session_state: false,
        }))
    }

    /// Refuses a logical table that does not live on the fleet of the
    /// shard the statement runs on; `runs_on` says, given that shard's
    /// database name, how the shard was chosen.
    fn check_fleet(
        &self,
        rule: &TableRule,
        fleet: FleetId,
        shard: u32,
        runs_on: impl FnOnce(&str) -> String,
    ) -> Result<(), RouteError> {
        if rule.fleet == fleet {
            return Ok(());
        }
        Err(RouteError::CrossShard(format!(
            "table {} lives on fleet {}, but {} on fleet {}",
            rule.name,
            self.fleet(rule.fleet)?.name,
            runs_on(&self.database_name(fleet, shard)),
            self.fleet(fleet)?.name
        )))
    }

    /// The statement's text, with `edits` applied, as a read on a shard.
    fn read_on(&self, fleet: FleetId, shard: u32, edits: Edits) -> Result<Plan, RouteError> {
        let sql = apply(edits, self.src.original)?;
        self.shard_plan(fleet, shard, sql, StatementKind::Read, None)
    }
}
