//! The fast path ([`crate::router::planner::fast`]) against the ordinary
//! route: every case of the router's tables ([`check_plan`] calls
//! [`equivalent`]) and the statements below are routed cold and warm, and
//! with other values in their literals once a template is learned, under
//! several session contexts and after a reload; every plan must equal the
//! ordinary one exactly.

use super::*;
use crate::router::lex::{self, ValueKind};
use crate::router::{clear_fast_path, fast_path_hits, fast_path_templates, set_fast_path};
use crate::topology::SharedTopology;

/// The contexts every statement is routed in (after the case's own).
fn contexts(base: RouteContext, t: &Topology) -> Vec<RouteContext> {
    let with_lex = |change: fn(&mut LexMode)| {
        let mut ctx = base;
        change(&mut ctx.lex);
        ctx
    };
    let mut list = vec![
        base,
        with_lex(|l| l.no_backslash_escapes = true),
        with_lex(|l| l.ansi_quotes = true),
        with_lex(|l| l.charset = ClientCharset::AsciiTrail(TrailCharset::Gbk)),
        with_lex(|l| l.server_version = 50744),
    ];
    let other_db = if base.current_db.is_some() {
        None
    } else {
        t.parse_database("db03429")
    };
    list.push(RouteContext {
        current_db: other_db,
        ..base
    });
    // The session's values some functions read (`LAST_INSERT_ID()`,
    // `ROW_COUNT()`, `@@autocommit`, `CONNECTION_ID()`, a time-sortable
    // ID's previous one): a template must not keep another session's.
    list.push(RouteContext {
        last_insert_id: (17u64 << 46) | (1 << 36) | 9,
        row_count: 3,
        autocommit: false,
        in_transaction: true,
        connection_id: 77,
        ..base
    });
    list
}

/// The statement with one literal replaced by each of a few other values
/// (other IDs of the same type and of others, edge values, strings), and
/// with all replaced at once.
fn variants(sql: &str, mode: &LexMode) -> Vec<String> {
    let Ok(lexed) = lex::lex(sql.as_bytes(), mode, u64::MAX) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let replace = |range: &std::ops::Range<usize>, with: &str| {
        format!("{}{with}{}", &sql[..range.start], &sql[range.end..])
    };
    for value in lexed.values.iter().take(4) {
        let written = &sql[value.range.clone()];
        let content = match value.kind {
            ValueKind::Digits => written,
            ValueKind::Quoted => &written[1..written.len() - 1],
        };
        let mut others: Vec<String> = vec![
            "0".into(),
            "1".into(),
            "18446744073709551615".into(),
            "99999999999999999999999".into(),
            format!("00{content}"),
        ];
        if let Ok(raw) = content.parse::<u64>() {
            if let Ok(decoded) = crate::id::ObjectId::decode(raw) {
                for (shard, type_id, local) in [
                    (0, decoded.type_id, 1),
                    (4095, decoded.type_id, crate::id::MAX_LOCAL),
                    (decoded.shard, decoded.type_id, decoded.local_id + 1),
                    (decoded.shard ^ 1, decoded.type_id, decoded.local_id),
                    (12, decoded.type_id, 9),
                    (3429, decoded.type_id, 0),
                    (decoded.shard, decoded.type_id % 3 + 1, decoded.local_id),
                    (5000, decoded.type_id, 1),
                ] {
                    others.push(id(u64::from(shard), u64::from(type_id), local).to_string());
                }
            }
        }
        for other in others {
            let with = match value.kind {
                ValueKind::Digits if other.bytes().all(|b| b.is_ascii_digit()) => other,
                ValueKind::Digits => continue,
                ValueKind::Quoted => format!("'{other}'"),
            };
            out.push(replace(&value.range, &with));
        }
        if value.kind == ValueKind::Quoted {
            out.push(replace(&value.range, "'x y'"));
            out.push(replace(&value.range, "''"));
        }
    }
    // Every literal at once: digits to another ID of the same shard.
    let mut all = String::new();
    let mut at = 0;
    for value in &lexed.values {
        all.push_str(&sql[at..value.range.start]);
        all.push_str(match value.kind {
            ValueKind::Digits => "241294492511762326",
            ValueKind::Quoted => "'241294492511762326'",
        });
        at = value.range.end;
    }
    all.push_str(&sql[at..]);
    out.push(all);
    out
}

