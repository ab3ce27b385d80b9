//! The prepare phase: both servers read, nothing changed. Every check that
//! fails says how to fix it.

use std::collections::HashMap;
use std::fmt;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::{databases, failed, literal, Login, SplitError, SplitPlan};
use crate::ops::OpsError;

/// One check and what it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Short name (`version`, `gtid`, ...).
    pub name: &'static str,
    /// What was found.
    pub detail: String,
    /// How to fix it, when it failed.
    pub fix: Option<String>,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fix {
            None => write!(f, "ok\t{}\t{}", self.name, self.detail),
            Some(fix) => write!(f, "FAILED\t{}\t{}; fix: {fix}", self.name, self.detail),
        }
    }
}

/// What [`prepare`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrepareReport {
    /// Every check, passed or not.
    pub checks: Vec<Check>,
    /// The source's databases (system schemas aside): what the copy takes.
    pub databases: Vec<String>,
    /// Their size on the source (data and indexes, bytes).
    pub bytes: u64,
    /// Their rows, as InnoDB estimates them.
    pub rows: u64,
}

impl PrepareReport {
    /// The failed checks, one line each.
    pub fn failures(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| c.fix.is_some())
            .map(ToString::to_string)
            .collect()
    }
}

/// The server variables the checks read.
const VARIABLES: [&str; 14] = [
    "version",
    "log_bin",
    "binlog_format",
    "server_id",
    "gtid_domain_id",
    "gtid_strict_mode",
    "read_only",
    "log_slave_updates",
    "replicate_do_db",
    "replicate_ignore_db",
    "replicate_do_table",
    "replicate_ignore_table",
    "replicate_wild_do_table",
    "replicate_wild_ignore_table",
];

async fn variables(conn: &mut Conn, host: &str) -> Result<HashMap<String, String>, OpsError> {
    let names: Vec<String> = VARIABLES.iter().map(|v| literal(v)).collect();
    let rows: Vec<(String, String)> = conn
        .query(format!(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})",
            names.join(",")
        ))
        .await
        .map_err(failed(host, "reading the server variables"))?;
    Ok(rows
        .into_iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v))
        .collect())
}

/// `(major, minor)` of a `@@version` such as `10.11.6-MariaDB-0+deb12u1`.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether a variable reads as on.
fn on(value: Option<&String>) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1")
}

/// The checks on what both servers' variables say (pure).
pub fn variable_checks(
    plan: &SplitPlan,
    source: &HashMap<String, String>,
    target: &HashMap<String, String>,
) -> Vec<Check> {
    let (s, t) = (&plan.source, &plan.target);
    let get =
        |vars: &HashMap<String, String>, name: &str| vars.get(name).cloned().unwrap_or_default();
    let mut checks = Vec::new();
    let mut check = |name, ok: bool, detail: String, fix: String| {
        checks.push(Check {
            name,
            detail,
            fix: (!ok).then_some(fix),
        })
    };
    let (sv, tv) = (get(source, "version"), get(target, "version"));
    let mariadb = sv.contains("MariaDB") && tv.contains("MariaDB");
    let newer = match (major_minor(&sv), major_minor(&tv)) {
        (Some(a), Some(b)) => b >= a,
        _ => false,
    };
    check(
        "version",
        mariadb && newer,
        format!("source {sv}, target {tv}"),
        format!("run MariaDB of the source's version or later on {t} (GTID replication from {s} needs it)"),
    );
    check(
        "binlog",
        on(source.get("log_bin")) && get(source, "binlog_format").eq_ignore_ascii_case("ROW"),
        format!("source log_bin {}, binlog_format {}", get(source, "log_bin"), get(source, "binlog_format")),
        format!("set log_bin and binlog_format = ROW on {s} (my.cnf, restart): the target replicates its binlog"),
    );
    check(
        "target binlog",
        on(target.get("log_bin")) && on(target.get("log_slave_updates")),
        format!("target log_bin {}, log_slave_updates {}", get(target, "log_bin"), get(target, "log_slave_updates")),
        format!("set log_bin and log_slave_updates = ON on {t} (my.cnf, restart): as a master it needs a binlog for its replicas"),
    );
    check(
        "server id",
        get(source, "server_id") != get(target, "server_id"),
        format!(
            "source {}, target {}",
            get(source, "server_id"),
            get(target, "server_id")
        ),
        format!("give {t} a server_id of its own (my.cnf, restart)"),
    );
    let same_domain = get(source, "gtid_domain_id") == get(target, "gtid_domain_id");
    check(
        "gtid",
        !(on(target.get("gtid_strict_mode")) && same_domain),
        format!(
            "gtid_domain_id source {}, target {}; target gtid_strict_mode {}",
            get(source, "gtid_domain_id"),
            get(target, "gtid_domain_id"),
            get(target, "gtid_strict_mode")
        ),
        format!(
            "{t} runs gtid_strict_mode in the source's GTID domain: once it takes writes, the source's events still \
             replicating are out of order and replication stops; SET GLOBAL gtid_domain_id = <a domain of its own> on {t} \
             (and in its my.cnf), or gtid_strict_mode = OFF"
        ),
    );
    check(
        "read_only",
        !on(target.get("read_only")),
        format!("target read_only {}", get(target, "read_only")),
        format!("SET GLOBAL read_only = 0 on {t}: after the cutover every write to the shards goes there"),
    );
    let filters: Vec<String> = VARIABLES
        .iter()
        .filter(|v| v.starts_with("replicate_"))
        .filter(|v| !get(target, v).is_empty())
        .map(|v| format!("{v} = {}", get(target, v)))
        .collect();
    check(
        "replication filters",
        filters.is_empty(),
        if filters.is_empty() {
            "none on the target".to_owned()
        } else {
            filters.join(", ")
        },
        format!("remove the replicate_* settings from {t}'s my.cnf and restart it: the copy replicates every database"),
    );
    checks
}

