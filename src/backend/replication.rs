//! A replica's replication as the servers report it: `SHOW SLAVE STATUS`
//! ([`replication`]), GTID positions and the distance between two of them,
//! and the lag the health checker keeps for each replica ([`LagTracker`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::topology::rewrite::same_address;

/// A server's replication as `SHOW SLAVE STATUS` shows it (the default
/// connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// `Master_Host:Master_Port`.
    pub master: String,
    /// `Slave_IO_Running` (`Yes`, `No`, `Connecting`).
    pub io_running: String,
    /// `Slave_SQL_Running`.
    pub sql_running: String,
    /// `Using_Gtid` (`No`, `Slave_Pos`, `Current_Pos`).
    pub using_gtid: String,
    /// `Seconds_Behind_Master` (none while a thread is stopped).
    pub seconds_behind: Option<u64>,
    /// `Last_IO_Error` or `Last_SQL_Error`, whichever is set.
    pub last_error: String,
    /// The replication filters set (`Replicate_Do_DB = db1`, ...).
    pub filters: Vec<String>,
    /// `Gtid_IO_Pos`: the GTID position received from the master.
    pub gtid_io_pos: String,
}

/// The `SHOW SLAVE STATUS` columns of replication filters: a replica with
/// one set has not applied every transaction of its master.
const FILTERS: [&str; 6] = [
    "Replicate_Do_DB",
    "Replicate_Ignore_DB",
    "Replicate_Do_Table",
    "Replicate_Ignore_Table",
    "Replicate_Wild_Do_Table",
    "Replicate_Wild_Ignore_Table",
];

impl Replication {
    /// Why this is not a running GTID replica of `master` (none: it is).
    pub fn problem_for(&self, master: &str) -> Option<String> {
        if !same_server(&self.master, master) {
            return Some(format!(
                "it replicates from {}, not from {master}",
                self.master
            ));
        }
        if self.io_running != "Yes" || self.sql_running != "Yes" {
            return Some(format!(
                "replication threads are not both running (IO {}, SQL {}){}",
                self.io_running,
                self.sql_running,
                if self.last_error.is_empty() {
                    String::new()
                } else {
                    format!(": {}", self.last_error)
                }
            ));
        }
        if self.using_gtid.eq_ignore_ascii_case("No") || self.using_gtid.is_empty() {
            return Some(
                "it does not replicate with GTIDs (Using_Gtid = No): CHANGE MASTER TO MASTER_USE_GTID=slave_pos"
                    .to_owned(),
            );
        }
        if !self.filters.is_empty() {
            return Some(format!(
                "it has replication filters ({}): it may lack rows of the moved shards; \
                 remove them (SET GLOBAL Replicate_Do_DB = '' and the like, with replication stopped)",
                self.filters.join(", ")
            ));
        }
        None
    }

    /// Why a replica this far behind (`Seconds_Behind_Master`) is not
    /// made a master: above `max_lag_ms` (`health.max_promote_lag_ms`).
    pub fn lag_problem(&self, max_lag_ms: u64) -> Option<String> {
        let behind = self.seconds_behind?;
        (behind.saturating_mul(1000) > max_lag_ms).then(|| {
            format!(
                "it is {behind} s behind its master (Seconds_Behind_Master), more than \
                 health.max_promote_lag_ms ({max_lag_ms} ms): let it catch up first"
            )
        })
    }

    /// `IO Yes, SQL Yes, from host:port, Using_Gtid X, N s behind`.
    pub fn describe(&self) -> String {
        format!(
            "IO {}, SQL {}, from {}, Using_Gtid {}, {} behind",
            self.io_running,
            self.sql_running,
            self.master,
            self.using_gtid,
            self.seconds_behind
                .map_or_else(|| "unknown s".to_owned(), |s| format!("{s} s"))
        )
    }
}

/// Whether two `host:port` addresses name the same server: as the config
/// compares them ([`same_address`]), with `localhost` taken as `127.0.0.1`.
pub fn same_server(a: &str, b: &str) -> bool {
    let plain = |addr: &str| {
        let addr = addr.trim();
        match addr.get(..10) {
            Some(host) if host.eq_ignore_ascii_case("localhost:") => {
                format!("127.0.0.1:{}", &addr[10..])
            }
            _ => addr.to_owned(),
        }
    };
    same_address(&plain(a), &plain(b))
}

