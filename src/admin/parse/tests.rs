//! The admin parser's tests.

use super::*;

fn range(first: u32, last: u32, fleet: Option<&str>) -> ShardRange {
    ShardRange {
        first,
        last,
        fleet: fleet.map(str::to_owned),
    }
}

#[test]
fn keywords_any_case_trailing_semicolon_and_space() {
    assert_eq!(parse("SHOW HOSTS").unwrap(), Command::ShowHosts);
    assert_eq!(parse("  show   hosts ;; \n").unwrap(), Command::ShowHosts);
    assert_eq!(parse("Show Stats;").unwrap(), Command::ShowStats);
    assert_eq!(parse("show config").unwrap(), Command::ShowConfig);
    assert_eq!(parse("show proxies;").unwrap(), Command::ShowProxies);
    assert_eq!(
        parse("reload config;").unwrap(),
        Command::ReloadConfig { force: false }
    );
    assert_eq!(
        parse("RELOAD CONFIG force").unwrap(),
        Command::ReloadConfig { force: true }
    );
    assert!(parse("RELOAD CONFIG NOW").is_err());
    assert_eq!(parse("verify fleet").unwrap(), Command::VerifyFleet);
    assert_eq!(parse("help").unwrap(), Command::Help);
    assert_eq!(parse("SHOW COMMANDS").unwrap(), Command::Help);
}

#[test]
fn show_shards_and_shard() {
    assert_eq!(
        parse("SHOW SHARDS").unwrap(),
        Command::ShowShards { like: None }
    );
    assert_eq!(
        parse("show shards like 'db0342%';").unwrap(),
        Command::ShowShards {
            like: Some("db0342%".into())
        }
    );
    assert_eq!(
        parse("SHOW SHARDS LIKE \"34_9\"").unwrap(),
        Command::ShowShards {
            like: Some("34_9".into())
        }
    );
    assert_eq!(
        parse("SHOW SHARD 3429").unwrap(),
        Command::ShowShard {
            shard: 3429,
            fleet: None
        }
    );
    assert_eq!(
        parse("show shard 12 in mod").unwrap(),
        Command::ShowShard {
            shard: 12,
            fleet: Some("mod".into())
        }
    );
    let error = parse("SHOW SHARD abc").unwrap_err();
    assert_eq!(
        error.to_string(),
        "'abc' is not a shard number; expected: SHOW SHARD <n> [IN <fleet>]"
    );
    assert!(parse("SHOW SHARDS LIKE").is_err());
    assert!(parse("SHOW SHARD").is_err());
}

#[test]
fn explain_route_keeps_the_statement_as_written() {
    assert_eq!(
        parse("explain route SELECT * FROM pins WHERE id = 5;").unwrap(),
        Command::ExplainRoute {
            statement: "SELECT * FROM pins WHERE id = 5".into()
        }
    );
    assert_eq!(
        parse("EXPLAIN\tROUTE /*+ SHARD(3) */ select 'a;b'").unwrap(),
        Command::ExplainRoute {
            statement: "/*+ SHARD(3) */ select 'a;b'".into()
        }
    );
    assert!(parse("EXPLAIN ROUTE").is_err());
    assert!(matches!(
        parse("EXPLAIN ROUTES x").unwrap_err(),
        ParseError::Unknown(_)
    ));
}

#[test]
fn ids() {
    assert_eq!(
        parse("DECODE ID 241294492511762325").unwrap(),
        Command::DecodeId {
            id: 241294492511762325
        }
    );
    assert_eq!(
        parse("encode id 3429 pin 7075733").unwrap(),
        Command::EncodeId {
            shard: 3429,
            object_type: "pin".into(),
            local_id: 7075733
        }
    );
    assert_eq!(
        parse("ENCODE ID 3429 1 7075733").unwrap(),
        Command::EncodeId {
            shard: 3429,
            object_type: "1".into(),
            local_id: 7075733
        }
    );
    let error = parse("DECODE ID -5").unwrap_err().to_string();
    assert!(
        error.contains("the ID must be a non-negative integer, not '-5'"),
        "{error}"
    );
    assert!(error.ends_with("expected: DECODE ID <id>"), "{error}");
    let error = parse("ENCODE ID 1 2").unwrap_err().to_string();
    assert!(error.contains("three fields, got 2"), "{error}");
}

