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
        value: DiagnosticsValue::Count,
    };
    for (sql, columns) in [
        ("SELECT @@warning_count", vec![count("@@warning_count")]),
        (
            "select @@session.error_count",
            vec![count("@@session.error_count")],
        ),
        (
            "SELECT  @@local.warning_count ;",
            vec![count("@@local.warning_count")],
        ),
        (
            "SELECT @@warning_count, @@error_count",
            vec![count("@@warning_count"), count("@@error_count")],
        ),
        ("/* c */ SELECT @@error_count AS e", vec![count("e")]),
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
        asked("SELECT @@warning_count, @@version, @@error_count AS e LIMIT 1")
    else {
        panic!("diagnostics");
    };
    assert_eq!(columns[1].value, DiagnosticsValue::Variable);
    assert_eq!(
        fallback,
        Some("SELECT 0 AS `@@warning_count`, @@version, 0 AS e LIMIT 1".into())
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
