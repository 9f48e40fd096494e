//! Generated request bodies (proptest) against every body-reading endpoint of the running
//! server: random bytes, random JSON, and objects made of the endpoints' own field names with
//! values of every type and size. Each answer must be one of docs/api.md's (never a 5xx, an error
//! always with its code and message), and an answer refusing the body must leave the sale as it
//! was. A failing body is shrunk to a minimal one by proptest.

use crate::helpers::*;
use proptest::{
    collection::{btree_map, vec},
    prelude::*,
    sample::select,
    test_runner::{Config, TestCaseError, TestRunner},
};
use reqwest::{header, Client};
use serde_json::{json, Value};

const FIELDS: &[&str] = &[
    "username",
    "password",
    "path",
    "quantity",
    "captcha_id",
    "captcha_answer",
    "title",
    "description",
    "image_url",
    "price_cents",
    "seckill_price_cents",
    "starts_at",
    "ends_at",
    "stock",
    "per_user_limit",
    "captcha_required",
    "payment_window_secs",
    "add",
    "role",
    "user_id",
    "bot_check",
    "pow",
    "pow_difficulty",
    "stock_shards",
    "waiting_room",
    "admit_per_sec",
    "accounts_created_before",
    "current_password",
    "new_password",
    "again",
    "admission",
    "name",
];

/// Headers a hostile client sends with its body: a retry key (valid, reused across endpoints,
/// malformed, too long) and a client address (IPv4, IPv6, a chain, garbage), the server trusting
/// one proxy.
const KEYS: &[&str] = &[
    "k1",
    "k2",
    "",
    "bad key",
    "ééé",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];
const ADDRESSES: &[&str] = &[
    "203.0.113.1",
    "2001:db8:1:2::1",
    "198.51.100.1, 203.0.113.9",
    "not an address",
    "",
];

const NASTY: &[&str] = &[
    "",
    " ",
    "'; DROP TABLE orders; --",
    "\" OR \"\"=\"",
    "<script>alert(1)</script>",
    "\u{0}",
    "\u{202e}gnp.exe",
    "../../etc/passwd",
    "2030-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "-1",
    "1e309",
    "NaN",
    "null",
    "%s%n%x",
    "\u{1F600}\u{1F600}",
    "ann_ok",
    "long-enough-password",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        select(vec![
            0_i64,
            1,
            -1,
            2,
            100,
            101,
            10_000_000,
            10_000_001,
            i64::MAX,
            i64::MIN
        ])
        .prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(Value::from),
        select(NASTY).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            btree_map(
                prop_oneof![select(FIELDS).prop_map(str::to_string), "[a-z_]{1,10}"],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects of the endpoints' own fields (most likely to get past the parser), any JSON, any bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => btree_map(select(FIELDS), json_value(), 0..8)
            .prop_map(|m| serde_json::to_vec(&m).unwrap()),
        1 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => vec(any::<u8>(), 0..300),
    ]
}

