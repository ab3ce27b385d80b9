//! A tiny HTTP/1.1 responder on the metrics listener: `GET /metrics`
//! answers the statistics as text (Prometheus), `GET /healthz` and
//! `GET /ready` the process's liveness and readiness as JSON (200 or 503);
//! anything else gets 404. One request per connection.

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
/// The content type of the health endpoints.
const JSON: &str = "application/json";

/// The answer of a health endpoint: whether it is healthy (200, else
/// 503) and a JSON body saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// 200 when true, 503 when false.
    pub ok: bool,
    /// The JSON body.
    pub body: String,
}

/// What the listener computes for each path; each is called only for its
/// own path.
pub struct Endpoints {
    /// The text of `GET /metrics`.
    pub metrics: Box<dyn Fn() -> String + Send + Sync>,
    /// `GET /healthz`: the process is alive and its loops turn.
    pub healthz: Box<dyn Fn() -> Probe + Send + Sync>,
    /// `GET /ready`: the proxy can serve clients now.
    pub ready: Box<dyn Fn() -> Probe + Send + Sync>,
}

/// Serves [`Endpoints`] on `listener` until the process ends.
pub async fn serve(listener: TcpListener, endpoints: Endpoints) -> io::Result<()> {
    let endpoints = Arc::new(endpoints);
    crate::net::accept_forever(listener, "metrics listener", |stream, peer, _| {
        let endpoints = endpoints.clone();
        async move {
            if let Err(e) = answer(&endpoints, stream).await {
                debug!(%peer, error = %e, "metrics request failed");
            }
        }
    })
    .await;
    Ok(())
}

/// Reads one request head and writes the answer, then closes.
async fn answer(endpoints: &Endpoints, mut stream: TcpStream) -> io::Result<()> {
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(head) => head?,
        Err(_) => return Ok(()),
    };
    let response = respond(&head, endpoints);
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

/// The whole HTTP response to a request head.
fn respond(head: &[u8], endpoints: &Endpoints) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut parts = line.trim_ascii().split(|&b| b == b' ');
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or_default();
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let probe = |probe: Probe| {
        let status = if probe.ok {
            "200 OK"
        } else {
            "503 Service Unavailable"
        };
        (status, JSON, probe.body + "\n")
    };
    let (status, content_type, body) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => ("200 OK", CONTENT_TYPE, (endpoints.metrics)()),
        (b"GET" | b"HEAD", b"/healthz") => probe((endpoints.healthz)()),
        (b"GET" | b"HEAD", b"/ready") => probe((endpoints.ready)()),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: GET /metrics, /healthz and /ready are served\n".to_owned(),
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

    fn endpoints(metrics: &'static str, ready: bool) -> Endpoints {
        Endpoints {
            metrics: Box::new(move || metrics.to_owned()),
            healthz: Box::new(|| Probe {
                ok: true,
                body: "{\"alive\":true}".to_owned(),
            }),
            ready: Box::new(move || Probe {
                ok: ready,
                body: format!("{{\"ready\":{ready}}}"),
            }),
        }
    }

    fn never() -> Endpoints {
        Endpoints {
            metrics: Box::new(|| panic!("metrics computed")),
            healthz: Box::new(|| panic!("liveness computed")),
            ready: Box::new(|| panic!("readiness computed")),
        }
    }

    #[test]
    fn get_metrics_answers_the_text() {
        let e = endpoints("a 1\n", true);
        let response = text(respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &e));
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(response.contains("Content-Length: 4\r\n"));
        assert!(response.ends_with("\r\n\r\na 1\n"));
        let query = text(respond(b"GET /metrics?x=1 HTTP/1.0\n\n", &e));
        assert!(query.starts_with("HTTP/1.1 200 OK"), "{query}");
        let e = endpoints("abc", true);
        let head = text(respond(b"HEAD /metrics HTTP/1.1\r\n\r\n", &e));
        assert!(
            head.contains("Content-Length: 3") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
    }

    #[test]
    fn health_endpoints_answer_200_or_503_with_their_json() {
        let up = endpoints("", true);
        let live = text(respond(b"GET /healthz HTTP/1.1\r\n\r\n", &up));
        assert!(live.starts_with("HTTP/1.1 200 OK\r\n"), "{live}");
        assert!(live.contains("Content-Type: application/json"), "{live}");
        assert!(live.ends_with("{\"alive\":true}\n"), "{live}");
        let ready = text(respond(b"GET /ready HTTP/1.1\r\n\r\n", &up));
        assert!(ready.starts_with("HTTP/1.1 200 OK"), "{ready}");
        let down = endpoints("", false);
        let not_ready = text(respond(b"GET /ready?verbose HTTP/1.0\r\n\r\n", &down));
        assert!(
            not_ready.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{not_ready}"
        );
        assert!(not_ready.ends_with("{\"ready\":false}\n"), "{not_ready}");
    }

    #[test]
    fn anything_else_is_refused_without_computing_anything() {
        let e = never();
        assert!(text(respond(b"GET / HTTP/1.1\r\n\r\n", &e)).starts_with("HTTP/1.1 404"));
        assert!(text(respond(b"GET /metricsx HTTP/1.1\r\n\r\n", &e)).starts_with("HTTP/1.1 404"));
        assert!(text(respond(b"POST /metrics HTTP/1.1\r\n\r\n", &e)).starts_with("HTTP/1.1 404"));
        assert!(text(respond(b"POST /ready HTTP/1.1\r\n\r\n", &e)).starts_with("HTTP/1.1 404"));
        assert!(text(respond(b"GET /readyz HTTP/1.1\r\n\r\n", &e)).starts_with("HTTP/1.1 404"));
        for garbage in [&b""[..], b"\xff\xfe\x00", b"   ", b"GET", b"\r\n\r\n"] {
            let response = text(respond(garbage, &e));
            assert!(response.starts_with("HTTP/1.1 404"), "{response}");
        }
    }
}