/// Routes `sql` with the fast path off, then on, and says how they differ.
fn compare(sql: &str, topo: &Topology, ctx: &RouteContext) -> Option<String> {
    set_fast_path(false);
    let ordinary = route(sql, topo, ctx, &mut Fixed(3429));
    set_fast_path(true);
    let fast = route(sql, topo, ctx, &mut Fixed(3429));
    (fast != ordinary)
        .then(|| format!("{sql:?} in {ctx:?}\n  ordinary {ordinary:?}\n  fast     {fast:?}"))
}

/// Routes `sql` (a case of the tables, with its USE database) and its
/// variants through both paths in every context, with the templates of
/// the earlier contexts kept; then reloads the table and does it again.
/// `thorough`: variants in every context (else in the case's own only).
pub(super) fn equivalent(
    t: &Topology,
    sql: &str,
    use_db: Option<&str>,
    thorough: bool,
) -> Option<String> {
    let shared = SharedTopology::new(t.clone());
    let base = RouteContext {
        current_db: use_db.map(|db| t.parse_database(db).expect("test USE database")),
        ..RouteContext::default()
    };
    clear_fast_path();
    let mut failures = Vec::new();
    for round in 0..2 {
        let topo = shared.load();
        for ctx in contexts(base, &topo) {
            // Cold, seen, learned, warm.
            for _ in 0..4 {
                failures.extend(compare(sql, &topo, &ctx));
            }
            if (round == 0 && thorough) || ctx == base {
                for variant in variants(sql, &ctx.lex) {
                    failures.extend(compare(&variant, &topo, &ctx));
                }
            }
        }
        // A reload: the masters of the main fleet's ranges rotated, and
        // pins of another type (its IDs of type 1 refused from then on).
        let mut next = (*topo).clone();
        if let Some(pins) = next.tables.get_mut("pins") {
            pins.kind = crate::topology::TableKind::Object { type_id: 5 };
        }
        let masters: Vec<_> = next.fleets[0].ranges.iter().map(|r| r.master).collect();
        for (range, master) in next.fleets[0]
            .ranges
            .iter_mut()
            .zip(masters.iter().cycle().skip(1))
        {
            range.master = *master;
        }
        shared.store(next);
    }
    set_fast_path(true);
    (!failures.is_empty()).then(|| failures.join("\n"))
}