#[test]
fn promote() {
    assert_eq!(
        parse("PROMOTE REPLICA 127.0.0.1:3307").unwrap(),
        Command::PromoteReplica {
            master: "127.0.0.1:3307".into(),
            stop_replication: false
        }
    );
    assert_eq!(
        parse("promote replica '127.0.0.1:3307' stop replication;").unwrap(),
        Command::PromoteReplica {
            master: "127.0.0.1:3307".into(),
            stop_replication: true
        }
    );
    assert!(parse("PROMOTE REPLICA").is_err());
    assert!(parse("PROMOTE REPLICA a b").is_err());
}

#[test]
fn an_unknown_command_lists_every_form_within_what_the_cli_keeps() {
    // The mariadb CLI keeps 511 bytes of an error message.
    for command in [
        "X".repeat(300),
        "SELECT @@\u{fffd}v()".to_owned(),
        "\u{10348}".repeat(100),
    ] {
        let message = parse(&command).unwrap_err().to_string();
        assert!(message.len() <= 511, "{} bytes: {message}", message.len());
        assert!(message.ends_with(SHOW_COMMANDS), "{message}");
    }
}

#[test]
fn move_shards() {
    assert_eq!(
        parse("MOVE SHARDS 1024-2047 IN main TO 127.0.0.1:3309").unwrap(),
        Command::MoveShards {
            range: range(1024, 2047, Some("main")),
            target: "127.0.0.1:3309".into(),
            dry_run: false
        }
    );
    assert_eq!(
        parse("move shards 7 to '127.0.0.1:3309' dry run;").unwrap(),
        Command::MoveShards {
            range: range(7, 7, None),
            target: "127.0.0.1:3309".into(),
            dry_run: true
        }
    );
    let error = parse("MOVE SHARDS 1-2").unwrap_err().to_string();
    assert!(error.contains("needs TO"), "{error}");
    assert!(error.ends_with(MOVE_SHARDS), "{error}");
    assert!(parse("MOVE SHARDS 1-2 TO").is_err());
    assert!(parse("MOVE SHARDS TO h:1").is_err());
    assert!(parse("MOVE SHARDS 2-1 TO h:1").is_err());
    let error = parse("MOVE SHARDS 1-2 TO h:1 NOW").unwrap_err().to_string();
    assert!(error.contains("unexpected 'NOW'"), "{error}");
    assert!(parse("MOVE SHARDS 1-2 TO h:1 DRY").is_err());
}

#[test]
fn pause_and_resume_ranges() {
    assert_eq!(
        parse("PAUSE SHARDS 1024-2047").unwrap(),
        Command::PauseShards(range(1024, 2047, None))
    );
    assert_eq!(
        parse("pause shards 1024 - 2047 in main;").unwrap(),
        Command::PauseShards(range(1024, 2047, Some("main")))
    );
    assert_eq!(
        parse("PAUSE SHARDS 7").unwrap(),
        Command::PauseShards(range(7, 7, None))
    );
    assert_eq!(
        parse("RESUME SHARDS 256-511 IN `mod`").unwrap(),
        Command::ResumeShards {
            range: range(256, 511, Some("mod")),
            force: false
        }
    );
    assert_eq!(
        parse("resume shards 1024-2047 IN main force").unwrap(),
        Command::ResumeShards {
            range: range(1024, 2047, Some("main")),
            force: true
        }
    );
    assert_eq!(
        parse("RESUME SHARDS 7 FORCE").unwrap(),
        Command::ResumeShards {
            range: range(7, 7, None),
            force: true
        }
    );
    let error = parse("PAUSE SHARDS 9-3").unwrap_err().to_string();
    assert!(error.contains("backwards"), "{error}");
    assert!(error.ends_with(PAUSE_SHARDS), "{error}");
    assert!(parse("PAUSE SHARDS").is_err());
    assert!(parse("PAUSE SHARDS x-3").is_err());
    assert!(parse("RESUME SHARDS 1-2 IN").is_err());
}

#[test]
fn unknown_commands_list_what_is_accepted() {
    let error = parse("SHOW TABLES").unwrap_err();
    assert!(matches!(error, ParseError::Unknown(_)));
    let message = error.to_string();
    assert!(message.starts_with("unknown admin command 'SHOW TABLES'"));
    for (form, _) in COMMANDS {
        let name = command_name(form);
        assert!(message.contains(name), "{name} missing from {message}");
    }
    assert_eq!(command_name(SHOW_SHARD), "SHOW SHARD");
    assert_eq!(command_name(SHOW_COMMANDS), SHOW_COMMANDS);
    assert!(parse("")
        .unwrap_err()
        .to_string()
        .starts_with("empty admin command"));
    assert!(parse("SHOW HOSTS now")
        .unwrap_err()
        .to_string()
        .contains("unexpected 'now'"));
    let error = parse("SHOW SHARDS LIKE 'abc").unwrap_err().to_string();
    assert!(error.contains("unterminated"), "{error}");
    assert!(error.ends_with(SHOW_SHARDS), "{error}");
}

