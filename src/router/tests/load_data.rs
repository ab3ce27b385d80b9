//! LOAD DATA LOCAL INFILE: one explicit shard, the file name the server may ask for.

use super::*;

/// The file name a plan lets the server ask the client for.
fn file_of(plan: &Plan) -> Option<&[u8]> {
    match plan {
        Plan::Shard(query) => query.local_infile.as_deref(),
        _ => None,
    }
}

#[test]
fn load_data_local_runs_on_its_explicit_shard() {
    run(vec![
        c(
            "LOAD DATA LOCAL INFILE '/tmp/p.tsv' INTO TABLE db03429.pins (data)",
            write("db03429", "LOAD DATA LOCAL INFILE '/tmp/p.tsv' INTO TABLE db03429.pins (data)"),
        ),
        c(
            "load data low_priority local infile \"f.csv\" replace into table `db00007`.`t` character set utf8mb4 fields terminated by ',' enclosed by '\"' lines terminated by '\\n' ignore 1 lines (@a, b) set c = unhex(@a), d = NOW()",
            write("db00007", "load data low_priority local infile \"f.csv\" replace into table `db00007`.`t` character set utf8mb4 fields terminated by ',' enclosed by '\"' lines terminated by '\\n' ignore 1 lines (@a, b) set c = unhex(@a), d = NOW()"),
        ),
        c(
            "LOAD XML LOCAL INFILE 'x.xml' INTO TABLE db00003.t ROWS IDENTIFIED BY '<row>'",
            write("db00003", "LOAD XML LOCAL INFILE 'x.xml' INTO TABLE db00003.t ROWS IDENTIFIED BY '<row>'"),
        ),
        // Under USE: the table is qualified.
        u(
            "db00042",
            "LOAD DATA LOCAL INFILE 'p.tsv' IGNORE INTO TABLE pins (data)",
            write("db00042", "LOAD DATA LOCAL INFILE 'p.tsv' IGNORE INTO TABLE db00042.pins (data)"),
        ),
        u(
            "db00042",
            "LOAD DATA LOCAL INFILE 'p.tsv' INTO TABLE db00042.pins;",
            write("db00042", "LOAD DATA LOCAL INFILE 'p.tsv' INTO TABLE db00042.pins;"),
        ),
        // No shard database.
        c(
            "LOAD DATA LOCAL INFILE 'p.tsv' INTO TABLE pins (data)",
            reject("NoShardKey", "LOAD DATA LOCAL INFILE ... INTO TABLE dbNNNNN.pins"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p.tsv' INTO TABLE newtable",
            reject("UnknownTable", "newtable"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p.tsv' INTO TABLE elsewhere.pins",
            reject("UnknownDatabase", "elsewhere"),
        ),
        u(
            "msdb00001",
            "LOAD DATA LOCAL INFILE 'p.tsv' INTO TABLE pins",
            reject("CrossShard", "table pins lives on fleet main"),
        ),
        // The server's files stay out of reach.
        c(
            "LOAD DATA INFILE '/etc/passwd' INTO TABLE db03429.pins",
            reject("Unsupported", "without LOCAL reads a file on the server's host"),
        ),
        c(
            "LOAD DATA CONCURRENT INFILE '/etc/passwd' INTO TABLE db03429.pins",
            reject("Unsupported", "without LOCAL"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE mysql.user",
            reject("SystemSchema", "mysql"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE information_schema.tables",
            reject("SystemSchema", "information_schema"),
        ),
        // Nothing after the table may reach beyond it.
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE db03429.pins (data) SET data = (SELECT data FROM db00001.pins LIMIT 1)",
            reject("Unsupported", "SELECT after the table"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE db03429.pins (data) SET data = (SELECT 1)",
            reject("Unsupported", "SELECT after the table"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE db03429.pins (data) SET data = db00001.f(1)",
            reject("Unsupported", "qualified name"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE db03429.pins (@d) SET data = GET_LOCK('x', 1)",
            reject("Unsupported", "GET_LOCK() in LOAD DATA"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE db03429.pins (@d) SET data = NEXT VALUE FOR s",
            reject("Unsupported", "NEXT after the table"),
        ),
        c(
            "LOAD DATA LOCAL INFILE 'p' INTO TABLE db03429.pins; DROP TABLE db03429.pins",
            reject("Syntax", "several statements"),
        ),
        c(
            "LOAD /*+ SHARD(7) */ DATA LOCAL INFILE 'p' INTO TABLE pins",
            reject("Unsupported", "a hint on LOAD DATA"),
        ),
        c("LOAD DATA LOCAL INFILE p INTO TABLE db00001.t", reject("Unsupported", "quoted file name")),
        c("LOAD DATA LOCAL 'p' INTO TABLE db00001.t", reject("Unsupported", "without INFILE")),
        c("LOAD DATA LOCAL INFILE 'p' db00001.t", reject("Unsupported", "INTO TABLE")),
        c("LOAD INDEX INTO CACHE t", reject("Unsupported", "without DATA or XML")),
    ]);
}

#[test]
fn the_file_name_is_the_one_the_server_decodes() {
    let t = topo();
    let ctx = RouteContext::default();
    let plan = |sql: &str, ctx: &RouteContext| route(sql, &t, ctx, &mut Fixed(1));
    let cases: [(&str, &[u8]); 4] = [
        (
            "LOAD DATA LOCAL INFILE '/tmp/a.tsv' INTO TABLE db00001.t",
            b"/tmp/a.tsv",
        ),
        (
            "LOAD DATA LOCAL INFILE 'it''s\\ttab\\\\' INTO TABLE db00001.t",
            b"it's\ttab\\",
        ),
        (
            "LOAD DATA LOCAL INFILE \"d\\\"q\" INTO TABLE db00001.t",
            b"d\"q",
        ),
        (
            "LOAD DATA LOCAL INFILE 'caf\u{e9}.tsv' INTO TABLE db00001.t",
            "caf\u{e9}.tsv".as_bytes(),
        ),
    ];
    for (sql, name) in cases {
        assert_eq!(file_of(&plan(sql, &ctx)), Some(name), "{sql}");
    }
    // A name whose bytes the lexer masks (a backslash under
    // NO_BACKSLASH_ESCAPES, non-ASCII in a non-UTF-8 character set) is
    // refused rather than guessed.
    let raw = RouteContext {
        lex: LexMode {
            no_backslash_escapes: true,
            ..LexMode::default()
        },
        ..RouteContext::default()
    };
    let sql = "LOAD DATA LOCAL INFILE 'C:\\tmp\\a.tsv' INTO TABLE db00001.t";
    let masked = plan(sql, &raw);
    assert!(
        rejected_with(&masked, "Unsupported", "file name with bytes"),
        "{masked:?}"
    );
    // Statements other than LOAD DATA never let the server ask.
    assert_eq!(file_of(&plan("SELECT data FROM db00001.pins", &ctx)), None);
    // Not prepared (as on a server).
    let prepared = route_prepare("LOAD DATA LOCAL INFILE 'p' INTO TABLE db00001.t", &t, &ctx);
    assert!(
        rejected_with(&prepared, "Unsupported", "prepared statement"),
        "{prepared:?}"
    );
}
