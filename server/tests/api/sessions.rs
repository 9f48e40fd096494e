//! Sessions that end before they expire (sign out, sign out everywhere, a password change, a
//! block), on every instance; the operator's shops, merchants, resets and blocks; new passwords
//! checked against the common ones.

use crate::helpers::*;
use app::api::Role;
use reqwest::{header, Client};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const PASSWORD: &str = "long-enough-1";

/// The `sid` value a response set.
async fn me_with(app: &TestApp, sid: &str) -> u16 {
    Client::new()
        .get(app.url("/api/me"))
        .header(header::COOKIE, format!("sid={sid}"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Waits (at most `secs`) until `sid` answers `401` on `app`, and says how long that took.
async fn ended_within(app: &TestApp, sid: &str, secs: u64, what: &str) -> Duration {
    let started = Instant::now();
    eventually(secs, what, || async {
        (me_with(app, sid).await == 401).then_some(())
    })
    .await;
    started.elapsed()
}

/// A new user signed in through the API (its own cookie jar) and the `sid` value it holds.
async fn signed_up(app: &TestApp, name: &str) -> (Client, String, String) {
    let username = unique_name(name);
    let (client, sid) = register(app, &username, PASSWORD).await;
    (client, username, sid)
}

async fn sign_in(app: &TestApp, username: &str, password: &str) -> (Client, reqwest::Response) {
    let client = Client::builder().cookie_store(true).build().unwrap();
    let resp = client
        .post(app.url("/api/auth/login"))
        .json(&json!({"username": username, "password": password}))
        .send()
        .await
        .unwrap();
    (client, resp)
}

/// The operator, signed in through the API.
/// A new operator, signed in through the form (a session of its own, as a person's).
async fn signed_in_operator(app: &TestApp) -> Client {
    let (_, name) = operator_account(app).await;
    let (client, resp) = sign_in(app, &name, OPERATOR_PASSWORD).await;
    assert_eq!(resp.status().as_u16(), 200);
    client
}

/// Instances that reload their sessions only every ten minutes, far past every check here: what
/// ends a session on another instance within the check is the broadcast alone.
fn broadcast_only(config: &mut server::infra::config::Config) {
    config.session_reload = Duration::from_secs(600);
}

#[tokio::test]
async fn a_cookie_copied_before_sign_out_is_refused_after_it_on_every_instance() {
    let app = spawn_app_with(broadcast_only).await;
    let other = spawn_instance(&app.config).await;
    let (client, _, sid) = signed_up(&app, "copy").await;
    assert_eq!(me_with(&app, &sid).await, 200);
    assert_eq!(me_with(&other, &sid).await, 200);

    let resp = client
        .post(app.url("/api/auth/logout"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    assert!(set_cookie(&resp).unwrap().contains("Max-Age=0"));
    assert_eq!(
        me_with(&app, &sid).await,
        401,
        "ended where it signed out, at once"
    );
    let took = ended_within(
        &other,
        &sid,
        1,
        "the other instance refuses the copied cookie",
    )
    .await;
    eprintln!("sign-out reached the other instance in {took:?}");

    // A third instance started afterwards knows it from the database.
    let late = spawn_instance(&app.config).await;
    assert_eq!(me_with(&late, &sid).await, 401);
    // Buying with it is refused too.
    assert_error(
        Client::new()
            .get(other.url("/api/activities/1/path"))
            .header(header::COOKIE, format!("sid={sid}"))
            .send()
            .await
            .unwrap(),
        401,
        "unauthenticated",
    )
    .await;
}

#[tokio::test]
async fn signing_out_everywhere_ends_every_session_of_the_user_only() {
    let app = spawn_app_with(broadcast_only).await;
    let other = spawn_instance(&app.config).await;
    let (first, username, first_sid) = signed_up(&app, "every").await;
    let (_, resp) = sign_in(&other, &username, PASSWORD).await;
    let second_sid = sid_of(&resp);
    let (_, _, bystander) = signed_up(&app, "bystander").await;
    for sid in [&first_sid, &second_sid, &bystander] {
        assert_eq!(me_with(&other, sid).await, 200);
    }

    let resp = first
        .post(app.url("/api/auth/logout-everywhere"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    for instance in [&app, &other] {
        for sid in [&first_sid, &second_sid] {
            ended_within(instance, sid, 1, "every session of the user ends").await;
        }
    }
    assert_eq!(
        me_with(&app, &bystander).await,
        200,
        "another user's session goes on"
    );
    // An instance started afterwards knows the raised epoch from the database, at once.
    let late = spawn_instance(&app.config).await;
    assert_eq!(me_with(&late, &first_sid).await, 401);
    assert_eq!(me_with(&late, &second_sid).await, 401);
    assert_eq!(me_with(&late, &bystander).await, 200);
    // Signing in again starts a new session that works.
    let (again, resp) = sign_in(&other, &username, PASSWORD).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        again
            .get(app.url("/api/me"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
}

#[tokio::test]
async fn a_password_change_ends_the_other_sessions_and_refuses_common_passwords() {
    let app = spawn_app().await;
    let (this, username, this_sid) = signed_up(&app, "change").await;
    let (_, resp) = sign_in(&app, &username, PASSWORD).await;
    let elsewhere = sid_of(&resp);

    let change = |current: &str, new: &str| {
        this.post(app.url("/api/auth/password"))
            .json(&json!({"current_password": current, "new_password": new}))
            .send()
    };
    let body = assert_error(
        change(PASSWORD, "password123").await.unwrap(),
        400,
        "invalid_input",
    )
    .await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("new_password"),
        "{body}"
    );
    let body = assert_error(
        change("not-the-password", "a-new-long-secret-7")
            .await
            .unwrap(),
        400,
        "invalid_input",
    )
    .await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("current_password"),
        "{body}"
    );
    assert_eq!(
        me_with(&app, &elsewhere).await,
        200,
        "refused changes change nothing"
    );

    let resp = change(PASSWORD, "a-new-long-secret-7").await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let renewed = sid_of(&resp);
    assert_eq!(
        me_with(&app, &elsewhere).await,
        401,
        "the other session ended"
    );
    assert_eq!(
        me_with(&app, &this_sid).await,
        401,
        "the cookie before the change ended too"
    );
    assert_eq!(
        me_with(&app, &renewed).await,
        200,
        "this session goes on with its new cookie"
    );
    assert_error(
        app.login(&username, PASSWORD).await,
        401,
        "invalid_credentials",
    )
    .await;
    assert_eq!(
        app.login(&username, "a-new-long-secret-7")
            .await
            .status()
            .as_u16(),
        200
    );

    // Wrong current passwords are throttled like sign-ins (5 per user per window in tests).
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(
            change("wrong-password-x", "another-long-secret-8")
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
}

#[tokio::test]
async fn registering_with_a_common_or_guessable_password_is_refused() {
    let app = spawn_app().await;
    for weak in ["password1", "qwerty123", "iloveyou", "1234567890"] {
        let name = unique_name("weak");
        let body = assert_error(app.register(&name, weak).await, 400, "invalid_input").await;
        assert!(
            body["message"].as_str().unwrap().starts_with("password"),
            "{weak}: {body}"
        );
        let exists: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users WHERE username = $1)")
                .bind(&name)
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert!(!exists, "{weak}: nothing created");
    }
    let name = unique_name("ann");
    let body = assert_error(app.register(&name, &name).await, 400, "invalid_input").await;
    assert!(
        body["message"].as_str().unwrap().contains("password"),
        "{body}"
    );
}

#[tokio::test]
async fn a_blocked_user_is_refused_within_a_second_everywhere_and_cannot_sign_in() {
    let app = spawn_app_with(broadcast_only).await;
    let other = spawn_instance(&app.config).await;
    let operator = signed_in_operator(&app).await;
    let merchant = merchant(&app).await;
    let activity = live_activity(&app, &merchant, 10, json!({"per_user_limit": 5})).await["id"]
        .as_i64()
        .unwrap();
    let (shopper, username, _) = signed_up(&app, "blockme").await;
    let id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
        .bind(&username)
        .fetch_one(&app.db)
        .await
        .unwrap();
    let path = other.path(&shopper, activity).await;
    assert_eq!(
        other
            .buy(&shopper, activity, json!({"path": path}))
            .await
            .status()
            .as_u16(),
        202
    );

    let resp = operator
        .post(app.url(&format!("/api/operator/users/{id}/block")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, body) = json(resp).await;
    assert_eq!(
        (status, body["blocked"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    let blocked_at = Instant::now();
    let remaining = other.remaining(activity).await;
    eventually(
        1,
        "the blocked shopper's next buy is refused on the other instance",
        || async {
            let status = other
                .buy(&shopper, activity, json!({"path": path}))
                .await
                .status()
                .as_u16();
            assert!(status == 202 || status == 401, "{status}");
            (status == 401).then_some(())
        },
    )
    .await;
    eprintln!(
        "a block reached the other instance's buy path in {:?}",
        blocked_at.elapsed()
    );
    let remaining_after = other.remaining(activity).await;
    assert!(
        remaining - remaining_after <= 1,
        "at most a buy in flight got through"
    );

    assert_error(app.login(&username, PASSWORD).await, 403, "account_blocked").await;
    assert_error(
        app.login(&username, "wrong-password-x").await,
        401,
        "invalid_credentials",
    )
    .await;
    let resp = operator
        .post(app.url(&format!("/api/operator/users/{id}/unblock")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(app.login(&username, PASSWORD).await.status().as_u16(), 200);
}

#[tokio::test]
async fn an_operator_creates_a_shop_and_a_merchant_who_signs_in_and_sells() {
    let app = spawn_app().await;
    let operator = signed_in_operator(&app).await;
    let shop_name = unique_name("Corner shop");
    let resp = operator
        .post(app.url("/api/operator/shops"))
        .json(&json!({"name": shop_name}))
        .send()
        .await
        .unwrap();
    let (status, shop) = json(resp).await;
    assert_eq!(status, 201, "{shop}");
    let shop_id = shop["id"].as_i64().unwrap();
    let again = operator
        .post(app.url("/api/operator/shops"))
        .json(&json!({"name": shop_name.to_uppercase()}))
        .send()
        .await
        .unwrap();
    assert_error(again, 409, "shop_taken").await;

    let merchant_name = unique_name("corner");
    let create = |password: &str| {
        operator
            .post(app.url(&format!("/api/operator/shops/{shop_id}/merchants")))
            .json(&json!({"username": merchant_name, "password": password}))
            .send()
    };
    assert_error(create("12345678").await.unwrap(), 400, "invalid_input").await;
    let (status, user) = json(create("corner-shop-secret-4").await.unwrap()).await;
    assert_eq!(status, 201, "{user}");
    assert_eq!(user["role"], "merchant");
    assert_eq!(user["shop"]["id"], shop_id);

    let (merchant, resp) = sign_in(&app, &merchant_name, "corner-shop-secret-4").await;
    let (status, me) = json(resp).await;
    assert_eq!(
        (status, &me["shop"]["name"]),
        (200, &Value::from(shop_name.clone()))
    );
    let sale = live_activity(&app, &merchant, 3, json!({"title": "Corner sale"})).await;
    let sale_id = sale["id"].as_i64().unwrap();
    let (_, list) = json(
        merchant
            .get(app.url("/api/admin/activities"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let ids: Vec<i64> = list["activities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![sale_id]);

    // The operator's audit log has the three actions, with who did them.
    let (status, log) = json(
        operator
            .get(app.url("/api/operator/audit"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    let actions: Vec<(String, String)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["actor"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for action in ["shop.create", "merchant.create", "activity.create"] {
        assert!(
            actions.iter().any(|(a, _)| a == action),
            "{action} in {actions:?}"
        );
    }
    assert!(
        actions
            .iter()
            .any(|(a, who)| a == "activity.create" && who == &merchant_name),
        "{actions:?}"
    );
    // The merchant's log shows its shop only.
    let (_, own) = json(
        merchant
            .get(app.url("/api/admin/audit"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let entries = own["entries"].as_array().unwrap();
    assert!(
        !entries.is_empty(),
        "the merchant's own actions are logged: {own}"
    );
    assert!(entries.iter().all(|e| e["shop_id"] == shop_id), "{own}");

    // Merchants, shoppers and visitors do not reach the operator's API.
    let shopper = shoppers(&app, 1).await.pop().unwrap();
    for (client, status, code) in [
        (&merchant, 403, "forbidden"),
        (&shopper.client, 403, "forbidden"),
        (&Client::new(), 401, "unauthenticated"),
    ] {
        for path in [
            "/api/operator/shops",
            "/api/operator/users",
            "/api/operator/audit",
        ] {
            assert_error(
                client.get(app.url(path)).send().await.unwrap(),
                status,
                code,
            )
            .await;
        }
        let resp = client
            .post(app.url("/api/operator/shops"))
            .json(&json!({"name": "Sneaky"}))
            .send()
            .await
            .unwrap();
        assert_error(resp, status, code).await;
    }

    // A reset ends the merchant's sessions; the new password works.
    let merchant_id = user["id"].as_i64().unwrap();
    let resp = operator
        .post(app.url(&format!("/api/operator/users/{merchant_id}/password")))
        .json(&json!({"new_password": "reset-by-the-operator-5"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    assert_error(
        merchant
            .get(app.url("/api/admin/activities"))
            .send()
            .await
            .unwrap(),
        401,
        "unauthenticated",
    )
    .await;
    assert_eq!(
        app.login(&merchant_name, "reset-by-the-operator-5")
            .await
            .status()
            .as_u16(),
        200
    );
    let (_, found) = json(
        operator
            .get(app.url(&format!("/api/operator/users?q={}", &merchant_name[..6])))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        found["users"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["id"] == merchant_id),
        "{found}"
    );
}

#[tokio::test]
async fn a_sign_out_or_epoch_whose_broadcast_was_lost_is_honoured_within_the_reload_period() {
    let app = spawn_app().await;
    let other = spawn_instance(&app.config).await;
    let (_, username, sid) = signed_up(&app, "lost").await;
    let (_, _, second) = signed_up(&app, "lost2").await;
    assert_eq!(me_with(&other, &sid).await, 200);
    assert_eq!(me_with(&other, &second).await, 200);

    // Signed out in the database, as `end_session` writes it, but never broadcast.
    let mut parts = sid.split('.');
    let hex = parts.next().unwrap().to_string();
    let expires: i64 = sid.split('.').nth(5).unwrap().parse().unwrap();
    let user_id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
        .bind(&username)
        .fetch_one(&app.db)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO revoked_sessions (sid, user_id, expires_at) VALUES ($1, $2, to_timestamp($3))",
    )
    .bind(&hex)
    .bind(user_id)
    .bind(expires as f64)
    .execute(&app.db)
    .await
    .unwrap();
    // The second user's every session ended (a block's epoch), never broadcast either.
    sqlx::query(
        "UPDATE users SET session_epoch = session_epoch + 1, session_epoch_at = clock_timestamp()
         WHERE username <> $1 AND role = 'shopper'",
    )
    .bind(&username)
    .execute(&app.db)
    .await
    .unwrap();

    // The reload period is 1 s here (10 s by default; the setting refuses more than 30 s:
    // `infra::config::tests::a_session_reload_period_past_thirty_seconds_is_refused`): honoured well within 10 s.
    assert_eq!(app.config.session_reload, Duration::from_secs(1));
    for instance in [&app, &other] {
        ended_within(instance, &sid, 10, "the lost sign-out honoured on reload").await;
        ended_within(instance, &second, 10, "the lost epoch honoured on reload").await;
    }
}

#[tokio::test]
async fn an_operator_whose_sign_in_is_old_confirms_the_password_before_a_reset_or_a_block() {
    let app = spawn_app().await;
    let (op_id, _) = operator_account(&app).await;
    let (_, target, _) = signed_up(&app, "target").await;
    let target_id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
        .bind(&target)
        .fetch_one(&app.db)
        .await
        .unwrap();
    // A session whose password was checked eleven minutes ago (a console left open).
    let keys = server::http::session::SessionKeys::new(SECRET, Duration::from_secs(3600), false);
    let now = chrono::Utc::now().timestamp();
    let stale = keys.sign(&signing::Claims {
        sid: signing::new_session_id(),
        user_id: op_id,
        role: Role::Operator,
        shop_id: 0,
        epoch: 0,
        expires_at: now + 3600,
        joined: 0,
        auth_at: now - 11 * 60,
    });
    let jar = std::sync::Arc::new(reqwest::cookie::Jar::default());
    jar.add_cookie_str(&format!("sid={stale}"), &app.url("/").parse().unwrap());
    let operator = Client::builder()
        .cookie_provider(jar.clone())
        .build()
        .unwrap();
    let reset = || {
        operator
            .post(app.url(&format!("/api/operator/users/{target_id}/password")))
            .json(&json!({"new_password": "reset-by-the-operator-5"}))
            .send()
    };
    let block = || {
        operator
            .post(app.url(&format!("/api/operator/users/{target_id}/block")))
            .json(&json!({}))
            .send()
    };
    assert_error(reset().await.unwrap(), 403, "reauthentication_required").await;
    assert_error(block().await.unwrap(), 403, "reauthentication_required").await;
    // Nothing changed: the target still signs in with the old password.
    assert_eq!(app.login(&target, PASSWORD).await.status().as_u16(), 200);
    // The session itself still reads the console.
    assert_eq!(
        operator
            .get(app.url("/api/operator/shops"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    // A wrong password confirms nothing.
    let confirm = |password: &'static str| {
        operator
            .post(app.url("/api/auth/confirm"))
            .json(&json!({"password": password}))
            .send()
    };
    let body = assert_error(
        confirm("not-the-password").await.unwrap(),
        400,
        "invalid_input",
    )
    .await;
    assert!(
        body["message"].as_str().unwrap().starts_with("password"),
        "{body}"
    );
    assert_error(block().await.unwrap(), 403, "reauthentication_required").await;

    // The right one: a new session (the old cookie ended), and the actions go through.
    let resp = confirm(OPERATOR_PASSWORD).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        me_with(&app, &stale).await,
        401,
        "the confirmed session replaced the old one"
    );
    assert_eq!(block().await.unwrap().status(), 200);
    assert_eq!(reset().await.unwrap().status().as_u16(), 204);
    assert_eq!(
        app.login(&target, "reset-by-the-operator-5")
            .await
            .status()
            .as_u16(),
        403,
        "blocked, with the new password"
    );
}