/// `SHOW SLAVE STATUS` on `conn`; `None` when the server is no replica.
pub async fn replication(conn: &mut Conn) -> Result<Option<Replication>, String> {
    let row: Option<Row> = conn
        .query_first("SHOW SLAVE STATUS")
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.map(|row| {
        let field = |name: &str| {
            row.get_opt::<Option<String>, _>(name)
                .and_then(Result::ok)
                .flatten()
                .unwrap_or_default()
        };
        let io_error = field("Last_IO_Error");
        Replication {
            master: format!("{}:{}", field("Master_Host"), field("Master_Port")),
            io_running: field("Slave_IO_Running"),
            sql_running: field("Slave_SQL_Running"),
            using_gtid: field("Using_Gtid"),
            seconds_behind: field("Seconds_Behind_Master").parse().ok(),
            last_error: if io_error.is_empty() {
                field("Last_SQL_Error")
            } else {
                io_error
            },
            filters: FILTERS
                .iter()
                .filter_map(|name| {
                    let value = field(name);
                    (!value.is_empty()).then(|| format!("{name} = {value}"))
                })
                .collect(),
            gtid_io_pos: field("Gtid_IO_Pos"),
        }
    }))
}

/// A GTID position (`0-1-42,1-2-7`): per replication domain, the sequence
/// number of the last transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidPos(BTreeMap<u32, u64>);

impl GtidPos {
    /// Reads `domain-server-sequence` entries separated by commas; `None`
    /// when one is malformed. An empty text is the empty position.
    pub fn parse(text: &str) -> Option<GtidPos> {
        let mut domains = BTreeMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let mut parts = entry.split('-');
            let domain = parts.next()?.parse().ok()?;
            let _server: u32 = parts.next()?.parse().ok()?;
            let sequence = parts.next()?.parse().ok()?;
            if parts.next().is_some() {
                return None;
            }
            domains.insert(domain, sequence);
        }
        Some(GtidPos(domains))
    }

    /// Transactions of `self` (a master's position) that `applied` (a
    /// replica's) lacks, summed over domains: sequence numbers grow by
    /// one per transaction within a domain.
    pub fn distance_from(&self, applied: &GtidPos) -> u64 {
        self.0
            .iter()
            .map(|(domain, &sequence)| {
                sequence.saturating_sub(applied.0.get(domain).copied().unwrap_or(0))
            })
            .sum()
    }

    /// Whether `self` has applied everything of `other`.
    pub fn covers(&self, other: &GtidPos) -> bool {
        other.distance_from(self) == 0
    }
}

/// Most master positions a [`LagTracker`] keeps.
const MAX_SAMPLES: usize = 256;

/// A replica's lag, as time: the master positions seen at each check that
/// the replica has not applied yet, oldest first. The lag is the age of
/// the oldest one: how long the replica has been missing a transaction
/// the master had. It grows while the SQL thread is stopped, when
/// `Seconds_Behind_Master` is NULL.
#[derive(Debug, Default)]
pub struct LagTracker {
    pending: VecDeque<(Instant, GtidPos)>,
    master: Option<GtidPos>,
}

impl LagTracker {
    /// Records one check at `now`: the master's position (`None` when it
    /// could not be read) read before the replica's `applied` one.
    /// Returns the lag and the transactions the replica lacks of the last
    /// master position known (`None` before any).
    pub fn observe(
        &mut self,
        now: Instant,
        master: Option<GtidPos>,
        applied: &GtidPos,
    ) -> (Duration, Option<u64>) {
        if let Some(master) = master {
            if self.pending.back().map(|(_, pos)| pos) != Some(&master) {
                if self.pending.len() >= MAX_SAMPLES {
                    // Keeps the oldest, which sets the lag.
                    self.pending.remove(1);
                }
                self.pending.push_back((now, master.clone()));
            }
            self.master = Some(master);
        }
        while self
            .pending
            .front()
            .is_some_and(|(_, pos)| applied.covers(pos))
        {
            self.pending.pop_front();
        }
        let lag = self
            .pending
            .front()
            .map_or(Duration::ZERO, |(at, _)| now.saturating_duration_since(*at));
        let behind = self.master.as_ref().map(|m| m.distance_from(applied));
        (lag, behind)
    }
}

