//! The statement-shape fast path of [`route`](super::route): a plan
//! template per statement shape, filled with a new statement's literals
//! without running sqlparser or the planner.
//!
//! A statement's *shape* is what MariaDB's lexer ([`lex::lex`], run on every
//! statement as before) reads, with the value literals masked: its bytes
//! outside its plain `'...'` strings and digits-only numbers, compared byte
//! for byte (comments, executable comments, hints, blanks, introducers,
//! signs, `1e3`, `0x1F`, `X'..'` are all part of the shape), plus the kind
//! of each masked literal, the session context that decides the reading
//! and the plan (USE database, sql_mode flags, character set, server
//! version, token limit) and the routing table's
//! [`identity`](crate::topology::Topology::identity) (a reload is another
//! table). Two statements of one shape differ only in the contents of
//! their masked literals; a literal whose content is not plain printable
//! ASCII (no `\`, no quote) keeps its statement off the fast path.
//!
//! A template is made from the ordinary route of a statement seen for the
//! second time, and only when that route:
//! - planned one shard (`Plan::Shard`; not a schema change or LOAD DATA),
//!   read no session value (`LAST_INSERT_ID()`, ... re-route another text),
//!   chose no placement, and read no object table's columns (they change
//!   without a reload);
//! - read at most one masked literal as a shard key ([`note_key`]), a plain
//!   one (no introducer) of an object, mapping or mod-shard table.
//!
//! The template then says where each byte of the shard's text comes from:
//! the shape's own bytes, a literal copied as written, the key's local id,
//! its shard database name or its shard number. It is found by routing two
//! probes (the statement with other values in every literal, the key on two
//! other shards) and kept only if it gives exactly the ordinary plan of the
//! statement and of both probes (text bytes, target, kind and flags).
//! On a hit, the key's shard is computed by the planner's own functions;
//! a key the planner would refuse (a bad ID, another type) takes the
//! ordinary route, which gives the error.
//!
//! Per thread, like the parse cache: [`MAX_TEMPLATES`] templates and
//! [`MAX_SEEN`] shapes seen once, each emptied when full.

use std::cell::{Cell, RefCell};
use std::hash::{BuildHasher, Hash, Hasher};

use bytes::{BufMut, Bytes, BytesMut};
use rustc_hash::FxHashMap;

use super::keys::decode_id;
use super::notes::{note_untemplatable, KeyRule, Record, RECORD};
use crate::id::{mod_shard, ObjectId};
use crate::router::lex::{self, ValueKind, ValueLiteral};
use crate::router::plan::{
    ClientCharset, Placement, Plan, RouteContext, ShardQuery, SqlText, StatementKind, Target,
    TrailCharset,
};
use crate::topology::{Fleet, FleetId, Topology};

/// Most templates kept per thread.
pub const MAX_TEMPLATES: usize = 512;
/// Most shapes remembered as seen once (or refused) per thread.
pub const MAX_SEEN: usize = 4096;
/// Longest statement, in bytes, the fast path takes.
const MAX_STATEMENT_BYTES: usize = 2048;
/// Most masked literals of a statement the fast path takes.
const MAX_VALUES: usize = 64;

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
    static ENABLED: Cell<bool> = const { Cell::new(true) };
    static HITS: Cell<u64> = const { Cell::new(0) };
    /// The keys of this thread's shape hashes: random, so a client cannot
    /// choose statements whose hashes crowd one place of the caches.
    static SHAPE_KEYS: foldhash::fast::RandomState = foldhash::fast::RandomState::default();
    /// The buffer this thread writes the texts of filled templates into:
    /// each plan's text is a share of it, and it is reused once they are
    /// all dropped.
    static OUTPUT: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// The least room [`OUTPUT`] is given when it has too little left for a
/// text: room for many statements' texts, so that it is reused (not
/// reallocated) while they come and go.
const OUTPUT_BYTES: usize = 8 * 1024;

/// Keyed by a shape's hash (keyed at random per thread, so a cheap hasher
/// of the maps is safe).
#[derive(Default)]
struct Cache {
    templates: FxHashMap<u64, Template>,
    /// Shapes seen once (`true`) or refused (`false`).
    seen: FxHashMap<u64, bool>,
}

/// Turns the fast path of this thread on or off (on by default): off,
/// [`route`](super::route) always plans. For tests that compare both paths.
pub fn set_fast_path(enabled: bool) {
    ENABLED.with(|e| e.set(enabled));
}

/// Forgets this thread's templates and seen shapes.
pub fn clear_fast_path() {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        c.templates.clear();
        c.seen.clear();
    });
}

/// How many templates this thread holds.
pub fn fast_path_templates() -> usize {
    CACHE.with(|c| c.borrow().templates.len())
}

/// How many statements this thread routed from a template.
pub fn fast_path_hits() -> u64 {
    HITS.with(Cell::get)
}

/// A placement that marks the route untemplatable when asked.
struct Watched<'p>(&'p mut dyn Placement);

impl Placement for Watched<'_> {
    fn choose(&mut self, first: u32, last: u32) -> u32 {
        note_untemplatable();
        self.0.choose(first, last)
    }
}

/// [`route`](super::route): from a template when one fits, else planned
/// (and learned from, the second time a shape is seen).
pub(super) fn route(
    sql: &[u8],
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut dyn Placement,
) -> Plan {
    let mut placement = Watched(placement);
    if topo.identity == 0 || !ENABLED.with(Cell::get) || sql.len() > MAX_STATEMENT_BYTES {
        return super::route_slow(sql, topo, ctx, &mut placement);
    }
    let Ok(lexed) = lex::lex(sql, &ctx.lex, ctx.max_tokens) else {
        return super::route_slow(sql, topo, ctx, &mut placement);
    };
    let plan = route_lexed(sql, &lexed.values, topo, ctx, &mut placement);
    lexed.recycle();
    plan
}

