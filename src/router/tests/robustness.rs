//! Refusals, byte-faithful forwarding, and odd, deep or oversized input that must never panic or overflow the stack.

use super::*;

#[test]
fn refused_statements() {
    run(vec![
        c(
            "DROP DATABASE db00001",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c(
            "CREATE DATABASE foo",
            reject("Unsupported", "shardgate fleet init"),
        ),
        c("SELEC 1", reject("Syntax", "")),
        c("SELECT * FROM", reject("Syntax", "")),
        c("", reject("EmptyQuery", "Query was empty")),
        c("  ;", reject("EmptyQuery", "empty")),
        c(
            "DO (SELECT data FROM pins)",
            reject("Unsupported", "DO over a sharded table"),
        ),
        c(
            "DO (SELECT data FROM db00001.pins)",
            reject("Unsupported", "DO over"),
        ),
        c("SELECT 1; SELECT 2", reject("Syntax", "one at a time")),
        c("SELECT 'unterminated", reject("Syntax", "")),
        c("LOCK TABLES pins READ", reject("Unsupported", "LOCK")),
        c("SELECT data FROM nope", reject("UnknownTable", "nope")),
    ]);
    // Error codes.
    assert_eq!(RouteError::Syntax(String::new()).code(), 1064);
    assert_eq!(RouteError::UnknownTable(String::new()).code(), 1146);
    assert_eq!(RouteError::EmptyQuery.code(), 1065);
}

#[test]
fn comment_only_and_do_run_on_any_host_as_written() {
    // A server answers a statement of comments with an empty OK, and
    // evaluates DO without a result.
    let t = topo();
    let ctx = RouteContext::default();
    for sql in [
        "--",
        "-- x",
        "/* x */",
        "# x\n;",
        "DO 1",
        "do SLEEP(0), 1 + 1",
        "DO (SELECT 1)",
    ] {
        match route(sql, &t, &ctx, &mut Fixed(0)) {
            Plan::AnyHost { sql: text, .. } => assert_eq!(text, sql),
            other => panic!("{sql:?} routed to {other:?}"),
        }
    }
}

#[test]
fn faithful_forwarding() {
    // Text needing no rewrite is forwarded byte for byte.
    let t = topo();
    let ctx = RouteContext::default();
    for sql in [
        "SELECT /* a comment */ 1 -- trailing\n",
        "SELECT 'it''s', \"dq\", `bq` FROM information_schema.tables",
        "SELECT  data\tFROM db00001.pins\r\nWHERE local_id=1 # hash comment",
        "SELECT x'414243', 0x41, b'01', _utf8mb4'é' COLLATE utf8mb4_bin",
    ] {
        let text = match route(sql, &t, &ctx, &mut Fixed(0)) {
            Plan::AnyHost { sql, .. } => sql,
            Plan::Shard(q) => q.sql,
            other => panic!("{sql:?} routed to {other:?}"),
        };
        assert_eq!(text, sql);
    }
}

#[test]
fn never_panics_on_odd_input() {
    let t = topo();
    let ctx = RouteContext {
        current_db: Some((0, 1)),
        ..RouteContext::default()
    };
    for sql in [
        "\u{0}",
        "SELECT id FROM pins WHERE id IN ()",
        "SELECT /*+ SHARD(((( */ 1",
        "SELECT /*+ COLOCATE() */ 1",
        "INSERT INTO pins VALUES",
        "SELECT * FROM a.b.c",
        "USE",
        "SET",
        "SET = 1",
        "SHOW",
        "UPDATE pins SET (a, b) = (1, 2)",
        "SELECT 日本 FROM 日本",
        "SELECT id FROM pins p, boards b",
    ] {
        let _ = route(sql, &t, &ctx, &mut Fixed(0));
    }
    // Every prefix of multi-shard statements, with and without USE.
    let statements = [
        format!("SELECT 'é' AS x, COUNT(*), id FROM pins WHERE ((id = {PIN}) OR /* c */ id IN ({PIN_FAR}, '{PIN_B}')) GROUP BY 3, x ORDER BY 2 DESC LIMIT 5, 10"),
        "SELECT data FROM pins /*+ SCATTER */ WHERE data <> '' ORDER BY ts, id LIMIT 1 OFFSET 2".to_owned(),
        format!("SELECT pin_id FROM board_has_pins WHERE {BOARD} = board_id OR board_id = {BOARD_FAR} ORDER BY sequence"),
    ];
    for sql in &statements {
        for (end, _) in sql.char_indices() {
            for ctx in [RouteContext::default(), ctx] {
                let _ = route(&sql[..end], &t, &ctx, &mut Fixed(0));
                let _ = route_prepare(&sql[..end], &t, &ctx);
            }
        }
    }
}

/// Runs `f` on a thread with a `stack`-byte stack (a runtime worker has
/// 2 MiB); a stack overflow aborts the test binary.
fn on_small_stack<T: Send + 'static>(stack: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(f)
        .expect("thread starts")
        .join()
        .expect("no panic")
}

