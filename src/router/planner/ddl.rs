//! Schema changes on one explicit shard: `CREATE TABLE`, `DROP TABLE`,
//! `ALTER TABLE`, `CREATE INDEX`, `DROP INDEX`, `TRUNCATE`, `RENAME TABLE`
//! and `DROP VIEW`.
//!
//! The tables a statement names go through the same resolution and
//! decision as a DML statement's (`dml`, `decide`): a shard database in
//! the name, a `/*+ SHARD(n) */` or `/*+ COLOCATE(id) */` hint, or the
//! session's USE database decide the shard, they must agree, and
//! unqualified names are qualified with the shard database. Nothing else
//! can decide: a schema change has no shard key, and one on a sharded
//! table with no shard named is refused, pointing to `shardgate fleet
//! migrate`, which changes every shard database of the fleet.

use sqlparser::ast::{
    AlterTableOperation, ColumnOption, CreateTableLikeKind, ObjectName, ObjectType,
    RenameTableNameKind, Statement, TableConstraint,
};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Tokenizer;

use super::dml::Planner;
use super::{idents, syntax, unsupported, Env};
use crate::router::hints::{self, Hint, Hints};
use crate::router::lex;
use crate::router::plan::{Placement, Plan, RouteError, StatementKind};
use crate::router::text::{Edits, Source};
use crate::topology::{FleetId, TableKind};

/// What to do instead of CREATE/DROP DATABASE and the schema changes that
/// are not routed.
pub(super) const NOT_ROUTED: &str =
    "databases, views, routines and triggers are not changed through the proxy; \
     shard databases are created by `shardgate fleet init`, and a table changes on every shard with `shardgate fleet migrate`";

/// Why temporary tables are refused.
const TEMPORARY: &str = "temporary tables: a statement runs on a pooled backend connection, \
     so a temporary table would outlive the statement on a connection other sessions use";

/// What names the shard of a schema change, for messages.
pub(super) fn expected(pattern: &str, table: &str) -> String {
    format!(
        "a shard database ({pattern}.{table}, or USE {pattern}) or a /*+ SHARD(n) */ or /*+ COLOCATE(id) */ hint; \
         to change the table on every shard database, run `shardgate fleet migrate`"
    )
}

/// The tables a schema change names and its verb for access errors, or
/// `None` when `statement` is not one of the routed schema changes.
pub(super) fn tables(
    statement: &Statement,
) -> Result<Option<(&'static str, Vec<&ObjectName>)>, RouteError> {
    Ok(Some(match statement {
        Statement::CreateTable(create) => {
            if create.temporary {
                return Err(unsupported(TEMPORARY));
            }
            if create.query.is_some() {
                return Err(unsupported(
                    "CREATE TABLE ... SELECT: create the table, then INSERT ... SELECT on the same shard",
                ));
            }
            if create.clone.is_some() {
                return Err(unsupported("CREATE TABLE ... CLONE"));
            }
            let mut names = vec![&create.name];
            match &create.like {
                Some(CreateTableLikeKind::Parenthesized(like))
                | Some(CreateTableLikeKind::Plain(like)) => names.push(&like.name),
                None => {}
            }
            names.extend(foreign_tables(statement));
            ("CREATE", names)
        }
        Statement::AlterTable(alter) => {
            let mut names = vec![&alter.name];
            for operation in &alter.operations {
                if let AlterTableOperation::RenameTable { table_name } = operation {
                    match table_name {
                        RenameTableNameKind::As(name) | RenameTableNameKind::To(name) => {
                            names.push(name)
                        }
                    }
                }
            }
            names.extend(foreign_tables(statement));
            ("ALTER", names)
        }
        Statement::CreateIndex(index) => ("INDEX", vec![&index.table_name]),
        Statement::Drop {
            object_type: ObjectType::Index,
            table: Some(table),
            ..
        } => ("INDEX", vec![table]),
        Statement::Drop {
            temporary: true, ..
        } => return Err(unsupported(TEMPORARY)),
        Statement::Drop {
            object_type: ObjectType::Table | ObjectType::View,
            names,
            ..
        } => ("DROP", names.iter().collect()),
        Statement::Truncate(truncate) => (
            "DROP",
            truncate.table_names.iter().map(|t| &t.name).collect(),
        ),
        Statement::RenameTable(renames) => (
            "ALTER",
            renames
                .iter()
                .flat_map(|r| [&r.old_name, &r.new_name])
                .collect(),
        ),
        _ => return Ok(None),
    }))
}

