//! The hostile-input suite: every endpoint of docs/api.md against clients that lie. Each request gets
//! its docs/api.md answer (never a 5xx), and a fingerprint of everything a sale consists of — users,
//! activities, orders, stock additions in PostgreSQL; stock and holders in Redis — is the same
//! afterwards. docs/reliability.md lists what is tried here.

use crate::helpers::*;
use app::api::Role;
use reqwest::{header, Client, Method, Response};
use serde_json::{json, Value};
use server::http::session::SessionKeys;
use signing::Claims;
use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

/// Everything a hostile request must not change.
async fn fingerprint(app: &TestApp, activity: i64) -> Value {
    let db: Value = sqlx::query_scalar(
        "SELECT json_build_object(
            'users', (SELECT json_agg(json_build_array(id, username, role) ORDER BY id) FROM users),
            'activities', (SELECT json_agg(a ORDER BY id) FROM activities a),
            'orders', (SELECT json_agg(json_build_array(token, user_id, status, quantity) ORDER BY token) FROM orders),
            'stock_additions', (SELECT count(*) FROM stock_additions))",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    let holders: std::collections::BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(app.shard_keys(activity).await[0].holders())
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    json!({"db": db, "remaining": app.remaining(activity).await, "holders": holders})
}

/// A sale with one confirmed order, a shopper, another shopper and a merchant.
struct Scene {
    app: TestApp,
    merchant: Client,
    shopper: Shopper,
    other: Shopper,
    activity: i64,
    token: String,
}