fn is_too_deep(plan: &Plan) -> bool {
    matches!(plan, Plan::Reject(e @ RouteError::TooDeep(m)) if m.len() > 10 && e.to_string().contains("nested too deeply") && e.code() == 1105)
}

#[test]
fn deep_statements_do_not_overflow_the_stack() {
    // Every shape an attacker can nest, 100,000 deep, on a runtime
    // worker's stack: refused, never a crash.
    let (plans, shapes) = on_small_stack(2 << 20, || {
        let t = topo();
        // Past the token cap most would be refused before parsing; the
        // nesting limit is what is tested here.
        let ctx = RouteContext {
            max_tokens: u64::MAX,
            ..RouteContext::default()
        };
        let n = 100_000;
        let shapes = vec![
            format!("SELECT 1{}", " IS NULL".repeat(n)),
            format!("SELECT 1{}", " IS NOT TRUE".repeat(n)),
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND 1{}",
                " IS NULL".repeat(n)
            ),
            format!("SELECT 'a'{}", " COLLATE utf8mb4_bin".repeat(n)),
            format!("SELECT {}1", "NOT ".repeat(n)),
            format!("SELECT {}1", "- ".repeat(n)),
            format!("SELECT {}1", "~".repeat(n)),
            format!("SELECT {}1", "!".repeat(n)),
            format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n)),
            format!(
                "SELECT * FROM {}pins{} WHERE id = {PIN}",
                "(".repeat(n),
                ")".repeat(n)
            ),
            format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n)),
            format!(
                "SELECT {}1{}",
                "CASE WHEN 1 THEN ".repeat(n),
                " END".repeat(n)
            ),
            format!("SELECT 1{}", " BETWEEN 0 AND 2".repeat(n)),
            format!("SELECT 1{}", " IN (1)".repeat(n)),
            format!("SELECT 1{}", " LIKE 'a'".repeat(n)),
            format!("SELECT 1{}", " = 1".repeat(n)),
            format!("SELECT 1{}", " + 1".repeat(n)),
            format!("SELECT 1{}", " UNION SELECT 1, 2".repeat(n)),
            format!(
                "SELECT data FROM pins WHERE id = {PIN}{}",
                " AND data <> 'x'".repeat(n)
            ),
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND ({}1)",
                "data = 'y' OR ".repeat(n)
            ),
            format!("SELECT /*+ SCATTER */ 1{} FROM pins", " + 1".repeat(n)),
            format!(
                "UPDATE pins SET data = 1{} WHERE id = {PIN}",
                " IS NULL".repeat(n)
            ),
            format!(
                "SELECT 1 FROM pins WHERE id = {PIN} ORDER BY 1{}",
                " + 1".repeat(n)
            ),
            // Unclosed: still refused before sqlparser recurses.
            format!("SELECT {}1", "(".repeat(n)),
        ];
        let plans: Vec<Plan> = shapes
            .iter()
            .map(|sql| route(sql, &t, &ctx, &mut Fixed(0)))
            .collect();
        (plans, shapes)
    });
    for (plan, sql) in plans.iter().zip(&shapes) {
        assert!(
            matches!(plan, Plan::Reject(_)),
            "{}: {}",
            &sql[..60],
            short(plan)
        );
    }
    assert!(plans.iter().filter(|p| is_too_deep(p)).count() >= 15);
}