/// What the health checker last read of a replica's replication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLag {
    /// The replica's master, as the topology names it.
    pub master: String,
    /// How long the replica has been missing a transaction its master had
    /// (at least `Seconds_Behind_Master`); none when it could not be read.
    pub lag: Option<Duration>,
    /// `Seconds_Behind_Master` (none while a replication thread is stopped).
    pub seconds_behind_master: Option<u64>,
    /// Transactions of the master's `@@gtid_binlog_pos` not in the
    /// replica's `@@gtid_slave_pos`, when both were read.
    pub gtid_behind: Option<u64>,
    /// `Slave_SQL_Running` is `Yes`.
    pub sql_running: bool,
    /// Why the last reading failed.
    pub error: Option<String>,
}

impl ReplicaLag {
    /// Whether the lag is known and above `max`.
    pub fn exceeds(&self, max: Duration) -> bool {
        self.lag.is_some_and(|lag| lag > max)
    }

    /// `lag 5230 ms (Seconds_Behind_Master NULL, 3 transactions behind,
    /// SQL thread stopped)`.
    pub fn describe(&self) -> String {
        let lag = self
            .lag
            .map_or_else(|| "unknown".to_owned(), |l| format!("{} ms", l.as_millis()));
        let seconds = self
            .seconds_behind_master
            .map_or_else(|| "NULL".to_owned(), |s| s.to_string());
        let behind = self
            .gtid_behind
            .map_or_else(|| "unknown".to_owned(), |b| b.to_string());
        let sql = if self.sql_running {
            "running"
        } else {
            "stopped"
        };
        format!(
            "lag {lag} (Seconds_Behind_Master {seconds}, {behind} transactions behind, SQL thread {sql})"
        )
    }
}

