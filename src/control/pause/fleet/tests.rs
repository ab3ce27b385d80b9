use super::*;

fn record(first: u32, last: u32, cutover: Option<&str>) -> (String, PauseRecord) {
    let record = PauseRecord {
        fleet: Some("main".to_owned()),
        first,
        last,
        requested_by: "web-1".to_owned(),
        user: "admin".to_owned(),
        requested_at_ms: 1,
        timeout_ms: 5000,
        cutover: cutover.map(str::to_owned),
    };
    (record.id(), record)
}

const MOVE: &str = "MOVE SHARDS 1024-2047 IN main TO 127.0.0.1:3309";

#[test]
fn a_resume_leaves_a_cutovers_record_alone_without_force() {
    let records = [record(0, 9, None), record(1024, 2047, Some(MOVE))];
    let refused =
        to_resume(&records, Some("main"), 1024, 2047, false).expect_err("held by the move");
    let message = refused.to_string();
    assert!(message.contains(MOVE), "{message}");
    assert!(message.contains("asked on web-1"), "{message}");
    assert!(
        message.contains("RESUME SHARDS 1024-2047 IN main FORCE"),
        "{message}"
    );
    let wide = to_resume(&records, None, 0, 4095, false).expect_err("one of them is held");
    assert!(matches!(wide, FleetPauseError::HeldByCutover { .. }));

    let forced = to_resume(&records, Some("main"), 1024, 2047, true).expect("forced");
    assert_eq!(forced, [records[1].clone()]);
    let plain = to_resume(&records, Some("main"), 0, 9, false).expect("a plain pause");
    assert_eq!(plain, [records[0].clone()]);
}

#[test]
fn the_resume_command_names_force_only_for_a_cutover() {
    assert_eq!(resume_command(&record(0, 9, None).1), "0-9 IN main");
    assert_eq!(
        resume_command(&record(1024, 2047, Some(MOVE)).1),
        "1024-2047 IN main FORCE"
    );
}