#[test]
fn statements_just_within_the_depth_limits_route_on_a_quarter_of_a_worker_stack() {
    // The limits leave a 4x margin on a runtime worker's 2 MiB stack in a
    // debug build: the deepest statements they let through route on 512 KiB.
    let depth = planner::MAX_DEPTH as usize;
    let listed = planner::MAX_DEPTH_LISTED as usize;
    let walk = planner::MAX_WALK_DEPTH as usize;
    let plans = on_small_stack(512 << 10, move || {
        let t = topo();
        // The long flat lists below are past the default token cap; the
        // stack use is what is tested here.
        let ctx = RouteContext {
            max_tokens: u64::MAX,
            ..RouteContext::default()
        };
        [
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND (1{})",
                " OR 1".repeat(depth - 10)
            ),
            format!(
                "SELECT data FROM pins WHERE id = {PIN}{}",
                " AND data <> 'x'".repeat(depth / 2 - 10)
            ),
            format!("SELECT 1{}", " UNION SELECT 2".repeat(depth - 10)),
            format!(
                "SELECT data FROM pins WHERE id = {PIN} AND 1{}",
                " IS NULL".repeat(walk - 10)
            ),
            format!(
                "SELECT /*+ SCATTER */ 1{} AS x FROM pins ORDER BY 1{}",
                " + 1".repeat(listed - 2),
                " + 1".repeat(listed - 2)
            ),
            format!(
                "SELECT /*+ SCATTER */ id{}, COUNT(*) FROM pins GROUP BY id{}",
                " + 0".repeat(listed - 2),
                " + 0".repeat(listed - 2)
            ),
            format!(
                "SELECT id{} FROM pins WHERE id = {PIN}",
                " + 0".repeat(listed - 2)
            ),
            format!("SELECT CASE{} END", " WHEN 1 THEN 2".repeat(20_000)),
            format!("SELECT 1 IN ({}1)", "1, ".repeat(100_000)),
        ]
        .map(|sql| route(&sql, &t, &ctx, &mut Fixed(0)))
    });
    for plan in &plans {
        assert!(!matches!(plan, Plan::Reject(_)), "{}", short(plan));
    }
    // One more level is refused.
    let t = topo();
    let ctx = RouteContext::default();
    let over = format!(
        "SELECT data FROM pins WHERE id = {PIN} AND (1{})",
        " OR 1".repeat(depth + 1)
    );
    assert!(is_too_deep(&route(&over, &t, &ctx, &mut Fixed(0))));
    let over = format!(
        "SELECT 1{} FROM pins WHERE id = {PIN}",
        " + 1".repeat(listed + 1)
    );
    assert!(is_too_deep(&route(&over, &t, &ctx, &mut Fixed(0))));
    let over = format!(
        "SELECT data FROM pins WHERE id = {PIN} AND 1{}",
        " IS NULL".repeat(walk + 1)
    );
    assert!(is_too_deep(&route(&over, &t, &ctx, &mut Fixed(0))));
}

#[test]
fn token_cap_refuses_before_parsing() {
    let sql = format!(
        "SELECT 1 FROM pins WHERE id IN ({})",
        vec!["1"; 2_000].join(",")
    );
    let ctx = RouteContext {
        max_tokens: 1_000,
        ..RouteContext::default()
    };
    let plan = route(&sql, &topo(), &ctx, &mut Fixed(0));
    assert!(
        rejected_with(&plan, "Unsupported", "max_statement_tokens"),
        "{plan:?}"
    );
}

