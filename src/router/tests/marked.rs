//! A prepared statement's kept route ([`MarkedRoute`]) against learning it
//! anew ([`route_marked`]) and against the ordinary route of its text with
//! the values written in: for every statement below, learned once, each
//! execute's values must give the plan learning would give, and that plan,
//! filled in, must be the ordinary one.

use super::*;
use crate::router::{
    clear_fast_path, placeholders, route_marked, set_fast_path, MarkedParam, MarkedPlan,
    MarkedRoute, MarkerValue,
};
use crate::topology::SharedTopology;

/// Prepared statements over object, mapping and mod-shard tables: a key
/// bound or written in the text, values the planner reads or not, the ID
/// composed in the select list (the shard number in the text), `*`.
const STATEMENTS: &[&str] = &[
    "SELECT data FROM pins WHERE id = ?",
    "SELECT data FROM pins WHERE id = ? AND data <> ?",
    "SELECT * FROM pins WHERE id = ?",
    "SELECT id, data FROM pins WHERE id=? LIMIT ?",
    "UPDATE pins SET data = ? WHERE id = ?",
    "DELETE FROM boards WHERE id = ?",
    "SELECT pin_id FROM board_has_pins WHERE board_id = ? LIMIT ?",
    "SELECT * FROM user_by_email WHERE email = ?",
    "SELECT data FROM pins WHERE id = 241294492511762325 AND data = ?",
    "SELECT data FROM pins WHERE data = ? AND id = ?",
];

/// Values an execute may bind to one marker.
fn candidates() -> Vec<MarkerValue> {
    let mut values: Vec<MarkerValue> = [
        id(0, 1, 1),
        id(12, 1, 9),
        id(3429, 1, 5),
        id(4095, 1, 123_456_789),
        id(100, 2, 1),
        id(3429, 2, 77),
        id(7, 3, 3),
        id(5000, 1, 1),
        0,
        7,
        u64::MAX,
        PIN,
    ]
    .into_iter()
    .map(MarkerValue::Digits)
    .collect();
    values.push(MarkerValue::Other);
    values
}

/// Every value of [`candidates`] in each place of `count`, the others
/// bound to `base`.
fn executes(base: &[MarkerValue]) -> Vec<Vec<MarkerValue>> {
    let mut out = vec![base.to_vec()];
    for place in 0..base.len() {
        for value in candidates() {
            let mut values = base.to_vec();
            values[place] = value;
            out.push(values);
        }
    }
    out
}

/// `sql` with each marker replaced by its value as the probe writes it.
fn bound(sql: &str, markers: &[std::ops::Range<usize>], values: &[MarkerValue]) -> String {
    let mut text = sql.to_owned();
    for (range, value) in markers.iter().zip(values).rev() {
        let written = match value {
            MarkerValue::Digits(n) => format!(" {n} "),
            MarkerValue::Other => " 'x' ".to_owned(),
        };
        text.replace_range(range.clone(), &written);
    }
    text
}