/// Reads a replica's lag behind `master`: the master's
/// `@@gtid_binlog_pos` first (on `master_conn`, if there is one; without
/// it, the replica's `Gtid_IO_Pos`, what it received), then the
/// replica's `SHOW SLAVE STATUS` and `@@gtid_slave_pos` on `replica_conn`.
pub async fn read_lag(
    tracker: &mut LagTracker,
    master: &str,
    master_conn: Option<&mut Conn>,
    replica_conn: &mut Conn,
) -> Result<ReplicaLag, String> {
    let master_pos = match master_conn {
        Some(conn) => conn
            .query_first::<Option<String>, _>("SELECT @@gtid_binlog_pos")
            .await
            .ok()
            .flatten()
            .flatten()
            .and_then(|text| GtidPos::parse(&text)),
        None => None,
    };
    let status = replication(replica_conn).await?;
    // Without the master, what the replica received is the next best
    // position of the master known.
    let master_pos = master_pos.or_else(|| {
        status
            .as_ref()
            .and_then(|s| GtidPos::parse(&s.gtid_io_pos))
            .filter(|pos| *pos != GtidPos::default())
    });
    let applied: Option<String> = replica_conn
        .query_first::<Option<String>, _>("SELECT @@gtid_slave_pos")
        .await
        .map_err(|e| e.to_string())?
        .flatten();
    let applied = applied.unwrap_or_default();
    let applied = GtidPos::parse(&applied)
        .ok_or_else(|| format!("cannot read @@gtid_slave_pos '{applied}'"))?;
    let (lag, gtid_behind) = tracker.observe(Instant::now(), master_pos, &applied);
    let status = status.ok_or("SHOW SLAVE STATUS is empty: it is no replica")?;
    let seconds_behind_master = status.seconds_behind;
    let lag = lag.max(Duration::from_secs(seconds_behind_master.unwrap_or(0)));
    Ok(ReplicaLag {
        master: master.to_owned(),
        lag: Some(lag),
        seconds_behind_master,
        gtid_behind,
        sql_running: status.sql_running == "Yes",
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(text: &str) -> GtidPos {
        GtidPos::parse(text).unwrap()
    }

    #[test]
    fn gtid_positions_parse_and_measure_per_domain() {
        assert_eq!(pos(""), GtidPos::default());
        assert_eq!(pos("0-1-42, 1-2-7").distance_from(&pos("0-1-40")), 2 + 7);
        assert_eq!(pos("0-1-42").distance_from(&pos("0-1-50")), 0);
        assert!(pos("0-1-42,1-2-7").covers(&pos("0-3-42")));
        assert!(!pos("0-1-41").covers(&pos("0-1-42")));
        for bad in ["0-1", "x-1-2", "0-1-2-3", "0-1-2,zz"] {
            assert_eq!(GtidPos::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn lag_is_the_age_of_the_oldest_master_position_not_applied() {
        let mut tracker = LagTracker::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Caught up: no lag.
        assert_eq!(
            tracker.observe(t0, Some(pos("0-1-10")), &pos("0-1-10")),
            (Duration::ZERO, Some(0))
        );
        // A write the replica does not apply (SQL thread stopped).
        assert_eq!(
            tracker.observe(at(100), Some(pos("0-1-11")), &pos("0-1-10")),
            (Duration::ZERO, Some(1))
        );
        assert_eq!(
            tracker.observe(at(600), Some(pos("0-1-13")), &pos("0-1-10")),
            (Duration::from_millis(500), Some(3))
        );
        // The master cannot be read: the lag still grows, the distance is
        // to the last position known.
        assert_eq!(
            tracker.observe(at(900), None, &pos("0-1-10")),
            (Duration::from_millis(800), Some(3))
        );
        // Partly applied: the lag is that of the next position missing.
        assert_eq!(
            tracker.observe(at(1000), Some(pos("0-1-13")), &pos("0-1-12")),
            (Duration::from_millis(400), Some(1))
        );
        assert_eq!(
            tracker.observe(at(1100), Some(pos("0-1-13")), &pos("0-1-13")),
            (Duration::ZERO, Some(0))
        );
    }

    #[test]
    fn a_long_stall_keeps_its_oldest_sample() {
        let mut tracker = LagTracker::default();
        let t0 = Instant::now();
        for i in 0..1000u64 {
            let now = t0 + Duration::from_millis(i);
            let (lag, behind) =
                tracker.observe(now, Some(pos(&format!("0-1-{}", i + 1))), &pos("0-1-0"));
            assert_eq!(lag, Duration::from_millis(i));
            assert_eq!(behind, Some(i + 1));
        }
        assert!(tracker.pending.len() <= MAX_SAMPLES);
    }

    #[test]
    fn a_move_target_too_far_behind_is_refused() {
        let mut status = Replication {
            master: "127.0.0.1:3307".into(),
            io_running: "Yes".into(),
            sql_running: "Yes".into(),
            using_gtid: "Slave_Pos".into(),
            seconds_behind: Some(12),
            last_error: String::new(),
            filters: Vec::new(),
            gtid_io_pos: "0-1-5".into(),
        };
        let problem = status.lag_problem(10_000).unwrap();
        assert!(problem.contains("12 s behind"), "{problem}");
        assert!(
            problem.contains("health.max_promote_lag_ms (10000 ms)"),
            "{problem}"
        );
        assert_eq!(status.lag_problem(12_000), None);
        status.seconds_behind = None;
        assert_eq!(status.lag_problem(0), None);
    }

    #[test]
    fn a_lag_is_described_for_an_operator() {
        let lag = ReplicaLag {
            master: "127.0.0.1:3307".into(),
            lag: Some(Duration::from_millis(5230)),
            seconds_behind_master: None,
            gtid_behind: Some(3),
            sql_running: false,
            error: None,
        };
        assert!(lag.exceeds(Duration::from_secs(5)));
        assert!(!lag.exceeds(Duration::from_secs(6)));
        assert_eq!(
            lag.describe(),
            "lag 5230 ms (Seconds_Behind_Master NULL, 3 transactions behind, SQL thread stopped)"
        );
    }
}