#[test]
fn generated_bodies_get_an_api_answer_and_refused_ones_change_nothing() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (app, merchant, shopper, operator, target, activity) = rt.block_on(async {
        let app = spawn_app_with(|c| c.trusted_proxies = 1).await;
        let merchant = merchant(&app).await;
        let activity = live_activity(&app, &merchant, 10, json!({})).await["id"]
            .as_i64()
            .unwrap();
        let shopper = shoppers(&app, 1).await.pop().unwrap();
        let operator = operator(&app).await;
        // The account the operator's routes act on: not one the fuzzer signs in with.
        let target = insert_shoppers(&app.db, 1).await[0];
        (app, merchant, shopper.client, operator, target, activity)
    });
    let anonymous = Client::new();
    // Every route that reads a body (every POST the routers declare), with the client it is
    // meant for; only the two sign-outs are left out (they read no body, and would end the
    // sessions the other cases use).
    let endpoints: Vec<(String, &Client, String)> = api_routes()
        .into_iter()
        .filter(|(m, p)| {
            *m == reqwest::Method::POST
                && !matches!(
                    p.as_str(),
                    "/api/auth/logout" | "/api/auth/logout-everywhere"
                )
        })
        .map(|(_, path)| {
            let client = if path.starts_with("/api/operator/") {
                &operator
            } else if path.starts_with("/api/admin/") {
                &merchant
            } else if path == "/api/auth/register" || path == "/api/auth/login" {
                &anonymous
            } else {
                &shopper
            };
            let id = if path.starts_with("/api/operator/users/") {
                target
            } else if path.starts_with("/api/operator/shops/") {
                1
            } else {
                activity
            };
            let url = path
                .replace("{id}", &id.to_string())
                .replace("{token}", &uuid::Uuid::new_v4().to_string());
            (path, client, app.url(&url))
        })
        .collect();
    assert!(
        endpoints.len() >= 16,
        "{:?}",
        endpoints.iter().map(|e| &e.0).collect::<Vec<_>>()
    );
    let documented = documented_refusals();
    let cases = std::env::var("SECKILL_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let headers = (
        proptest::option::of(select(KEYS)),
        proptest::option::of(select(ADDRESSES)),
    );
    let result = runner.run(
        &(0..endpoints.len(), body(), headers),
        |(endpoint, body, (key, address))| {
            let (name, client, url) = &endpoints[endpoint];
            rt.block_on(async {
                let before = state(&app, activity).await;
                let mut request = client
                    .post(url)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
                if let Some(key) = key {
                    request = request.header("idempotency-key", key);
                }
                if let Some(address) = address {
                    request = request.header("x-forwarded-for", address);
                }
                let resp = request.send().await.unwrap();
                let status = resp.status().as_u16();
                let text = resp.text().await.unwrap();
                let shown = format!(
                    "{} (key {key:?}, from {address:?})",
                    String::from_utf8_lossy(&body)
                );
                prop_assert!(status < 500, "{name} answered {status} to {shown}: {text}");
                if status >= 400 {
                    let error: Value = serde_json::from_str(&text)
                        .map_err(|_| TestCaseError::fail(format!("{name}: not JSON: {text}")))?;
                    prop_assert!(
                        error["error"].as_str().is_some_and(|c| !c.is_empty()),
                        "{name}: no code: {text}"
                    );
                    prop_assert!(
                        error["message"].as_str().is_some_and(|m| !m.is_empty()),
                        "{name}: no message: {text}"
                    );
                    let code = error["error"].as_str().unwrap_or_default().to_string();
                    prop_assert!(
                        documented.contains(&(status, code.clone())),
                        "{name} answered {status} {code}, which docs/api.md does not document, to {shown}"
                    );
                    prop_assert_eq!(
                        state(&app, activity).await,
                        before,
                        "{} refused {} but something changed",
                        name,
                        shown
                    );
                } else {
                    // Generated input that is valid is allowed to act; it must still be a documented
                    // success (`204`: a password reset, a sign-out; serde also reads a struct from a
                    // JSON array of its fields, so `["eight chars"]` is a valid reset).
                    prop_assert!(
                        matches!(status, 200..=202 | 204),
                        "{name} answered {status} to {shown}"
                    );
                }
                Ok(())
            })
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The refusals docs/api.md documents, as it writes them: `` `400 invalid_input` `` or
/// `` `400 {"error":"invalid_input"}` ``.
fn documented_refusals() -> std::collections::BTreeSet<(u16, String)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"))
        .expect("docs/api.md");
    let mut found = std::collections::BTreeSet::new();
    for piece in text.split('`').skip(1) {
        let Some((status, rest)) = piece.split_once(' ') else {
            continue;
        };
        let Ok(status) = status.parse::<u16>() else {
            continue;
        };
        let rest = rest.strip_prefix("{\"error\":\"").unwrap_or(rest);
        let code: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if (400..600).contains(&status) && !code.is_empty() {
            found.insert((status, code));
        }
    }
    assert!(
        found.contains(&(400, "invalid_input".to_string())) && found.len() >= 20,
        "docs/api.md's refusals not found: {found:?}"
    );
    found
}

/// Users, activities, orders and the sale's stock in Redis.
async fn state(app: &TestApp, activity: i64) -> Value {
    let db: Value = sqlx::query_scalar(
        "SELECT json_build_array((SELECT count(*) FROM users), (SELECT json_agg(a ORDER BY id) FROM activities a), (SELECT count(*) FROM orders))",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    json!([db, app.remaining(activity).await])
}