/// [`route`] of a statement whose masked literals are `values`.
fn route_lexed(
    sql: &[u8],
    values: &[ValueLiteral],
    topo: &Topology,
    ctx: &RouteContext,
    placement: &mut Watched<'_>,
) -> Plan {
    let Some(shape) = Shape::of(sql, values) else {
        return super::route_slow(sql, topo, ctx, placement);
    };
    let key = shape.hash(ctx, topo.identity);
    let found = CACHE.with(|c| {
        let c = c.borrow();
        let template = c.templates.get(&key)?;
        template.same_shape(&shape, ctx, topo.identity).then(|| {
            template
                .fill(&shape, topo)
                .map(|plan| (plan, template.digest))
        })
    });
    match found {
        Some(Some((plan, digest))) => {
            HITS.with(|h| h.set(h.get() + 1));
            super::DIGEST.with(|d| {
                if d.get().is_none() {
                    d.set(Some(digest));
                }
            });
            return plan;
        }
        // A value the planner refuses or routes otherwise: planned.
        Some(None) => return super::route_slow(sql, topo, ctx, placement),
        None => {}
    }
    let seen = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.seen.len() >= MAX_SEEN {
            c.seen.clear();
        }
        c.seen.insert(key, true)
    });
    if seen != Some(true) {
        // First sighting (or refused before): plan only.
        if seen == Some(false) {
            CACHE.with(|c| c.borrow_mut().seen.insert(key, false));
        }
        return super::route_slow(sql, topo, ctx, placement);
    }
    let (plan, recorded) = recording(|| super::route_slow(sql, topo, ctx, placement));
    let learned = learn(&shape, &plan, &recorded, topo, ctx);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        match learned {
            Some(template) => {
                c.seen.remove(&key);
                if c.templates.len() >= MAX_TEMPLATES {
                    c.templates.clear();
                }
                c.templates.insert(key, template);
            }
            None => {
                c.seen.insert(key, false);
            }
        }
    });
    plan
}

/// Runs `route` with the planner's notes recorded.
fn recording(route: impl FnOnce() -> Plan) -> (Plan, Record) {
    RECORD.with(|r| *r.borrow_mut() = Some(Record::default()));
    let plan = route();
    let recorded = RECORD.with(|r| r.borrow_mut().take()).unwrap_or_default();
    (plan, recorded)
}

/// A statement as the fast path sees it: its bytes and masked literals.
struct Shape<'s> {
    sql: &'s [u8],
    values: &'s [ValueLiteral],
}

impl<'s> Shape<'s> {
    /// `None` when a literal is not plain, or there are too many.
    fn of(sql: &'s [u8], values: &'s [ValueLiteral]) -> Option<Self> {
        if values.len() > MAX_VALUES {
            return None;
        }
        let plain = values.iter().all(|v| match v.kind {
            ValueKind::Digits => true,
            ValueKind::Quoted => sql
                .get(v.range.start + 1..v.range.end.saturating_sub(1))
                .is_some_and(|content| {
                    content
                        .iter()
                        .all(|&b| (0x20..=0x7E).contains(&b) && b != b'\\' && b != b'\'')
                }),
        });
        plain.then_some(Shape { sql, values })
    }

    /// The bytes between the literals (one more piece than literals).
    fn segments(&self) -> impl Iterator<Item = &'s [u8]> + '_ {
        let sql = self.sql;
        let mut start = 0;
        self.values
            .iter()
            .map(|v| v.range.clone())
            .chain(std::iter::once(sql.len()..sql.len()))
            .map(move |range| {
                let piece = sql.get(start..range.start).unwrap_or_default();
                start = range.end;
                piece
            })
    }

    /// The key of the shape in this thread's caches: a keyed hash of what
    /// [`Template::same_shape`] compares.
    fn hash(&self, ctx: &RouteContext, identity: u64) -> u64 {
        let mut h = SHAPE_KEYS.with(BuildHasher::build_hasher);
        h.write_u64(identity);
        context_key(ctx).hash(&mut h);
        let mut values = self.values.iter();
        for segment in self.segments() {
            h.write(segment);
            match values.next().map(|v| v.kind) {
                Some(ValueKind::Digits) => h.write_u8(1),
                Some(ValueKind::Quoted) => h.write_u8(2),
                None => {}
            }
        }
        h.finish()
    }

    /// Literal `i` as written (quotes included).
    fn value(&self, i: usize) -> &'s [u8] {
        self.values
            .get(i)
            .and_then(|v| self.sql.get(v.range.clone()))
            .unwrap_or_default()
    }

    /// Literal `i`'s content (inside the quotes).
    fn content(&self, i: usize) -> &'s [u8] {
        let whole = self.value(i);
        match self.values.get(i).map(|v| v.kind) {
            Some(ValueKind::Quoted) => whole
                .get(1..whole.len().saturating_sub(1))
                .unwrap_or_default(),
            _ => whole,
        }
    }

    fn stored(&self, ctx: &RouteContext, identity: u64) -> StoredShape {
        let mut exact = Vec::new();
        let mut cuts = Vec::new();
        for (segment, value) in self.segments().zip(self.values.iter()) {
            exact.extend_from_slice(segment);
            cuts.push((exact.len(), value.kind));
        }
        if let Some(last) = self.segments().last() {
            exact.extend_from_slice(last);
        }
        StoredShape {
            context: context_key(ctx),
            identity,
            exact,
            cuts,
        }
    }
}