async fn scene() -> Scene {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let activity = live_activity(&app, &merchant, 10, json!({"per_user_limit": 2})).await["id"]
        .as_i64()
        .unwrap();
    let mut people = shoppers(&app, 2).await;
    let (other, shopper) = (people.pop().unwrap(), people.pop().unwrap());
    let path = app.path(&shopper.client, activity).await;
    let (status, body) = json(
        app.buy(&shopper.client, activity, json!({"path": path}))
            .await,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    assert_settled(&app, activity, std::slice::from_ref(&token)).await;
    Scene {
        app,
        merchant,
        shopper,
        other,
        activity,
        token,
    }
}

/// Sends a raw body as JSON and checks the answer's status and error code.
async fn expect(
    client: &Client,
    url: &str,
    body: impl Into<reqwest::Body>,
    status: u16,
    code: &str,
    what: &str,
) {
    let resp = client
        .post(url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    expect_answer(resp, status, code, what).await;
}

async fn expect_answer(resp: Response, status: u16, code: &str, what: &str) {
    let got = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: not JSON ({got}): {text}"));
    assert_eq!(
        (got, body["error"].as_str().unwrap_or_default()),
        (status, code),
        "{what}: {body}"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: an error says why"
    );
}

/// Bodies no endpoint accepts: broken JSON, the wrong JSON shape, bytes that are not UTF-8,
/// numbers beyond any type, nesting past the parser's limit.
fn broken_bodies() -> Vec<(String, Vec<u8>)> {
    let mut bodies: Vec<(String, Vec<u8>)> = [
        "{",
        "",
        "[]",
        "null",
        "\"text\"",
        "123",
        "{\"a\":}",
        "{\"a\" 1}",
        "{'a': 1}",
        "\u{feff}{}",
        "{\"x\": 1e999999}",
    ]
    .iter()
    .map(|b| (format!("body {b:?}"), b.as_bytes().to_vec()))
    .collect();
    bodies.push((
        "invalid UTF-8".into(),
        vec![b'{', b'"', 0xff, 0xfe, b'"', b':', b'1', b'}'],
    ));
    bodies.push((
        "nesting 10,000 deep".into(),
        "[".repeat(10_000).into_bytes(),
    ));
    bodies
}

#[tokio::test]
async fn hostile_bodies_on_every_mutating_endpoint_get_their_api_answer_and_change_nothing() {
    let Scene {
        app,
        merchant,
        shopper,
        activity,
        ..
    } = scene().await;
    let before = fingerprint(&app, activity).await;
    let anonymous = Client::new();
    let url = |p: &str| app.url(p);
    let (register, login, create) = (
        url("/api/auth/register"),
        url("/api/auth/login"),
        url("/api/admin/activities"),
    );
    let (buy, stock) = (
        url(&format!("/api/activities/{activity}/buy")),
        url(&format!("/api/admin/activities/{activity}/stock")),
    );

    // Every body-reading endpoint, with a client that gets past its sign-in rule.
    let endpoints: [(&str, &Client, &String); 5] = [
        ("register", &anonymous, &register),
        ("login", &anonymous, &login),
        ("buy", &shopper.client, &buy),
        ("create", &merchant, &create),
        ("add stock", &merchant, &stock),
    ];
    for (name, client, url) in endpoints {
        for (what, body) in broken_bodies() {
            expect(
                client,
                url,
                body,
                400,
                "invalid_input",
                &format!("{name}: {what}"),
            )
            .await;
        }
        let oversized =
            json!({"title": "x".repeat(17 * 1024), "username": "x".repeat(17 * 1024)}).to_string();
        expect(
            client,
            url,
            oversized.clone(),
            413,
            "payload_too_large",
            &format!("{name}: 17 KiB"),
        )
        .await;
        // The same body streamed in chunks with no length announced: cut off at 16 KiB as it
        // is read.
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = oversized
            .into_bytes()
            .chunks(1024)
            .map(|c| Ok(c.to_vec()))
            .collect();
        expect(
            client,
            url,
            reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)),
            413,
            "payload_too_large",
            &format!("{name}: 17 KiB streamed"),
        )
        .await;
        let resp = client
            .post(url.as_str())
            .header(header::CONTENT_TYPE, "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        expect_answer(
            resp,
            415,
            "unsupported_media_type",
            &format!("{name}: text/plain"),
        )
        .await;
    }

    // Wrong types, out-of-range and huge numbers, injection strings, unknown fields.
    let sql = "x'); DROP TABLE users; --";
    let register_cases = [
        json!({"username": sql, "password": "long-enough-1"}),
        json!({"username": "<script>alert(1)</script>", "password": "long-enough-1"}),
        json!({"username": "nul\u{0}byte", "password": "long-enough-1"}),
        json!({"username": 12345, "password": "long-enough-1"}),
        json!({"username": ["ann"], "password": "long-enough-1"}),
        json!({"username": null, "password": "long-enough-1"}),
        json!({"username": "ann_ok", "password": "short"}),
        json!({"username": "ann_ok", "password": "x".repeat(129)}),
        json!({"username": "ann_ok"}),
        json!({"username": "ann_ok", "password": "long-enough-1", "role": "merchant"}),
    ];
    for body in register_cases {
        expect(
            &anonymous,
            &register,
            body.to_string(),
            400,
            "invalid_input",
            &format!("register {body}"),
        )
        .await;
    }
    // A username that cannot exist is bad input; injection in the password is just a wrong password.
    for (user, password) in [
        (sql, sql),
        ("' OR '1'='1", "' OR '1'='1"),
        ("admin'--", "anything-at-all"),
    ] {
        let body = json!({"username": user, "password": password});
        expect(
            &anonymous,
            &login,
            body.to_string(),
            400,
            "invalid_input",
            &format!("login {body}"),
        )
        .await;
    }
    for password in [sql, "' OR '1'='1", "nul\u{0}byte"] {
        let body = json!({"username": "ann_nobody", "password": password});
        expect(
            &anonymous,
            &login,
            body.to_string(),
            401,
            "invalid_credentials",
            &format!("login {body}"),
        )
        .await;
    }

    let path = app.path(&shopper.client, activity).await;
    let buy_cases = [
        (json!({"path": path, "quantity": -1}), "invalid_input"),
        (json!({"path": path, "quantity": 0}), "invalid_input"),
        (json!({"path": path, "quantity": 3}), "invalid_input"),
        (
            json!({"path": path, "quantity": 9_223_372_036_854_775_807_i64}),
            "invalid_input",
        ),
        (json!({"path": path, "quantity": 1e30}), "invalid_input"),
        (json!({"path": path, "quantity": 1.5}), "invalid_input"),
        (json!({"path": path, "quantity": "1"}), "invalid_input"),
        (
            json!({"path": path, "quantity": -9_223_372_036_854_775_808_i64}),
            "invalid_input",
        ),
        (json!({"path": 5}), "invalid_input"),
        (json!({"path": [path]}), "invalid_input"),
        (json!({"quantity": 1}), "invalid_input"),
        (json!({"path": path, "user_id": 1}), "invalid_input"),
        (json!({"path": sql}), "bad_path"),
        (json!({"path": "' OR 1=1 --"}), "bad_path"),
        (json!({"path": "x".repeat(10_000)}), "bad_path"),
        (json!({"path": ""}), "bad_path"),
    ];
    for (body, code) in buy_cases {
        expect(
            &shopper.client,
            &buy,
            body.to_string(),
            400,
            code,
            &format!("buy {body}"),
        )
        .await;
    }

    let valid = json!({
        "title": "Hostile", "description": "", "price_cents": 1000, "seckill_price_cents": 100,
        "starts_at": "2030-01-01T00:00:00Z", "ends_at": "2030-01-02T00:00:00Z", "stock": 5,
    });
    let changes = [
        json!({"title": ""}),
        json!({"title": "x".repeat(121)}),
        json!({"title": 7}),
        json!({"description": "x".repeat(5001)}),
        json!({"price_cents": -1}),
        json!({"price_cents": 1e20}),
        json!({"price_cents": "1000"}),
        json!({"seckill_price_cents": 1001}),
        json!({"seckill_price_cents": -5}),
        json!({"starts_at": "yesterday"}),
        json!({"starts_at": 1_700_000_000}),
        json!({"starts_at": "2030-01-03T00:00:00Z"}),
        json!({"ends_at": "2030-01-01T00:00:00Z"}),
        json!({"stock": 0}),
        json!({"stock": -5}),
        json!({"stock": 10_000_001}),
        json!({"stock": 1e100}),
        json!({"stock": 99_999_999_999_999_999_999_u128.to_string().parse::<f64>().unwrap()}),
        json!({"stock": "5"}),
        json!({"per_user_limit": 0}),
        json!({"per_user_limit": 101}),
        // (these tests allow windows from 1 s; production from 60 s)
        json!({"payment_window_secs": 0}),
        json!({"payment_window_secs": -60}),
        json!({"payment_window_secs": 86_401}),
        json!({"captcha_required": "yes"}),
        json!({"image_url": "javascript:alert(1)"}),
        json!({"merchant_id": 1}),
    ];
    for change in changes {
        let mut body = valid.clone();
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        expect(
            &merchant,
            &create,
            body.to_string(),
            400,
            "invalid_input",
            &format!("create with {change}"),
        )
        .await;
    }
    let mut missing = valid.clone();
    missing.as_object_mut().unwrap().remove("stock");
    expect(
        &merchant,
        &create,
        missing.to_string(),
        400,
        "invalid_input",
        "create without stock",
    )
    .await;

    for add in [
        json!(0),
        json!(-1),
        json!(10_000_001),
        json!("5"),
        json!(5.5),
        json!(1e20),
        json!(null),
        json!(-9_223_372_036_854_775_808_i64),
    ] {
        let body = json!({"add": add});
        expect(
            &merchant,
            &stock,
            body.to_string(),
            400,
            "invalid_input",
            &format!("add stock {body}"),
        )
        .await;
    }
    expect(
        &merchant,
        &stock,
        "{}",
        400,
        "invalid_input",
        "add stock without add",
    )
    .await;

    assert_eq!(
        fingerprint(&app, activity).await,
        before,
        "hostile bodies changed nothing"
    );
}

