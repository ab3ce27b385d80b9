//! Splitting a schema file (`config/schema.sql`) into `CREATE TABLE`
//! statements and assigning each to the fleet that owns the table.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::router::{self, LexMode, Outline};
use crate::topology::{FleetId, Topology};

use super::OpsError;

/// One `CREATE TABLE` statement of the schema file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDdl {
    /// Table name as written (unquoted, case kept).
    pub name: String,
    /// The statement, comments removed, without the trailing `;`, always
    /// with `IF NOT EXISTS` so that running it again is harmless.
    pub sql: String,
    /// 1-based line of the statement in the schema file.
    pub line: usize,
}

/// The schema split per fleet: what to create in every shard database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetSchema {
    /// Tables of each fleet, in schema-file order. Fleets with no table in
    /// the schema are absent.
    pub by_fleet: BTreeMap<FleetId, Vec<TableDdl>>,
    /// Tables named in the config that the schema file does not create
    /// (lower case). Not an error: the proxy would answer 1146 for them.
    pub missing_from_schema: Vec<String>,
}

/// A statement of the schema file and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Statement text: comments removed (except `/*! ... */` and `/*+ ... */`),
    /// trimmed, no trailing `;`.
    pub text: String,
    /// 1-based line where the statement starts.
    pub line: usize,
}

/// Splits SQL text into statements at `;` with the router's lexer, read as
/// MariaDB reads it with default modes (backslash escapes, no ANSI_QUOTES,
/// utf8mb4): quotes, `-- `, `#` and `/* */` comments, executable comments.
/// Plain comments are dropped; `/*! ... */` and `/*+ ... */` are kept. A
/// text the lexer refuses (an unterminated quote or comment, ...) is an
/// error naming the line where the refused token starts.
pub fn split_statements(sql: &str) -> Result<Vec<Statement>, OpsError> {
    let outline = router::outline(sql, &LexMode::default()).map_err(|e| OpsError::Schema {
        line: line_at(sql, e.at),
        message: e.error.to_string(),
    })?;
    let plain: Vec<Range<usize>> = outline
        .comments
        .into_iter()
        .filter(|c| c.plain)
        .map(|c| c.range)
        .collect();
    let mut out = Vec::new();
    for range in outline.statements {
        let mut text = String::new();
        let mut first_kept = None;
        let mut at = range.start;
        for comment in plain
            .iter()
            .filter(|c| c.start >= range.start && c.end <= range.end)
        {
            let before = sql.get(at..comment.start).unwrap_or_default();
            if first_kept.is_none() && !before.trim().is_empty() {
                first_kept = Some(at + (before.len() - before.trim_start().len()));
            }
            text.push_str(before);
            if sql
                .get(comment.clone())
                .is_some_and(|c| c.starts_with("/*"))
            {
                text.push(' ');
            }
            at = comment.end;
        }
        let rest = sql.get(at..range.end).unwrap_or_default();
        if first_kept.is_none() && !rest.trim().is_empty() {
            first_kept = Some(at + (rest.len() - rest.trim_start().len()));
        }
        text.push_str(rest);
        if let Some(start) = first_kept {
            out.push(Statement {
                text: text.trim().to_string(),
                line: line_at(sql, start),
            });
        }
    }
    Ok(out)
}

