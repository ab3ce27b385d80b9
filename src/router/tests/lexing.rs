//! Lexical modes and comments read as the server reads them: executable comments, NO_BACKSLASH_ESCAPES, ANSI_QUOTES, multibyte charsets.

use super::*;

#[test]
fn executable_comments_are_read_as_the_server_reads_them() {
    let mariadb = LexMode {
        server_version: 101119,
        ..LexMode::default()
    };
    // The content of /*M! */ is SQL to MariaDB.
    let plan = route_lex(
        "/*M!CREATE TABLE db00001.x (a int) */ SELECT local_id FROM db00001.pins LIMIT 0",
        mariadb,
    );
    assert!(matches!(plan, Plan::Reject(_)), "{plan:?}");
    let plan = route_lex("SET @a=1 /*M!, GLOBAL max_connect_errors=4242 */", mariadb);
    assert!(rejected_with(&plan, "Unsupported", "GLOBAL"), "{plan:?}");
    let plan = route_lex(
        "SET @a=1 /*!100000 , GLOBAL max_connect_errors=4242 */",
        mariadb,
    );
    assert!(rejected_with(&plan, "Unsupported", "GLOBAL"), "{plan:?}");
    // Too new for the server: a comment, not SQL.
    let plan = route_lex(
        "SET @a=1 /*!999999 , GLOBAL max_connect_errors=4242 */",
        mariadb,
    );
    assert!(
        matches!(plan, Plan::Session(SessionAction::SetSession { .. })),
        "{plan:?}"
    );
    // MySQL 5.7+ versions are skipped by MariaDB.
    let plan = route_lex("SELECT 1 /*!50708 , (SELECT 1 FROM pins) */", mariadb);
    assert_eq!(
        plan,
        Plan::AnyHost {
            sql: "SELECT 1 /*!50708 , (SELECT 1 FROM pins) */".into(),
            writes_through_function: false,
        }
    );
    // Edits inside an executed comment land in place.
    let sql = format!("SELECT data FROM pins WHERE /*!id = {PIN}*/");
    match route_lex(&sql, mariadb) {
        Plan::Shard(q) => assert_eq!(
            q.sql,
            "SELECT data FROM db03429.pins WHERE /*!local_id = 7075733*/"
        ),
        other => panic!("{other:?}"),
    }
    let sql = format!("SELECT data FROM pins WHERE /*!40101 id = {PIN} */ /*!99999 OR 1=1 */");
    match route_lex(&sql, mariadb) {
        Plan::Shard(q) => assert_eq!(
            q.sql,
            "SELECT data FROM db03429.pins WHERE /*!40101 local_id = 7075733 */ /*!99999 OR 1=1 */"
        ),
        other => panic!("{other:?}"),
    }
    // A hint inside an executable comment, a nested comment: refused.
    for sql in [
        "SELECT /*! /*+ SHARD(1) */ 1 */",
        "SELECT 1 /*!99999 /* x */ OR 1=1 */",
        "SELECT 1--1",
    ] {
        let plan = route_lex(sql, mariadb);
        assert!(
            matches!(plan, Plan::Reject(RouteError::Unreadable(_))),
            "{sql}: {plan:?}"
        );
    }
}

#[test]
fn no_backslash_escapes_and_ansi_quotes() {
    let nbe = LexMode {
        no_backslash_escapes: true,
        ..LexMode::default()
    };
    // Under NO_BACKSLASH_ESCAPES the backslash does not escape the quote:
    // the string ends there and the GLOBAL assignment is SQL.
    let sql = "SET @x='\\', GLOBAL max_connect_errors=4243 -- '";
    assert!(rejected_with(&route_lex(sql, nbe), "Unsupported", "GLOBAL"));
    // Without the mode it is one string: a user variable.
    assert!(matches!(
        route_lex(sql, LexMode::default()),
        Plan::Session(SessionAction::SetSession { .. })
    ));
    // A backslash in a string under the mode: read as a character.
    let sql = format!("SELECT data FROM pins WHERE id = {PIN} AND data = 'a\\'");
    match route_lex(&sql, nbe) {
        Plan::Shard(q) => assert_eq!(
            q.sql,
            "SELECT data FROM db03429.pins WHERE local_id = 7075733 AND data = 'a\\'"
        ),
        other => panic!("{other:?}"),
    }
    // ANSI_QUOTES: "pins" is a table.
    let ansi = LexMode {
        ansi_quotes: true,
        ..LexMode::default()
    };
    let sql = format!("SELECT \"data\" FROM \"pins\" WHERE \"id\" = {PIN}");
    match route_lex(&sql, ansi) {
        Plan::Shard(q) => assert!(q.sql.to_string().contains("7075733"), "{}", q.sql),
        other => panic!("{other:?}"),
    }
}