#[tokio::test]
async fn hostile_paths_and_queries_get_their_api_answer() {
    let Scene {
        app,
        merchant,
        shopper,
        activity,
        ..
    } = scene().await;
    let before = fingerprint(&app, activity).await;
    let ids = [
        "abc",
        "-1",
        "0",
        "1.5",
        "99999999999999999999",
        "1%20OR%201=1",
        "1';DROP%20TABLE%20activities;--",
        "%00",
        // Not UTF-8 once decoded.
        "%FF%FE",
        "%C3%28",
    ];
    for id in ids {
        for (method, path, client) in [
            (
                Method::GET,
                format!("/api/activities/{id}"),
                &shopper.client,
            ),
            (
                Method::GET,
                format!("/api/activities/{id}/stock"),
                &shopper.client,
            ),
            (
                Method::GET,
                format!("/api/activities/{id}/path"),
                &shopper.client,
            ),
            (
                Method::POST,
                format!("/api/activities/{id}/buy"),
                &shopper.client,
            ),
            (
                Method::POST,
                format!("/api/admin/activities/{id}/stock"),
                &merchant,
            ),
            (
                Method::POST,
                format!("/api/admin/activities/{id}/pause"),
                &merchant,
            ),
            (
                Method::POST,
                format!("/api/admin/activities/{id}/resume"),
                &merchant,
            ),
            (
                Method::GET,
                format!("/api/admin/activities/{id}/stats"),
                &merchant,
            ),
            (
                Method::GET,
                format!("/api/admin/activities/{id}"),
                &merchant,
            ),
            (
                Method::GET,
                format!("/api/admin/activities/{id}/stock-additions"),
                &merchant,
            ),
        ] {
            let resp = client
                .request(method.clone(), app.url(&path))
                .json(&json!({"path": "x", "add": 1}))
                .send()
                .await
                .unwrap();
            expect_answer(resp, 400, "invalid_input", &format!("{method} {path}")).await;
        }
    }
    // A well-formed id of no activity.
    for (method, path, client) in [
        (Method::GET, "/api/activities/987654321", &shopper.client),
        (
            Method::POST,
            "/api/admin/activities/987654321/stock",
            &merchant,
        ),
        (
            Method::POST,
            "/api/admin/activities/987654321/pause",
            &merchant,
        ),
        (
            Method::GET,
            "/api/admin/activities/987654321/stats",
            &merchant,
        ),
    ] {
        let resp = client
            .request(method.clone(), app.url(path))
            .json(&json!({"add": 1}))
            .send()
            .await
            .unwrap();
        expect_answer(resp, 404, "not_found", &format!("{method} {path}")).await;
    }
    for token in [
        "not-a-token",
        "..%2F..%2Fetc%2Fpasswd",
        "00000000-0000-0000-0000-00000000000g",
        "'%20OR%20''='",
        "%FF%FE",
    ] {
        let resp = shopper
            .client
            .get(app.url(&format!("/api/orders/{token}")))
            .send()
            .await
            .unwrap();
        expect_answer(resp, 400, "invalid_input", &format!("order {token}")).await;
        let resp = shopper
            .client
            .post(app.url(&format!("/api/orders/{token}/pay")))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        expect_answer(resp, 400, "invalid_input", &format!("pay {token}")).await;
    }
    for query in [
        "activity_id=abc",
        "activity_id=99999999999999999999",
        "limit=-1",
        "limit=99999999999999999999",
        "offset=-5",
        "status=confirmed'%20OR%201=1--",
        "status=%3Cscript%3E",
        // A repeated field, and values that are not UTF-8 once decoded.
        "limit=1&limit=2",
        "status=paid&status=confirmed",
        "activity_id=%FF",
        "status=%C3%28",
    ] {
        let resp = merchant
            .get(app.url(&format!("/api/admin/orders?{query}")))
            .send()
            .await
            .unwrap();
        expect_answer(resp, 400, "invalid_input", &format!("orders ?{query}")).await;
    }
    let resp = merchant
        .get(app.url("/api/admin/orders.csv?activity_id=1%27%20OR%201=1"))
        .send()
        .await
        .unwrap();
    expect_answer(resp, 400, "invalid_input", "csv with an injected id").await;
    assert_eq!(
        fingerprint(&app, activity).await,
        before,
        "hostile paths changed nothing"
    );
}