#[test]
fn client_queries() {
    assert_eq!(
        parse("select @@version_comment limit 1").unwrap(),
        Command::Select(vec![SelectItem::Variable {
            name: "version_comment".into(),
            column: "@@version_comment".into()
        }])
    );
    assert_eq!(
        parse("SELECT DATABASE(), @@session.autocommit").unwrap(),
        Command::Select(vec![
            SelectItem::Function {
                name: "database".into(),
                column: "DATABASE()".into()
            },
            SelectItem::Variable {
                name: "autocommit".into(),
                column: "@@session.autocommit".into()
            }
        ])
    );
    assert_eq!(parse("SET NAMES utf8mb4").unwrap(), Command::Set);
    assert!(matches!(
        parse("SELECT * FROM pins").unwrap_err(),
        ParseError::Unknown(_)
    ));
    assert!(parse("SETTINGS").is_err());
}

#[test]
fn verify_shards_rows() {
    assert_eq!(
        parse("VERIFY SHARDS 0-20 IN main ROWS AGAINST 127.0.0.1:3309").unwrap(),
        Command::VerifyShardRows {
            range: range(0, 20, Some("main")),
            against: "127.0.0.1:3309".into(),
            max_rows_per_second: None,
        }
    );
    assert_eq!(
        parse("verify shards 5 rows against '127.0.0.1:3311' max 500 rows per second;").unwrap(),
        Command::VerifyShardRows {
            range: range(5, 5, None),
            against: "127.0.0.1:3311".into(),
            max_rows_per_second: Some(500),
        }
    );
    let error = parse("VERIFY SHARDS 1-2").unwrap_err().to_string();
    assert!(error.contains("needs ROWS AGAINST"), "{error}");
    assert!(error.ends_with(VERIFY_SHARDS_ROWS), "{error}");
    assert!(parse("VERIFY SHARDS 1-2 ROWS AGAINST").is_err());
    assert!(parse("VERIFY SHARDS 1-2 ROWS h:1").is_err());
    assert!(parse("VERIFY SHARDS 2-1 ROWS AGAINST h:1").is_err());
    assert!(parse("VERIFY SHARDS 1-2 ROWS AGAINST h:1 MAX x ROWS PER SECOND").is_err());
}

#[test]
fn digest_and_shard_stats_commands() {
    use crate::stats::digest::DigestOrder;
    use crate::stats::shards::ShardOrder;
    assert_eq!(
        parse("SHOW DIGESTS"),
        Ok(Command::ShowDigests {
            order: DigestOrder::TotalTime,
            limit: None
        })
    );
    assert_eq!(
        parse("show digests order by p99 limit 5;"),
        Ok(Command::ShowDigests {
            order: DigestOrder::P99,
            limit: Some(5)
        })
    );
    assert_eq!(
        parse("SHOW DIGESTS LIMIT 3"),
        Ok(Command::ShowDigests {
            order: DigestOrder::TotalTime,
            limit: Some(3)
        })
    );
    assert_eq!(
        parse("SHOW DIGESTS ORDER BY errors"),
        Ok(Command::ShowDigests {
            order: DigestOrder::Errors,
            limit: None
        })
    );
    assert_eq!(parse("RESET DIGESTS"), Ok(Command::ResetDigests));
    assert_eq!(
        parse("SHOW SHARD STATS"),
        Ok(Command::ShowShardStats {
            top: DEFAULT_SHARD_STATS_TOP,
            order: ShardOrder::Statements
        })
    );
    assert_eq!(
        parse("SHOW SHARD STATS TOP 3 ORDER BY time"),
        Ok(Command::ShowShardStats {
            top: 3,
            order: ShardOrder::Time
        })
    );
    assert_eq!(
        parse("SHOW SHARD STATS ORDER BY errors"),
        Ok(Command::ShowShardStats {
            top: DEFAULT_SHARD_STATS_TOP,
            order: ShardOrder::Errors
        })
    );
    assert_eq!(
        parse("SHOW SHARD 12"),
        Ok(Command::ShowShard {
            shard: 12,
            fleet: None
        })
    );
    for bad in [
        "SHOW DIGESTS ORDER BY name",
        "SHOW DIGESTS LIMIT 0",
        "SHOW DIGESTS LIMIT",
        "SHOW DIGESTS ORDER",
        "SHOW DIGESTS extra",
        "RESET DIGESTS now",
        "SHOW SHARD STATS TOP x",
        "SHOW SHARD STATS ORDER BY rows",
        "SHOW SHARD STATS TOP 3 extra",
    ] {
        assert!(
            matches!(parse(bad), Err(ParseError::BadArguments { .. })),
            "{bad}: {:?}",
            parse(bad)
        );
    }
}