/// What of the session context the shape's key holds: everything that
/// decides the reading and the plan of a statement whose plan reads no
/// session value.
type ContextKey = (Option<(FleetId, u32)>, bool, bool, u8, u32, u64);

fn context_key(ctx: &RouteContext) -> ContextKey {
    let charset = match ctx.lex.charset {
        ClientCharset::Utf8 => 0,
        ClientCharset::AsciiSafe => 1,
        ClientCharset::AsciiTrail(TrailCharset::Big5) => 2,
        ClientCharset::AsciiTrail(TrailCharset::Gbk) => 3,
        ClientCharset::AsciiTrail(TrailCharset::Sjis) => 4,
    };
    (
        ctx.current_db,
        ctx.lex.no_backslash_escapes,
        ctx.lex.ansi_quotes,
        charset,
        ctx.lex.server_version,
        ctx.max_tokens,
    )
}

/// A shape as kept: the bytes outside the literals, where each literal
/// was and its kind.
#[derive(Debug, PartialEq, Eq)]
struct StoredShape {
    context: ContextKey,
    identity: u64,
    exact: Vec<u8>,
    cuts: Vec<(usize, ValueKind)>,
}

/// Where the bytes of a template's text come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// The template's own bytes.
    Text(usize, usize),
    /// A literal as written.
    Value(usize),
    /// The key's local id.
    LocalId,
    /// The key's shard database name.
    DbName,
    /// The key's shard number.
    Shard,
}

/// The key literal of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    index: usize,
    rule: KeyRule,
}

/// A plan template.
#[derive(Debug)]
struct Template {
    shape: StoredShape,
    key: Option<Key>,
    fleet: FleetId,
    /// The shard when there is no key.
    shard: u32,
    pieces: Vec<Piece>,
    text: Vec<u8>,
    kind: StatementKind,
    compose_insert_id: Option<u16>,
    writes_through_function: bool,
    leaves_session_state: bool,
    digest: u64,
}

impl Template {
    fn same_shape(&self, shape: &Shape<'_>, ctx: &RouteContext, identity: u64) -> bool {
        let stored = &self.shape;
        if stored.identity != identity
            || stored.context != context_key(ctx)
            || stored.cuts.len() != shape.values.len()
        {
            return false;
        }
        let mut at = 0;
        for (i, segment) in shape.segments().enumerate() {
            let cut = stored.cuts.get(i);
            let end = cut.map_or(stored.exact.len(), |(end, _)| *end);
            if stored.exact.get(at..end) != Some(segment) {
                return false;
            }
            if let (Some((_, kind)), Some(value)) = (cut, shape.values.get(i)) {
                if *kind != value.kind {
                    return false;
                }
            }
            at = end;
        }
        true
    }

    /// The plan of `shape`'s statement; `None` when its key does not route
    /// as the planner's functions say a key routes, or its shard has no
    /// master.
    fn fill(&self, shape: &Shape<'_>, topo: &Topology) -> Option<Plan> {
        let fleet = topo.fleets.get(self.fleet)?;
        let (shard, local_id) = match self.key {
            None => (self.shard, None),
            Some(key) => key_target(key.rule, shape.content(key.index), fleet)?,
        };
        let host = topo.master_of(self.fleet, shard)?;
        let database = &fleet.database;
        let database_len = database.prefix.len()
            + database.width.max(decimal_len(u64::from(shard)))
            + database.suffix.len();
        let len = self
            .pieces
            .iter()
            .map(|piece| match *piece {
                Piece::Text(start, end) => end - start,
                Piece::Value(i) => shape.value(i).len(),
                Piece::LocalId => local_id.map_or(0, decimal_len),
                Piece::DbName => database_len,
                Piece::Shard => decimal_len(u64::from(shard)),
            })
            .sum();
        let sql = OUTPUT.with(|output| {
            let mut sql = output.borrow_mut();
            if sql.capacity() < len {
                sql.reserve(len.max(OUTPUT_BYTES));
            }
            for piece in &self.pieces {
                match *piece {
                    Piece::Text(start, end) => sql.put_slice(self.text.get(start..end)?),
                    Piece::Value(i) => sql.put_slice(shape.value(i)),
                    Piece::LocalId => push_decimal(&mut *sql, local_id?, 0),
                    Piece::DbName => push_db_name(&mut *sql, database, shard),
                    Piece::Shard => push_decimal(&mut *sql, u64::from(shard), 0),
                }
            }
            Some(sql.split().freeze())
        });
        // A piece that failed left its bytes in the buffer: dropped with it.
        let Some(sql) = sql else {
            OUTPUT.with(|output| output.borrow_mut().clear());
            return None;
        };
        Some(Plan::Shard(self.shard_query(shard, host, sql)))
    }

    /// The plan's query on `shard` of `host` with the filled-in `sql`.
    fn shard_query(
        &self,
        shard: u32,
        host: crate::topology::HostId,
        sql: impl Into<Bytes>,
    ) -> ShardQuery {
        ShardQuery {
            target: Target {
                fleet: self.fleet,
                shard,
                host,
            },
            sql: SqlText(sql.into()),
            kind: self.kind,
            compose_insert_id: self.compose_insert_id,
            writes_through_function: self.writes_through_function,
            local_infile: None,
            leaves_session_state: self.leaves_session_state,
        }
    }
}