/// Every endpoint that needs a session, and whether it needs a merchant.
/// Every route that needs a session (all but [`PUBLIC_ROUTES`]), read from the routers, with its
/// ids filled in; `true` for the staff's (merchant or operator), which a shopper gets `403` from.
fn signed_in_endpoints(activity: i64, token: &str) -> Vec<(Method, String, bool)> {
    let routes = api_routes();
    // The reader itself: it finds the routes it must (a parser that found nothing would sweep
    // nothing).
    for known in [
        (Method::POST, "/api/activities/{id}/buy"),
        (Method::POST, "/api/operator/users/{id}/block"),
        (Method::GET, "/api/admin/activities/{id}/stock-additions"),
        (Method::POST, "/api/activities/{id}/queue"),
    ] {
        assert!(
            routes
                .iter()
                .any(|(m, p)| (m, p.as_str()) == (&known.0, known.1)),
            "{known:?} not read from the routers: {routes:?}"
        );
    }
    let signed_in: Vec<(Method, String, bool)> = routes
        .into_iter()
        .filter(|(m, p)| !PUBLIC_ROUTES.contains(&(m.as_str(), p.as_str())))
        .map(|(m, p)| {
            let staff = p.starts_with("/api/admin/") || p.starts_with("/api/operator/");
            let mut path = p
                .replace("{id}", &activity.to_string())
                .replace("{token}", token);
            // The order lists name their sale in the query.
            if path == "/api/admin/orders" || path == "/api/admin/orders.csv" {
                path.push_str(&format!("?activity_id={activity}"));
            }
            (m, path, staff)
        })
        .collect();
    assert!(signed_in.len() >= 30, "{signed_in:?}");
    signed_in
}