/// The tables a `CREATE TABLE` or `ALTER TABLE` references in its foreign
/// keys (constraints and column `REFERENCES`).
pub(super) fn foreign_tables(statement: &Statement) -> Vec<&ObjectName> {
    let mut names = Vec::new();
    match statement {
        Statement::CreateTable(create) => {
            let options = create.columns.iter().flat_map(|c| &c.options);
            names.extend(options.filter_map(|o| referenced_by_column(&o.option)));
            names.extend(
                create
                    .constraints
                    .iter()
                    .filter_map(referenced_by_constraint),
            );
        }
        Statement::AlterTable(alter) => {
            for operation in &alter.operations {
                match operation {
                    AlterTableOperation::AddConstraint { constraint, .. } => {
                        names.extend(referenced_by_constraint(constraint))
                    }
                    AlterTableOperation::AddColumn { column_def, .. } => names.extend(
                        column_def
                            .options
                            .iter()
                            .filter_map(|o| referenced_by_column(&o.option)),
                    ),
                    AlterTableOperation::ChangeColumn { options, .. }
                    | AlterTableOperation::ModifyColumn { options, .. } => {
                        names.extend(options.iter().filter_map(referenced_by_column))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    names
}

/// The table a column's `REFERENCES` names.
fn referenced_by_column(option: &ColumnOption) -> Option<&ObjectName> {
    match option {
        ColumnOption::ForeignKey(fk) => Some(&fk.foreign_table),
        _ => None,
    }
}

/// The table a `FOREIGN KEY ... REFERENCES` constraint names.
fn referenced_by_constraint(constraint: &TableConstraint) -> Option<&ObjectName> {
    match constraint {
        TableConstraint::ForeignKey(fk) => Some(&fk.foreign_table),
        _ => None,
    }
}

use crate::router::plan::SCHEMA_ENGINES as ENGINES;

/// The hint for a column named like a refused table option.
const QUOTE: &str = " (a column named engine, union, directory or connection: quote it, `engine`)";

/// What the tokens of a `CREATE` or `ALTER` say beyond the syntax tree:
/// table options that reach outside the shard database are refused
/// (`ENGINE` other than [`ENGINES`], `UNION=(...)`, `DATA DIRECTORY`,
/// `INDEX DIRECTORY`, `CONNECTION=`), and the number of `REFERENCES`
/// clauses, which must match the referenced tables [`tables`] found.
pub(super) fn scan(tokens: &[TokenWithSpan]) -> Result<usize, RouteError> {
    let words: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let keyword = |t: Option<&&Token>| match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    };
    let mut references = 0;
    for (i, token) in words.iter().enumerate() {
        match keyword(Some(token)) {
            Keyword::REFERENCES => references += 1,
            Keyword::ENGINE => {
                let value = match words.get(i + 1) {
                    Some(Token::Eq) => words.get(i + 2),
                    other => other,
                };
                let known = match value {
                    Some(Token::Word(w)) => {
                        ENGINES.iter().any(|e| e.eq_ignore_ascii_case(&w.value))
                    }
                    Some(Token::SingleQuotedString(s)) => {
                        ENGINES.iter().any(|e| e.eq_ignore_ascii_case(s))
                    }
                    _ => false,
                };
                if !known {
                    return Err(unsupported(format!(
                        "this ENGINE in a schema change through the proxy; use one of {}{QUOTE}",
                        ENGINES.join(", ")
                    )));
                }
            }
            Keyword::UNION | Keyword::DIRECTORY | Keyword::CONNECTION => {
                return Err(unsupported(format!(
                    "UNION=, DATA DIRECTORY, INDEX DIRECTORY and CONNECTION= in a schema change \
                     through the proxy: a shard's table stays in its shard database{QUOTE}"
                )))
            }
            _ => {}
        }
    }
    Ok(references)
}

/// Refuses `statement` when its `REFERENCES` clauses (`references`, from
/// [`scan`]) are more than the referenced tables found in its syntax tree:
/// every table it names must be checked.
pub(super) fn check_references(statement: &Statement, references: usize) -> Result<(), RouteError> {
    if references > foreign_tables(statement).len() {
        return Err(unsupported(
            "a REFERENCES clause shardgate cannot read; write FOREIGN KEY (...) REFERENCES table (...)",
        ));
    }
    Ok(())
}

/// Plans a schema change naming `names` (from [`tables`]) on the shard
/// its names, hints or USE database decide.
pub(super) fn plan<'a>(
    env: Env<'a>,
    command: &'static str,
    names: &[&'a ObjectName],
    edits: Edits,
    hints: &Hints,
    placement: &mut dyn Placement,
) -> Result<Plan, RouteError> {
    let mut plain_fleet = None;
    if env.ctx.current_db.is_none() {
        // A new table has no config entry: without USE, a shard database
        // in its name says where it goes, or a SHARD/COLOCATE hint on the
        // fleet of the statement's other tables or the config's ID fleet.
        for name in names {
            if let [table] = idents(name)?.as_slice() {
                if env.topo.table(&table.value).is_none() {
                    plain_fleet = Some(new_table_fleet(env, names, hints, &table.value)?);
                }
            }
        }
    }
    let mut planner = Planner::for_command(env, command);
    planner.plain_fleet = plain_fleet;
    for name in names {
        planner.add_table(name, None, false);
    }
    planner.finish(StatementKind::SchemaChange, edits, hints, placement)
}

/// The fleet of a new table (`table`, unqualified, not in the config) of
/// a schema change without USE: only a `/*+ SHARD(n) */` or
/// `/*+ COLOCATE(id) */` hint can name its shard, on the fleet of the
/// statement's other tables (`CREATE TABLE t LIKE pins`), else on the
/// config's only fleet, else on the one fleet of its object tables (the
/// fleet whose IDs and shard numbers a hint names).
fn new_table_fleet(
    env: Env<'_>,
    names: &[&ObjectName],
    hints: &Hints,
    table: &str,
) -> Result<FleetId, RouteError> {
    let no_shard = |expected: &str| RouteError::NoShardKey {
        table: table.to_owned(),
        expected: expected.to_owned(),
    };
    if !hints
        .hints
        .iter()
        .any(|hint| matches!(hint, Hint::Shard(_) | Hint::Colocate(_)))
    {
        return Err(no_shard(
            "a shard database in the name (dbNNNNN.table), USE dbNNNNN or a /*+ SHARD(n) */ hint: the table is not in shardgate's config",
        ));
    }
    for name in names {
        let named = match idents(name)?.as_slice() {
            [other] => env.topo.table(&other.value).map(|rule| rule.fleet),
            [db, _] => env.topo.parse_database(&db.value).map(|(fleet, _)| fleet),
            _ => None,
        };
        if let Some(fleet) = named {
            return Ok(fleet);
        }
    }
    if env.topo.fleets.len() == 1 {
        return Ok(0);
    }
    let mut object_fleets = env
        .topo
        .tables
        .values()
        .filter(|rule| matches!(rule.kind, TableKind::Object { .. }))
        .map(|rule| rule.fleet)
        .collect::<Vec<_>>();
    object_fleets.sort_unstable();
    object_fleets.dedup();
    match object_fleets.as_slice() {
        [fleet] => Ok(*fleet),
        _ => Err(no_shard(
            "a shard database in the name (dbNNNNN.table) or USE dbNNNNN: the table is not in shardgate's config and the config has several fleets, so a hint cannot say which one",
        )),
    }
}

/// The table a schema change for every shard database changes (`shardgate
/// fleet migrate`), read like a client's statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationTable {
    /// The table, unqualified, as written.
    pub name: String,
    /// The statement drops it (`DROP TABLE`): afterwards it is absent.
    pub dropped: bool,
}

/// Reads a schema change meant for every shard database: one routed schema
/// change (not RENAME) naming its tables unqualified, without hints.
/// Read as a server with the default `sql_mode` and a UTF-8 client reads
/// it; [`migration_table_in`] reads it as a given session does.
pub fn migration_table(sql: &str) -> Result<MigrationTable, RouteError> {
    migration_table_in(sql, &crate::router::plan::LexMode::default())
}

/// [`migration_table`], read in `mode` (the `sql_mode`, character set and
/// version of the session that will run it).
pub fn migration_table_in(
    sql: &str,
    mode: &crate::router::plan::LexMode,
) -> Result<MigrationTable, RouteError> {
    let lexed = lex::lex(
        sql.as_bytes(),
        mode,
        crate::topology::config::DEFAULT_MAX_STATEMENT_TOKENS,
    )?;
    let dialect = MySqlDialect {};
    let tokens = Tokenizer::new(&dialect, &lexed.shadow)
        .tokenize_with_location()
        .map_err(syntax)?;
    lex::check_tokens(&lexed, &tokens)?;
    let src = Source::new(sql.as_bytes(), &lexed.shadow);
    let hints = hints::scan(&tokens, &src, &mut Edits::default())?;
    if !hints.hints.is_empty() {
        return Err(unsupported(
            "a shardgate hint in a statement for every shard database",
        ));
    }
    let references = scan(&tokens)?;
    let statements = Parser::new(&dialect)
        .with_tokens_with_locations(tokens)
        .parse_statements()
        .map_err(syntax)?;
    let [statement] = statements.as_slice() else {
        return Err(unsupported("not exactly one statement"));
    };
    let renames = match statement {
        Statement::RenameTable(_) => true,
        Statement::AlterTable(alter) => alter
            .operations
            .iter()
            .any(|op| matches!(op, AlterTableOperation::RenameTable { .. })),
        _ => false,
    };
    if renames {
        return Err(unsupported(
            "renaming a table on every shard: the config names its tables; rename in two steps (CREATE ... LIKE, copy, DROP)",
        ));
    }
    let Some((_, names)) = tables(statement)? else {
        return Err(unsupported(
            "not a table schema change (CREATE/DROP/ALTER TABLE, CREATE/DROP INDEX, TRUNCATE)",
        ));
    };
    check_references(statement, references)?;
    let mut idents_of = names.iter().map(|name| idents(name));
    let first = match idents_of.next().transpose()?.as_deref() {
        Some([table]) => table.value.clone(),
        _ => {
            return Err(unsupported(
                "a qualified table name: the statement runs in every shard database, name the table alone",
            ))
        }
    };
    for other in idents_of {
        if other?.len() != 1 {
            return Err(unsupported(
                "a qualified table name: the statement runs in every shard database, name the table alone",
            ));
        }
    }
    let dropped = matches!(
        statement,
        Statement::Drop {
            object_type: ObjectType::Table,
            ..
        }
    );
    Ok(MigrationTable {
        name: first,
        dropped,
    })
}
