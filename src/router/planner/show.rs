//! SHOW, DESCRIBE and the other statements about a database or a table's
//! definition. A table is the same in every shard database, so these run on
//! the database the statement names, else the one selected with USE (the
//! text then names it), else, when no table is involved, on any host.

use sqlparser::ast::{Ident, ObjectName, ObjectNamePart, ShowStatementIn, ShowStatementOptions};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use super::{any_host, idents, is_system_schema, object_name_text, unsupported, Env};
use crate::router::plan::{Plan, RouteError};
use crate::router::text::{Edits, Source};
use crate::topology::{FleetId, Topology};

/// What a SHOW's tokens say, found before parsing (sqlparser does not keep
/// it, or does not parse the statement at all).
#[derive(Default)]
pub(super) struct ShowScan {
    /// Where a `FROM db` goes: the end of `TABLES` (SHOW TABLES) or of
    /// `STATUS` (SHOW TABLE STATUS).
    pub keyword_end: Option<usize>,
    /// The first shard database the statement names.
    pub named_db: Option<(FleetId, u32)>,
}

impl ShowScan {
    pub(super) fn of(tokens: &[TokenWithSpan], src: &Source<'_>, topo: &Topology) -> Self {
        let keyword_end = tokens
            .iter()
            .find(|t| matches!(&t.token, Token::Word(w) if w.keyword == Keyword::TABLES || w.value.eq_ignore_ascii_case("STATUS")))
            .and_then(|t| src.offset(t.span.end));
        let named_db = tokens.iter().find_map(|t| match &t.token {
            Token::Word(w) => topo.parse_database(&w.value),
            _ => None,
        });
        ShowScan {
            keyword_end,
            named_db,
        }
    }
}

impl Env<'_> {
    /// A SHOW shardgate does not understand: on the shard database it names,
    /// else anywhere; text unchanged but for hints.
    pub(super) fn show_fallback(
        &self,
        db: Option<(FleetId, u32)>,
        edits: Edits,
    ) -> Result<Plan, RouteError> {
        match db {
            Some((fleet, shard)) => self.read_on(fleet, shard, edits),
            None => any_host(self.src.original, edits),
        }
    }

    /// A statement on a database the statement names: a system schema runs
    /// anywhere, a shard database on its shard.
    fn in_named_database(&self, db: &Ident, edits: Edits) -> Result<Plan, RouteError> {
        if is_system_schema(&db.value) {
            return any_host(self.src.original, edits);
        }
        let (fleet, shard) = self
            .topo
            .parse_database(&db.value)
            .ok_or_else(|| RouteError::UnknownDatabase(db.value.clone()))?;
        self.read_on(fleet, shard, edits)
    }

    /// A statement about one table's definition (`SHOW COLUMNS FROM t`,
    /// `SHOW CREATE TABLE t`, `DESCRIBE t`, `SHOW INDEX FROM t`): the table
    /// is the same in every shard database, so it needs a database, from
    /// the statement or from USE.
    pub(super) fn table_statement(
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
        if let Some(db) = db {
            return self.in_named_database(db, edits);
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
            self.check_fleet(rule, fleet, shard, |db| {
                format!("the current database {db} is")
            })?;
        }
        let at = self.range(table.span)?.start;
        edits.insert(at, format!("{}.", self.database_name(fleet, shard)));
        self.read_on(fleet, shard, edits)
    }

    /// `SHOW [FULL] TABLES [FROM db]` and `SHOW TABLE STATUS [FROM db]`:
    /// the named database, else the current one, else any host.
    pub(super) fn show_in_database(
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
        if let Some(db) = db {
            return self.in_named_database(db, edits);
        }
        match (self.ctx.current_db, keyword_end) {
            (Some((fleet, shard)), Some(at)) => {
                edits.insert(at, format!(" FROM {}", self.database_name(fleet, shard)));
                self.read_on(fleet, shard, edits)
            }
            _ => any_host(self.src.original, edits),
        }
    }

    /// SHOW forms sqlparser keeps as a word list: `SHOW INDEX FROM t [FROM
    /// db]`, `SHOW TABLE STATUS [FROM db]`; anything else runs on the shard
    /// database it names, or anywhere.
    pub(super) fn show_other(
        &self,
        words: &[Ident],
        scan: &ShowScan,
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
            return self.show_in(db, scan.keyword_end, edits);
        }
        self.show_fallback(scan.named_db, edits)
    }
}