#[tokio::test]
async fn missing_forged_and_expired_cookies_get_401_and_shoppers_get_403_on_every_endpoint() {
    let Scene {
        app,
        shopper,
        activity,
        token,
        ..
    } = scene().await;
    let before = fingerprint(&app, activity).await;
    let keys = SessionKeys::new(SECRET, Duration::from_secs(3600), false);
    let now = chrono::Utc::now().timestamp();
    let genuine = keys.sign(&Claims {
        sid: 1,
        shop_id: 0,
        epoch: 0,
        user_id: shopper.id,
        role: Role::Shopper,
        expires_at: now + 3600,
        joined: 0,
        auth_at: 0,
    });
    let (payload, signature) = genuine.rsplit_once('.').unwrap();
    let mut flipped = signature.chars().collect::<Vec<_>>();
    flipped[3] = if flipped[3] == 'A' { 'B' } else { 'A' };
    let cookies = [
        ("no cookie", None),
        ("garbage", Some("garbage".to_string())),
        ("empty", Some(String::new())),
        (
            "promoted to merchant",
            Some(genuine.replacen(".shopper.", ".merchant.", 1)),
        ),
        (
            "another user's id",
            Some(genuine.replacen(
                &format!(".{}.shopper.", shopper.id),
                &format!(".{}.shopper.", shopper.id + 1),
                1,
            )),
        ),
        ("another session id", Some(format!("1{genuine}"))),
        (
            "a flipped signature",
            Some(format!(
                "{payload}.{}",
                flipped.into_iter().collect::<String>()
            )),
        ),
        ("no signature", Some(payload.to_string())),
        (
            "a later expiry",
            Some(genuine.replacen(
                &format!(".{}.", now + 3600),
                &format!(".{}.", now + 999_999),
                1,
            )),
        ),
        (
            "another secret",
            Some(
                SessionKeys::new(
                    b"not-the-server-secret-not-the-server",
                    Duration::from_secs(60),
                    false,
                )
                .sign(&Claims {
                    sid: 1,
                    shop_id: 0,
                    epoch: 0,
                    user_id: shopper.id,
                    role: Role::Merchant,
                    expires_at: now + 3600,
                    joined: 0,
                    auth_at: 0,
                }),
            ),
        ),
        (
            "expired",
            Some(keys.sign(&Claims {
                sid: 1,
                shop_id: 0,
                epoch: 0,
                user_id: shopper.id,
                role: Role::Shopper,
                expires_at: now - 1,
                joined: 0,
                auth_at: 0,
            })),
        ),
    ];
    // Each forgery is one: an edit that did not apply would test the genuine cookie.
    for (what, cookie) in &cookies {
        assert_ne!(
            cookie.as_deref(),
            Some(genuine.as_str()),
            "{what} is the genuine cookie"
        );
    }
    for (method, path, merchant_only) in signed_in_endpoints(activity, &token) {
        for (what, cookie) in &cookies {
            let mut req = Client::new()
                .request(method.clone(), app.url(&path))
                .json(&json!({"path": "x", "add": 1}));
            if let Some(value) = cookie {
                req = req.header(header::COOKIE, format!("sid={value}"));
            }
            expect_answer(
                req.send().await.unwrap(),
                401,
                "unauthenticated",
                &format!("{method} {path} with {what}"),
            )
            .await;
        }
        if merchant_only {
            let resp = shopper
                .client
                .request(method.clone(), app.url(&path))
                .json(&json!({"add": 1}))
                .send()
                .await
                .unwrap();
            expect_answer(
                resp,
                403,
                "forbidden",
                &format!("{method} {path} as a shopper"),
            )
            .await;
        }
    }
    assert_eq!(
        fingerprint(&app, activity).await,
        before,
        "no forged session changed anything"
    );
}

