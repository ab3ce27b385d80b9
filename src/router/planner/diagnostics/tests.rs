//! Unit tests of the diagnostics statements: what the router says they
//! ask.

use crate::router::plan::{
    Diagnostics, DiagnosticsArea, DiagnosticsColumn, DiagnosticsValue, Plan,
};
use crate::router::{route, route_prepare, RandomPlacement, RouteContext};
use crate::topology::tests::{load, SPEC_YAML};
use crate::topology::Topology;

fn topology() -> Topology {
    load(SPEC_YAML)
}

fn asked(sql: &str) -> Option<Diagnostics> {
    let plan = route(
        sql.as_bytes(),
        &topology(),
        &RouteContext::default(),
        &mut RandomPlacement::seeded(1),
    );
    match plan {
        Plan::Diagnostics { sql: text, asked } => {
            assert_eq!(text, sql, "the original text is sent");
            Some(asked)
        }
        _ => None,
    }
}

#[test]
fn show_lists_name_their_area() {
    use DiagnosticsArea::{Errors, Warnings};
    for (sql, expected) in [
        ("SHOW WARNINGS", Diagnostics::List(Warnings)),
        ("show warnings limit 2", Diagnostics::List(Warnings)),
        ("SHOW WARNINGS LIMIT 1, 3;", Diagnostics::List(Warnings)),
        ("SHOW ERRORS", Diagnostics::List(Errors)),
        ("  SHOW ERRORS LIMIT 5", Diagnostics::List(Errors)),
    ] {
        assert_eq!(asked(sql), Some(expected), "{sql}");
    }
}

#[test]
fn show_counts_name_their_area() {
    use DiagnosticsArea::{Errors, Warnings};
    assert_eq!(
        asked("SHOW COUNT(*) WARNINGS"),
        Some(Diagnostics::Count(Warnings))
    );
    assert_eq!(
        asked("show count ( * ) errors"),
        Some(Diagnostics::Count(Errors))
    );
    assert_eq!(asked("SHOW COUNT(*) THINGS"), None);
    assert_eq!(asked("SHOW COUNT(1) WARNINGS"), None);
}

#[test]
fn selects_of_the_counts_give_one_column_per_item() {
    let count = |name: &str| DiagnosticsColumn {
        name: name.to_owned(),
        value: DiagnosticsValue::Count(DiagnosticsArea::Warnings),
    };
    let errors = |name: &str| DiagnosticsColumn {
        name: name.to_owned(),
        value: DiagnosticsValue::Count(DiagnosticsArea::Errors),
    };
    for (sql, columns) in [
        ("SELECT @@warning_count", vec![count("@@warning_count")]),
        (
            "select @@session.error_count",
            vec![errors("@@session.error_count")],
        ),
        (
            "SELECT  @@local.warning_count ;",
            vec![count("@@local.warning_count")],
        ),
        (
            "SELECT @@warning_count, @@error_count",
            vec![count("@@warning_count"), errors("@@error_count")],
        ),
        ("/* c */ SELECT @@error_count AS e", vec![errors("e")]),
        (
            "SELECT @@WARNING_COUNT, 42, 'x', NULL",
            vec![
                count("@@WARNING_COUNT"),
                DiagnosticsColumn {
                    name: "42".to_owned(),
                    value: DiagnosticsValue::Number("42".to_owned()),
                },
                DiagnosticsColumn {
                    name: "x".to_owned(),
                    value: DiagnosticsValue::Text("x".to_owned()),
                },
                DiagnosticsColumn {
                    name: "NULL".to_owned(),
                    value: DiagnosticsValue::Null,
                },
            ],
        ),
    ] {
        assert_eq!(
            asked(sql),
            Some(Diagnostics::Select {
                columns,
                fallback: None
            }),
            "{sql}"
        );
    }
    // Another system variable is a server's to answer: with the counts
    // written as 0 when the previous statement left nothing.
    let Some(Diagnostics::Select { columns, fallback }) =
        asked("SELECT @@warning_count, @@sql_mode, @@error_count AS e LIMIT 1")
    else {
        panic!("diagnostics");
    };
    assert_eq!(columns[1].value, DiagnosticsValue::Variable);
    assert_eq!(
        fallback,
        Some("SELECT 0 AS `@@warning_count`, @@sql_mode, 0 AS e LIMIT 1".into())
    );
}

#[test]
fn other_reads_of_variables_are_not_diagnostics() {
    assert_eq!(asked("SELECT @@version"), None);
    assert_eq!(asked("SELECT @@warning_count FROM t"), None);
    assert_eq!(asked("SHOW WARNINGS; SELECT 1"), None);
}

#[test]
fn prepare_plans_diagnostics_the_same_way() {
    assert_eq!(
        route_prepare("SHOW ERRORS", &topology(), &RouteContext::default()),
        Plan::Diagnostics {
            sql: "SHOW ERRORS".into(),
            asked: Diagnostics::List(DiagnosticsArea::Errors),
        }
    );
}

fn route_in(sql: &[u8], ctx: &RouteContext) -> Plan {
    route(sql, &topology(), ctx, &mut RandomPlacement::seeded(1))
}

#[test]
fn a_count_named_with_multibyte_bytes_is_not_copied_into_the_fallback() {
    use crate::router::plan::{ClientCharset, TrailCharset};
    let mut ctx = RouteContext::default();
    ctx.lex.charset = ClientCharset::AsciiTrail(TrailCharset::Gbk);
    // 中 is E4 B8 AD in UTF-8; in gbk E4 B8 is one character and AD 60
    // another: a doubled backtick after it would leave one backtick to
    // close the column name early.
    let sql = "SELECT @@session/*中`, (SELECT info FROM information_schema.tables) #*/.warning_count, @@sql_mode".as_bytes();
    assert!(
        matches!(route_in(sql, &ctx), Plan::Reject(_)),
        "{:?}",
        route_in(sql, &ctx)
    );
    // An alias needs no copy.
    let sql = "SELECT @@session/*中`*/.warning_count AS w, @@sql_mode".as_bytes();
    let Plan::Diagnostics {
        asked: Diagnostics::Select { fallback, .. },
        ..
    } = route_in(sql, &ctx)
    else {
        panic!("diagnostics");
    };
    assert_eq!(fallback, Some("SELECT 0 AS w, @@sql_mode".into()));
}

#[test]
fn session_values_are_substituted_in_diagnostics_selects() {
    let ctx = RouteContext {
        autocommit: true,
        ..RouteContext::default()
    };
    assert_eq!(
        route_in(b"SELECT @@warning_count, @@autocommit", &ctx),
        Plan::Diagnostics {
            sql: "SELECT @@warning_count, 1 AS `@@autocommit`".into(),
            asked: Diagnostics::Select {
                columns: vec![
                    DiagnosticsColumn {
                        name: "@@warning_count".to_owned(),
                        value: DiagnosticsValue::Count(DiagnosticsArea::Warnings),
                    },
                    DiagnosticsColumn {
                        name: "@@autocommit".to_owned(),
                        value: DiagnosticsValue::Number("1".to_owned()),
                    },
                ],
                fallback: None,
            },
        }
    );
    let Plan::Diagnostics {
        asked: Diagnostics::Select { fallback, .. },
        ..
    } = route_in(
        b"SELECT @@error_count, @@session.autocommit, @@sql_mode",
        &ctx,
    )
    else {
        panic!("diagnostics");
    };
    assert_eq!(
        fallback,
        Some("SELECT 0 AS `@@error_count`, 1 AS `@@session.autocommit`, @@sql_mode".into())
    );
}