/// The 1-based line of byte offset `at` of `sql`.
fn line_at(sql: &str, at: usize) -> usize {
    1 + sql.as_bytes()[..at.min(sql.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Reads the table name of a `CREATE TABLE` statement and returns it with the
/// statement made idempotent (`IF NOT EXISTS` added when missing).
/// Anything else (other statements, `CREATE TEMPORARY TABLE`, qualified
/// names) is an error naming the line.
pub fn parse_create_table(stmt: &Statement) -> Result<TableDdl, OpsError> {
    let err = |message: String| OpsError::Schema {
        line: stmt.line,
        message,
    };
    let text = stmt.text.as_str();
    let mut rest = text;
    let first = word(&mut rest);
    let second = word(&mut rest);
    if first != "CREATE" || second != "TABLE" {
        let head: String = text.chars().take(40).collect();
        return Err(err(format!(
            "only CREATE TABLE statements are allowed in a schema file, found `{head}`"
        )));
    }
    let after_table = text.len() - rest.len();
    // Optional IF NOT EXISTS.
    let mut probe = rest;
    let has_if_not_exists = word(&mut probe) == "IF" && word(&mut probe) == "NOT" && {
        let w = word(&mut probe);
        w == "EXISTS"
    };
    if has_if_not_exists {
        rest = probe;
    }
    // The table name: `quoted` or bare.
    let r = rest.trim_start();
    let (name, after_name) = if let Some(q) = r.strip_prefix('`') {
        let end = q
            .find('`')
            .ok_or_else(|| err("unterminated `quoted` table name".into()))?;
        (q[..end].to_string(), &q[end + 1..])
    } else {
        let end = r
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(r.len());
        (r[..end].to_string(), &r[end..])
    };
    if name.is_empty() {
        return Err(err("CREATE TABLE without a table name".into()));
    }
    if after_name.trim_start().starts_with('.') {
        return Err(err(format!(
            "table `{name}` is qualified with a database; write only the table name \
             (it is created in every shard database)"
        )));
    }
    let sql = if has_if_not_exists {
        text.to_string()
    } else {
        format!(
            "{} IF NOT EXISTS{}",
            &text[..after_table],
            &text[after_table..]
        )
    };
    Ok(TableDdl {
        name,
        sql,
        line: stmt.line,
    })
}

/// The next keyword of `rest` (upper case), advancing `rest` past it.
fn word(rest: &mut &str) -> String {
    let t = rest.trim_start();
    let end = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(t.len());
    let w = t[..end].to_ascii_uppercase();
    *rest = &t[end..];
    w
}

/// Words that start an index or constraint in a `CREATE TABLE` column list
/// (anything else starts a column).
const NOT_COLUMNS: [&str; 9] = [
    "PRIMARY",
    "KEY",
    "INDEX",
    "UNIQUE",
    "CONSTRAINT",
    "FOREIGN",
    "FULLTEXT",
    "SPATIAL",
    "CHECK",
];

/// The column names of a `CREATE TABLE` statement, in order, as written
/// (backquotes removed). Indexes and constraints are skipped; quotes,
/// comments and nested parentheses (`DECIMAL(10,2)`, `ENUM('a,b')`) are
/// honoured. A statement without a column list (`LIKE`, `AS SELECT`) is an
/// error naming its line.
pub fn table_columns(ddl: &TableDdl) -> Result<Vec<String>, OpsError> {
    let err = |message: String| OpsError::Schema {
        line: ddl.line,
        message,
    };
    let sql = ddl.sql.as_str();
    let outline = router::outline(sql, &LexMode::default())
        .map_err(|e| err(format!("table `{}`: {}", ddl.name, e.error)))?;
    let elements = column_list(sql, &outline).ok_or_else(|| {
        err(format!(
            "table `{}` has no column list (write its columns; LIKE and AS SELECT \
             are not supported in a schema file)",
            ddl.name
        ))
    })?;
    let mut columns = Vec::new();
    for element in elements {
        let text = sql.get(element.clone()).unwrap_or_default();
        let skipped = text.len() - router::skip_blanks_and_comments(text.as_bytes()).len();
        let start = element.start + skipped;
        let element = sql.get(start..element.end).unwrap_or_default().trim_end();
        if element.starts_with('`') {
            let quoted = outline.quoted.iter().find(|q| q.start == start);
            let name = quoted
                .and_then(|q| sql.get(q.start + 1..q.end - 1))
                .map(|name| name.replace("``", "`"));
            columns.push(name.ok_or_else(|| {
                err(format!(
                    "table `{}`: cannot read the `quoted` column name",
                    ddl.name
                ))
            })?);
            continue;
        }
        let end = element
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(element.len());
        let (name, mut rest) = element.split_at(end);
        if name.is_empty() {
            return Err(err(format!(
                "table `{}`: cannot read a column name in `{}`",
                ddl.name,
                element.chars().take(40).collect::<String>()
            )));
        }
        let keyword = name.to_ascii_uppercase();
        let is_period = keyword == "PERIOD" && word(&mut rest) == "FOR";
        if is_period || NOT_COLUMNS.contains(&keyword.as_str()) {
            continue;
        }
        columns.push(name.to_string());
    }
    Ok(columns)
}

/// The byte ranges of the top-level comma-separated elements inside the
/// first parenthesis of `sql`; its quoted text and comments (as `outline`
/// found them) are not looked into.
fn column_list(sql: &str, outline: &Outline) -> Option<Vec<Range<usize>>> {
    let mut opaque: Vec<Range<usize>> = outline
        .quoted
        .iter()
        .cloned()
        .chain(outline.comments.iter().map(|c| c.range.clone()))
        .collect();
    opaque.sort_by_key(|r| r.start);
    let mut opaque = opaque.into_iter().peekable();
    let bytes = sql.as_bytes();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut elements = Vec::new();
    let mut i = 0usize;
    while i < bytes.len() {
        while opaque.next_if(|r| r.end <= i).is_some() {}
        if let Some(skip) = opaque.next_if(|r| r.start <= i) {
            i = skip.end;
            continue;
        }
        match bytes[i] {
            b'(' => {
                depth += 1;
                if depth == 1 {
                    start = i + 1;
                }
            }
            b')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    elements.push(start..i);
                    return Some(elements);
                }
            }
            b',' if depth == 1 => {
                elements.push(start..i);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Parses a schema file and assigns every table to its fleet by the
/// config's `tables` section. Tables the config does not name are an error
/// listing all of them; so are duplicate tables and non-`CREATE TABLE`
/// statements.
pub fn plan_schema(topology: &Topology, schema_sql: &str) -> Result<FleetSchema, OpsError> {
    let mut plan = FleetSchema::default();
    let mut unknown = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for stmt in split_statements(schema_sql)? {
        let ddl = parse_create_table(&stmt)?;
        let key = ddl.name.to_ascii_lowercase();
        if let Some(first) = seen.insert(key.clone(), ddl.line) {
            return Err(OpsError::Schema {
                line: ddl.line,
                message: format!(
                    "table `{}` is created twice (first on line {first})",
                    ddl.name
                ),
            });
        }
        match topology.table(&key) {
            Some(rule) => plan.by_fleet.entry(rule.fleet).or_default().push(ddl),
            None => unknown.push(format!("{} (line {})", ddl.name, ddl.line)),
        }
    }
    if !unknown.is_empty() {
        return Err(OpsError::UnknownTables { tables: unknown });
    }
    let mut missing: Vec<String> = topology
        .tables
        .keys()
        .filter(|t| !seen.contains_key(&t.to_ascii_lowercase()))
        .cloned()
        .collect();
    missing.sort();
    plan.missing_from_schema = missing;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_strips_comments() {
        let sql = "-- header\n# hash comment\nCREATE TABLE a (x INT COMMENT 'semi;colon -- not a comment');\n\n/* block; */ CREATE TABLE `b` (y TEXT DEFAULT \"it\"\"s;\") /*!50100 ENGINE=InnoDB */;\nCREATE TABLE c (z INT)";
        let stmts = split_statements(sql).unwrap();
        assert_eq!(stmts.len(), 3);
        assert_eq!(
            stmts[0].text,
            "CREATE TABLE a (x INT COMMENT 'semi;colon -- not a comment')"
        );
        assert_eq!(stmts[0].line, 3);
        assert!(stmts[1].text.starts_with("CREATE TABLE `b`"));
        assert!(stmts[1].text.contains("\"it\"\"s;\""));
        assert!(stmts[1].text.contains("/*!50100 ENGINE=InnoDB */"));
        assert_eq!(stmts[1].line, 5);
        assert_eq!(stmts[2].text, "CREATE TABLE c (z INT)");
        assert_eq!(stmts[2].line, 6);
    }

    #[test]
    fn unterminated_quote_is_an_error_with_line() {
        let e = split_statements("\nCREATE TABLE a (x INT DEFAULT 'oops);").unwrap_err();
        assert!(matches!(e, OpsError::Schema { line: 2, .. }), "{e}");
        let e = split_statements("CREATE TABLE a (x INT);\nCREATE TABLE b (\n  y INT /* oops")
            .unwrap_err();
        assert!(matches!(e, OpsError::Schema { line: 3, .. }), "{e}");
        assert!(e.to_string().contains("unterminated comment"), "{e}");
    }

    #[test]
    fn keeps_executable_comments_and_hints() {
        let sql = "/*+ SET_VAR(x=1) */ CREATE TABLE a ( -- the key\n  id INT, /*!50100 b INT, */\n  c INT # last\n) /*!99999 FUTURE */";
        let stmts = split_statements(sql).unwrap();
        assert_eq!(
            stmts[0].text,
            "/*+ SET_VAR(x=1) */ CREATE TABLE a ( \n  id INT, /*!50100 b INT, */\n  c INT \n) /*!99999 FUTURE */"
        );
        assert_eq!(stmts[0].line, 1);
        let ddl = TableDdl {
            name: "a".into(),
            sql: "CREATE TABLE a ( -- the key\n  id INT, # x, y\n /*!50100 */ c INT)".into(),
            line: 1,
        };
        assert_eq!(table_columns(&ddl).unwrap(), ["id", "c"]);
    }

    #[test]
    fn adds_if_not_exists() {
        let s = Statement {
            text: "create table pins (id int)".into(),
            line: 1,
        };
        let d = parse_create_table(&s).unwrap();
        assert_eq!(d.name, "pins");
        assert_eq!(d.sql, "create table IF NOT EXISTS pins (id int)");
        let s = Statement {
            text: "CREATE TABLE IF NOT EXISTS `Board Pins` (id int)".into(),
            line: 1,
        };
        let d = parse_create_table(&s).unwrap();
        assert_eq!(d.name, "Board Pins");
        assert_eq!(d.sql, s.text);
    }

    #[test]
    fn rejects_other_statements_and_qualified_names() {
        for text in [
            "DROP TABLE pins",
            "CREATE TEMPORARY TABLE t (x int)",
            "CREATE TABLE db00001.pins (x int)",
            "INSERT INTO pins VALUES (1)",
        ] {
            let s = Statement {
                text: text.into(),
                line: 7,
            };
            let e = parse_create_table(&s).unwrap_err();
            assert!(matches!(e, OpsError::Schema { line: 7, .. }), "{text}: {e}");
        }
    }

    #[test]
    fn shipped_schema_parses() {
        let sql = include_str!("../../config/schema.sql");
        let names: Vec<String> = split_statements(sql)
            .unwrap()
            .iter()
            .map(|s| parse_create_table(s).unwrap().name)
            .collect();
        assert_eq!(
            names,
            [
                "pins",
                "boards",
                "users",
                "board_has_pins",
                "user_likes_pins",
                "user_by_email",
                "photos"
            ]
        );
    }

    #[test]
    fn columns_in_order_without_indexes() {
        let ddl = |sql: &str| TableDdl {
            name: "t".into(),
            sql: sql.into(),
            line: 4,
        };
        let cols = table_columns(&ddl(
            "CREATE TABLE IF NOT EXISTS t (\n  `local id` BIGINT, price DECIMAL(10,2) DEFAULT '1,5',\n  \
             kind ENUM('a,b', 'c)') COMMENT 'x(', `we``ird` INT, /* c, d */ period INT,\n  \
             PRIMARY KEY (`local id`), KEY k (price, kind), UNIQUE u (kind), CONSTRAINT c CHECK (price > 0),\n  \
             PERIOD FOR p (a, b), INDEX i (period), FULLTEXT f (kind)) ENGINE=InnoDB COMMENT 'y (z, w)'",
        ))
        .unwrap();
        assert_eq!(cols, ["local id", "price", "kind", "we`ird", "period"]);
        let e = table_columns(&ddl("CREATE TABLE IF NOT EXISTS t LIKE s")).unwrap_err();
        assert!(matches!(e, OpsError::Schema { line: 4, .. }), "{e}");
        assert!(e.to_string().contains("no column list"), "{e}");
    }

    #[test]
    fn shipped_schema_columns() {
        let sql = include_str!("../../config/schema.sql");
        let stmts = split_statements(sql).unwrap();
        let cols: Vec<Vec<String>> = stmts
            .iter()
            .map(|s| table_columns(&parse_create_table(s).unwrap()).unwrap())
            .collect();
        assert_eq!(cols[0], ["local_id", "data", "ts"]);
        assert_eq!(cols[3], ["board_id", "pin_id", "sequence"]);
        assert_eq!(cols[5], ["email", "user_id"]);
    }
}