#[tokio::test]
async fn another_users_order_and_buy_link_are_not_theirs() {
    let Scene {
        app,
        shopper,
        other,
        activity,
        token,
        ..
    } = scene().await;
    let before = fingerprint(&app, activity).await;
    let resp = other
        .client
        .get(app.url(&format!("/api/orders/{token}")))
        .send()
        .await
        .unwrap();
    expect_answer(resp, 404, "not_found", "reading another's order").await;
    let resp = other
        .client
        .post(app.url(&format!("/api/orders/{token}/pay")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    expect_answer(resp, 404, "not_found", "paying another's order").await;
    let (_, listed) = json(
        other
            .client
            .get(app.url("/api/orders"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        listed["orders"],
        json!([]),
        "another's orders are not listed"
    );
    let path = app.path(&shopper.client, activity).await;
    let resp = app
        .buy(&other.client, activity, json!({"path": path}))
        .await;
    expect_answer(resp, 400, "bad_path", "buying with another's link").await;
    assert_eq!(fingerprint(&app, activity).await, before, "nothing changed");
}

#[tokio::test]
async fn requests_from_another_origin_are_refused_and_change_nothing() {
    let Scene {
        app,
        merchant,
        shopper,
        activity,
        ..
    } = scene().await;
    let before = fingerprint(&app, activity).await;
    let buy = app.url(&format!("/api/activities/{activity}/buy"));
    let path = app.path(&shopper.client, activity).await;
    let hostile: [(&str, &str); 4] = [
        ("origin", "https://evil.example"),
        ("origin", "null"),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
    ];
    for (name, value) in hostile {
        let resp = shopper
            .client
            .post(&buy)
            .header(name, value)
            .json(&json!({"path": path}))
            .send()
            .await
            .unwrap();
        expect_answer(
            resp,
            403,
            "cross_origin",
            &format!("buy with {name}: {value}"),
        )
        .await;
        // The HTML form a hostile page can send without a preflight.
        let resp = shopper
            .client
            .post(&buy)
            .header(name, value)
            .header(header::CONTENT_TYPE, "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        expect_answer(
            resp,
            403,
            "cross_origin",
            &format!("form post with {name}: {value}"),
        )
        .await;
        let resp = merchant
            .post(app.url(&format!("/api/admin/activities/{activity}/pause")))
            .header(name, value)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        expect_answer(
            resp,
            403,
            "cross_origin",
            &format!("pause with {name}: {value}"),
        )
        .await;
    }
    let resp = Client::new()
        .post(app.url("/api/auth/logout"))
        .header("origin", "https://evil.example")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    expect_answer(resp, 403, "cross_origin", "logout from another origin").await;
    assert_eq!(fingerprint(&app, activity).await, before, "nothing changed");

    // The site itself, as a browser sends it.
    let resp = shopper
        .client
        .post(&buy)
        .header("origin", &app.base)
        .header("sec-fetch-site", "same-origin")
        .json(&json!({"path": path}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202, "the site's own origin buys");
}

#[tokio::test]
async fn a_title_with_markup_renders_as_text() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let title = r#"</script><script>alert("t")</script><img src=x onerror=alert(1)>"#;
    let description = r#"<b>bold</b><iframe src="https://evil.example"></iframe>"#;
    let activity = live_activity(
        &app,
        &merchant,
        5,
        json!({"title": title, "description": description}),
    )
    .await;
    assert_eq!(activity["title"], title, "stored and answered as given");
    for page in [format!("/activities/{}", activity["id"]), "/".to_string()] {
        let html = app.get(&page).await.text().await.unwrap();
        assert!(
            html.contains("&lt;/script&gt;&lt;script&gt;alert"),
            "{page}: the title shows as text"
        );
        for raw in ["<script>alert", "<img src=x", "<iframe", "<b>bold"] {
            assert!(
                !html.contains(raw),
                "{page}: {raw:?} reached the page as markup"
            );
        }
    }
}

/// Reads from a raw connection until the server closes it or answers; fails after `secs`.
fn read_until_closed(stream: &mut TcpStream, secs: u64) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(secs)))
        .unwrap();
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server kept the connection open for {secs} s: {e}"),
    }
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn slow_clients_are_cut_off() {
    let app = spawn_app_with(|c| {
        c.header_read_timeout = Duration::from_secs(1);
        c.request_timeout = Duration::from_secs(1);
    })
    .await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let users_before = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM users")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let (head, body) = tokio::task::spawn_blocking(move || {
        // Headers trickled and never finished: the connection is closed.
        let mut slow_head = TcpStream::connect(&addr).unwrap();
        slow_head.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
        let head = read_until_closed(&mut slow_head, 15);
        // A body announced and never sent: 408, and the registration does not happen.
        let mut slow_body = TcpStream::connect(&addr).unwrap();
        slow_body
            .write_all(b"POST /api/auth/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"username\":")
            .unwrap();
        (head, read_until_closed(&mut slow_body, 15))
    })
    .await
    .unwrap();
    assert!(
        !head.contains("200 OK"),
        "a request whose head never ended was not served: {head}"
    );
    assert!(
        body.starts_with("HTTP/1.1 408"),
        "a body that never came gets 408: {body}"
    );
    let users_after = sqlx::query_scalar::<_, i64>("SELECT count(*) FROM users")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(users_after, users_before);
    assert_eq!(
        app.get("/healthz").await.status().as_u16(),
        200,
        "and the server serves on"
    );
}

