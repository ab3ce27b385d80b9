//! Config validation: every problem, each with its line.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::config::{Config, MAX_SHUTDOWN_DRAIN_TIMEOUT_MS};
use super::lines::LineIndex;
use super::{Fleet, Host, HostId, TableKind, Topology};
use crate::id::MAX_TYPE;

mod fleets;
mod tables;

use fleets::{check_fleet, check_format_collisions, database_spec, fleet_order, intern_hosts};
use tables::check_tables;

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// File name or other source label.
    pub source_name: String,
    /// 1-based line number (0 when unknown).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.source_name, self.message)
        } else {
            write!(f, "{}:{}: {}", self.source_name, self.line, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// All problems found in a config file; displays one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl ConfigErrors {
    /// A single error, e.g. for an unreadable file.
    pub fn single(source_name: &str, line: usize, message: impl Into<String>) -> Self {
        ConfigErrors(vec![ConfigError {
            source_name: source_name.to_owned(),
            line,
            message: message.into(),
        }])
    }
}

/// Checks a `host:port` address: IPv4, hostname or `[v6]`, and a port
/// 1-65535 (0 too when `allow_port_zero`, for listen addresses).
pub fn check_address(addr: &str, allow_port_zero: bool) -> Result<(), String> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!(
            "address `{addr}` has no port; write it as host:port"
        ));
    };
    if host.is_empty() {
        return Err(format!(
            "address `{addr}` has no host; write it as host:port"
        ));
    }
    if let Some(inner) = host.strip_prefix('[') {
        let ok = inner
            .strip_suffix(']')
            .is_some_and(|v6| v6.parse::<Ipv6Addr>().is_ok());
        if !ok {
            return Err(format!(
                "address `{addr}`: `{host}` is not a valid [IPv6] address"
            ));
        }
    } else if host.contains(':') {
        return Err(format!(
            "address `{addr}`: write an IPv6 host in brackets, e.g. [::1]:3306"
        ));
    } else if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        if host.parse::<Ipv4Addr>().is_err() {
            return Err(format!(
                "address `{addr}`: `{host}` is not a valid IPv4 address"
            ));
        }
    } else if !is_hostname(host) {
        return Err(format!(
            "address `{addr}`: `{host}` is not a valid host name"
        ));
    }
    match port.parse::<u16>() {
        Ok(0) if !allow_port_zero => Err(format!("address `{addr}`: port must be 1-65535")),
        Ok(_) => Ok(()),
        Err(_) => Err(format!(
            "address `{addr}`: port `{port}` must be a number 1-65535"
        )),
    }
}

fn is_hostname(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Parses YAML text into a [`Config`]; a syntax or type error is reported
/// together with any duplicate keys the line scan found.
/// The document is first held to [`super::prescan`]'s limits, so a hostile
/// one costs the parser little.
pub(super) fn parse(text: &str, source: &str) -> Result<(Config, LineIndex), ConfigErrors> {
    super::prescan::check(text).map_err(|e| ConfigErrors::single(source, e.line, e.message))?;
    let lines = LineIndex::scan(text);
    match serde_yaml::from_str::<Config>(text) {
        Ok(config) => Ok((config, lines)),
        Err(err) => {
            let line = err.location().map_or(0, |l| l.line());
            let mut errors = Errors::new(source);
            errors.push(line, strip_location(&err.to_string()));
            for dup in lines.duplicates() {
                if dup.line != line {
                    errors.push(dup.line, duplicate_message(dup));
                }
            }
            Err(errors.finish())
        }
    }
}

fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) if message[at..].contains(" column ") => message[..at].to_owned(),
        _ => message.to_owned(),
    }
}

fn duplicate_message(dup: &super::lines::Duplicate) -> String {
    let what = match dup.parent.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["tables"] => "table",
        ["fleets"] => "fleet",
        ["types"] => "type",
        _ => "key",
    };
    let place = if what == "key" && !dup.parent.is_empty() {
        format!(" in `{}`", dup.parent.join("."))
    } else {
        String::new()
    };
    format!(
        "duplicate {what} `{}`{place} (first defined on line {})",
        dup.key, dup.first_line
    )
}

struct Errors {
    source: String,
    list: Vec<ConfigError>,
}

impl Errors {
    fn new(source: &str) -> Self {
        Errors {
            source: source.to_owned(),
            list: Vec::new(),
        }
    }

    fn push(&mut self, line: usize, message: impl Into<String>) {
        self.list.push(ConfigError {
            source_name: self.source.clone(),
            line,
            message: message.into(),
        });
    }

    fn finish(mut self) -> ConfigErrors {
        self.list.sort_by_key(|e| (e.line == 0, e.line));
        ConfigErrors(self.list)
    }
}

