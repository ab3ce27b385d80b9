//! A tiny HTTP/1.1 responder for Prometheus: `GET /metrics` answers the
//! statistics as text; anything else gets 404. One request per connection.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

/// Longest request head read (a scraper sends a few hundred bytes).
const MAX_REQUEST_HEAD: usize = 8192;
/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The content type of the Prometheus text format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `/metrics` on `listener` until the process ends; `render` makes
/// the text of each answer.
pub async fn serve<F>(listener: TcpListener, render: F) -> io::Result<()>
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let render = Arc::new(render);
    crate::net::accept_forever(listener, "metrics listener", |stream, peer, _| {
        let render = render.clone();
        async move {
            if let Err(e) = answer(render.as_ref(), stream).await {
                debug!(%peer, error = %e, "metrics request failed");
            }
        }
    })
    .await;
    Ok(())
}

/// Reads one request head and writes the answer, then closes.
async fn answer(render: &(impl Fn() -> String + ?Sized), mut stream: TcpStream) -> io::Result<()> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(head) => head?,
        Err(_) => return Ok(()),
    };
    let response = respond(&head, render);
    stream.write_all(&response).await?;
    stream.shutdown().await
}

/// Bytes up to the end of the request head (or what came before the
/// client stopped sending, or the size limit).
async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while head.len() < MAX_REQUEST_HEAD {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break;
        }
    }
    Ok(head)
}

/// The whole HTTP response to a request head; `metrics` makes the body of
/// a `GET /metrics`.
fn respond(head: &[u8], metrics: impl FnOnce() -> String) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut parts = line.trim_ascii().split(|&b| b == b' ');
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or_default();
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, content_type, body) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => ("200 OK", CONTENT_TYPE, metrics()),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: only GET /metrics is served\n".to_owned(),
        ),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != b"HEAD" {
        response.extend_from_slice(body.as_bytes());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(response: Vec<u8>) -> String {
        String::from_utf8(response).unwrap()
    }

    #[test]
    fn get_metrics_answers_the_text() {
        let response = text(respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", || {
            "a 1\n".to_owned()
        }));
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(response.contains("Content-Length: 4\r\n"));
        assert!(response.ends_with("\r\n\r\na 1\n"));
        let query = text(respond(b"GET /metrics?x=1 HTTP/1.0\n\n", || "a".to_owned()));
        assert!(query.starts_with("HTTP/1.1 200 OK"), "{query}");
        let head = text(respond(b"HEAD /metrics HTTP/1.1\r\n\r\n", || {
            "abc".to_owned()
        }));
        assert!(
            head.contains("Content-Length: 3") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
    }

    #[test]
    fn anything_else_is_refused_without_computing_metrics() {
        let never = || -> String { panic!("metrics computed") };
        assert!(text(respond(b"GET / HTTP/1.1\r\n\r\n", never)).starts_with("HTTP/1.1 404"));
        assert!(text(respond(b"GET /metricsx HTTP/1.1\r\n\r\n", never)).starts_with("HTTP/1.1 404"));
        assert!(text(respond(b"POST /metrics HTTP/1.1\r\n\r\n", never)).starts_with("HTTP/1.1 404"));
        for garbage in [&b""[..], b"\xff\xfe\x00", b"   ", b"GET", b"\r\n\r\n"] {
            let response = text(respond(garbage, never));
            assert!(response.starts_with("HTTP/1.1 404"), "{response}");
        }
    }
}
