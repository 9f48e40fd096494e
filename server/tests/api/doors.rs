//! A hostile crowd at the doors (docs/security.md): sign-in guessing in bursts, a stranger
//! trying to lock an owner out, sign-up floods, captcha and challenge floods, slow CSV readers,
//! retried admin writes, input the database cannot store, and /metrics. The server runs behind
//! one trusted proxy here, so each request says its client address in `X-Forwarded-For`.

use crate::helpers::*;
use futures_util::{stream, StreamExt};
use reqwest::Client;
use serde_json::{json, Value};
use server::infra::config::DoorLimits;
use std::collections::BTreeMap;

const PASSWORD: &str = "correct-horse-battery";

/// Behind one proxy: `X-Forwarded-For` names the client.
async fn behind_a_proxy(tweak: impl FnOnce(&mut server::infra::config::Config)) -> TestApp {
    spawn_app_with(|c| {
        c.trusted_proxies = 1;
        tweak(c);
    })
    .await
}

async fn post_from(
    app: &TestApp,
    address: &str,
    path: &str,
    body: &Value,
) -> (u16, Value, Option<u64>) {
    let resp = Client::new()
        .post(app.url(path))
        .header("x-forwarded-for", address)
        .json(body)
        .send()
        .await
        .unwrap();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let (status, body) = json(resp).await;
    (status, body, retry_after)
}

async fn sign_in_from(
    app: &TestApp,
    address: &str,
    username: &str,
    password: &str,
) -> (u16, Option<u64>) {
    let (status, _, retry_after) = post_from(
        app,
        address,
        "/api/auth/login",
        &json!({"username": username, "password": password}),
    )
    .await;
    (status, retry_after)
}

fn tally(statuses: impl IntoIterator<Item = u16>) -> BTreeMap<u16, usize> {
    let mut t = BTreeMap::new();
    for s in statuses {
        *t.entry(s).or_default() += 1;
    }
    t
}

#[tokio::test]
async fn fifty_concurrent_guesses_verify_at_most_five_and_lock_only_the_guessers_address() {
    let app = behind_a_proxy(|_| {}).await;
    let owner = unique_name("owner");
    assert_eq!(app.register(&owner, PASSWORD).await.status(), 201);
    let guesser = "198.51.100.7";

    // 50 wrong passwords at once: the attempt is taken before the password is verified and one
    // verification per username runs at a time, so at most 5 are verified (401), the rest 429.
    let guesses: Vec<String> = (0..50).map(|i| format!("wrong-guess-{i}")).collect();
    let burst = guesses
        .iter()
        .map(|g| sign_in_from(&app, guesser, &owner, g));
    let answers = futures_util::future::join_all(burst).await;
    let t = tally(answers.iter().map(|(s, _)| *s));
    assert!(t.get(&401).copied().unwrap_or(0) <= 5, "{t:?}");
    assert!(t.get(&401).copied().unwrap_or(0) >= 1, "{t:?}");
    assert_eq!(
        t.get(&401).copied().unwrap_or(0) + t.get(&429).copied().unwrap_or(0),
        50,
        "{t:?}"
    );
    assert!(answers
        .iter()
        .filter(|(s, _)| *s == 429)
        .all(|(_, r)| r.is_some()));

    // Guessing on, one at a time, until locked: never more than 5 verified in all.
    let mut verified = t.get(&401).copied().unwrap_or(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let locked = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "not locked within 30 s of guessing"
        );
        let (status, retry_after) = sign_in_from(&app, guesser, &owner, "yet-another-guess").await;
        match status {
            401 => verified += 1,
            429 if retry_after.unwrap_or(0) > 1 => break retry_after.unwrap(),
            429 => tokio::task::yield_now().await,
            other => panic!("{other}"),
        }
        assert!(verified <= 5, "more than 5 guesses verified");
    };
    assert!(
        locked > 30,
        "locked for the window (60 s here), not a second: {locked}"
    );
    assert_eq!(verified, 5);

    // The right password in a burst from the locked address is refused too.
    let right = (0..10).map(|_| sign_in_from(&app, guesser, &owner, PASSWORD));
    let answers = futures_util::future::join_all(right).await;
    assert!(answers.iter().all(|(s, _)| *s == 429), "{answers:?}");

    // The owner, from their own address, is not locked out.
    assert_eq!(
        sign_in_from(&app, "203.0.113.20", &owner, PASSWORD).await.0,
        200
    );
}

