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
}