#[tokio::test]
async fn a_merchant_of_another_shop_gets_404_for_every_admin_endpoint_of_this_shops_sale() {
    let Scene {
        app,
        merchant,
        activity,
        token,
        ..
    } = scene().await;
    let stranger = merchant_of(&app, &unique_name("Other shop")).await;
    let before = fingerprint(&app, activity).await;
    let audit_rows = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM audit_log")
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    let audited = audit_rows().await;
    let names_the_sale = |path: &str| {
        path.contains(&format!("/{activity}/"))
            || path.ends_with(&format!("/{activity}"))
            || path.contains(&format!("={activity}"))
    };
    let mut tried = 0;
    for (method, path, merchant_only) in signed_in_endpoints(activity, &token) {
        // A merchant's routes that name this sale (the operator's `{id}` is an account's).
        if !merchant_only || !path.starts_with("/api/admin/") || !names_the_sale(&path) {
            continue;
        }
        tried += 1;
        let resp = stranger
            .request(method.clone(), app.url(&path))
            .json(&json!({"add": 1}))
            .send()
            .await
            .unwrap();
        expect_answer(
            resp,
            404,
            "not_found",
            &format!("{method} {path} of another shop"),
        )
        .await;
        // The same request for a sale that does not exist answers the same: no existence leak.
        let resp = stranger
            .request(
                method.clone(),
                app.url(
                    &path
                        .replace(&format!("/{activity}"), "/987654")
                        .replace(&format!("={activity}"), "=987654"),
                ),
            )
            .json(&json!({"add": 1}))
            .send()
            .await
            .unwrap();
        expect_answer(
            resp,
            404,
            "not_found",
            &format!("{method} {path} of no sale"),
        )
        .await;
    }
    assert_eq!(tried, 12, "every admin endpoint that names a sale");

    // The lists and exports of the stranger's shop hold nothing of this one.
    let (_, list) = json(
        stranger
            .get(app.url("/api/admin/activities"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(list["activities"], json!([]), "{list}");
    let (_, orders) = json(
        stranger
            .get(app.url("/api/admin/orders"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (orders["total"].as_i64(), &orders["orders"]),
        (Some(0), &json!([]))
    );
    let csv = stranger
        .get(app.url("/api/admin/orders.csv"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(csv.lines().count(), 1, "the header only: {csv}");
    let (_, merchants) = json(
        stranger
            .get(app.url("/api/admin/merchants"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        merchants["merchants"].as_array().unwrap().len(),
        1,
        "itself only: {merchants}"
    );
    let (_, audit) = json(
        stranger
            .get(app.url("/api/admin/audit"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| !e["target"]
                .as_str()
                .unwrap()
                .contains(&format!("#{activity}"))),
        "{audit}"
    );

    assert_eq!(
        fingerprint(&app, activity).await,
        before,
        "another shop changed nothing"
    );
    // The stranger's export of its own (empty) shop is audited; nothing else was.
    assert_eq!(audit_rows().await, audited + 1);
    // The sale's own shop still sees it.
    let resp = merchant
        .get(app.url(&format!("/api/admin/activities/{activity}/stats")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}