#[tokio::test]
async fn past_the_global_bound_a_username_is_slowed_not_locked() {
    let app = behind_a_proxy(|c| c.login_throttle.max_failures_per_user_everywhere = 10).await;
    let owner = unique_name("owner");
    assert_eq!(app.register(&owner, PASSWORD).await.status(), 201);
    // Ten addresses, one wrong guess each: the username's bound from everywhere is reached.
    for i in 0..10 {
        let (status, _) =
            sign_in_from(&app, &format!("198.51.100.{i}"), &owner, "wrong-guess").await;
        assert_eq!(status, 401);
    }
    // Now guesses from fresh addresses are slowed (one a second for the username), not verified
    // back to back; none of those addresses is locked.
    let mut t = BTreeMap::new();
    for i in 0..10 {
        let (status, _) = sign_in_from(
            &app,
            &format!("198.51.100.{}", 100 + i),
            &owner,
            "wrong-guess",
        )
        .await;
        *t.entry(status).or_insert(0) += 1;
    }
    assert!(t.get(&429).copied().unwrap_or(0) >= 5, "{t:?}");
    // The owner gets in, waiting a second or so at most.
    eventually(10, "the owner signs in past the global bound", || async {
        (sign_in_from(&app, "203.0.113.20", &owner, PASSWORD).await.0 == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_sign_up_flood_from_one_address_is_refused_and_sign_in_goes_on() {
    let app = behind_a_proxy(|c| {
        c.doors = DoorLimits {
            signups_per_address: 5,
            ..c.doors
        };
    })
    .await;
    let member = unique_name("member");
    let (status, _, _) = post_from(
        &app,
        "203.0.113.5",
        "/api/auth/register",
        &json!({"username": member, "password": PASSWORD}),
    )
    .await;
    assert_eq!(status, 201);

    let flood = (0..40).map(|_| {
        let name = unique_name("bot");
        let app = &app;
        async move {
            post_from(
                app,
                "198.51.100.66",
                "/api/auth/register",
                &json!({"username": name, "password": PASSWORD}),
            )
            .await
        }
    });
    let sign_in = sign_in_from(&app, "203.0.113.5", &member, PASSWORD);
    let (answers, signed_in) =
        futures_util::future::join(futures_util::future::join_all(flood), sign_in).await;
    let t = tally(answers.iter().map(|(s, _, _)| *s));
    assert_eq!(t.get(&201).copied(), Some(5), "{t:?}");
    assert_eq!(t.get(&429).copied(), Some(35), "{t:?}");
    assert!(answers
        .iter()
        .filter(|(s, _, _)| *s == 429)
        .all(|(_, b, r)| b["error"] == "rate_limited" && r.is_some_and(|r| r > 60)));
    assert_eq!(signed_in.0, 200, "sign-in during the flood");
    // Another address may still sign up.
    let (status, _, _) = post_from(
        &app,
        "203.0.113.6",
        "/api/auth/register",
        &json!({"username": unique_name("new"), "password": PASSWORD}),
    )
    .await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn the_platforms_sign_up_budget_holds_against_many_addresses() {
    let minute = || chrono::Utc::now().timestamp() / 60;
    // A minute turns at most once in a try of a few seconds: three tries always see one whole.
    for _ in 0..3 {
        // A fresh deployment (its own Redis prefix) each try: its budget is untouched.
        let app = behind_a_proxy(|c| {
            c.doors = DoorLimits {
                signups_per_minute: 3,
                ..c.doors
            };
        })
        .await;
        let started = minute();
        let mut statuses = Vec::new();
        for i in 0..6 {
            let body = json!({"username": unique_name("m"), "password": PASSWORD});
            let address = format!("198.51.100.{i}");
            statuses.push(
                post_from(&app, &address, "/api/auth/register", &body)
                    .await
                    .0,
            );
        }
        if minute() == started {
            assert_eq!(statuses, vec![201, 201, 201, 429, 429, 429]);
            return;
        }
        // The minute turned during the loop (a new budget then): again, on a fresh deployment.
    }
    panic!("three tries in a row each saw a minute turn");
}

/// The statuses of `n` copies of one request, 32 at a time.
async fn flood(n: usize, request: &reqwest::RequestBuilder) -> Vec<u16> {
    stream::iter(0..n)
        .map(|_| async {
            let request = request
                .try_clone()
                .expect("a request without a streamed body");
            request.send().await.unwrap().status().as_u16()
        })
        .buffer_unordered(32)
        .collect()
        .await
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// A flood at a bucket of 20 a minute: its burst of 20 answered, plus the one token it regains
/// every 3 s while the flood lasts (whole tokens only: `took` spans the flood, so it is never
/// shorter than the time the bucket had); every other request `429`.
fn within_the_bucket(t: &BTreeMap<u16, usize>, sent: usize, took: std::time::Duration) {
    let refilled = (took.as_secs_f64() / 3.0).floor() as usize;
    let answered = t.get(&200).copied().unwrap_or(0);
    assert!(
        (20..=20 + refilled).contains(&answered),
        "{t:?} in {took:?}"
    );
    assert_eq!(t.get(&429).copied(), Some(sent - answered), "{t:?}");
}

#[tokio::test]
async fn captcha_and_challenge_floods_from_one_client_are_refused_past_a_bound() {
    let app = behind_a_proxy(|c| {
        c.doors = DoorLimits {
            captchas_per_minute: 20,
            challenges_per_minute: 20,
            ..c.doors
        };
    })
    .await;
    let before = rss_kib();
    let captcha = Client::new()
        .get(app.url("/api/captcha"))
        .header("x-forwarded-for", "198.51.100.80");
    let started = std::time::Instant::now();
    let t = tally(flood(1500, &captcha).await);
    within_the_bucket(&t, 1500, started.elapsed());
    // Another address still gets its captcha.
    let other = Client::new()
        .get(app.url("/api/captcha"))
        .header("x-forwarded-for", "203.0.113.80")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);

    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 10, json!({"bot_check": "proof_of_work"})).await["id"]
        .as_i64()
        .unwrap();
    let shopper = shoppers(&app, 1).await.remove(0);
    let challenge = shopper
        .client
        .get(app.url(&format!("/api/activities/{id}/challenge")));
    let started = std::time::Instant::now();
    let t = tally(flood(5000, &challenge).await);
    within_the_bucket(&t, 5000, started.elapsed());
    // What the doors remember is one entry per client, whatever the flood.
    assert!(
        app.state.doors.tracked() <= 3,
        "{}",
        app.state.doors.tracked()
    );
    println!(
        "RSS of the test process (server, client and all): {} KiB before, {} KiB after 1,500 captchas and 5,000 challenges",
        before,
        rss_kib()
    );
}

#[tokio::test]
async fn a_retried_add_stock_or_create_with_its_key_changes_nothing_more() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let body = live_activity_body(10, json!({}));
    let create = |key: &'static str| {
        merchant
            .post(app.url("/api/admin/activities"))
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    let answers = futures_util::future::join_all((0..5).map(|_| create("create-once"))).await;
    let mut ids = Vec::new();
    for resp in answers {
        let (status, created) = json(resp.unwrap()).await;
        assert_eq!(status, 201, "{created}");
        ids.push(created["id"].as_i64().unwrap());
    }
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    let sales: i64 = sqlx::query_scalar("SELECT count(*) FROM activities")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sales, 1);
    let id = ids[0];

    let add = |key: &'static str, n: i64| {
        merchant
            .post(app.url(&format!("/api/admin/activities/{id}/stock")))
            .header("idempotency-key", key)
            .json(&json!({"add": n}))
            .send()
    };
    let answers = futures_util::future::join_all((0..5).map(|_| add("add-once", 7))).await;
    for resp in answers {
        let (status, level) = json(resp.unwrap()).await;
        assert_eq!(
            (status, level["total_stock"].as_i64()),
            (200, Some(17)),
            "{level}"
        );
    }
    assert_eq!(app.remaining(id).await, 17);
    // A new key adds again; the old key on another route is refused, naming the header.
    let (status, level) = json(add("add-twice", 3).await.unwrap()).await;
    assert_eq!((status, level["total_stock"].as_i64()), (200, Some(20)));
    let resp = create("add-once").await.unwrap();
    let body = assert_error(resp, 400, "invalid_input").await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{body}"
    );
    assert_eq!(app.remaining(id).await, 20);
    let additions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM stock_additions WHERE activity_id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(additions, 2);

    // A day on, the first answers are forgotten (the minute's sweep); today's stay.
    let kept = |age: &'static str| {
        let db = app.db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(&format!(
                "SELECT count(*) FROM admin_requests WHERE created_at {age} now() - interval '1 day'"
            ))
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    let today = kept(">").await;
    assert!(today >= 2, "the keys above are kept");
    sqlx::query(
        "INSERT INTO admin_requests (merchant_id, key, route, created_at)
         SELECT merchant_id, key || '-old', route, now() - interval '25 hours' FROM admin_requests",
    )
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(kept("<").await, today);
    let forgotten = server::domain::admin_requests::forget_old(&app.db)
        .await
        .unwrap();
    assert_eq!(forgotten, today as u64);
    assert_eq!((kept("<").await, kept(">").await), (0, today));
}