fn squeeze(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The marked plan's text with its `?`s filled in (a client value as the
/// probe wrote it), and the ordinary plan of the bound text: the same
/// target, kind, flags and text.
fn matches_ordinary(
    plan: &MarkedPlan,
    values: &[MarkerValue],
    text: &str,
    topo: &Topology,
    ctx: &RouteContext,
) -> Result<(), String> {
    let mut filled = plan.query.sql.as_bytes().to_vec();
    for (range, param) in plan.markers.iter().zip(&plan.params).rev() {
        let written = match param {
            MarkedParam::LocalId(l) => l.to_string(),
            MarkedParam::Client(m) => match values[*m] {
                MarkerValue::Digits(n) => n.to_string(),
                MarkerValue::Other => "'x'".to_owned(),
            },
        };
        filled.splice(range.clone(), written.into_bytes());
    }
    let Plan::Shard(ordinary) = route(text, topo, ctx, &mut Fixed(0)) else {
        return Err(format!("{text}: a marked plan, but no single-shard plan"));
    };
    let same = squeeze(&filled) == squeeze(ordinary.sql.as_bytes())
        && plan.query.target == ordinary.target
        && plan.query.kind == ordinary.kind
        && plan.query.compose_insert_id == ordinary.compose_insert_id
        && plan.query.writes_through_function == ordinary.writes_through_function
        && plan.query.leaves_session_state == ordinary.leaves_session_state;
    match same {
        true => Ok(()),
        false => Err(format!(
            "{text}\n  marked   {plan:?}\n  filled   {}\n  ordinary {ordinary:?}",
            squeeze(&filled)
        )),
    }
}

/// Each statement learned once (with a pin's ID on shard 3429 in each
/// place, or a string where that has no route), then executed with other
/// values: the kept route gives what learning anew gives, and its plan is
/// the ordinary one. The route fits only values of the kinds it learned.
#[test]
fn a_kept_route_gives_the_plan_learning_gives() {
    let shared = SharedTopology::new(topo());
    let topo = shared.load();
    let mut failures = Vec::new();
    let mut learned = 0;
    let mut filled = 0;
    for ctx in [
        RouteContext::default(),
        RouteContext {
            current_db: topo.parse_database("db00012"),
            ..RouteContext::default()
        },
    ] {
        clear_fast_path();
        for sql in STATEMENTS {
            let markers = placeholders(sql, &ctx.lex).unwrap();
            let base: Vec<MarkerValue> = vec![MarkerValue::Digits(PIN_B); markers.len()];
            let first = [base.clone(), vec![MarkerValue::Other; markers.len()]]
                .into_iter()
                .find_map(|values| {
                    MarkedRoute::learn(sql.as_bytes(), &markers, &values, &topo, &ctx)
                        .map(|learned| (learned, values))
                });
            let Some(((kept, _), learned_with)) = first else {
                continue;
            };
            learned += 1;
            for values in executes(&learned_with) {
                let fresh = route_marked(sql.as_bytes(), &markers, &values, &topo, &ctx);
                let fits = kept.fits(&values, &topo, &ctx);
                let kinds_same = values.iter().zip(&learned_with).all(|(a, b)| {
                    matches!(a, MarkerValue::Digits(_)) == matches!(b, MarkerValue::Digits(_))
                });
                if fits != kinds_same {
                    failures.push(format!("{sql} {values:?}: fits {fits}"));
                }
                let plan = kept.fill(&values, &topo, &ctx);
                if !fits {
                    if plan.is_some() {
                        failures.push(format!("{sql} {values:?}: filled, not fitting"));
                    }
                    continue;
                }
                if plan != fresh {
                    failures.push(format!(
                        "{sql} {values:?}\n  kept  {plan:?}\n  fresh {fresh:?}"
                    ));
                }
                if let Some(plan) = &plan {
                    filled += 1;
                    let text = bound(sql, &markers, &values);
                    failures.extend(matches_ordinary(plan, &values, &text, &topo, &ctx).err());
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        learned >= STATEMENTS.len() - 1 && filled > 100,
        "{learned} routes learned, {filled} plans filled: the cases no longer test much"
    );
}

/// A kept route does not fit another routing table, session context,
/// kinds of values, or the fast path turned off; learning finds none with
/// the fast path off.
#[test]
fn a_kept_route_holds_only_where_it_was_learned() {
    let shared = SharedTopology::new(topo());
    let topo = shared.load();
    let ctx = RouteContext::default();
    let sql = "SELECT data FROM pins WHERE id = ? AND data <> ?";
    let markers = placeholders(sql, &ctx.lex).unwrap();
    let values = [MarkerValue::Digits(PIN_FAR), MarkerValue::Other];
    clear_fast_path();
    let (kept, plan) =
        MarkedRoute::learn(sql.as_bytes(), &markers, &values, &topo, &ctx).expect("a route");
    assert_eq!(kept.fill(&values, &topo, &ctx), Some(plan));
    assert!(kept.fits(&values, &topo, &ctx));
    shared.store((*topo).clone());
    assert!(!kept.fits(&values, &shared.load(), &ctx), "another table");
    let mut ansi = ctx;
    ansi.lex.ansi_quotes = true;
    assert!(!kept.fits(&values, &topo, &ansi), "another context");
    let used_db = RouteContext {
        current_db: topo.parse_database("db00012"),
        ..ctx
    };
    assert!(!kept.fits(&values, &topo, &used_db), "another database");
    let other_kinds = [MarkerValue::Digits(PIN_FAR), MarkerValue::Digits(5)];
    assert!(!kept.fits(&other_kinds, &topo, &ctx), "another kind");
    assert!(!kept.fits(&values[..1], &topo, &ctx), "fewer values");
    set_fast_path(false);
    let off = kept.fits(&values, &topo, &ctx)
        || MarkedRoute::learn(sql.as_bytes(), &markers, &values, &topo, &ctx).is_some();
    set_fast_path(true);
    assert!(!off, "the fast path off");
    // A statement near the fast path's limit: a longer value makes its
    // probe (each marker replaced by " value ") too long, as learning it
    // anew finds.
    let probe_base = 2048 - 3 - 15; // room for 'x' and 15 digits, not 18
    let padding = " ".repeat(probe_base - (sql.len() - 2 + 4));
    let long = format!("{sql}{padding}");
    let markers = placeholders(&long, &ctx.lex).unwrap();
    let short = [MarkerValue::Digits(id(0, 1, 1)), MarkerValue::Other];
    let (kept, _) =
        MarkedRoute::learn(long.as_bytes(), &markers, &short, &topo, &ctx).expect("a route");
    let fifteen = [MarkerValue::Digits(PIN_FAR), MarkerValue::Other];
    assert!(kept.fill(&fifteen, &topo, &ctx).is_some());
    let longer = [MarkerValue::Digits(PIN), MarkerValue::Other];
    assert_eq!(
        route_marked(long.as_bytes(), &markers, &longer, &topo, &ctx),
        None
    );
    assert!(!kept.fits(&longer, &topo, &ctx));
}

use crate::test_alloc as counting;

/// A kept route's plan costs its text, its `?` list and its parameter
/// list: nothing is lexed or hashed.
#[test]
fn filling_a_kept_route_allocates_three_times() {
    let shared = SharedTopology::new(topo());
    let topo = shared.load();
    let ctx = RouteContext::default();
    let sql = "SELECT data FROM pins WHERE id = ?";
    let markers = placeholders(sql, &ctx.lex).unwrap();
    clear_fast_path();
    let (kept, _) = MarkedRoute::learn(
        sql.as_bytes(),
        &markers,
        &[MarkerValue::Digits(PIN)],
        &topo,
        &ctx,
    )
    .expect("a route");
    let values: Vec<[MarkerValue; 1]> = (0..8)
        .map(|i| [MarkerValue::Digits(id(i * 500, 1, i + 1))])
        .collect();
    let before = counting::allocations();
    let plans: Vec<Option<MarkedPlan>> = values
        .iter()
        .map(|values| kept.fill(values, &topo, &ctx))
        .collect();
    let made = counting::allocations() - before - 1; // `plans` itself
    assert!(plans.iter().all(Option::is_some));
    assert!(made <= 3 * 8, "{made} allocations for 8 fills");
}
