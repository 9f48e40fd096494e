//! Connection hygiene: an answer after which the server closes the connection says
//! `Connection: close`, and every other answer leaves the connection usable. Each case sends a
//! request on a raw keep-alive connection, reads the answer, then sends the next request on the
//! same connection (or, when the answer said close, checks the server really closed it and a new
//! connection works). And the reported case, with a pooling HTTP client.

use crate::helpers::*;
use serde_json::json;
use std::time::Duration;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

const NEXT: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n";

/// Reads one answer (head and a `Content-Length` body, or a chunked body to its end).
async fn read_answer(stream: &mut TcpStream) -> Option<(u16, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("an answer within 10 s")
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: Option<usize> = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok());
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let body = &buf[head_end..];
        let complete = match length {
            Some(n) => body.len() >= n,
            None if chunked => body.ends_with(b"0\r\n\r\n"),
            None => true,
        };
        if complete {
            break;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("the body within 10 s")
            .ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((status, head))
}

/// Whether the server closed the connection (end of stream or reset) within a short while.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(Duration::from_millis(1500), stream.read(&mut byte)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) => panic!("unexpected bytes after the answer"),
        Err(_) => false,
    }
}

/// Sends `request` (and `more` after a pause, if any), checks the answer's status, and that the
/// connection afterwards is either usable or closed with `Connection: close` said.
async fn case(app: &TestApp, what: &str, request: Vec<u8>, status: u16) -> bool {
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream.write_all(&request).await.unwrap();
    let (got, head) = read_answer(&mut stream)
        .await
        .unwrap_or_else(|| panic!("{what}: no answer"));
    assert_eq!(got, status, "{what}: {head}");
    let says_close = head.contains("connection: close");
    if says_close {
        assert!(
            closed_by_server(&mut stream).await,
            "{what}: said close but kept the connection"
        );
    } else {
        // The next request on the same connection gets its answer.
        let sent = stream.write_all(NEXT).await;
        let answer = match sent {
            Ok(()) => read_answer(&mut stream).await,
            Err(_) => None,
        };
        assert_eq!(
            answer.map(|(s, _)| s),
            Some(200),
            "{what}: the connection was closed without `Connection: close` ({head})"
        );
    }
    // Either way, the server goes on serving.
    let mut fresh = TcpStream::connect(&addr).await.unwrap();
    fresh.write_all(NEXT).await.unwrap();
    assert_eq!(
        read_answer(&mut fresh).await.map(|(s, _)| s),
        Some(200),
        "{what}"
    );
    says_close
}