/// Validates `config` and builds its routing table; `lines` locates errors.
pub(super) fn build(
    config: Config,
    source: &str,
    lines: &LineIndex,
) -> Result<Topology, ConfigErrors> {
    let mut errors = Errors::new(source);
    for dup in lines.duplicates() {
        errors.push(dup.line, duplicate_message(dup));
    }
    check_general(&config, lines, &mut errors);
    check_tls(&config, lines, &mut errors);
    check_types(&config, lines, &mut errors);

    let fleet_names = fleet_order(&config, lines);
    let fleet_ids: HashMap<&str, usize> = fleet_names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();

    let mut hosts: Vec<Host> = Vec::new();
    let mut host_ids: HashMap<String, HostId> = HashMap::new();
    let mut fleets = Vec::new();
    for name in &fleet_names {
        let Some(fc) = config.fleets.get(name) else {
            continue;
        };
        let database = database_spec(&config, name, fc);
        if let Some(fleet) = check_fleet(name, fc, &database, lines, &mut errors) {
            fleets.push(intern_hosts(fleet, fc, &mut hosts, &mut host_ids));
        }
    }
    if config.fleets.is_empty() {
        errors.push(
            lines.line(&["fleets"]),
            "no fleets configured; add a `fleets:` section",
        );
    }
    check_format_collisions(&fleets, lines, &mut errors);

    let mut tables = check_tables(&config, &fleet_ids, lines, &mut errors);
    // An object table of a fleet with time-sortable IDs stores its `id`
    // (minted at INSERT) and routes by it like a mapping table.
    for rule in tables.values_mut() {
        let mints = fleets.get(rule.fleet).is_some_and(Fleet::mints_ids);
        if mints && matches!(rule.kind, TableKind::Object { .. }) {
            rule.kind = TableKind::Mapping {
                from_column: "id".to_owned(),
            };
        }
    }

    if errors.list.is_empty() {
        Ok(Topology {
            config,
            fleets,
            hosts,
            tables,
            generation: 0,
            identity: 0,
            columns: Default::default(),
        })
    } else {
        Err(errors.finish())
    }
}

fn check_general(config: &Config, lines: &LineIndex, errors: &mut Errors) {
    if config.listen.is_empty() {
        errors.push(0, "`listen` is missing; add e.g. `listen: 127.0.0.1:6033`");
    } else if let Err(e) = check_address(&config.listen, true) {
        errors.push(lines.line(&["listen"]), format!("listen: {e}"));
    }
    if let Some(admin) = &config.admin {
        if admin.listen.is_empty() {
            errors.push(
                lines.line(&["admin"]),
                "admin: `listen` is missing; add e.g. `listen: 127.0.0.1:6032`",
            );
        } else if let Err(e) = check_address(&admin.listen, true) {
            errors.push(
                lines.line(&["admin", "listen"]),
                format!("admin listen: {e}"),
            );
        }
        if admin.users.is_empty() {
            errors.push(
                lines.line(&["admin"]),
                "admin: no admin users; add `users: [{ name: admin, password: ... }]`",
            );
        }
        check_users(&admin.users, &["admin", "users"], lines, errors);
    }
    if config.users.is_empty() {
        errors.push(
            lines.line(&["users"]),
            "no client users; add `users: [{ name: app, password: ... }]`",
        );
    }
    check_users(&config.users, &["users"], lines, errors);

    let backend = &config.backend;
    if backend.user.is_empty() {
        errors.push(
            lines.line(&["backend"]),
            "backend: `user` is missing (the account shardgate logs in to the hosts with)",
        );
    }
    check_operations_account(config, lines, errors);
    let limits = [
        ("pool_max_per_host", u64::from(backend.pool_max_per_host)),
        ("connect_timeout_ms", backend.connect_timeout_ms),
        ("checkout_timeout_ms", backend.checkout_timeout_ms),
    ];
    for (key, value) in limits {
        if value == 0 {
            errors.push(
                lines.line(&["backend", key]),
                format!("backend: `{key}` must be at least 1"),
            );
        }
    }
    check_operations(config, lines, errors);
    check_limits(config, lines, errors);
}

/// The `limits` that bound each other.
fn check_limits(config: &Config, lines: &LineIndex, errors: &mut Errors) {
    let limits = &config.limits;
    if limits.max_merge_bytes_total < limits.max_merge_bytes {
        errors.push(
            lines.line(&["limits", "max_merge_bytes_total"]),
            format!(
                "limits: `max_merge_bytes_total` ({}) must be at least `max_merge_bytes` ({}): \
                 it bounds all multi-shard reads of the process together",
                limits.max_merge_bytes_total, limits.max_merge_bytes
            ),
        );
    }
}

/// The `operations` account, when the section is there.
fn check_operations_account(config: &Config, lines: &LineIndex, errors: &mut Errors) {
    if let Some(account) = &config.operations {
        if account.user.is_empty() {
            errors.push(
                lines.line(&["operations"]),
                "operations: `user` is missing (the account fleet init, VERIFY FLEET and \
                 PROMOTE REPLICA log in to the hosts with); remove the section to use \
                 the backend account",
            );
        }
    }
}