#[test]
fn gbk_multibyte_characters_swallow_no_backslash() {
    let gbk = LexMode {
        charset: ClientCharset::AsciiTrail(TrailCharset::Gbk),
        ..LexMode::default()
    };
    // 中 is E4 B8 AD; read as gbk, AD 5C is one character, and the quote
    // after it ends the string: `OR 1=1` is SQL.
    let sql = format!("SELECT data FROM pins WHERE id = {PIN} AND data = '中\\' OR 1=1 -- '");
    let plan = route_lex(&sql, gbk);
    assert!(matches!(plan, Plan::Reject(_)), "{plan:?}");
    // Read as UTF-8 it is one string.
    assert!(matches!(
        route_lex(&sql, LexMode::default()),
        Plan::Shard(_)
    ));
}

#[test]
fn literals_and_comments_cross_checked() {
    // Prefixed literals, concatenated strings and kept hints agree.
    let plan = route_lex(
        "SELECT x'41', X'42', b'1', N'n', _utf8mb4'u' 'v', 0x41, `a``b` /*+ MAX_EXECUTION_TIME(1) */",
        LexMode::default(),
    );
    assert!(matches!(plan, Plan::AnyHost { .. }), "{plan:?}");
}

#[test]
fn multibyte_identifiers_are_words_and_reach_the_server_as_written() {
    let route_bytes = |sql: &[u8], charset: ClientCharset| {
        let ctx = RouteContext {
            lex: LexMode {
                charset,
                ..LexMode::default()
            },
            ..RouteContext::default()
        };
        route(sql, &topo(), &ctx, &mut Fixed(3429))
    };
    // 海豚 in gbk, シイラ in sjis, 皿 in big5 (Connector/Python's
    // BugOra21535573): unquoted column names.
    for (charset, name) in [
        (TrailCharset::Gbk, &b"\xBA\xA3\xEB\xE0"[..]),
        (TrailCharset::Sjis, &b"\x83\x56\x83\x43\x83\x89"[..]),
        (TrailCharset::Big5, &b"\xA5\xD6"[..]),
    ] {
        let mut sql = b"CREATE TABLE db00001.mbtest (".to_vec();
        sql.extend_from_slice(name);
        sql.extend_from_slice(b" INT AUTO_INCREMENT KEY, c1 VARCHAR(40))");
        match route_bytes(&sql, ClientCharset::AsciiTrail(charset)) {
            Plan::Shard(q) => assert!(
                q.sql.0.windows(name.len()).any(|w| w == name),
                "{charset:?}: the name's bytes as written: {:?}",
                q.sql
            ),
            other => panic!("{charset:?}: {other:?}"),
        }
    }
    // A single-byte character set's non-ASCII byte outside quotes: refused
    // with the way out; quoted, it goes through.
    let latin1 = b"SELECT caf\xE9 FROM db00001.pins";
    let plan = route_bytes(latin1, ClientCharset::AsciiSafe);
    assert!(rejected_with(&plan, "Unsupported", "backticks"), "{plan:?}");
    let quoted = b"SELECT `caf\xE9` FROM db00001.pins";
    assert!(
        matches!(
            route_bytes(quoted, ClientCharset::AsciiSafe),
            Plan::Shard(_)
        ),
        "quoted"
    );
}