#[test]
fn bytes_in_bytes_out() {
    let latin1 = RouteContext {
        lex: LexMode {
            charset: ClientCharset::AsciiSafe,
            ..LexMode::default()
        },
        ..RouteContext::default()
    };
    let t = topo();
    let sql: &[u8] = b"SELECT HEX('\xe9')";
    assert_eq!(
        route(sql, &t, &latin1, &mut Fixed(0)),
        Plan::AnyHost {
            sql: sql.into(),
            writes_through_function: false,
        }
    );
    let mut sql = format!("SELECT data FROM pins WHERE id = {PIN} AND data = '").into_bytes();
    sql.extend_from_slice(b"\xe9\xff'");
    let mut want = b"SELECT data FROM db03429.pins WHERE local_id = 7075733 AND data = '".to_vec();
    want.extend_from_slice(b"\xe9\xff'");
    match route(sql.as_slice(), &t, &latin1, &mut Fixed(0)) {
        Plan::Shard(q) => assert_eq!(q.sql.as_bytes(), want.as_slice()),
        other => panic!("{other:?}"),
    }
    // Invalid UTF-8 on a utf8 connection: the same bytes, unchanged.
    match route(sql.as_slice(), &t, &RouteContext::default(), &mut Fixed(0)) {
        Plan::Shard(q) => assert_eq!(q.sql.as_bytes(), want.as_slice()),
        other => panic!("{other:?}"),
    }
}

/// Random statements built from pieces that stress the lexer (quotes,
/// comment markers, escapes, multibyte lead and trail bytes) never panic
/// the router, in any lexical mode.
#[test]
fn random_statements_never_panic() {
    const PIECES: &[&[u8]] = &[
        b"SELECT ",
        b"data ",
        b"FROM pins ",
        b"WHERE id = ",
        b"241294492511762325",
        b"'",
        b"\"",
        b"`",
        b"\\",
        b"/*",
        b"*/",
        b"/*!",
        b"/*M!",
        b"40101",
        b"999999",
        b"/*+ SHARD(1) */",
        b"--",
        b"-- ",
        b"#",
        b"\n",
        b";",
        b"?",
        b".",
        b"5e",
        b"1.5e-",
        b"x'",
        b"N'",
        b"\xbf",
        b"\x5c",
        b"\x81",
        b"\xe4\xb8\xad",
        b"\xff",
        b"\0",
        b" OR 1=1 ",
        b"SET STATEMENT a=1 FOR ",
        b"SET @a=1",
        b", GLOBAL x=1",
        b"(",
        b")",
        b",",
    ];
    let t = topo();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..40_000 {
        let mut sql = Vec::new();
        for _ in 0..(next() % 12) {
            sql.extend_from_slice(PIECES[(next() % PIECES.len() as u64) as usize]);
        }
        let charset = match next() % 5 {
            0 => ClientCharset::Utf8,
            1 => ClientCharset::AsciiSafe,
            2 => ClientCharset::AsciiTrail(TrailCharset::Gbk),
            3 => ClientCharset::AsciiTrail(TrailCharset::Big5),
            _ => ClientCharset::AsciiTrail(TrailCharset::Sjis),
        };
        let flags = next();
        let ctx = RouteContext {
            lex: LexMode {
                charset,
                no_backslash_escapes: flags & 1 != 0,
                ansi_quotes: flags & 2 != 0,
                ..LexMode::default()
            },
            ..RouteContext::default()
        };
        let _ = route(sql.as_slice(), &t, &ctx, &mut Fixed(0));
        let _ = route_prepare(sql.as_slice(), &t, &ctx);
        let _ = split_statements(sql.as_slice(), &ctx.lex);
        let _ = placeholders(sql.as_slice(), &ctx.lex);
    }
}