#[tokio::test]
async fn input_the_database_cannot_store_is_a_400_naming_the_field_and_changes_nothing() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let cases = [
        ("title", json!({"title": "Phone\u{0}"})),
        ("description", json!({"description": "A\u{0}B"})),
        (
            "image_url",
            json!({"image_url": "https://example.com/\u{0}.png"}),
        ),
        ("title", json!({"title": "Phone \u{202E}gnp.exe"})),
        (
            "price_cents",
            json!({"price_cents": i64::MAX, "seckill_price_cents": 1}),
        ),
    ];
    for (field, fields) in cases {
        let resp = merchant
            .post(app.url("/api/admin/activities"))
            .json(&live_activity_body(10, fields.clone()))
            .send()
            .await
            .unwrap();
        let body = assert_error(resp, 400, "invalid_input").await;
        assert!(
            body["message"].as_str().unwrap().starts_with(field),
            "{fields}: {body}"
        );
    }
    let sales: i64 = sqlx::query_scalar("SELECT count(*) FROM activities")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sales, 0);

    // The operator's user search.
    let operator = client_for(
        insert_shoppers(&app.db, 1).await[0],
        app::api::Role::Operator,
    );
    let resp = operator
        .get(app.url("/api/operator/users?q=a%00b"))
        .send()
        .await
        .unwrap();
    let body = assert_error(resp, 400, "invalid_input").await;
    assert!(body["message"].as_str().unwrap().starts_with('q'), "{body}");

    // A repeated query field and a path that is not UTF-8: the API's JSON error, not text.
    for path in [
        "/api/admin/orders?limit=1&limit=2",
        "/api/admin/orders?activity_id=%FF",
        "/api/activities/%FF%FE/stock",
        "/api/orders/%C3%28",
    ] {
        let resp = merchant.get(app.url(path)).send().await.unwrap();
        assert!(resp.status().is_client_error(), "{path}: {}", resp.status());
        assert_eq!(resp.headers()["content-type"], "application/json", "{path}");
        let (_, body) = json(resp).await;
        assert!(body["error"].is_string(), "{path}: {body}");
    }
}