/// The `health`, `pause` and `metrics` sections.
fn check_operations(config: &Config, lines: &LineIndex, errors: &mut Errors) {
    let health = &config.health;
    let pause = &config.pause;
    let limits = [
        ("health", "interval_ms", health.interval_ms),
        ("health", "timeout_ms", health.timeout_ms),
        ("health", "columns_refresh_ms", health.columns_refresh_ms),
        (
            "health",
            "failures_before_down",
            u64::from(health.failures_before_down),
        ),
        ("pause", "timeout_ms", pause.timeout_ms),
        ("pause", "drain_timeout_ms", pause.drain_timeout_ms),
    ];
    for (section, key, value) in limits {
        if value == 0 {
            errors.push(
                lines.line(&[section, key]),
                format!("{section}: `{key}` must be at least 1"),
            );
        }
    }
    let drain = config.shutdown.drain_timeout_ms;
    if drain > MAX_SHUTDOWN_DRAIN_TIMEOUT_MS {
        errors.push(
            lines.line(&["shutdown", "drain_timeout_ms"]),
            format!(
                "shutdown: `drain_timeout_ms` {drain} is more than an hour ({MAX_SHUTDOWN_DRAIN_TIMEOUT_MS}); \
                 a stop that long holds a deploy; 0 cuts sessions at once"
            ),
        );
    }
    if let Some(metrics) = &config.metrics {
        if metrics.listen.is_empty() {
            errors.push(
                lines.line(&["metrics"]),
                "metrics: `listen` is missing; add e.g. `listen: 127.0.0.1:9104`",
            );
        } else if let Err(e) = check_address(&metrics.listen, true) {
            errors.push(
                lines.line(&["metrics", "listen"]),
                format!("metrics listen: {e}"),
            );
        }
    }
    let stats = &config.stats;
    let min_digests = super::config::MIN_MAX_DIGESTS;
    if !(min_digests..=super::config::MAX_MAX_DIGESTS).contains(&stats.max_digests) {
        errors.push(
            lines.line(&["stats", "max_digests"]),
            format!(
                "stats: `max_digests` must be between {min_digests} and {}",
                super::config::MAX_MAX_DIGESTS
            ),
        );
    }
    if stats.slow_log_per_second == 0 {
        errors.push(
            lines.line(&["stats", "slow_log_per_second"]),
            "stats: `slow_log_per_second` must be at least 1",
        );
    }
    if config.schema.as_deref() == Some("") {
        errors.push(
            lines.line(&["schema"]),
            "schema: empty path; name the per-shard schema file, e.g. `schema: schema.sql`",
        );
    }
}

/// The `tls` section: both files given, readable, PEM, and the key that of
/// the certificate. The files are read here, so `check-config` and a
/// starting proxy report a bad certificate with its line.
fn check_tls(config: &Config, lines: &LineIndex, errors: &mut Errors) {
    use super::tls_files as tls;
    let Some(section) = &config.tls else {
        return;
    };
    let certs = load_tls_file(&section.cert, "cert", lines, errors, tls::load_certs);
    let key = load_tls_file(&section.key, "key", lines, errors, tls::load_key);
    if let (Some(certs), Some(key)) = (certs, key) {
        if let Err(e) = tls::server_config(certs, key) {
            errors.push(lines.line(&["tls"]), format!("tls: {e}"));
        }
    }
}

fn load_tls_file<T>(
    path: &str,
    field: &str,
    lines: &LineIndex,
    errors: &mut Errors,
    load: impl FnOnce(&std::path::Path) -> Result<T, String>,
) -> Option<T> {
    let line = lines.line(&["tls", field]);
    if path.is_empty() {
        errors.push(
            line,
            format!("tls: `{field}` is missing; give the path of a PEM file"),
        );
        return None;
    }
    load(std::path::Path::new(path))
        .map_err(|e| errors.push(line, format!("tls {field}: {e}")))
        .ok()
}

fn check_users(
    users: &[super::config::UserConfig],
    path: &[&str],
    lines: &LineIndex,
    errors: &mut Errors,
) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, user) in users.iter().enumerate() {
        let item = format!("#{i}");
        let mut at = path.to_vec();
        at.push(&item);
        let line = lines.line(&at);
        if user.name.is_empty() {
            errors.push(
                line,
                format!("{}: a user has an empty name", path.join(".")),
            );
        } else if let Some(first) = seen.insert(&user.name, line) {
            errors.push(
                line,
                format!(
                    "{}: duplicate user `{}` (first defined on line {first})",
                    path.join("."),
                    user.name
                ),
            );
        }
    }
}

fn check_types(config: &Config, lines: &LineIndex, errors: &mut Errors) {
    let mut by_id: BTreeMap<u32, &str> = BTreeMap::new();
    let mut names: Vec<(&String, &u32)> = config.types.iter().collect();
    names.sort_by_key(|(name, _)| lines.line(&["types", name.as_str()]));
    for (name, &id) in names {
        let line = lines.line(&["types", name]);
        if id > u32::from(MAX_TYPE) {
            errors.push(
                line,
                format!("type `{name}` has id {id}; type ids must be 0-{MAX_TYPE}"),
            );
        }
        if let Some(other) = by_id.insert(id, name) {
            errors.push(
                line,
                format!("types `{other}` and `{name}` have the same id {id}"),
            );
        }
    }
}