/// Statements of one shape whose literals mean different things, each
/// routed (with variants) after its look-alikes taught the cache.
#[test]
fn look_alike_statements_never_share_a_wrong_template() {
    let t = topo();
    let pin = PIN.to_string();
    let far = PIN_FAR.to_string();
    let board = BOARD.to_string();
    let email = "a@b.c";
    let statements = [
        format!("SELECT data FROM pins WHERE id = {pin}"),
        "SELECT data FROM pins WHERE id = LAST_INSERT_ID()".to_owned(),
        format!(
            "SELECT ROW_COUNT(), @@autocommit, CONNECTION_ID(), data FROM pins WHERE id = {pin}"
        ),
        format!("SELECT LAST_INSERT_ID(), data FROM pins WHERE id = {pin}"),
        format!("SELECT data FROM pins WHERE id = '{pin}'"),
        format!("SELECT data FROM pins WHERE id = \"{pin}\""),
        format!("SELECT data FROM pins WHERE id = _utf8mb4'{pin}'"),
        format!("SELECT data FROM pins WHERE id = _latin1'{pin}'"),
        format!("SELECT data FROM pins WHERE id = N'{pin}'"),
        format!("SELECT data FROM pins WHERE id = -{pin}"),
        format!("SELECT data FROM pins WHERE id = +{pin}"),
        format!("SELECT data FROM pins WHERE id = {pin}.0"),
        format!("SELECT data FROM pins WHERE id = {pin}e0"),
        "SELECT data FROM pins WHERE id = 1e3".to_owned(),
        "SELECT data FROM pins WHERE id = 0x3593".to_owned(),
        "SELECT data FROM pins WHERE id = X'3593'".to_owned(),
        "SELECT data FROM pins WHERE id = b'1011'".to_owned(),
        "SELECT data FROM pins WHERE id = 0b1011".to_owned(),
        format!("SELECT data FROM pins WHERE id = {pin} /* {far} */"),
        format!("SELECT data FROM pins WHERE id = /*!{far} */ {pin}"),
        format!("SELECT data FROM pins WHERE id = /*!50744 {far} + */ {pin}"),
        format!("SELECT data FROM pins WHERE id = /*M!100000 {far} + */ {pin}"),
        format!("SELECT /*+ SHARD(12) */ data FROM pins WHERE id = {pin}"),
        format!("SELECT data FROM pins WHERE id = {pin} -- {far}"),
        format!("SELECT data FROM pins WHERE id = {pin} # {far}"),
        format!("SELECT data FROM pins WHERE id IN ({pin})"),
        format!("SELECT data FROM pins WHERE id IN ({pin}, {far})"),
        format!("SELECT data FROM pins WHERE id IN ({pin}, {pin})"),
        format!("SELECT data FROM pins WHERE id = {pin} OR id = {far}"),
        format!("SELECT data FROM pins WHERE id = {pin} AND id = {far}"),
        format!("SELECT data FROM pins WHERE id = {pin} LIMIT 5"),
        format!("SELECT data FROM pins WHERE id = {pin} AND data = '{far}'"),
        format!("SELECT data FROM pins WHERE id = {pin} AND data = 'it''s'"),
        format!("SELECT data FROM pins WHERE id = {pin} AND data = 'back\\\\slash'"),
        format!("SELECT data FROM pins WHERE id = {pin} AND data = 'caf\u{e9}'"),
        format!("SELECT data FROM pins WHERE id = {pin} AND data = _binary'{far}'"),
        format!("SELECT id, data FROM pins WHERE id = {pin}"),
        format!("SELECT * FROM pins WHERE id = {pin}"),
        format!("SELECT data FROM pins WHERE id = {pin} FOR UPDATE"),
        format!("SELECT data FROM pins WHERE id = {board}"),
        format!("SELECT data FROM boards WHERE id = {board}"),
        format!("SELECT data FROM db03429.pins WHERE id = {pin}"),
        "SELECT data FROM db03429.pins WHERE local_id = 5".to_owned(),
        format!("SELECT pin_id FROM board_pins WHERE board_id = {board}"),
        format!("SELECT user_id FROM user_by_email WHERE email = '{email}'"),
        format!("SELECT user_id FROM user_by_email WHERE email = 'x{email}'"),
        "SELECT user_id FROM user_by_email WHERE email = 1234".to_owned(),
        format!("UPDATE pins SET data = 'x' WHERE id = {pin}"),
        format!("UPDATE pins SET data = {far} WHERE id = {pin}"),
        format!("DELETE FROM pins WHERE id = {pin}"),
        format!("INSERT INTO pins (id, data) VALUES ({pin}, 'x')"),
        "INSERT INTO pins (data) VALUES ('x')".to_owned(),
        format!("SELECT data FROM pins WHERE id = {pin} AND @1 = 1"),
        format!("SELECT data FROM pins WHERE id = LAST_INSERT_ID() + {pin}"),
        format!("SELECT data, LAST_INSERT_ID() FROM pins WHERE id = {pin}"),
        format!("SELECT data, CONNECTION_ID() FROM pins WHERE id = {pin}"),
        format!("SELECT data FROM pins WHERE id = {pin};"),
        format!("SELECT data FROM pins WHERE id = {pin}; SELECT 1"),
        format!("select data from pins where id = {pin}"),
        format!("SELECT data FROM pins WHERE id={pin}"),
        format!("SELECT data FROM pins WHERE `id` = {pin}"),
        format!("SELECT data FROM pins WHERE \"id\" = {pin}"),
        format!("SELECT data FROM pins p WHERE p.id = {pin}"),
        format!("SELECT data FROM pins WHERE id = {pin} AND ts > '2020-01-01'"),
        format!("SELECT data FROM pins WHERE id = {pin} AND ts > DATE '2020-01-01'"),
        format!("SELECT data FROM pins WHERE id = {pin} AND ts > INTERVAL '1' DAY + ts"),
        format!("SELECT data AS '{far}' FROM pins WHERE id = {pin}"),
        format!("SELECT '{far}' '{pin}' FROM pins WHERE id = {pin}"),
        format!("SELECT data FROM pins WHERE id = {pin} AND data LIKE 'a%' ESCAPE '!'"),
        format!("DO NEXTVAL(s) + {pin}"),
        "SELECT 1".to_owned(),
        format!("SELECT {pin}"),
    ];
    let mut failures = Vec::new();
    for use_db in [None, Some("db03429"), Some("db00012")] {
        for sql in &statements {
            failures.extend(equivalent(&t, sql, use_db, true));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fast path is used: a point lookup learned on its second sighting is
/// planned from its template for other IDs, and its plan is the ordinary
/// one; its digest is the statement's.
#[test]
fn point_lookups_are_filled_from_a_template() {
    let shared = SharedTopology::new(topo());
    let topo = shared.load();
    let ctx = RouteContext::default();
    clear_fast_path();
    let sql = |id: u64| format!("SELECT data FROM pins WHERE id = {id}");
    for _ in 0..2 {
        let _ = route(&sql(PIN), &topo, &ctx, &mut Fixed(0));
    }
    assert_eq!(fast_path_templates(), 1);
    let before = fast_path_hits();
    for (shard, local) in [(0, 1), (12, 9), (4095, 123_456_789), (3429, 7_075_733)] {
        let text = sql(id(shard, 1, local));
        let fast = route(&text, &topo, &ctx, &mut Fixed(0));
        set_fast_path(false);
        let ordinary = route(&text, &topo, &ctx, &mut Fixed(0));
        set_fast_path(true);
        assert_eq!(fast, ordinary, "{text}");
        let Plan::Shard(query) = fast else {
            panic!("one shard: {fast:?}")
        };
        assert_eq!(u64::from(query.target.shard), shard);
        assert_eq!(
            query.sql,
            format!("SELECT data FROM db{shard:05}.pins WHERE local_id = {local}")
        );
        let bytes = bytes::Bytes::from(text.clone());
        let (_, digest) = crate::router::route_digested(&bytes, &topo, &ctx, &mut Fixed(0));
        assert_eq!(digest, Some(statement_digest(text.as_bytes(), &ctx).0));
    }
    assert_eq!(
        fast_path_hits() - before,
        8,
        "every lookup after learning hits"
    );
    // An ID of another type, or a bad one, takes the ordinary route.
    for text in [sql(BOARD), sql(u64::MAX), sql(id(5000, 1, 1))] {
        let plan = route(&text, &topo, &ctx, &mut Fixed(0));
        assert!(
            matches!(plan, Plan::Reject(RouteError::BadId { .. })),
            "{plan:?}"
        );
    }
}

/// Without an identity (a table never stored in a [`SharedTopology`]) no
/// template is made: such a table may still change.
#[test]
fn tables_without_identity_are_never_templated() {
    let t = topo();
    clear_fast_path();
    for _ in 0..4 {
        let _ = route(
            &format!("SELECT data FROM pins WHERE id = {PIN}"),
            &t,
            &RouteContext::default(),
            &mut Fixed(0),
        );
    }
    assert_eq!(fast_path_templates(), 0);
}

use crate::test_alloc as counting;

/// Most allocations of a point lookup routed from its template: none (the
/// lexer's lists are recycled, the text sent is a share of the thread's
/// output buffer).
const POINT_LOOKUP_ALLOCATIONS: u64 = 0;

#[test]
fn a_point_lookup_from_its_template_does_not_allocate() {
    let shared = SharedTopology::new(topo());
    let topo = shared.load();
    let ctx = RouteContext::default();
    let sql: Vec<String> = (0..8)
        .map(|i| format!("SELECT data FROM pins WHERE id = {}", id(i * 500, 1, i + 1)))
        .collect();
    clear_fast_path();
    for text in sql.iter().chain(&sql) {
        let _ = route(text, &topo, &ctx, &mut Fixed(0));
    }
    let hits = fast_path_hits();
    let before = counting::allocations();
    let plans: Vec<Plan> = sql
        .iter()
        .map(|text| route(text, &topo, &ctx, &mut Fixed(0)))
        .collect();
    let made = counting::allocations() - before - 1; // `plans` itself
    assert_eq!(fast_path_hits() - hits, 8);
    assert!(plans.iter().all(|p| matches!(p, Plan::Shard(_))));
    assert_eq!(
        made,
        POINT_LOOKUP_ALLOCATIONS * 8,
        "allocations for 8 point lookups, {POINT_LOOKUP_ALLOCATIONS} each"
    );
}

/// Filled texts share the thread's output buffer: many plans kept at once
/// (more than one buffer holds), dropped in any order while more are
/// filled, each keeps exactly the ordinary plan's text.
#[test]
fn filled_texts_kept_at_once_stay_each_their_own() {
    let shared = SharedTopology::new(topo());
    let topo = shared.load();
    let ctx = RouteContext::default();
    clear_fast_path();
    let sql = |i: u64| {
        format!(
            "SELECT data FROM pins WHERE id = {} AND data <> '{}'",
            id(i % 4096, 1, 1 + i * 7919),
            "x".repeat((i % 97) as usize)
        )
    };
    for _ in 0..2 {
        let _ = route(&sql(0), &topo, &ctx, &mut Fixed(0));
    }
    let before = fast_path_hits();
    let mut kept = Vec::new();
    for i in 0..600u64 {
        let text = sql(i);
        kept.push((text.clone(), route(&text, &topo, &ctx, &mut Fixed(0))));
        if i % 3 == 0 {
            kept.swap_remove((i as usize * 31) % kept.len());
        }
    }
    assert_eq!(fast_path_hits() - before, 600);
    set_fast_path(false);
    for (text, plan) in &kept {
        assert_eq!(*plan, route(text, &topo, &ctx, &mut Fixed(0)), "{text}");
    }
    set_fast_path(true);
}

/// A prepared statement's plan with its values as markers: the ID the
/// planner reads picks the shard and becomes `local_id = ?` bound to its
/// local part; a value it does not read stays the client's `?`; filled in,
/// the text is the ordinary plan's. A key that is not plain digits, an ID
/// the planner refuses, or a plan over several shards has no marked plan.
#[test]
fn prepared_statements_keep_unread_values_as_markers() {
    use crate::router::{placeholders, route_marked, MarkedParam, MarkerValue};
    let shared = SharedTopology::new(topo());
    let topo = shared.load();
    let ctx = RouteContext::default();
    clear_fast_path();
    let sql = "SELECT data FROM pins WHERE id = ? AND data <> ?";
    let markers = placeholders(sql, &ctx.lex).unwrap();
    let squeeze = |text: &[u8]| {
        String::from_utf8_lossy(text)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (shard, local) in [(12u32, 9u64), (4095, 123_456_789), (0, 1)] {
        let pin = id(u64::from(shard), 1, local);
        let values = [MarkerValue::Digits(pin), MarkerValue::Other];
        let marked =
            route_marked(sql.as_bytes(), &markers, &values, &topo, &ctx).expect("a marked plan");
        assert_eq!(marked.query.target.shard, shard);
        assert_eq!(
            marked.params,
            vec![MarkedParam::LocalId(local), MarkedParam::Client(1)]
        );
        assert_eq!(
            squeeze(marked.query.sql.as_bytes()),
            format!("SELECT data FROM db{shard:05}.pins WHERE local_id = ? AND data <> ?")
        );
        let mut filled = marked.query.sql.as_bytes().to_vec();
        for (range, param) in marked.markers.iter().zip(&marked.params).rev() {
            let written = match param {
                MarkedParam::LocalId(l) => l.to_string(),
                MarkedParam::Client(_) => "'x'".to_owned(),
            };
            filled.splice(range.clone(), written.into_bytes());
        }
        let Plan::Shard(ordinary) = route(
            &format!("SELECT data FROM pins WHERE id = {pin} AND data <> 'x'"),
            &topo,
            &ctx,
            &mut Fixed(0),
        ) else {
            panic!("one shard")
        };
        assert_eq!(squeeze(&filled), squeeze(ordinary.sql.as_bytes()));
        assert_eq!(
            (marked.query.target, marked.query.kind),
            (ordinary.target, ordinary.kind)
        );
    }
    // The key bound as a string (or NULL): the values go into the text.
    let key_as_text = [MarkerValue::Other, MarkerValue::Digits(5)];
    assert_eq!(
        route_marked(sql.as_bytes(), &markers, &key_as_text, &topo, &ctx),
        None
    );
    // IDs the planner refuses: another type, a shard past the fleet's.
    for bad in [BOARD, u64::MAX, id(5000, 1, 1)] {
        let values = [MarkerValue::Digits(bad), MarkerValue::Other];
        assert_eq!(
            route_marked(sql.as_bytes(), &markers, &values, &topo, &ctx),
            None,
            "{bad}"
        );
    }
    // Two IDs on two shards: several shards, no marked plan.
    let two = "SELECT data FROM pins WHERE id IN (?, ?)";
    let two_markers = placeholders(two, &ctx.lex).unwrap();
    let values = [
        MarkerValue::Digits(id(12, 1, 1)),
        MarkerValue::Digits(id(3000, 1, 1)),
    ];
    assert_eq!(
        route_marked(two.as_bytes(), &two_markers, &values, &topo, &ctx),
        None
    );
}