#[tokio::test]
async fn paying_an_order_whose_amount_overflows_is_a_400_not_a_500() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 5, json!({"per_user_limit": 5})).await["id"]
        .as_i64()
        .unwrap();
    let shopper = shoppers(&app, 1).await.remove(0);
    let path = app.path(&shopper.client, id).await;
    let (status, body) = json(
        app.buy(&shopper.client, id, json!({"path": path, "quantity": 5}))
            .await,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    assert_settled(&app, id, std::slice::from_ref(&token)).await;
    // A price set before today's bound (or by hand): 5 × it overflows 64 bits.
    sqlx::query("UPDATE orders SET unit_price_cents = $1 WHERE token = $2::uuid")
        .bind(i64::MAX / 2)
        .bind(&token)
        .execute(&app.db)
        .await
        .unwrap();
    let resp = shopper
        .client
        .post(app.url(&format!("/api/orders/{token}/pay")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(resp, 400, "invalid_input").await;
    assert_eq!(
        order_status(&app, &token).await.as_deref(),
        Some("confirmed"),
        "nothing changed"
    );
}

#[tokio::test]
async fn metrics_answer_the_operators_token_only() {
    let app = spawn_app().await;
    assert_eq!(app.get("/metrics").await.status(), 401);
    let wrong = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth("not-the-metrics-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(app.metrics().await.contains("# EOF"));
    let off = spawn_app_with(|c| c.metrics_token = None).await;
    assert_eq!(off.get("/metrics").await.status(), 404);
}

#[tokio::test]
async fn forty_exports_held_open_by_clients_that_never_read_leave_the_server_answering() {
    use tokio::io::AsyncWriteExt;
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 10, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let buyer = insert_shoppers(&app.db, 1).await[0];
    // Enough orders that an export is megabytes, far past what the sockets buffer.
    sqlx::query(
        "INSERT INTO orders (token, activity_id, user_id, quantity, unit_price_cents, status, reserved_at)
         SELECT gen_random_uuid(), $1, $2, 1, 100, 'confirmed', now() FROM generate_series(1, 60000)",
    )
    .bind(id)
    .bind(buyer)
    .execute(&app.db)
    .await
    .unwrap();
    let shop: i64 = sqlx::query_scalar("SELECT shop_id FROM activities WHERE id = $1")
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    // 40 merchants of the shop each ask for the export and never read a byte.
    let merchants = insert_shoppers(&app.db, 40).await;
    sqlx::query("UPDATE users SET role = 'merchant', shop_id = $2 WHERE id = ANY($1)")
        .bind(&merchants)
        .bind(shop)
        .execute(&app.db)
        .await
        .unwrap();
    let keys = server::http::session::SessionKeys::new(
        SECRET,
        std::time::Duration::from_secs(3600),
        false,
    );
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut held = Vec::new();
    for m in &merchants {
        let cookie = keys.issue(server::http::session::Holder {
            user_id: *m,
            role: app::api::Role::Merchant,
            shop_id: Some(shop),
            epoch: 0,
            joined: 0,
        });
        let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
        sock.write_all(
            format!(
                "GET /api/admin/orders.csv HTTP/1.1\r\nHost: {addr}\r\nCookie: {}={}\r\n\r\n",
                cookie.name(),
                cookie.value()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        held.push(sock);
    }
    // While they hang: readiness, the storefront and the console answer as usual. Readiness gives
    // each engine a short deadline, which a loaded test machine can miss once; what this guards
    // is that the hanging exports never keep it from answering 200.
    for _ in 0..5 {
        eventually(10, "/readyz 200 while 40 exports hang", || async {
            (app.get("/readyz").await.status() == 200).then_some(())
        })
        .await;
        assert_eq!(app.get("/api/activities").await.status(), 200);
        let list = merchant
            .get(app.url("/api/admin/orders?limit=5"))
            .send()
            .await
            .unwrap();
        assert_eq!(list.status(), 200);
    }
    drop(held);
}

#[tokio::test]
async fn every_signed_in_answer_is_no_store() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 5, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let shopper = shoppers(&app, 1).await.remove(0);
    for (client, path) in [
        (&shopper.client, "/api/me".to_string()),
        (&shopper.client, "/api/orders".to_string()),
        (&shopper.client, format!("/api/activities/{id}/path")),
        (&merchant, "/api/admin/activities".to_string()),
        (&merchant, format!("/api/admin/activities/{id}/stats")),
        (&merchant, "/api/admin/orders".to_string()),
        (&merchant, "/api/admin/merchants".to_string()),
    ] {
        let resp = client.get(app.url(&path)).send().await.unwrap();
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        let cache = resp
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_string());
        assert!(
            cache.as_deref().is_some_and(|c| c.contains("no-store")),
            "{path}: {cache:?}"
        );
    }
}

#[tokio::test]
async fn made_up_activity_ids_are_remembered_in_a_bounded_set() {
    let app = spawn_app().await;
    let shopper = shoppers(&app, 1).await.remove(0);
    let limit = server::buy::activities::MAX_UNKNOWN;
    let statuses: Vec<u16> = stream::iter(0..limit + 500)
        .map(|i| {
            let url = app.url(&format!("/api/activities/{}/path", 1_000_000 + i));
            let client = &shopper.client;
            async move { client.get(url).send().await.unwrap().status().as_u16() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 404));
    let remembered = app.state.activities.unknown_len();
    assert!((1..=limit).contains(&remembered), "{remembered}");
}

#[tokio::test]
async fn a_sign_up_carries_a_proof_of_work_spent_once() {
    let app = behind_a_proxy(|c| {
        c.doors = DoorLimits {
            signup_pow_difficulty: 2_000,
            challenges_per_minute: 5,
            ..c.doors
        };
    })
    .await;
    let register = |pow: Option<String>| {
        let mut body = json!({"username": unique_name("pow"), "password": PASSWORD});
        if let Some(pow) = pow {
            body["pow"] = pow.into();
        }
        let app = &app;
        async move { post_from(app, "203.0.113.30", "/api/auth/register", &body).await }
    };
    let challenge = || async {
        let resp = Client::new()
            .get(app.url("/api/auth/challenge"))
            .header("x-forwarded-for", "203.0.113.30")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["cache-control"], "no-store");
        resp.json::<altcha::Challenge>().await.unwrap()
    };
    // None, garbage, and a buy's solution (bound to a user and a sale) are refused.
    for pow in [None, Some("bm90IGEgcGF5bG9hZA==".to_string())] {
        let (status, body, _) = register(pow).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("captcha_invalid")),
            "{body}"
        );
    }
    let buy_challenge = signing::pow::ProofOfWork::new(SECRET).challenge(
        1,
        1,
        2_000,
        chrono::Utc::now().timestamp(),
    );
    let (status, _, _) = register(signing::pow::solve(buy_challenge)).await;
    assert_eq!(status, 400);
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(users, 0, "nothing created");

    // Solved: the account is made; the same solution again is refused.
    let solved = signing::pow::solve(challenge().await).unwrap();
    let (status, body, _) = register(Some(solved.clone())).await;
    assert_eq!(status, 201, "{body}");
    let (status, body, _) = register(Some(solved)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("captcha_invalid"))
    );

    // Challenges are bounded per address like the sale's.
    let mut refused = 0;
    for _ in 0..10 {
        let resp = Client::new()
            .get(app.url("/api/auth/challenge"))
            .header("x-forwarded-for", "203.0.113.30")
            .send()
            .await
            .unwrap();
        refused += usize::from(resp.status() == 429);
    }
    assert!(refused >= 5, "{refused}");
    // Without the check configured, there is no challenge to fetch.
    let off = spawn_app().await;
    assert_eq!(off.get("/api/auth/challenge").await.status(), 404);
}

