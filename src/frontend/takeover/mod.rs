//! `serve --takeover`: a new process takes the running proxy's listening
//! sockets and client sessions over a local Unix socket, so a restart or
//! an upgrade refuses no connection and cuts no session.
//!
//! The exchange, one message at a time ([`wire`]; JSON, descriptors with
//! SCM_RIGHTS, both ends of the same user):
//!
//! 1. old → new: [`Message::Hello`] with [`FORMAT`]. A new process that
//!    cannot read that format answers [`Message::Refuse`] and exits; the
//!    old one goes on serving.
//! 2. new → old: [`Message::Accept`].
//! 3. old: stops accepting clients (the listening socket stays open, new
//!    connections wait in its backlog); old → new: [`Message::Listeners`]
//!    with the client, admin and metrics sockets and the next connection id.
//! 4. new: serves them; new → old: [`Message::Listening`]. Until then a
//!    failure puts the old process back to accepting.
//! 5. old: each session at its next boundary outside a transaction
//!    ([`donor`]): old → new [`Message::Session`] with its socket; new →
//!    old [`Message::Ack`] once it serves it. A session without an ack
//!    stays in the old process (the channel closing answers every pending
//!    one "kept"), so a session is never served by neither process, and
//!    never sent twice.
//! 6. old: when it holds no session (or `shutdown.drain_timeout_ms` passed
//!    and the rest were drained as a stop drains them), old → new
//!    [`Message::Done`]; the old process leaves the registry and exits 0,
//!    and the new one binds the takeover socket for the next upgrade.

pub mod donor;
pub mod receiver;
pub mod wire;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::topology::config::Config;

/// The format of the hand-off this build speaks. Raised with any change a
/// process of the previous format could misread.
pub const FORMAT: u32 = 1;

/// One message of the exchange.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// The old process's first message.
    Hello {
        /// The hand-off format it speaks.
        format: u32,
        /// Its registry id.
        proxy_id: String,
    },
    /// The new process cannot take over (a format it does not read).
    Refuse {
        /// Why.
        reason: String,
    },
    /// The new process takes over in `format`.
    Accept {
        /// The format it speaks (the old one's).
        format: u32,
    },
    /// The listening sockets, in this order: client, admin (if `admin`),
    /// metrics (if `metrics`).
    Listeners {
        /// Whether the admin socket is among them.
        admin: bool,
        /// Whether the metrics socket is among them.
        metrics: bool,
        /// The id the next client connection gets.
        next_connection_id: u32,
    },
    /// The new process serves the listeners.
    Listening,
    /// One session with its client socket.
    Session(Box<super::handoff::SessionSnapshot>),
    /// The new process serves session `connection_id`.
    Ack {
        /// The session's id.
        connection_id: u32,
    },
    /// The new process could not take session `connection_id` (it stays in
    /// the old one).
    Nack {
        /// The session's id.
        connection_id: u32,
        /// Why.
        reason: String,
    },
    /// The old process holds no session any more.
    Done {
        /// Sessions handed over.
        handed: u64,
    },
}

/// The takeover socket of `config`: `takeover.socket`, else
/// `shardgate-takeover-PORT.sock` (the client port) under
/// `$XDG_RUNTIME_DIR`, or `/tmp`; none for a client port of 0 without
/// `takeover.socket` (no later process could find it).
pub fn socket_path(config: &Config) -> Option<PathBuf> {
    if let Some(path) = &config.takeover.socket {
        return Some(PathBuf::from(path));
    }
    let port = config
        .listen
        .rsplit(':')
        .next()
        .and_then(|port| port.parse::<u16>().ok())
        .filter(|&port| port != 0)?;
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    Some(dir.join(format!("shardgate-takeover-{port}.sock")))
}

/// The format of a first message, if it names one.
pub fn format_of(first: &serde_json::Value) -> Option<u32> {
    first
        .get("format")
        .and_then(serde_json::Value::as_u64)
        .and_then(|format| u32::try_from(format).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_their_type_and_the_first_carries_the_format() {
        let hello = serde_json::to_value(Message::Hello {
            format: FORMAT,
            proxy_id: "p".into(),
        })
        .unwrap();
        assert_eq!(hello["type"], "hello");
        assert_eq!(format_of(&hello), Some(FORMAT));
        let future = serde_json::json!({"type": "hello", "format": 7, "layout": [1]});
        assert_eq!(format_of(&future), Some(7));
        assert_eq!(format_of(&serde_json::json!({"type": "hello"})), None);
    }

    #[test]
    fn the_default_socket_is_named_after_the_client_port() {
        let mut config = crate::topology::tests::load(crate::topology::tests::SPEC_YAML).config;
        config.listen = "127.0.0.1:6033".into();
        let path = socket_path(&config).unwrap();
        assert!(path.ends_with("shardgate-takeover-6033.sock"), "{path:?}");
        config.listen = "[::]:0".into();
        assert_eq!(socket_path(&config), None);
        config.takeover.socket = Some("/run/sg/t.sock".into());
        assert_eq!(socket_path(&config), Some(PathBuf::from("/run/sg/t.sock")));
    }
}
