//! SQL literals rendered from parameter values.

use super::*;

#[test]
fn numbers_render() {
    let u = "utf8mb4";
    assert_eq!(lit(&ParamValue::Null, u), "NULL");
    assert_eq!(lit(&ParamValue::Int(i64::MIN), u), "-9223372036854775808");
    assert_eq!(lit(&ParamValue::Int(0), u), "0");
    assert_eq!(lit(&ParamValue::UInt(u64::MAX), u), "18446744073709551615");
    assert_eq!(lit(&ParamValue::Float(1.5), u), "1.5e0");
    assert_eq!(lit(&ParamValue::Float(1e300), u), "1e300");
    assert_eq!(lit(&ParamValue::Float(-0.25), u), "-2.5e-1");
    assert_eq!(lit(&ParamValue::Float(0.0), u), "0e0");
    for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut out = String::new();
        assert!(render_literal(&ParamValue::Float(v), Charset::UTF8MB4, &mut out).is_err());
    }
    for v in [
        0.1,
        0.1 + 0.2,
        -1e-7,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::EPSILON,
        123_456_789.123_456_79,
        f64::from(1.1f32),
        f64::from(f32::MAX),
        9_007_199_254_740_993.0,
    ] {
        let text = lit(&ParamValue::Float(v), u);
        assert!(text.contains('e'), "{text} is an approximate-value literal");
        assert_eq!(
            text.parse::<f64>().unwrap().to_bits(),
            v.to_bits(),
            "{text}"
        );
    }
    assert_eq!(lit(&ParamValue::Decimal("-12.50".into()), u), "-12.50");
    assert_eq!(lit(&ParamValue::Decimal(".5".into()), u), ".5");
    assert_eq!(lit(&ParamValue::Decimal("1e-5".into()), u), "1e-5");
    // Text that is not a number is refused, never spliced raw.
    for junk in ["1); DROP", "", "1 OR 1", "0x1"] {
        let mut out = String::new();
        assert!(
            render_literal(
                &ParamValue::Decimal(junk.into()),
                Charset::UTF8MB4,
                &mut out
            )
            .is_err(),
            "{junk:?}"
        );
        assert!(out.is_empty());
    }
}

#[test]
fn strings_render_as_introduced_hex() {
    // (charset, bytes, rendered)
    let cases: &[(&str, &[u8], &str)] = &[
        ("utf8mb4", b"", "_utf8mb4 X''"),
        ("utf8mb4", b"it's", "_utf8mb4 X'69742773'"),
        ("utf8mb4", b"a\\b\0\"", "_utf8mb4 X'615C620022'"),
        ("utf8mb4", "\u{1F600}".as_bytes(), "_utf8mb4 X'F09F9880'"),
        // Not UTF-8: the server would refuse `_utf8mb4 X'FF'`.
        ("utf8mb4", &[0xFF, 0x00, b'\''], "_binary X'FF0027'"),
        ("utf8mb3", "\u{1F600}".as_bytes(), "_binary X'F09F9880'"),
        ("utf8mb3", b"ok", "_utf8mb3 X'6F6B'"),
        ("latin1", &[0xE9, b'\\', b'\''], "_latin1 X'E95C27'"),
        ("binary", b"ab", "_binary X'6162'"),
        // 0x5C trail bytes stay inside their character.
        ("gbk", &[0xC4, 0xE3, b'\\', b'\''], "_gbk X'C4E35C27'"),
        ("gbk", &[0x81, 0x5C], "_gbk X'815C'"),
        ("gbk", &[0x81], "_binary X'81'"),
        ("big5", &[0xA4, 0x5C], "_big5 X'A45C'"),
        ("sjis", &[0x83, 0x5C], "_sjis X'835C'"),
        ("cp932", &[0x83, 0x5C, 0xB1], "_cp932 X'835CB1'"),
        ("cp932", &[0xFF], "_binary X'FF'"),
    ];
    for (charset, data, rendered) in cases {
        assert_eq!(lit(&bytes(data), charset), *rendered, "{charset} {data:?}");
    }
    let blob = |d: &[u8]| ParamValue::Bytes {
        data: d.to_vec(),
        binary: true,
    };
    assert_eq!(lit(&blob(b"abc"), "gbk"), "_binary X'616263'");
    assert_eq!(lit(&blob(b""), "utf8mb4"), "_binary X''");
    // Appends to what is there.
    let mut out = String::from("SELECT ");
    render_literal(&bytes(b"x"), Charset::UTF8MB4, &mut out).unwrap();
    assert_eq!(out, "SELECT _utf8mb4 X'78'");
    // Whatever the value, the literal is ASCII without a backslash and
    // with exactly the two quotes of its hex digits.
    let mut rng = Lcg(7);
    for len in 0..200 {
        let data: Vec<u8> = (0..len).map(|_| rng.next()).collect();
        for charset in ["utf8mb4", "gbk", "big5", "sjis", "latin1", "binary"] {
            let text = lit(&bytes(&data), charset);
            assert!(text.is_ascii() && !text.contains('\\') && !text.contains('"'));
            assert_eq!(text.matches('\'').count(), 2, "{text}");
        }
    }
}