/// A client of its own, signed up through the API (its cookie jar holds the session).
#[tokio::test]
async fn a_sale_kept_to_older_accounts_refuses_the_newer_ones_at_every_door() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let (old_name, new_name) = (unique_name("old"), unique_name("new"));
    let (old, _) = register(&app, &old_name, PASSWORD).await;
    let (new, _) = register(&app, &new_name, PASSWORD).await;
    // The older account dates from before the announcement; its next sign-in carries that.
    sqlx::query("UPDATE users SET created_at = now() - interval '1 day' WHERE username = $1")
        .bind(&old_name)
        .execute(&app.db)
        .await
        .unwrap();
    let resp = old
        .post(app.url("/api/auth/login"))
        .json(&json!({"username": old_name, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    let before = chrono::Utc::now() - chrono::Duration::hours(1);
    let rule = json!({"accounts_created_before": before.to_rfc3339(), "per_user_limit": 2});
    let sale = live_activity(&app, &merchant, 10, rule.clone()).await;
    let id = sale["id"].as_i64().unwrap();
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(sale["accounts_created_before"].as_str().unwrap())
            .unwrap()
            .timestamp(),
        before.timestamp(),
        "{sale}"
    );

    // The newer account: no buy path, no buy (whatever it sends), nothing taken.
    let resp = new
        .get(app.url(&format!("/api/activities/{id}/path")))
        .send()
        .await
        .unwrap();
    let body = assert_error(resp, 403, "account_too_new").await;
    assert!(body["accounts_created_before"].is_string(), "{body}");
    let resp = app
        .buy(&new, id, json!({"path": "made-up", "quantity": 1}))
        .await;
    assert_error(resp, 403, "account_too_new").await;
    assert_eq!(app.remaining(id).await, 10);

    // The older one buys as usual.
    let path = app.path(&old, id).await;
    let resp = app
        .buy(&old, id, json!({"path": path, "quantity": 2}))
        .await;
    assert_eq!(resp.status(), 202);
    assert_eq!(app.remaining(id).await, 8);

    // A waiting room keeps no place for the newer account.
    let mut with_room = rule;
    with_room["waiting_room"] = json!(true);
    let room = live_activity(&app, &merchant, 10, with_room).await;
    let room = room["id"].as_i64().unwrap();
    let join = |client: &Client| {
        client
            .post(app.url(&format!("/api/activities/{room}/queue")))
            .json(&json!({}))
            .send()
    };
    assert_error(join(&new).await.unwrap(), 403, "account_too_new").await;
    let line: i64 = redis::cmd("ZCARD")
        .arg(app.redis.keys.queue(room).line())
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    assert_eq!(line, 0, "the newer account took no place");
    assert_eq!(join(&old).await.unwrap().status(), 200);

    // The rule is an instant at most the start.
    let mut late = live_activity_body(10, json!({}));
    late["accounts_created_before"] =
        json!((chrono::Utc::now() + chrono::Duration::hours(2)).to_rfc3339());
    let resp = merchant
        .post(app.url("/api/admin/activities"))
        .json(&late)
        .send()
        .await
        .unwrap();
    let body = assert_error(resp, 400, "invalid_input").await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("accounts_created_before"),
        "{body}"
    );
}