/// Digits of `n` in decimal.
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Appends `n` in decimal, zero-padded to `width` digits (as `{n:0width$}`
/// writes it, without the formatting machinery).
fn push_decimal(out: &mut impl BufMut, mut n: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        start -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let written = digits.len() - start;
    out.put_bytes(b'0', width.saturating_sub(written));
    out.put_slice(digits.get(start..).unwrap_or_default());
}

/// Appends shard `shard`'s database name, as `DatabaseFormat::format`
/// writes it.
fn push_db_name(out: &mut impl BufMut, database: &crate::topology::DatabaseFormat, shard: u32) {
    out.put_slice(database.prefix.as_bytes());
    push_decimal(out, u64::from(shard), database.width);
    out.put_slice(database.suffix.as_bytes());
}

/// The shard (and an object's local id) a key literal's content selects,
/// as [`Env::key_shard`](super::Env::key_shard) computes it for a plain
/// literal; `None` where it would refuse.
fn key_target(rule: KeyRule, content: &[u8], fleet: &Fleet) -> Option<(u32, Option<u64>)> {
    match rule {
        KeyRule::Object(_) | KeyRule::Mapping => {
            let id = decode_id(parse_digits(content)?, fleet).ok()?;
            match rule {
                KeyRule::Object(type_id) if id.type_id != type_id => None,
                KeyRule::Object(_) => Some((id.shard, Some(id.local_id))),
                _ => Some((id.shard, None)),
            }
        }
        KeyRule::ModShard => Some((mod_shard(content, fleet.shard_count), None)),
    }
}

/// The number `content` writes: `None` unless it is digits only (at least
/// one) and fits in 64 bits, as `str::parse::<u64>` reads such digits.
fn parse_digits(content: &[u8]) -> Option<u64> {
    if content.is_empty() {
        return None;
    }
    content.iter().try_fold(0u64, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// The template of a statement whose ordinary plan and notes are these, if
/// one gives exactly that plan for it and for two probes.
fn learn(
    shape: &Shape<'_>,
    plan: &Plan,
    recorded: &Record,
    topo: &Topology,
    ctx: &RouteContext,
) -> Option<Template> {
    let Plan::Shard(query) = plan else {
        return None;
    };
    if recorded.untemplatable
        || query.local_infile.is_some()
        || query.kind == StatementKind::SchemaChange
    {
        return None;
    }
    let key = key_of(shape, recorded, query.target.fleet)?;
    let probes = probes(shape, key, query.target.fleet, query.target.shard, topo)?;
    let mut routed = Vec::new();
    // The probes' routes must not leave their digest for the caller.
    let digest_before = super::DIGEST.with(Cell::get);
    for probe in &probes {
        let (plan, notes) =
            recording(|| super::route_slow(&probe.sql, topo, ctx, &mut Watched(&mut FirstShard)));
        routed.push((plan, notes));
    }
    super::DIGEST.with(|d| d.set(digest_before));
    let mut template = None;
    for (probe, (probe_plan, notes)) in probes.iter().zip(&routed) {
        let lexed = lex::lex(&probe.sql, &ctx.lex, ctx.max_tokens).ok()?;
        let probe_shape = Shape::of(&probe.sql, &lexed.values)?;
        if probe_shape.stored(ctx, topo.identity) != shape.stored(ctx, topo.identity)
            || notes.untemplatable
            || key_of(&probe_shape, notes, query.target.fleet)? != key
        {
            return None;
        }
        let Plan::Shard(probe_query) = probe_plan else {
            return None;
        };
        if template.is_none() {
            let (pieces, text) = pieces(&probe_query.sql, &probe.sentinels);
            template = Some(Template {
                shape: shape.stored(ctx, topo.identity),
                key,
                fleet: query.target.fleet,
                shard: query.target.shard,
                pieces,
                text,
                kind: query.kind,
                compose_insert_id: query.compose_insert_id,
                writes_through_function: query.writes_through_function,
                leaves_session_state: query.leaves_session_state,
                digest: super::statement_digest(shape.sql, ctx).0,
            });
        }
        let template = template.as_ref()?;
        if template.fill(&probe_shape, topo).as_ref() != Some(probe_plan) {
            return None;
        }
    }
    let template = template?;
    (template.fill(shape, topo).as_ref() == Some(plan)).then_some(template)
}

/// The key literal of a route's notes: `None` (outer) when it cannot be
/// templated (two key literals, an introducer, another fleet), `Some(None)`
/// when no masked literal was read as a key.
fn key_of(shape: &Shape<'_>, recorded: &Record, fleet: FleetId) -> Option<Option<Key>> {
    let mut key: Option<Key> = None;
    for (range, introduced, rule, key_fleet) in &recorded.keys {
        let Some(index) = range
            .as_ref()
            .and_then(|range| shape.values.iter().position(|v| v.range == *range))
        else {
            // A key outside the masked literals is part of the shape.
            continue;
        };
        if *introduced || *key_fleet != fleet {
            return None;
        }
        let this = Key { index, rule: *rule };
        match key {
            Some(other) if other != this => return None,
            _ => key = Some(this),
        }
    }
    Some(key)
}

/// Places an object INSERT on the range's first shard (a probe's
/// placement; any placement makes the route untemplatable).
struct FirstShard;

impl Placement for FirstShard {
    fn choose(&mut self, first: u32, _last: u32) -> u32 {
        first
    }
}

/// A probe: the statement with other literals, and what each becomes in a
/// plan's text.
struct Probe {
    sql: Vec<u8>,
    sentinels: Vec<(Vec<u8>, Piece, bool)>,
}

/// Two probes: every literal changed (other lengths in each), the key on
/// two other shards with other local ids.
fn probes(
    shape: &Shape<'_>,
    key: Option<Key>,
    fleet_id: FleetId,
    shard: u32,
    topo: &Topology,
) -> Option<Vec<Probe>> {
    let fleet = topo.fleets.get(fleet_id)?;
    let mut shards = Vec::new();
    if let Some(key) = key {
        match key.rule {
            KeyRule::Object(_) | KeyRule::Mapping => {
                let count = fleet.shard_count;
                for candidate in [
                    count / 2 + shard,
                    count / 3 + shard + 7,
                    count - 1,
                    1,
                    count / 2 + 3,
                ] {
                    let candidate = candidate % count.max(1);
                    if candidate != shard
                        && !shards.contains(&candidate)
                        && topo.master_of(fleet_id, candidate).is_some()
                    {
                        shards.push(candidate);
                    }
                }
            }
            KeyRule::ModShard => {}
        }
    }
    let mut probes = Vec::new();
    for round in 0..2usize {
        let mut sql = Vec::with_capacity(shape.sql.len() + 32);
        let mut sentinels = Vec::new();
        let mut taken = vec![shard];
        for (i, segment) in shape.segments().enumerate() {
            sql.extend_from_slice(segment);
            let Some(value) = shape.values.get(i) else {
                break;
            };
            let quoted = value.kind == ValueKind::Quoted;
            let content = match key {
                Some(key) if key.index == i => {
                    let (content, extra) = key_probe(
                        key.rule,
                        shape.content(i),
                        quoted,
                        round,
                        fleet,
                        &shards,
                        &mut taken,
                    )?;
                    sentinels.extend(extra);
                    content
                }
                _ if quoted => format!(
                    "{}{round}x{i}{}",
                    ["~fa", "^gbz"][round],
                    ["q~", "^"][round]
                ),
                _ => [
                    90_000_000_017 + 1_000_003 * i as u64,
                    7_300_001 + 97 * i as u64,
                ][round]
                    .to_string(),
            };
            let written = if quoted {
                format!("'{content}'")
            } else {
                content
            };
            sentinels.push((written.clone().into_bytes(), Piece::Value(i), !quoted));
            sql.extend_from_slice(written.as_bytes());
        }
        probes.push(Probe { sql, sentinels });
    }
    Some(probes)
}

/// A key literal's content in probe `round`, and the sentinels of what it
/// selects (local id, shard database, shard number).
#[allow(clippy::type_complexity)]
fn key_probe(
    rule: KeyRule,
    original: &[u8],
    quoted: bool,
    round: usize,
    fleet: &Fleet,
    shards: &[u32],
    taken: &mut Vec<u32>,
) -> Option<(String, Vec<(Vec<u8>, Piece, bool)>)> {
    let (content, shard, local_id) = match rule {
        KeyRule::Object(_) | KeyRule::Mapping => {
            let raw: u64 = std::str::from_utf8(original).ok()?.parse().ok()?;
            let type_id = ObjectId::decode(raw).ok()?.type_id;
            let shard = *shards.get(round)?;
            let local_id = [56_789_012_345, 1_234_567][round];
            let id = ObjectId {
                shard,
                type_id,
                local_id,
            }
            .encode()
            .ok()?;
            (id.to_string(), shard, Some(local_id))
        }
        KeyRule::ModShard => {
            let found = (0..256u32).find_map(|n| {
                let content = if quoted {
                    format!("~k{round}z{n}~")
                } else {
                    (900_001 + 1_000 * round as u32 + n).to_string()
                };
                let shard = mod_shard(content.as_bytes(), fleet.shard_count);
                (!taken.contains(&shard)).then_some((content, shard))
            })?;
            (found.0, found.1, None)
        }
    };
    taken.push(shard);
    let mut sentinels = vec![
        (fleet.database_name(shard).into_bytes(), Piece::DbName, true),
        (shard.to_string().into_bytes(), Piece::Shard, true),
    ];
    if let Some(local_id) = local_id {
        sentinels.push((local_id.to_string().into_bytes(), Piece::LocalId, true));
    }
    Some((content, sentinels))
}

/// A plan's text cut into pieces: each sentinel found (the longest at a
/// place; one that `bounded` must not touch a word or number) is its
/// piece, the rest the template's own bytes.
fn pieces(text: &[u8], sentinels: &[(Vec<u8>, Piece, bool)]) -> (Vec<Piece>, Vec<u8>) {
    let word =
        |b: Option<&u8>| b.is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$');
    let mut pieces = Vec::new();
    let mut own = Vec::new();
    let mut plain_from = 0;
    let mut at = 0;
    let flush = |from: usize, to: usize, pieces: &mut Vec<Piece>, own: &mut Vec<u8>| {
        if from < to {
            let start = own.len();
            own.extend_from_slice(&text[from..to]);
            pieces.push(Piece::Text(start, own.len()));
        }
    };
    while at < text.len() {
        let found = sentinels
            .iter()
            .filter(|(s, _, bounded)| {
                !s.is_empty()
                    && text[at..].starts_with(s)
                    && !(*bounded
                        && (at > 0 && word(text.get(at - 1)) || word(text.get(at + s.len()))))
            })
            .max_by_key(|(s, _, _)| s.len());
        match found {
            Some((s, piece, _)) => {
                flush(plain_from, at, &mut pieces, &mut own);
                pieces.push(*piece);
                at += s.len();
                plain_from = at;
            }
            None => at += 1,
        }
    }
    flush(plain_from, text.len(), &mut pieces, &mut own);
    (pieces, own)
}

/// A prepared statement's bound value as [`route_marked`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerValue {
    /// A non-negative integer: written as its digits, so it may be read as
    /// a shard key.
    Digits(u64),
    /// Any other value (a string, NULL, a negative number, a time): written
    /// as a placeholder string; a statement whose route reads it takes the
    /// ordinary path.
    Other,
}

/// Where a `?` of a [`MarkedPlan`]'s text takes its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkedParam {
    /// The client's parameter of this index, as the client bound it.
    Client(usize),
    /// The key's local id, an unsigned 64-bit integer.
    LocalId(u64),
}

/// A prepared statement's single-shard plan with the bound values the
/// planner did not read left as `?` markers in its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedPlan {
    /// The plan; its text has one `?` per entry of `params`.
    pub query: ShardQuery,
    /// The value of each `?` of the text, in order.
    pub params: Vec<MarkedParam>,
    /// Where each `?` is in the text.
    pub markers: Vec<std::ops::Range<usize>>,
    /// The statement's digest (as [`route_digested`](super::route_digested) gives it).
    pub digest: u64,
}