#[test]
fn separators_keep_tokens_apart() {
    assert_eq!(bind_separator(Some('T'), Some('_')), " ");
    assert_eq!(bind_separator(Some('X'), Some('\'')), " ");
    assert_eq!(bind_separator(Some('1'), Some('5')), " ");
    assert_eq!(bind_separator(Some('-'), Some('-')), " ");
    assert_eq!(bind_separator(Some('='), Some('_')), "");
    assert_eq!(bind_separator(Some(' '), Some('-')), "");
    assert_eq!(bind_separator(None, Some('_')), "");
    assert_eq!(bind_separator(Some('('), Some('\'')), "");
}

#[test]
fn temporal_render() {
    assert_eq!(lit(&date(0, 0, 0, 0, 0, 0, 0), "utf8mb4"), "'0000-00-00'");
    assert_eq!(
        lit(&date(2024, 2, 9, 0, 0, 0, 0), "utf8mb4"),
        "'2024-02-09'"
    );
    assert_eq!(
        lit(&date(2024, 2, 9, 1, 2, 3, 0), "utf8mb4"),
        "'2024-02-09 01:02:03'"
    );
    assert_eq!(
        lit(&date(2024, 2, 9, 0, 0, 0, 5), "utf8mb4"),
        "'2024-02-09 00:00:00.000005'"
    );
    assert_eq!(
        lit(&date(2024, 2, 9, 1, 2, 3, 500_000), "utf8mb4"),
        "'2024-02-09 01:02:03.5'"
    );
    assert_eq!(
        lit(&date(999, 1, 1, 0, 0, 0, 120_000), "utf8mb4"),
        "'0999-01-01 00:00:00.12'"
    );
    assert_eq!(
        lit(&date(1, 1, 1, 0, 0, 0, 5_000_000), "utf8mb4"),
        "'0001-01-01 00:00:00.999999'"
    );
    assert_eq!(lit(&time(false, 0, 0, 0, 0, 0), "utf8mb4"), "'00:00:00'");
    assert_eq!(lit(&time(true, 0, 0, 0, 0, 0), "utf8mb4"), "'00:00:00'");
    assert_eq!(
        lit(&time(true, 1, 2, 3, 4, 5), "utf8mb4"),
        "'-26:03:04.000005'"
    );
    assert_eq!(
        lit(&time(false, 34, 22, 59, 59, 0), "utf8mb4"),
        "'838:59:59'"
    );
    assert_eq!(
        lit(&time(true, 0, 0, 0, 0, 500_000), "utf8mb4"),
        "'-00:00:00.5'"
    );
    assert_eq!(
        lit(&time(false, u32::MAX, 23, 0, 0, 0), "utf8mb4"),
        format!("'{}:00:00'", u64::from(u32::MAX) * 24 + 23)
    );
}

/// Rendered literals parse as one value for the router's parser, and
/// an introduced string reads back the same hex digits.
#[test]
fn literals_parse_as_one_expression() {
    use sqlparser::ast::{Expr, SelectItem, SetExpr, Statement, Value};
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    let item = |sql: &str| -> Expr {
        let mut statements = Parser::parse_sql(&MySqlDialect {}, sql).expect("parses");
        let Some(Statement::Query(query)) = statements.pop() else {
            panic!("{sql}: not a query")
        };
        let SetExpr::Select(select) = *query.body else {
            panic!("{sql}: not a select")
        };
        match select.projection.into_iter().next() {
            Some(SelectItem::UnnamedExpr(e)) => e,
            other => panic!("{sql}: {other:?}"),
        }
    };
    for data in [&b"it's"[..], b"\\'", b"\xC4\xE3\\'", b"\xFF"] {
        let sql = format!("SELECT {} FROM t", lit(&bytes(data), "gbk"));
        match item(&sql) {
            Expr::Prefixed { value, .. } => match *value {
                Expr::Value(v) => assert!(matches!(v.value, Value::HexStringLiteral(_))),
                other => panic!("{sql}: {other:?}"),
            },
            other => panic!("{sql}: {other:?}"),
        }
    }
    for v in [1.5, 1e300, 2.5e-7, 0.0] {
        let sql = format!("SELECT {} FROM t", lit(&ParamValue::Float(v), "utf8mb4"));
        assert!(matches!(item(&sql), Expr::Value(_)), "{sql}");
    }
}
