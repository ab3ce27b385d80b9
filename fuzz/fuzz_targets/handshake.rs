//! The server side of the login: `frontend::handshake::parse_handshake_response`
//! on an arbitrary payload, then the whole `login` (HandshakeResponse, auth
//! switch answer read from the stream) and `change_user` over in-memory
//! streams. Checks: no panic; the parser and `login` agree on what they
//! refuse; a parsed response keeps only capabilities the proxy offers (and
//! CLIENT_INTERACTIVE, which picks the session's idle timeout).
//!
//! Input: a flags byte, a 2-byte length and that many bytes of first
//! packet payload, then the rest of the client's stream (frames).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mysql_common::constants::CapabilityFlags;
use shardgate::frontend::handshake::{
    change_user, is_ssl_request, login, parse_handshake_response, Accounts, Greeting, LoggedIn,
    LoginFailure, SERVER_CAPABILITIES,
};
use shardgate::protocol::{FrameReader, FrameWriter};
use shardgate::topology::config::UserConfig;
use shardgate_fuzz::input::Input;
use shardgate_fuzz::run_ready;

fn account(name: &str, password: &str) -> UserConfig {
    UserConfig {
        name: name.to_owned(),
        password: password.to_owned(),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let tls_offered = flags & 1 != 0;
    let first_len = usize::from(input.u16());
    let first = input.take(first_len).to_vec();
    let rest = input.rest();
    // `guest` has no password, so a login can get through and reach
    // change_user with fuzzed fields.
    let accounts = Accounts {
        users: vec![account("app", "app"), account("guest", "")],
        other_port: Some((vec![account("admin", "admin")], "127.0.0.1:6032".to_owned())),
    };

    let _ = is_ssl_request(&first);
    let parsed = parse_handshake_response(&first, tls_offered);
    if let Ok(fields) = &parsed {
        assert!((SERVER_CAPABILITIES | CapabilityFlags::CLIENT_INTERACTIVE)
            .contains(fields.capabilities));
        assert!(fields
            .capabilities
            .contains(CapabilityFlags::CLIENT_PROTOCOL_41));
    }

    let (mut greeting, _) = Greeting::new(7, tls_offered, "10.11.0-MariaDB-shardgate");
    let framed = flags & 2 != 0;
    if !framed {
        greeting.first_packet = Some((1, first.clone()));
    }
    let mut reader = FrameReader::new(rest);
    let mut writer = FrameWriter::new(Vec::new());
    let logged_in = run_ready(login(&mut reader, &mut writer, greeting, &accounts));
    if !framed {
        match (&parsed, &logged_in) {
            (Err(expected), Err(LoginFailure::Refused { error, seq })) => {
                assert_eq!(expected.to_string(), error.to_string());
                assert_eq!(*seq, 2);
            }
            (Err(expected), other) => {
                panic!("the parser refused ({expected}) but login gave {other:?}")
            }
            (Ok(fields), Ok(session)) => {
                assert_eq!(
                    (&fields.user, fields.collation),
                    (&session.user, session.collation)
                );
                assert_eq!(fields.database, session.database);
            }
            (Ok(_), Err(_)) => {}
        }
    }

    if flags & 4 != 0 {
        let current = match logged_in {
            Ok(session) => session,
            Err(_) => LoggedIn {
                user: "app".to_owned(),
                capabilities: if flags & 8 != 0 {
                    SERVER_CAPABILITIES
                } else {
                    SERVER_CAPABILITIES.difference(CapabilityFlags::CLIENT_SECURE_CONNECTION)
                },
                collation: 45,
                database: None,
                next_seq: 2,
                nonce: [b'a'; 20],
                secure: false,
            },
        };
        let mut reader = FrameReader::new(rest);
        let mut writer = FrameWriter::new(Vec::new());
        let _ = run_ready(change_user(
            &mut reader,
            &mut writer,
            &current,
            &first,
            &accounts,
        ));
    }
});
