//! Splitting a schema file (`config/schema.sql`) into `CREATE TABLE`
//! statements and assigning each to the fleet that owns the table.

use std::collections::BTreeMap;

use crate::topology::{FleetId, Topology};

use super::FleetError;

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

/// Splits SQL text into statements at `;`, honouring quotes (`'`, `"`,
/// `` ` ``) and comments (`-- `, `#`, `/* */`). Plain comments are dropped.
pub fn split_statements(sql: &str) -> Result<Vec<Statement>, FleetError> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut line = 1usize;
    let mut start_line = 0usize; // line of the first non-blank char of `cur`
    let mut i = 0usize;
    let n = chars.len();

    let push = |cur: &mut String, start_line: &mut usize, out: &mut Vec<Statement>| {
        let text = cur.trim();
        if !text.is_empty() {
            out.push(Statement {
                text: text.to_string(),
                line: *start_line,
            });
        }
        cur.clear();
        *start_line = 0;
    };

    while i < n {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        // Line comments: `-- ` (dash dash whitespace or end) and `#`.
        let dash_comment =
            c == '-' && next == Some('-') && chars.get(i + 2).is_none_or(|c| c.is_whitespace());
        if dash_comment || c == '#' {
            while i < n && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let keep = matches!(chars.get(i + 2), Some('!') | Some('+'));
            let open_line = line;
            let mut j = i + 2;
            loop {
                if j + 1 >= n {
                    return Err(FleetError::Schema {
                        line: open_line,
                        message: "unterminated /* comment".into(),
                    });
                }
                if chars[j] == '*' && chars[j + 1] == '/' {
                    break;
                }
                j += 1;
            }
            let body: String = chars[i..j + 2].iter().collect();
            line += body.matches('\n').count();
            if keep {
                if start_line == 0 {
                    start_line = open_line;
                }
                cur.push_str(&body);
            } else {
                cur.push(' ');
            }
            i = j + 2;
            continue;
        }
        if c == '\'' || c == '"' || c == '`' {
            let open_line = line;
            if start_line == 0 {
                start_line = line;
            }
            cur.push(c);
            i += 1;
            loop {
                if i >= n {
                    return Err(FleetError::Schema {
                        line: open_line,
                        message: format!("unterminated {c}quoted{c} text"),
                    });
                }
                let d = chars[i];
                cur.push(d);
                if d == '\n' {
                    line += 1;
                }
                i += 1;
                if d == '\\' && c != '`' && i < n {
                    cur.push(chars[i]);
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                } else if d == c {
                    // A doubled quote is an escaped quote.
                    if i < n && chars[i] == c {
                        cur.push(c);
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            continue;
        }
        if c == ';' {
            push(&mut cur, &mut start_line, &mut out);
            i += 1;
            continue;
        }
        if c == '\n' {
            line += 1;
        }
        if start_line == 0 && !c.is_whitespace() {
            start_line = line;
        }
        cur.push(c);
        i += 1;
    }
    push(&mut cur, &mut start_line, &mut out);
    Ok(out)
}

/// Reads the table name of a `CREATE TABLE` statement and returns it with the
/// statement made idempotent (`IF NOT EXISTS` added when missing).
/// Anything else (other statements, `CREATE TEMPORARY TABLE`, qualified
/// names) is an error naming the line.
pub fn parse_create_table(stmt: &Statement) -> Result<TableDdl, FleetError> {
    let err = |message: String| FleetError::Schema {
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
pub fn table_columns(ddl: &TableDdl) -> Result<Vec<String>, FleetError> {
    let err = |message: String| FleetError::Schema {
        line: ddl.line,
        message,
    };
    let elements = column_list(&ddl.sql).ok_or_else(|| {
        err(format!(
            "table `{}` has no column list (write its columns; LIKE and AS SELECT \
             are not supported in a schema file)",
            ddl.name
        ))
    })?;
    let mut columns = Vec::new();
    for element in elements {
        let mut element = element.trim();
        while let Some(after) = element.strip_prefix("/*") {
            element = after
                .split_once("*/")
                .map_or("", |(_, rest)| rest)
                .trim_start();
        }
        if let Some(quoted) = element.strip_prefix('`') {
            columns.push(backquoted(quoted).ok_or_else(|| {
                err(format!(
                    "table `{}`: unterminated `quoted` column name",
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

/// The name in `` `name`... `` (after the opening backquote), with doubled
/// backquotes undone.
fn backquoted(text: &str) -> Option<String> {
    let mut name = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '`' {
            if chars.peek() == Some(&'`') {
                chars.next();
            } else {
                return Some(name);
            }
        }
        name.push(c);
    }
    None
}

/// The top-level comma-separated elements inside the first parenthesis of
/// `sql`, skipping quoted text and `/* */` comments.
fn column_list(sql: &str) -> Option<Vec<&str>> {
    let bytes = sql.as_bytes();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut elements = Vec::new();
    let mut i = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < bytes.len() {
                    if bytes[i] == b'\\' && q != b'`' {
                        i += 2;
                        continue;
                    }
                    if bytes[i] == q {
                        if bytes.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = sql[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |end| i + 2 + end + 1);
            }
            b'(' => {
                depth += 1;
                if depth == 1 {
                    start = i + 1;
                }
            }
            b')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    elements.push(&sql[start..i]);
                    return Some(elements);
                }
            }
            b',' if depth == 1 => {
                elements.push(&sql[start..i]);
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
pub fn plan_schema(topology: &Topology, schema_sql: &str) -> Result<FleetSchema, FleetError> {
    let mut plan = FleetSchema::default();
    let mut unknown = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for stmt in split_statements(schema_sql)? {
        let ddl = parse_create_table(&stmt)?;
        let key = ddl.name.to_ascii_lowercase();
        if let Some(first) = seen.insert(key.clone(), ddl.line) {
            return Err(FleetError::Schema {
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
        return Err(FleetError::UnknownTables { tables: unknown });
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
        assert!(matches!(e, FleetError::Schema { line: 2, .. }), "{e}");
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
            assert!(
                matches!(e, FleetError::Schema { line: 7, .. }),
                "{text}: {e}"
            );
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
                "user_by_email"
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
        assert!(matches!(e, FleetError::Schema { line: 4, .. }), "{e}");
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