/// The single-shard plan of a prepared statement `sql` (its markers at
/// `markers`, bound to `values`) with every value the planner does not
/// read left as a `?`: [`MarkedRoute::learn`]'s plan. `None` when there is
/// none: the caller binds the values into the text and routes it as any
/// statement.
pub fn route_marked(
    sql: &[u8],
    markers: &[std::ops::Range<usize>],
    values: &[MarkerValue],
    topo: &Topology,
    ctx: &RouteContext,
) -> Option<MarkedPlan> {
    MarkedRoute::learn(sql, markers, values, topo, ctx).map(|(_, plan)| plan)
}

impl Template {
    /// What of this template the executes of a prepared statement need
    /// ([`MarkedRoute`]): `shape` is its probe, `marker_of` the client
    /// parameter each of the probe's literals holds. `None` when the key
    /// is a parameter not bound as digits, a literal of the text the
    /// planner refuses as a key, or the text needs a local id its key does
    /// not give.
    fn fill_marked(
        &self,
        shape: &Shape<'_>,
        marker_of: &[Option<usize>],
        values: &[MarkerValue],
        topo: &Topology,
        learned: (ContextKey, usize),
    ) -> Option<MarkedRoute> {
        let fleet = topo.fleets.get(self.fleet)?;
        let key = match self.key {
            None => MarkedKey::Fixed(self.shard, None),
            Some(key) => match marker_of.get(key.index).copied().flatten() {
                Some(m) => match values.get(m) {
                    Some(MarkerValue::Digits(_)) => MarkedKey::Param(m, key.rule),
                    _ => return None,
                },
                None => {
                    let (shard, local_id) = key_target(key.rule, shape.content(key.index), fleet)?;
                    MarkedKey::Fixed(shard, local_id)
                }
            },
        };
        let gives_local_id = match key {
            MarkedKey::Fixed(_, local_id) => local_id.is_some(),
            MarkedKey::Param(_, rule) => matches!(rule, KeyRule::Object(_)),
        };
        let mut text = Vec::with_capacity(self.text.len() + 16);
        let mut pieces = Vec::new();
        let mut slots = Vec::new();
        let mut run_from = 0;
        for piece in &self.pieces {
            let per_shard = match *piece {
                Piece::Text(start, end) => {
                    text.extend_from_slice(self.text.get(start..end)?);
                    continue;
                }
                Piece::Value(i) => {
                    match marker_of.get(i).copied().flatten() {
                        Some(m) => {
                            slots.push((text.len(), MarkedSlot::Client(m)));
                            text.push(b'?');
                        }
                        None => text.extend_from_slice(shape.value(i)),
                    }
                    continue;
                }
                Piece::LocalId if gives_local_id => {
                    slots.push((text.len(), MarkedSlot::LocalId));
                    text.push(b'?');
                    continue;
                }
                Piece::LocalId => return None,
                Piece::DbName => MarkedPiece::DbName,
                Piece::Shard => MarkedPiece::Shard,
            };
            if run_from < text.len() {
                pieces.push(MarkedPiece::Text(run_from..text.len()));
            }
            pieces.push(per_shard);
            run_from = text.len();
        }
        if run_from < text.len() {
            pieces.push(MarkedPiece::Text(run_from..text.len()));
        }
        let (context, probe_base) = learned;
        Some(MarkedRoute {
            identity: topo.identity,
            context,
            digits: values
                .iter()
                .map(|value| matches!(value, MarkerValue::Digits(_)))
                .collect(),
            probe_base,
            key,
            pieces,
            text,
            slots,
            query: self.shard_query(self.shard, 0, Vec::new()),
            digest: self.digest,
        })
    }
}