fn post(path: &str, content_type: &str, length: usize, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

#[tokio::test]
async fn every_answer_that_closes_the_connection_says_so_and_the_rest_keep_it() {
    let app = spawn_app_with(|c| c.request_timeout = Duration::from_secs(1)).await;
    let login = br#"{"username":"nobody-here","password":"whatever-1"}"#;

    // Refusals before the body was read: the server cannot reuse the connection.
    let closing = [
        (
            "413: a declared 40 KB body",
            post("/api/auth/register", "application/json", 40_000, b""),
        ),
        ("413: a chunked body past 16 KiB", {
            let mut r = b"POST /api/auth/register HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            r.extend_from_slice(format!("{:x}\r\n", 20_000).as_bytes());
            r.extend_from_slice(&[b'a'; 20_000]);
            r
        }),
        (
            "415 with the body still to come",
            post("/api/auth/login", "text/plain", 50, b""),
        ),
        (
            "401 with the body still to come",
            post("/api/orders/x/pay", "application/json", 50, b""),
        ),
        (
            "408: a body that stops halfway",
            post(
                "/api/auth/login",
                "application/json",
                100,
                b"{\"username\":",
            ),
        ),
        (
            "400: a malformed request head",
            b"GET /healthz HTTP/1.1\r\nHost: test\r\nBad Header\r\n\r\n".to_vec(),
        ),
    ];
    let statuses = [413, 413, 415, 401, 408, 400];
    for ((what, request), status) in closing.into_iter().zip(statuses) {
        case(&app, what, request, status).await;
    }

    // Answers whose request was read in full keep the connection (nothing to close for).
    let keeping = [
        (
            "401 invalid credentials",
            post("/api/auth/login", "application/json", login.len(), login),
            401,
        ),
        (
            "400 malformed JSON",
            post("/api/auth/login", "application/json", 5, b"{{{{{"),
            400,
        ),
        (
            "404 unknown path",
            b"GET /api/nowhere HTTP/1.1\r\nHost: test\r\n\r\n".to_vec(),
            404,
        ),
        (
            "200 a page",
            b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n".to_vec(),
            200,
        ),
    ];
    for (what, request, status) in keeping {
        assert!(!case(&app, what, request, status).await, "{what}: kept");
    }
}

#[tokio::test]
async fn a_keep_alive_client_signs_in_after_a_refused_oversized_body() {
    let app = spawn_app().await;
    let name = unique_name("keep");
    assert_eq!(
        app.register(&name, "long-enough-1").await.status().as_u16(),
        201
    );
    // One pooled connection, reused whenever the server allows it.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    for _ in 0..3 {
        let big = json!({"username": "x".repeat(40 * 1024), "password": "long-enough-1"});
        let resp = client
            .post(app.url("/api/auth/register"))
            .json(&big)
            .send()
            .await
            .expect("the refusal arrives");
        assert_eq!(resp.status().as_u16(), 413);
        assert_eq!(resp.headers()["connection"], "close");
        let resp = client
            .post(app.url("/api/auth/login"))
            .json(&json!({"username": name, "password": "long-enough-1"}))
            .send()
            .await
            .expect("the next request on a keep-alive client goes through");
        assert_eq!(resp.status().as_u16(), 200);
    }
}

/// The crowd's usual answer, `409 sold_out`, is given before the session, the path and the body's
/// JSON are worked on (the body is still read, so the connection stays open), and counted like
/// any buy's answer; a request with an `Idempotency-Key` still goes the whole way.
#[tokio::test]
async fn a_sold_out_sale_answers_before_the_session_and_the_body_and_keeps_the_connection() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 1, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let uri = format!("/api/activities/{id}/buy");
    let unsigned = br#"{"path":"not-a-real-path"}"#;
    // On sale: a request without a session is refused as such.
    case(
        &app,
        "401 on sale",
        post(&uri, "application/json", unsigned.len(), unsigned),
        401,
    )
    .await;
    // One unit sold, then this instance learns the sale is sold out.
    let buyers = shoppers(&app, 2).await;
    for (buyer, status) in buyers.iter().zip([202, 409]) {
        let path = app.path(&buyer.client, id).await;
        let resp = app.buy(&buyer.client, id, json!({ "path": path })).await;
        assert_eq!(resp.status().as_u16(), status);
    }

    let kept = [
        (
            "409 without a session",
            post(&uri, "application/json", unsigned.len(), unsigned),
        ),
        (
            "409 on a body that is not JSON",
            post(&uri, "application/json", 5, b"{{{{{"),
        ),
    ];
    for (what, request) in kept {
        assert!(!case(&app, what, request, 409).await, "{what}: kept");
    }
    let mut chunked = format!("POST {uri} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n", 20_000).into_bytes();
    chunked.extend_from_slice(&[b'a'; 20_000]);
    assert!(
        case(&app, "413: a chunked body past 16 KiB", chunked, 413).await,
        "said close"
    );
    let keyed = format!(
        "POST {uri} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nIdempotency-Key: k1\r\nContent-Length: {}\r\n\r\n",
        unsigned.len()
    );
    let mut keyed = keyed.into_bytes();
    keyed.extend_from_slice(unsigned);
    case(&app, "401: keyed, so the whole way", keyed, 401).await;
    // Counted like the gate's answers: the shopper's refusal and the two early ones.
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(r#"seckill_buy_requests_total{result="sold_out"} 3"#),
        "{metrics}"
    );
}