#[test]
fn split_shards_with_every_option() {
    assert_eq!(
        parse("split shards 8-15 in main to 127.0.0.1:3311 dry run resume max 500 rows per second keep moved grace 0 seconds stop after copy;").unwrap(),
        Command::SplitShards(SplitCommand {
            range: range(8, 15, Some("main")),
            target: "127.0.0.1:3311".to_owned(),
            dry_run: true,
            resume: true,
            max_rows_per_second: Some(500),
            keep_moved: true,
            grace_seconds: Some(0),
            stop_after: Some(Phase::Copied),
        })
    );
    assert_eq!(
        parse("SPLIT SHARDS 1024-2047 TO db12:3306").unwrap(),
        Command::SplitShards(SplitCommand {
            range: range(1024, 2047, None),
            target: "db12:3306".to_owned(),
            dry_run: false,
            resume: false,
            max_rows_per_second: None,
            keep_moved: false,
            grace_seconds: None,
            stop_after: None,
        })
    );
    assert_eq!(parse("SHOW SPLITS").unwrap(), Command::ShowSplits);
}

#[test]
fn split_shards_bad_arguments_say_what_is_expected() {
    let refused = |text: &str| match parse(text) {
        Err(e @ ParseError::BadArguments { form, .. }) => {
            assert!(
                form == SPLIT_SHARDS || form == SHOW_SPLITS,
                "{text}: {form}"
            );
            e.to_string()
        }
        other => panic!("{text}: {other:?}"),
    };
    let cases = [
        (
            "SPLIT SHARDS 8-15",
            "needs TO and the new master's host:port",
        ),
        (
            "SPLIT SHARDS 8-15 TO",
            "TO needs the new master's host:port",
        ),
        ("SPLIT SHARDS 8-15 TO db12", "not 'db12'"),
        ("SPLIT SHARDS 8-15 TO db12:0", "not 'db12:0'"),
        ("SPLIT SHARDS 8-15 TO :3306", "not ':3306'"),
        ("SPLIT SHARDS 15-8 TO h:1", "backwards"),
        ("SPLIT SHARDS x-8 TO h:1", "'x' is not a shard number"),
        ("SPLIT SHARDS 8-15 TO h:1 MAX 10", "MAX <n> ROWS PER SECOND"),
        (
            "SPLIT SHARDS 8-15 TO h:1 MAX -1 ROWS PER SECOND",
            "non-negative integer",
        ),
        ("SPLIT SHARDS 8-15 TO h:1 GRACE 5", "GRACE <n> SECONDS"),
        (
            "SPLIT SHARDS 8-15 TO h:1 STOP AFTER cleanup",
            "prepare, copy, verify or cutover, not 'cleanup'",
        ),
        ("SPLIT SHARDS 8-15 TO h:1 STOP", "STOP AFTER needs a phase"),
        (
            "SPLIT SHARDS 8-15 TO h:1 NOW",
            "unexpected 'NOW' after the new master; the options are DRY RUN",
        ),
        ("SHOW SPLITS 1", "unexpected '1'"),
    ];
    let unknown = parse("SPLITÉÉÉÉÉÉÉÉÉÉ SHARDS").unwrap_err().to_string();
    assert!(
        unknown.contains("\n  SPLIT SHARDS\n  SHOW SPLITS\n"),
        "{unknown}"
    );
    assert!(
        unknown.len() <= 512,
        "the C client keeps 512 bytes: {}",
        unknown.len()
    );
    for (text, expected) in cases {
        let message = refused(text);
        assert!(message.contains(expected), "{text}: {message}");
        assert!(message.contains("expected: "), "{text}: {message}");
    }
}
