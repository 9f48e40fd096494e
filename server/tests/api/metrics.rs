//! docs/operations.md "Metrics": requests counted by the route they matched whatever a client
//! sends, and each live sale's figures set while it is on and removed when it ends.

use crate::helpers::*;
use rand::Rng;
use serde_json::json;
use std::collections::BTreeSet;

/// The values of `label` on the series of `family` (a metric name's prefix) in an exposition.
fn label_values(exposition: &str, family: &str, label: &str) -> BTreeSet<String> {
    let marker = format!("{label}=\"");
    exposition
        .lines()
        .filter(|line| line.starts_with(family))
        .filter_map(|line| {
            let from = line.find(&marker)? + marker.len();
            let len = line[from..].find('"')?;
            Some(line[from..from + len].to_string())
        })
        .collect()
}

/// Series (lines with a value) of one metric name, labels and all.
fn series<'a>(exposition: &'a str, name: &str) -> Vec<&'a str> {
    exposition
        .lines()
        .filter(|line| {
            line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
        })
        .collect()
}

/// A path segment long enough that no route template could hold it by chance.
fn random_segment(rng: &mut impl Rng) -> String {
    let len = rng.random_range(16..24);
    (0..len)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789-_.~"[rng.random_range(0..40)]))
        .collect()
}

#[tokio::test]
async fn random_ids_paths_and_methods_keep_the_request_series_to_the_routes_there_are() {
    let app = spawn_app().await;
    let mut rng = rand::rng();
    let methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "PURGE", "BREW"];
    let mut sent = BTreeSet::new();
    for i in 0..600 {
        let id: u64 = rng.random();
        let word = random_segment(&mut rng);
        sent.insert(word.clone());
        let path = match i % 6 {
            0 => format!("/api/activities/{id}"),
            1 => format!("/api/activities/{id}/buy"),
            2 => format!("/api/orders/{word}"),
            3 => format!("/{word}/{}", random_segment(&mut rng)),
            4 => format!("/pkg/{word}.js"),
            _ => format!("/api/{word}"),
        };
        let method = reqwest::Method::from_bytes(methods[i % methods.len()].as_bytes()).unwrap();
        let answer = app
            .client
            .request(method, app.url(&path))
            .send()
            .await
            .unwrap();
        assert!(
            answer.status().as_u16() < 500,
            "{path}: {}",
            answer.status()
        );
    }
    let exposition = app.metrics().await;
    let count = "seckill_http_request_duration_seconds_count";
    let routes = label_values(&exposition, count, "route");
    assert!(routes.contains("/api/activities/{id}"), "{routes:?}");
    assert!(routes.contains("/api/activities/{id}/buy"), "{routes:?}");
    assert!(routes.contains("unmatched"), "{routes:?}");
    for route in &routes {
        assert!(
            !sent.iter().any(|word| route.contains(word.as_str()))
                && !route.chars().any(|c| c.is_ascii_digit()),
            "a client's path leaked into a route label: {route}"
        );
    }
    let methods_seen = label_values(&exposition, count, "method");
    assert!(
        methods_seen.is_subset(
            &["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "other"]
                .map(String::from)
                .into()
        ),
        "{methods_seen:?}"
    );
    assert!(methods_seen.contains("other"), "{methods_seen:?}");
    // 600 requests of random ids and paths: a few dozen series, as many as routes × methods × statuses met.
    let lines = series(&exposition, count);
    assert!(
        lines.len() <= 60,
        "{} series:\n{}",
        lines.len(),
        lines.join("\n")
    );
    assert!(
        exposition.contains("seckill_http_requests_in_flight 1"),
        "the scrape itself is in flight"
    );
}