/// A prepared statement's route with its values as markers, made once
/// from the fast path's template of its shape ([`MarkedRoute::learn`]) and
/// kept with the statement: an execute fills it in for the shard its key
/// selects ([`MarkedRoute::fill`]) without reading the text again. It
/// holds for the routing table, the session context and the kinds of
/// values (digits or not) it was learned with ([`MarkedRoute::fits`]).
#[derive(Debug, Clone)]
pub struct MarkedRoute {
    identity: u64,
    context: ContextKey,
    /// Which parameters were bound as digits (the probe's literal kinds).
    digits: Vec<bool>,
    /// Bytes of the probe apart from the values written into it (the fast
    /// path takes statements up to [`MAX_STATEMENT_BYTES`]).
    probe_base: usize,
    key: MarkedKey,
    /// The plan's text: `text`, cut where the shard's database name and
    /// number go.
    pieces: Vec<MarkedPiece>,
    text: Vec<u8>,
    /// Each `?` of `text` (its offset) and what it takes, in order.
    slots: Vec<(usize, MarkedSlot)>,
    /// The template's plan; its target and text are each execute's.
    query: ShardQuery,
    digest: u64,
}

/// What selects a [`MarkedRoute`]'s shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkedKey {
    /// Not a value: this shard (and local id), from no key or a literal
    /// of the statement's text.
    Fixed(u32, Option<u64>),
    /// The client's parameter of this index, bound as digits, read by
    /// this rule.
    Param(usize, KeyRule),
}

