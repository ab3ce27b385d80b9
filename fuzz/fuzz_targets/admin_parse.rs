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
        Ok(Command::PauseShards(range) | Command::ResumeShards(range)) => {
            assert!(range.first <= range.last, "backwards range {range:?}");
        }
        Ok(command) => {
            let _ = format!("{command:?}");
        }
        Err(error) => {
            let message = error.to_string();
            if let ParseError::Unknown(_) = error {
                // The fixed command list plus at most 40 characters of the
                // command (4 bytes each at most) and "...".
                let mut empty = ParseError::Unknown(String::new()).to_string();
                empty.push_str(&"x".repeat(4 * 40 + 32));
                assert!(
                    message.len() <= empty.len(),
                    "error message of {} bytes",
                    message.len()
                );
            }
        }
    }
});
