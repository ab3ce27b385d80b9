//! One client session: login, then the command loop. Statements are routed
//! here (router) and executed by the engine.

use std::io;
use std::sync::Arc;

use mysql_common::constants::CapabilityFlags;
use tokio::net::TcpStream;
use tracing::debug;

use super::handshake::{self, LoginFailure};
use crate::backend::conn::FRAMING_CAPABILITIES;
use crate::backend::ConnKey;
use crate::engine::{write_error, Engine, SessionState};
use crate::error::ClientError;
use crate::protocol::packets::ok_packet;
use crate::protocol::{FrameReader, FrameWriter};
use crate::router::{route, Plan, RandomPlacement, RouteError, SessionAction};

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_PING: u8 = 0x0E;

/// Serves one client connection until it quits or fails.
pub async fn run(engine: Arc<Engine>, stream: TcpStream, connection_id: u32) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (read_half, write_half) = stream.into_split();
    let mut reader = FrameReader::new(read_half);
    let mut writer = FrameWriter::new(write_half);

    let users = engine.topology.load().config.users.clone();
    let logged_in = match handshake::login(&mut reader, &mut writer, connection_id, &users).await {
        Ok(logged_in) => logged_in,
        Err(LoginFailure::Io(error)) => return Err(error),
        Err(LoginFailure::Refused { error, seq }) => {
            debug!(connection_id, %error, "login refused");
            return handshake::reject(&mut writer, seq, &error).await;
        }
    };
    let key = ConnKey {
        framing: logged_in.capabilities & FRAMING_CAPABILITIES,
        collation: logged_in.collation,
    };
    let deprecate_eof = logged_in
        .capabilities
        .contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let mut state = SessionState::new(connection_id, key, deprecate_eof);
    if let Some(database) = &logged_in.database {
        let topology = engine.topology.load();
        match topology.parse_database(database) {
            Some(current) => state.route.current_db = Some(current),
            None => {
                let error = ClientError::Route(RouteError::UnknownDatabase(database.clone()));
                return handshake::reject(&mut writer, logged_in.next_seq, &error).await;
            }
        }
    }
    handshake::accept(&mut writer, logged_in.next_seq).await?;
    debug!(connection_id, user = %logged_in.user, "logged in");

    let mut placement = RandomPlacement::new();
    loop {
        let (last_seq, packet) = match reader.next_packet().await {
            Ok(packet) => packet,
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                let error = ClientError::PacketTooLarge(error.to_string());
                write_error(&mut writer, 1, &error).await?;
                return writer.shutdown().await;
            }
            Err(error) => return Err(error),
        };
        state.response_seq = last_seq.wrapping_add(1);
        let Some((&command, body)) = packet.split_first() else {
            let error = ClientError::UnsupportedCommand("empty command packet".to_owned());
            write_error(&mut writer, state.response_seq, &error).await?;
            writer.flush().await?;
            continue;
        };
        match command {
            COM_QUERY => {
                let sql = String::from_utf8_lossy(body);
                let topology = engine.topology.load();
                let plan = route(&sql, &topology, &state.route, &mut placement);
                engine
                    .execute(&topology, &mut state, plan, &mut writer)
                    .await?;
            }
            COM_INIT_DB => {
                let name = String::from_utf8_lossy(body);
                let topology = engine.topology.load();
                let plan = match topology.parse_database(&name) {
                    Some((fleet, shard)) => Plan::Session(SessionAction::Use { fleet, shard }),
                    None => Plan::Reject(RouteError::UnknownDatabase(name.into_owned())),
                };
                engine
                    .execute(&topology, &mut state, plan, &mut writer)
                    .await?;
            }
            COM_PING => {
                writer
                    .write_packet(
                        state.response_seq,
                        &ok_packet(0, 0, state.status_flags(), 0),
                    )
                    .await?;
                writer.flush().await?;
            }
            COM_QUIT => return Ok(()),
            other => {
                let error = ClientError::UnsupportedCommand(format!(
                    "command {other:#04x} ({}) is not supported yet; use text-protocol queries (COM_QUERY)",
                    command_name(other)
                ));
                write_error(&mut writer, state.response_seq, &error).await?;
                writer.flush().await?;
            }
        }
    }
}

fn command_name(command: u8) -> &'static str {
    match command {
        0x04 => "COM_FIELD_LIST",
        0x09 => "COM_STATISTICS",
        0x11 => "COM_CHANGE_USER",
        0x16 => "COM_STMT_PREPARE",
        0x17 => "COM_STMT_EXECUTE",
        0x18 => "COM_STMT_SEND_LONG_DATA",
        0x19 => "COM_STMT_CLOSE",
        0x1A => "COM_STMT_RESET",
        0x1B => "COM_SET_OPTION",
        0x1C => "COM_STMT_FETCH",
        0x1F => "COM_RESET_CONNECTION",
        _ => "unknown command",
    }
}