#[tokio::test]
async fn a_sale_has_its_units_journal_and_persister_figures_while_on_and_none_once_ended() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 40, json!({"per_user_limit": 5})).await["id"]
        .as_i64()
        .unwrap();
    let buyers = shoppers(&app, 3).await;
    for shopper in &buyers {
        let path = app.path(&shopper.client, id).await;
        let (status, body) = json(
            app.buy(&shopper.client, id, json!({"path": path, "quantity": 2}))
                .await,
        )
        .await;
        assert_eq!(status, 202, "{body}");
    }
    let units = format!("seckill_sale_units_left{{activity=\"{id}\"}} 34");
    eventually(20, "the sale's units left in the metrics", || async {
        let exposition = app.metrics().await;
        (exposition.contains(&units)
            && exposition.contains(&format!(
                "seckill_sale_journal_age_seconds{{activity=\"{id}\"}} "
            ))
            && exposition.contains(&format!(
                "seckill_sale_persister_lag_seconds{{activity=\"{id}\"}} 0.0"
            ))
            && exposition.contains(&format!("seckill_sale_line_length{{activity=\"{id}\"}} 0")))
        .then_some(())
    })
    .await;
    sqlx::query("UPDATE activities SET ends_at = now() - interval '1 second' WHERE id = $1")
        .bind(id)
        .execute(&app.db)
        .await
        .unwrap();
    let marker = format!("activity=\"{id}\"");
    eventually(20, "the ended sale's series removed", || async {
        let exposition = app.metrics().await;
        (!exposition
            .lines()
            .any(|l| l.starts_with("seckill_sale_") && l.contains(&marker)))
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn every_answer_carries_a_request_id_kept_from_the_edge_only_when_plain() {
    let app = spawn_app().await;
    let id_of = |resp: &reqwest::Response| {
        resp.headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let fresh = app.get("/healthz").await;
    let fresh = id_of(&fresh).expect("an id on an answer to a request without one");
    let made_here = |id: &str| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
    assert!(made_here(&fresh), "{fresh}");
    let again = id_of(&app.get("/healthz").await).unwrap();
    assert_ne!(fresh, again, "each request its own id");
    for (sent, kept) in [
        ("edge-7f3a_01.b", true),
        (&"x".repeat(65)[..], false),
        ("has space", false),
        ("", false),
    ] {
        let resp = app
            .client
            .get(app.url("/api/activities/0"))
            .header("x-request-id", sent)
            .send()
            .await
            .unwrap();
        let answered = id_of(&resp).unwrap();
        if kept {
            assert_eq!(answered, sent);
        } else {
            assert!(
                uuid::Uuid::parse_str(&answered).is_ok(),
                "{sent:?} answered with {answered:?}"
            );
        }
    }
}

/// Deployed (or `SECKILL_LOG_FORMAT=json`), every log line is one JSON object, and the lines a
/// request logs carry its id.
#[tokio::test]
async fn json_logs_carry_the_request_id_on_each_line_of_a_request() {
    let app = spawn_app().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = server_command(&app, "serve")
        .env("SECKILL_ADDR", format!("127.0.0.1:{port}"))
        .env("SECKILL_LOG_FORMAT", "json")
        .env("SECKILL_NO_WORKERS", "1")
        .env("RUST_LOG", "info,server::http::observe=debug")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the instance starts");
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    eventually(60, "the instance answers", || async {
        (http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .ok()?
            .status()
            == 200)
            .then_some(())
    })
    .await;
    let id = format!("log-check-{}", uuid::Uuid::new_v4().simple());
    let resp = http
        .get(format!("{base}/api/activities"))
        .header("x-request-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let _ = serve.kill();
    let out = serve.wait_with_output().unwrap();
    let logs = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let of_request: Vec<_> = lines
        .iter()
        .filter(|l| l["span"]["request_id"] == id.as_str())
        .collect();
    // The request's "answered" line, at debug.
    assert!(
        of_request
            .iter()
            .any(|l| l["fields"]["message"] == "answered"),
        "{} lines, none with the id:\n{logs}",
        lines.len()
    );
    assert!(
        of_request.iter().all(|l| l["span"]["name"] == "request"),
        "{of_request:?}"
    );
}