/// A part of a [`MarkedRoute`]'s text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MarkedPiece {
    /// These bytes of its own text.
    Text(std::ops::Range<usize>),
    /// The shard's database name.
    DbName,
    /// The shard's number.
    Shard,
}

/// What a `?` of a [`MarkedRoute`]'s text takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkedSlot {
    /// The client's parameter of this index.
    Client(usize),
    /// The key's local id.
    LocalId,
}

impl MarkedRoute {
    /// The route of a prepared statement `sql` (its markers at `markers`)
    /// executed with `values`, and its plan for them: a single-shard plan
    /// with every value the planner does not read left as a `?`, from the
    /// fast path's template of the statement's shape; `None` when there is
    /// none (not yet learned, not one shard, a value read as a key that is
    /// not a plain non-negative integer, a shape the fast path does not
    /// take).
    ///
    /// The values are written into a probe text (digits, or `'x'` for
    /// [`MarkerValue::Other`]) that is routed like any statement, so the
    /// fast path learns its shape; the template then says which literal is
    /// the shard key (its digits select the shard as the planner's
    /// functions say, a bad ID or another type finds no plan) and where
    /// each literal went in the shard's text: those places become `?`, and
    /// a key rewritten to its local id becomes a `?` bound to that local
    /// id. The plan's text is read again: its `?`s must be exactly those.
    pub fn learn(
        sql: &[u8],
        markers: &[std::ops::Range<usize>],
        values: &[MarkerValue],
        topo: &Topology,
        ctx: &RouteContext,
    ) -> Option<(Self, MarkedPlan)> {
        if markers.len() != values.len()
            || topo.identity == 0
            || !ENABLED.with(Cell::get)
            || markers.iter().any(|m| m.start > m.end || m.end > sql.len())
        {
            return None;
        }
        let mut probe = Vec::with_capacity(sql.len() + 24 * markers.len());
        let mut ranges = Vec::with_capacity(markers.len());
        let mut copied = 0;
        for (marker, value) in markers.iter().zip(values) {
            probe.extend_from_slice(sql.get(copied..marker.start)?);
            probe.push(b' ');
            let start = probe.len();
            match value {
                MarkerValue::Digits(n) => push_decimal(&mut probe, *n, 0),
                MarkerValue::Other => probe.extend_from_slice(b"'x'"),
            }
            ranges.push(start..probe.len());
            probe.push(b' ');
            copied = marker.end;
        }
        probe.extend_from_slice(sql.get(copied..)?);
        if probe.len() > MAX_STATEMENT_BYTES {
            return None;
        }
        let learned = (
            context_key(ctx),
            probe.len() - values.iter().map(probe_value_len).sum::<usize>(),
        );
        let lexed = lex::lex(&probe, &ctx.lex, ctx.max_tokens).ok()?;
        let shape = Shape::of(&probe, &lexed.values)?;
        // Literal index → the client's parameter it holds.
        let mut marker_of = vec![None; shape.values.len()];
        for (m, range) in ranges.iter().enumerate() {
            let index = shape.values.iter().position(|v| v.range == *range)?;
            marker_of[index] = Some(m);
        }
        let key = shape.hash(ctx, topo.identity);
        let lookup = |shape: &Shape<'_>| {
            CACHE.with(|c| {
                let c = c.borrow();
                match c.templates.get(&key) {
                    Some(t) if t.same_shape(shape, ctx, topo.identity) => {
                        Some(t.fill_marked(shape, &marker_of, values, topo, learned))
                    }
                    _ if c.seen.get(&key) == Some(&false) => Some(None),
                    _ => None,
                }
            })
        };
        let marked = match lookup(&shape) {
            Some(marked) => marked,
            None => {
                // Not learned yet: routed as any statement, which learns it
                // the second time it sees it (so twice; a prepared statement
                // is meant to be executed again).
                let digest_before = super::DIGEST.with(Cell::get);
                let mut marked = None;
                for _ in 0..2 {
                    route(&probe, topo, ctx, &mut FirstShard);
                    marked = lookup(&shape);
                    if marked.is_some() {
                        break;
                    }
                }
                super::DIGEST.with(|d| d.set(digest_before));
                marked.flatten()
            }
        }?;
        let plan = marked.fill(values, topo, ctx)?;
        // Every `?` of the text is one of ours, where it was put.
        let read = crate::router::placeholders(plan.query.sql.as_bytes(), &ctx.lex).ok()?;
        (read == plan.markers).then_some((marked, plan))
    }

    /// Whether the route holds for an execute with `values` on `topo` in
    /// `ctx`: the routing table, the session context and the kind of each
    /// value (digits or not) it was learned with, the fast path on, and a
    /// probe of these values no longer than the fast path takes.
    pub fn fits(&self, values: &[MarkerValue], topo: &Topology, ctx: &RouteContext) -> bool {
        self.identity == topo.identity
            && values.len() == self.digits.len()
            && values
                .iter()
                .zip(&self.digits)
                .all(|(value, &digits)| matches!(value, MarkerValue::Digits(_)) == digits)
            && self.context == context_key(ctx)
            && ENABLED.with(Cell::get)
            && self
                .probe_base
                .saturating_add(values.iter().map(probe_value_len).sum::<usize>())
                <= MAX_STATEMENT_BYTES
    }

    /// The plan of an execute with `values`, as [`MarkedRoute::learn`]
    /// would give it; `None` when the route does not fit them
    /// ([`MarkedRoute::fits`]), the key's value selects no shard as the
    /// planner's functions say (a bad ID, another type), or its shard has
    /// no master.
    pub fn fill(
        &self,
        values: &[MarkerValue],
        topo: &Topology,
        ctx: &RouteContext,
    ) -> Option<MarkedPlan> {
        if !self.fits(values, topo, ctx) {
            return None;
        }
        let fleet_id = self.query.target.fleet;
        let fleet = topo.fleets.get(fleet_id)?;
        let (shard, local_id) = match self.key {
            MarkedKey::Fixed(shard, local_id) => (shard, local_id),
            MarkedKey::Param(m, rule) => match values.get(m)? {
                MarkerValue::Digits(n) => digits_target(rule, *n, fleet)?,
                MarkerValue::Other => return None,
            },
        };
        let host = topo.master_of(fleet_id, shard)?;
        let database = &fleet.database;
        // Sized exactly: the plan's `Bytes` takes the vector as it is.
        let len = self
            .pieces
            .iter()
            .map(|piece| match piece {
                MarkedPiece::Text(range) => range.len(),
                MarkedPiece::DbName => db_name_len(database, shard),
                MarkedPiece::Shard => decimal_len(u64::from(shard)),
            })
            .sum();
        let mut sql = Vec::with_capacity(len);
        let mut markers = Vec::with_capacity(self.slots.len());
        let mut slots = self.slots.iter().map(|&(at, _)| at).peekable();
        for piece in &self.pieces {
            match piece {
                MarkedPiece::Text(range) => {
                    let start = sql.len();
                    sql.extend_from_slice(self.text.get(range.clone())?);
                    while let Some(at) = slots.next_if(|&at| at < range.end) {
                        let at = start + at.saturating_sub(range.start);
                        markers.push(at..at + 1);
                    }
                }
                MarkedPiece::DbName => push_db_name(&mut sql, database, shard),
                MarkedPiece::Shard => push_decimal(&mut sql, u64::from(shard), 0),
            }
        }
        let params = self
            .slots
            .iter()
            .map(|&(_, slot)| match slot {
                MarkedSlot::Client(m) => Some(MarkedParam::Client(m)),
                MarkedSlot::LocalId => local_id.map(MarkedParam::LocalId),
            })
            .collect::<Option<Vec<_>>>()?;
        Some(MarkedPlan {
            query: ShardQuery {
                target: Target {
                    fleet: fleet_id,
                    shard,
                    host,
                },
                sql: SqlText(Bytes::from(sql)),
                ..self.query.clone()
            },
            params,
            markers,
            digest: self.digest,
        })
    }

    /// Bytes the route holds.
    pub fn held_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.digits.len()
            + self.text.len()
            + self.pieces.len() * std::mem::size_of::<MarkedPiece>()
            + self.slots.len() * std::mem::size_of::<(usize, MarkedSlot)>()
    }
}

