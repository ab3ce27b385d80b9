//! Conformance with real client drivers: each test runs
//! one driver's script from `integration/drivers/` against the in-process
//! proxy and asserts it passed. The scripts connect with utf8mb4, insert by
//! hint and read back by the 64-bit ID, run FOR UPDATE read-modify-write
//! transactions, provoke the cross-shard error inside a transaction, send
//! UTF-8/emoji text and large values, read warnings, bind 64-bit IDs as
//! parameters, and then check on the backend hosts (straight to 3307 / 3308 /
//! 3310 with the same driver) where every row landed.
//!
//! `go_sql_driver_upstream_suite` runs go-sql-driver/mysql's own test suite
//! straight against the master of shard 1 and through the proxy, and fails on
//! a test that passes directly but not through the proxy unless
//! `integration/drivers/go/known_differences.txt` explains it;
//! `connector_python_upstream_suite` does the same with MySQL
//! Connector/Python's own test suite and
//! `integration/drivers/python_upstream/known_differences.txt`.
//!
//! The interpreters and packages come from `integration/drivers/setup.sh`
//! (run by `integration/test.sh`): the virtualenv `integration/.venv` with
//! PyMySQL and mysql-connector-python, `integration/drivers/node/node_modules`
//! with mysql2, sysbench, and Debian's python3-mysqldb (mysqlclient),
//! libmariadb-java with a JDK (Connector/J), golang-go and
//! golang-github-go-sql-driver-mysql-dev. A missing one fails the test with
//! the command to run; nothing is skipped.
//!
//! The scripts run one at a time (they share the proxy and the fleet, and the
//! lock-wait check times a 1 s wait). A script's whole output is printed when
//! it fails; `cargo test --test drivers -- --nocapture` shows it always.

mod common;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;

/// Longest a driver script may run (it is killed and the test fails after).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(600);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const SETUP_HINT: &str =
    "run integration/drivers/setup.sh (integration/test.sh runs it before the tests)";

fn drivers_dir() -> PathBuf {
    repo_root().join("integration/drivers")
}

fn venv_python() -> PathBuf {
    repo_root().join("integration/.venv/bin/python")
}

/// The proxy and backend arguments every driver script takes.
fn target_args() -> Vec<String> {
    let proxy = proxy_addr();
    vec![
        "--host".into(),
        proxy.ip().to_string(),
        "--port".into(),
        proxy.port().to_string(),
        "--master-a".into(),
        MASTER_A.to_string(),
        "--master-b".into(),
        MASTER_B.to_string(),
        "--mod-host".into(),
        MOD_HOST.to_string(),
    ]
}

/// Fails the test unless `program args` runs and exits 0.
fn require(what: &str, program: &Path, args: &[&str]) {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{what} is missing ({} {}): {SETUP_HINT}",
        program.display(),
        args.join(" ")
    );
}

/// Runs a driver script with the target arguments; panics with its output
/// (stdout and stderr interleaved) unless it exits 0 within the timeout.
fn run_script(name: &str, program: &Path, script: &Path) {
    run_script_with(name, program, script, &target_args(), &[]);
}

/// Runs `program script args` with `env` added; panics with its output
/// (stdout and stderr interleaved) unless it exits 0 within the timeout;
/// else returns that output.
fn run_script_with(
    name: &str,
    program: &Path,
    script: &Path,
    args: &[String],
    env: &[(&str, String)],
) -> String {
    let _serial = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    assert!(
        script.exists(),
        "{name}: script {} is missing",
        script.display()
    );
    let log_path = std::env::temp_dir().join(format!(
        "shardgate-driver-{}-{}.log",
        name.replace([' ', '/'], "-"),
        std::process::id()
    ));
    let log = File::create(&log_path).expect("create the output file");
    let started = Instant::now();
    let mut child = Command::new(program)
        .arg(script)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(repo_root())
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone().expect("clone the output file")))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{name}: cannot start {}: {e}; {SETUP_HINT}",
                program.display()
            )
        });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the script") {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut output = String::new();
    File::open(&log_path)
        .and_then(|mut f| f.read_to_string(&mut output))
        .expect("read the script output");
    let _ = std::fs::remove_file(&log_path);
    let command = format!(
        "{} {} {}",
        program.display(),
        script.display(),
        args.join(" ")
    );
    println!("$ {command}\n{output}");
    match status {
        None => panic!(
            "{name}: timed out after {}s\n$ {command}\n{output}",
            SCRIPT_TIMEOUT.as_secs()
        ),
        Some(status) if !status.success() => {
            let failed: Vec<&str> = output.lines().filter(|l| l.starts_with("FAIL")).collect();
            panic!(
                "{name}: the driver conformance script failed ({status}) after {:.1}s \
                 (its full output is above)\n$ {command}\nfailed checks:\n  {}\n",
                started.elapsed().as_secs_f64(),
                if failed.is_empty() {
                    "(none reported; see the output)".to_owned()
                } else {
                    failed.join("\n  ")
                },
            )
        }
        Some(_) => output,
    }
}

#[test]
fn pymysql() {
    let python = venv_python();
    require(
        "the Python virtualenv with PyMySQL",
        &python,
        &["-c", "import pymysql"],
    );
    run_script(
        "PyMySQL",
        &python,
        &drivers_dir().join("python/pymysql_conformance.py"),
    );
}

