//! `LOAD DATA LOCAL INFILE`: the link between the relay, which meets the
//! server's request for the client's file, and the session, which owns the
//! client's read side and hands the file's packets over one at a time.

use std::io;
use std::time::Duration;

use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use crate::protocol::FrameReader;

/// One packet of the client's file (its sequence id and payload), or why
/// it could not be read.
pub type FilePacket = io::Result<(u8, Vec<u8>)>;

/// How long the proxy waits for each packet of the client's file, as a
/// server's default `net_read_timeout`.
pub const FILE_PACKET_TIMEOUT: Duration = Duration::from_secs(30);

/// The relay's end of the link: present only when the client announced
/// `CLIENT_LOCAL_FILES`.
#[derive(Debug, Clone)]
pub struct ClientFileLink {
    requests: mpsc::Sender<mpsc::Sender<FilePacket>>,
}

/// The session's end of the link.
#[derive(Debug)]
pub struct ClientFileRequests {
    requests: mpsc::Receiver<mpsc::Sender<FilePacket>>,
}

/// A new link between a session's statements and its client reader.
pub fn client_file_link() -> (ClientFileLink, ClientFileRequests) {
    let (sender, receiver) = mpsc::channel(1);
    (
        ClientFileLink { requests: sender },
        ClientFileRequests { requests: receiver },
    )
}

impl ClientFileLink {
    /// Asks the session for the client's file: its packets arrive on the
    /// returned receiver, the last one empty (or an error).
    pub async fn request(&self) -> io::Result<mpsc::Receiver<FilePacket>> {
        let (sender, receiver) = mpsc::channel(1);
        self.requests.send(sender).await.map_err(|_| {
            io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the session stopped reading the client",
            )
        })?;
        Ok(receiver)
    }
}

impl ClientFileRequests {
    /// Serves the relay's requests: reads the client's packets up to the
    /// empty one that ends the file (each within the reader's packet limit)
    /// and hands them over one at a time. Meant to race the statement that
    /// may ask; it never finishes on its own.
    pub async fn serve<R: AsyncRead + Unpin>(&mut self, reader: &mut FrameReader<R>) {
        while let Some(reply) = self.requests.recv().await {
            loop {
                let packet = reader.next_packet().await;
                let last = !matches!(&packet, Ok((_, payload)) if !payload.is_empty());
                if reply.send(packet).await.is_err() || last {
                    break;
                }
            }
        }
        std::future::pending::<()>().await;
    }
}