/// Bytes a value takes in [`MarkedRoute::learn`]'s probe.
fn probe_value_len(value: &MarkerValue) -> usize {
    match value {
        MarkerValue::Digits(n) => decimal_len(*n),
        MarkerValue::Other => 3,
    }
}

/// [`key_target`] of a key bound to the integer `n` (read as its digits).
fn digits_target(rule: KeyRule, n: u64, fleet: &Fleet) -> Option<(u32, Option<u64>)> {
    match rule {
        KeyRule::Object(type_id) => {
            let id = decode_id(n, fleet).ok()?;
            (id.type_id == type_id).then_some((id.shard, Some(id.local_id)))
        }
        KeyRule::Mapping => decode_id(n, fleet).ok().map(|id| (id.shard, None)),
        KeyRule::ModShard => {
            let mut digits = Vec::with_capacity(20);
            push_decimal(&mut digits, n, 0);
            key_target(rule, &digits, fleet)
        }
    }
}

/// Bytes of shard `shard`'s database name ([`push_db_name`]).
fn db_name_len(database: &crate::topology::DatabaseFormat, shard: u32) -> usize {
    database.prefix.len()
        + database.width.max(decimal_len(u64::from(shard)))
        + database.suffix.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_as_format_writes_them() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            2047,
            4095,
            123_456,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            for width in [0, 1, 3, 5, 25] {
                let mut out = b"x".to_vec();
                push_decimal(&mut out, n, width);
                assert_eq!(
                    out,
                    format!("x{n:0width$}").into_bytes(),
                    "{n} width {width}"
                );
                if width == 0 {
                    assert_eq!(out.len() - 1, decimal_len(n));
                }
            }
        }
    }

    #[test]
    fn digits_are_read_as_str_parse_reads_them() {
        for text in [
            "0",
            "7",
            "0000000000000000000000042",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "184467440737095516150",
            "",
            "+1",
            "-1",
            "1 ",
            "1a",
            "١",
        ] {
            assert_eq!(
                parse_digits(text.as_bytes()),
                text.parse::<u64>()
                    .ok()
                    .filter(|_| text.bytes().all(|b| b.is_ascii_digit())),
                "{text:?}"
            );
        }
    }

    #[test]
    fn database_names_are_written_as_the_topology_formats_them() {
        let format = crate::topology::DatabaseFormat {
            prefix: "db".to_owned(),
            width: 5,
            suffix: "_x".to_owned(),
        };
        for shard in [0, 7, 2048, 99_999, 123_456] {
            let mut out = Vec::new();
            push_db_name(&mut out, &format, shard);
            assert_eq!(String::from_utf8(out).unwrap(), format.format(shard));
        }
    }
}