#[test]
fn mysql_connector_python() {
    let python = venv_python();
    require(
        "the Python virtualenv with mysql-connector-python (and its C extension)",
        &python,
        &[
            "-c",
            "import mysql.connector; assert mysql.connector.HAVE_CEXT",
        ],
    );
    run_script(
        "mysql-connector-python",
        &python,
        &drivers_dir().join("python/connector_conformance.py"),
    );
}

#[test]
fn node_mysql2() {
    let node_dir = drivers_dir().join("node");
    assert!(
        node_dir.join("node_modules/mysql2/package.json").exists(),
        "mysql2 is not installed in {}/node_modules: {SETUP_HINT}",
        node_dir.display()
    );
    require("Node.js", Path::new("node"), &["--version"]);
    run_script(
        "mysql2",
        Path::new("node"),
        &node_dir.join("conformance.js"),
    );
}

#[test]
fn sysbench_prepared_statements() {
    require("sysbench", Path::new("sysbench"), &["--version"]);
    require("the mariadb client", Path::new("mariadb"), &["--version"]);
    run_script(
        "sysbench",
        Path::new("bash"),
        &drivers_dir().join("sysbench/run.sh"),
    );
}

#[test]
fn mysqlclient() {
    let python = Path::new("/usr/bin/python3");
    require(
        "Debian's python3-mysqldb (mysqlclient) for /usr/bin/python3",
        python,
        &["-c", "import MySQLdb"],
    );
    run_script(
        "mysqlclient",
        python,
        &drivers_dir().join("python/mysqlclient_conformance.py"),
    );
}

#[test]
fn mariadb_connector_j() {
    require("a JDK (javac)", Path::new("javac"), &["-version"]);
    let jar = Path::new("/usr/share/java/mariadb-java-client.jar");
    assert!(
        jar.exists(),
        "{} (libmariadb-java) is missing: {SETUP_HINT}",
        jar.display()
    );
    run_script(
        "Connector/J",
        Path::new("bash"),
        &drivers_dir().join("java/run.sh"),
    );
}

#[test]
fn perl_dbd_mariadb() {
    require(
        "Perl with DBD::MariaDB (Debian's libdbd-mariadb-perl)",
        Path::new("perl"),
        &["-MDBD::MariaDB", "-e1"],
    );
    run_script(
        "DBD::MariaDB",
        Path::new("perl"),
        &drivers_dir().join("perl/dbd_mariadb_conformance.pl"),
    );
}

#[test]
fn go_sql_driver_upstream_suite() {
    require("Go", Path::new("go"), &["version"]);
    require("the mariadb client", Path::new("mariadb"), &["--version"]);
    run_script(
        "go-sql-driver/mysql upstream suite",
        Path::new("bash"),
        &drivers_dir().join("go/run_upstream.sh"),
    );
}

#[test]
fn connector_python_upstream_suite() {
    require(
        "the Python virtualenv with mysql-connector-python",
        &venv_python(),
        &["-c", "import mysql.connector"],
    );
    require("the mariadb client", Path::new("mariadb"), &["--version"]);
    run_script(
        "Connector/Python upstream suite",
        Path::new("bash"),
        &drivers_dir().join("python_upstream/run_upstream.sh"),
    );
}

/// Issue 20's load, CI-sized: 4 PyMySQL, 4 mysql2 and 4 sysbench (server-side
/// prepared) sessions doing point reads, inserts and short transactions
/// through a real `shardgate serve` (this build, copied to two paths) while
/// `serve --takeover` from the other copy replaces it three times
/// (`integration/bench/takeover.sh`, which the benchmark runs with 64
/// sessions and ten takeovers). No statement fails, no session reconnects,
/// every session's `@client`, `time_zone`, `sql_mode`, current database,
/// `CONNECTION_ID()` and prepared statement hold after each hand-off (the
/// clients check after every statement group), every takeover hands every
/// session and exits 0, and every acknowledged insert is on its master
/// exactly once (read there directly).
#[test]
fn takeover_under_load_pymysql_mysql2_sysbench() {
    require(
        "the Python virtualenv with PyMySQL",
        &venv_python(),
        &["-c", "import pymysql"],
    );
    require("Node.js", Path::new("node"), &["--version"]);
    require("sysbench", Path::new("sysbench"), &["--version"]);
    require("the mariadb client", Path::new("mariadb"), &["--version"]);
    let output = run_script_with(
        "takeover under load",
        Path::new("bash"),
        &repo_root().join("integration/bench/takeover.sh"),
        &[],
        &[
            ("SHARDGATE_BIN", env!("CARGO_BIN_EXE_shardgate").to_owned()),
            ("BENCH_BUILD", "0".to_owned()),
            ("TAKEOVER_SESSIONS", "4 4 4".to_owned()),
            ("TAKEOVER_ROUNDS", "3".to_owned()),
            ("TAKEOVER_INTERVAL", "3".to_owned()),
        ],
    );
    let verdict = output
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("takeover-load: "))
        .unwrap_or_else(|| panic!("no takeover-load line in the output:\n{output}"));
    let field = |name: &str| -> u64 {
        verdict
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name}= in {verdict}"))
    };
    assert!(verdict.starts_with("ok "), "{verdict}");
    assert_eq!(field("sessions"), 12, "{verdict}");
    assert_eq!(field("takeovers"), 3, "{verdict}");
    for zero in [
        "failed",
        "reconnects",
        "state_failed",
        "missing",
        "duplicated",
        "unacked",
    ] {
        assert_eq!(field(zero), 0, "{zero}: {verdict}");
    }
    assert!(field("inserts") > 100, "{verdict}");
    assert_eq!(field("once"), field("inserts"), "{verdict}");
}