/// Total free bytes of the target's disks, when its `DISKS` plugin is
/// loaded.
async fn free_bytes(conn: &mut Conn) -> Option<u64> {
    let free: Option<Option<u64>> = conn
        .query_first("SELECT CAST(MIN(Available) AS UNSIGNED) * 1024 FROM information_schema.DISKS")
        .await
        .ok();
    free.flatten()
}

/// Runs every check (read-only on both servers). `resuming`: the target
/// already holds a copy of this split (its databases and its replication
/// of the source are expected).
pub async fn prepare(
    login: &Login,
    plan: &SplitPlan,
    resuming: bool,
) -> Result<PrepareReport, SplitError> {
    let mut source = login.connect(&plan.source).await?;
    let mut target = match login.connect(&plan.target).await {
        Ok(conn) => conn,
        Err(e) => {
            let _ = source.disconnect().await;
            return Err(SplitError::Checks(vec![format!(
                "FAILED\treach\t{e}; fix: start {} and give it the operations account `{}` (ALL PRIVILEGES)",
                plan.target, login.user
            )]));
        }
    };
    let result = checks(login, plan, resuming, &mut source, &mut target).await;
    let _ = source.disconnect().await;
    let _ = target.disconnect().await;
    result
}

async fn checks(
    login: &Login,
    plan: &SplitPlan,
    resuming: bool,
    source: &mut Conn,
    target: &mut Conn,
) -> Result<PrepareReport, SplitError> {
    let (s, t) = (plan.source.as_str(), plan.target.as_str());
    let mut checks = vec![Check {
        name: "reach",
        detail: format!("{s} and {t} answer as `{}`", login.user),
        fix: None,
    }];
    checks.extend(variable_checks(
        plan,
        &variables(source, s).await?,
        &variables(target, t).await?,
    ));
    let status: Option<Row> = target
        .query_first("SHOW SLAVE STATUS")
        .await
        .map_err(failed(t, "SHOW SLAVE STATUS"))?;
    let replicates_from = status.as_ref().map(|row| {
        let column = |name: &str| {
            row.get_opt::<String, _>(name)
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        format!("{}:{}", column("Master_Host"), column("Master_Port"))
    });
    let ours = replicates_from.as_deref() == Some(s);
    checks.push(Check {
        name: "replication",
        detail: match &replicates_from {
            None => "the target replicates nothing".to_owned(),
            Some(from) => format!("the target replicates {from}"),
        },
        fix: (replicates_from.is_some() && !(resuming && ours)).then(|| {
            format!("the target must not be a replica yet: STOP SLAVE; RESET SLAVE ALL on {t} (the copy sets its replication up)")
        }),
    });
    let on_source = databases(source, s).await?;
    let on_target = databases(target, t).await?;
    let clashing: Vec<&String> = on_target.iter().filter(|d| on_source.contains(d)).collect();
    checks.push(Check {
        name: "empty target",
        detail: format!(
            "{} databases on the source, {} on the target{}",
            on_source.len(),
            on_target.len(),
            if clashing.is_empty() {
                String::new()
            } else {
                format!(", {} of them on both", clashing.len())
            }
        ),
        fix: (!clashing.is_empty() && !resuming).then(|| {
            let shown: Vec<&str> = clashing.iter().take(5).map(|d| d.as_str()).collect();
            format!(
                "the target already has databases of the source ({}{}): drop them on {t} or split to an empty server",
                shown.join(", "),
                if clashing.len() > 5 { ", ..." } else { "" }
            )
        }),
    });
    let absent: Vec<&String> = plan
        .moved
        .iter()
        .filter(|d| !on_source.contains(d))
        .collect();
    checks.push(Check {
        name: "range",
        detail: format!(
            "{} of the range's {} shard databases on the source",
            plan.moved.len() - absent.len(),
            plan.moved.len()
        ),
        fix: (!absent.is_empty()).then(|| {
            let shown: Vec<&str> = absent.iter().take(5).map(|d| d.as_str()).collect();
            format!(
                "{s} lacks {} ({}{}): is {s} the range's master? create them (shardgate fleet init) or fix the config",
                if absent.len() == 1 { "a shard database" } else { "shard databases" },
                shown.join(", "),
                if absent.len() > 5 { ", ..." } else { "" }
            )
        }),
    });
    let names: Vec<String> = on_source.iter().map(|d| literal(d)).collect();
    let (bytes, rows) = if names.is_empty() {
        (0, 0)
    } else {
        let size: Option<(Option<u64>, Option<u64>)> = source
            .query_first(format!(
                "SELECT CAST(SUM(DATA_LENGTH + INDEX_LENGTH) AS UNSIGNED), CAST(SUM(TABLE_ROWS) AS UNSIGNED) \
                 FROM information_schema.TABLES WHERE TABLE_SCHEMA IN ({})",
                names.join(",")
            ))
            .await
            .map_err(failed(s, "reading the table sizes"))?;
        size.map_or((0, 0), |(b, r)| (b.unwrap_or(0), r.unwrap_or(0)))
    };
    let free = free_bytes(target).await;
    checks.push(Check {
        name: "disk",
        detail: match free {
            Some(free) => format!("copy about {} MB, target free {} MB", bytes >> 20, free >> 20),
            None => format!(
                "copy about {} MB; target free space unknown (INSTALL SONAME 'disks' on {t} to have it checked)",
                bytes >> 20
            ),
        },
        fix: free
            .filter(|&free| free < bytes.saturating_add(bytes / 5))
            .map(|_| format!("free space on {t}: the copy needs about {} MB and 20% headroom", bytes >> 20)),
    });
    Ok(PrepareReport {
        checks,
        databases: on_source,
        bytes,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> SplitPlan {
        SplitPlan {
            fleet: "main".into(),
            first: 8,
            last: 15,
            source: "s:1".into(),
            target: "t:2".into(),
            moved: Vec::new(),
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        let mut good: HashMap<String, String> = [
            ("version", "10.11.6-MariaDB-0+deb12u1-log"),
            ("log_bin", "ON"),
            ("binlog_format", "ROW"),
            ("server_id", "1"),
            ("gtid_domain_id", "0"),
            ("gtid_strict_mode", "OFF"),
            ("read_only", "OFF"),
            ("log_slave_updates", "ON"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in pairs {
            good.insert(k.to_string(), v.to_string());
        }
        good
    }

    fn failed_names(source: &[(&str, &str)], target: &[(&str, &str)]) -> Vec<&'static str> {
        variable_checks(&plan(), &vars(source), &vars(target))
            .into_iter()
            .filter(|c| c.fix.is_some())
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn good_servers_pass_every_check() {
        assert_eq!(failed_names(&[], &[("server_id", "2")]), Vec::<&str>::new());
    }

    #[test]
    fn each_bad_setting_fails_its_check() {
        let t = |pairs: &[(&str, &str)]| {
            let mut all = vec![("server_id", "2")];
            all.extend_from_slice(pairs);
            failed_names(&[], &all)
        };
        assert_eq!(failed_names(&[], &[]), vec!["server id"]);
        assert_eq!(t(&[("version", "10.6.1-MariaDB")]), vec!["version"]);
        assert_eq!(t(&[("version", "8.0.36")]), vec!["version"]);
        assert_eq!(
            failed_names(&[("binlog_format", "STATEMENT"), ("server_id", "2")], &[]),
            vec!["binlog"]
        );
        assert_eq!(t(&[("log_bin", "OFF")]), vec!["target binlog"]);
        assert_eq!(t(&[("gtid_strict_mode", "ON")]), vec!["gtid"]);
        assert_eq!(
            t(&[("gtid_strict_mode", "ON"), ("gtid_domain_id", "7")]),
            Vec::<&str>::new()
        );
        assert_eq!(t(&[("read_only", "ON")]), vec!["read_only"]);
        assert_eq!(
            t(&[("replicate_do_db", "db00001")]),
            vec!["replication filters"]
        );
    }

    #[test]
    fn a_failed_check_prints_its_fix() {
        let checks = variable_checks(
            &plan(),
            &vars(&[]),
            &vars(&[("server_id", "2"), ("read_only", "ON")]),
        );
        let line = checks
            .iter()
            .find(|c| c.name == "read_only")
            .unwrap()
            .to_string();
        assert_eq!(
            line,
            "FAILED\tread_only\ttarget read_only ON; fix: SET GLOBAL read_only = 0 on t:2: after the cutover every write to the shards goes there"
        );
        assert_eq!(major_minor("10.11.6-MariaDB"), Some((10, 11)));
    }
}
