//! The admin command parser (`admin::parse::parse`) on arbitrary text,
//! and the error message it would send. Checks: no panic; shard ranges
//! are never backwards; an unknown command's message stays short enough
//! for the C client's 512-byte error buffer whatever the client sent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shardgate::admin::parse::{parse, Command, ParseError};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse(&text) {
        Ok(Command::PauseShards(range) | Command::ResumeShards { range, .. }) => {
            assert!(range.first <= range.last, "backwards range {range:?}");
        }
        Ok(command) => {
            let _ = format!("{command:?}");
        }
        Err(error) => {
            let message = error.to_string();
            if let ParseError::Unknown(_) = error {
                // The `mariadb` CLI keeps 511 bytes of an error message.
                assert!(
                    message.len() <= 511,
                    "error message of {} bytes",
                    message.len()
                );
            }
        }
    }
});
