use crate::helpers::*;
use app::api::Role;
use reqwest::Client;
use serde_json::json;
use server::http::session::{Holder, SessionKeys};
use signing::Claims;
use std::time::Duration;

const PASSWORD: &str = "correct-horse-battery";

#[tokio::test]
async fn register_creates_a_shopper_and_signs_them_in() {
    let app = spawn_app().await;
    let name = unique_name("ann");
    let resp = app.register(&name, PASSWORD).await;
    let cookie = set_cookie(&resp).expect("register sets sid");
    let (status, user) = json(resp).await;
    assert_eq!(status, 201, "{user}");
    assert_eq!(
        (user["username"].as_str(), user["role"].as_str()),
        (Some(name.as_str()), Some("shopper"))
    );
    assert!(user["id"].as_i64().is_some());
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age="] {
        assert!(cookie.contains(attr), "{attr} missing in {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "Secure only when configured: {cookie}"
    );

    let (status, me) = json(app.get("/api/me").await).await;
    assert_eq!(status, 200);
    assert_eq!(me, user);
}

#[tokio::test]
async fn passwords_are_stored_as_argon2id_hashes_at_owasp_parameters() {
    let app = spawn_app().await;
    let name = unique_name("hash");
    assert_eq!(app.register(&name, PASSWORD).await.status().as_u16(), 201);
    let stored: String = sqlx::query_scalar("SELECT password_hash FROM users WHERE username = $1")
        .bind(&name)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(
        stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{stored}"
    );
    assert!(!stored.contains(PASSWORD));
}

#[tokio::test]
async fn over_https_the_cookie_is_a_secure_host_cookie_and_hsts_is_sent() {
    let app = spawn_app_with(|c| c.cookie_secure = true).await;
    let resp = app.register(&unique_name("sec"), PASSWORD).await;
    assert_eq!(
        resp.headers()["strict-transport-security"],
        "max-age=31536000; includeSubDomains"
    );
    let cookie = set_cookie(&resp).unwrap();
    assert!(cookie.starts_with("__Host-sid="), "{cookie}");
    assert!(
        cookie.contains("Secure") && cookie.contains("Path=/"),
        "{cookie}"
    );
    assert!(!cookie.contains("Domain"), "{cookie}");
    // The cookie signs the client in (a plain `sid` cookie would not be read).
    let value = cookie.split(';').next().unwrap().to_string();
    let me = Client::new()
        .get(app.url("/api/me"))
        .header(reqwest::header::COOKIE, &value)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);
    let plain = value.replacen("__Host-sid=", "sid=", 1);
    let me = Client::new()
        .get(app.url("/api/me"))
        .header(reqwest::header::COOKIE, plain)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 401);
    // Plain HTTP (`make run` on loopback): no HSTS.
    let plain_app = spawn_app().await;
    let resp = plain_app.register(&unique_name("pl"), PASSWORD).await;
    assert!(resp.headers().get("strict-transport-security").is_none());
    assert!(set_cookie(&resp).unwrap().starts_with("sid="));
}

#[tokio::test]
async fn an_operators_session_lasts_hours_not_days() {
    let keys = SessionKeys::new(SECRET, Duration::from_secs(7 * 24 * 3600), true);
    for (role, most) in [(Role::Operator, 4 * 3600), (Role::Shopper, 7 * 24 * 3600)] {
        let cookie = keys.issue(Holder {
            user_id: 1,
            role,
            shop_id: None,
            epoch: 0,
            joined: 0,
        });
        assert_eq!(
            cookie.max_age().map(|d| d.whole_seconds()),
            Some(most),
            "{role:?}"
        );
    }
}

#[tokio::test]
async fn a_taken_username_gets_409_whatever_its_case() {
    let app = spawn_app().await;
    let name = unique_name("dup");
    assert_eq!(app.register(&name, PASSWORD).await.status().as_u16(), 201);
    assert_error(
        app.register(&name, "another-password").await,
        409,
        "username_taken",
    )
    .await;
    assert_error(
        app.register(&name.to_uppercase(), "another-password").await,
        409,
        "username_taken",
    )
    .await;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

#[tokio::test]
async fn registration_validates_username_and_password_naming_the_field() {
    let app = spawn_app().await;
    for (username, password, field) in [
        ("ab", PASSWORD, "username"),
        ("x".repeat(33).as_str(), PASSWORD, "username"),
        ("ann smith", PASSWORD, "username"),
        ("<script>x", PASSWORD, "username"),
        ("ann_short", "1234567", "password"),
        ("ann_long", "p".repeat(129).as_str(), "password"),
    ] {
        let body = assert_error(app.register(username, password).await, 400, "invalid_input").await;
        assert!(
            body["message"].as_str().unwrap().starts_with(field),
            "{username}: {body}"
        );
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(count, 0);
}

#[tokio::test]
async fn login_signs_in_with_the_right_password() {
    let app = spawn_app().await;
    let name = unique_name("bob");
    assert_eq!(
        app.register(&name, PASSWORD).await.status(),
        201,
        "registered"
    );
    app.post("/api/auth/logout", &json!({})).await;
    assert_error(app.get("/api/me").await, 401, "unauthenticated").await;

    let resp = app.login(&name.to_uppercase(), PASSWORD).await;
    assert!(set_cookie(&resp).is_some());
    let (status, user) = json(resp).await;
    assert_eq!(
        (status, user["username"].as_str()),
        (200, Some(name.as_str()))
    );
    assert_eq!(json(app.get("/api/me").await).await.0, 200);
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_user_get_the_same_401() {
    let app = spawn_app().await;
    let name = unique_name("carl");
    assert_eq!(
        app.register(&name, PASSWORD).await.status(),
        201,
        "registered"
    );
    let wrong = assert_error(
        app.login(&name, "not-the-password").await,
        401,
        "invalid_credentials",
    )
    .await;
    let unknown = assert_error(
        app.login(&unique_name("ghost"), PASSWORD).await,
        401,
        "invalid_credentials",
    )
    .await;
    assert_eq!(wrong, unknown);
}

#[tokio::test]
async fn repeated_failures_for_a_username_are_throttled_with_retry_after() {
    let app = spawn_app().await;
    let name = unique_name("dora");
    assert_eq!(
        app.register(&name, PASSWORD).await.status(),
        201,
        "registered"
    );
    for _ in 0..5 {
        assert_error(
            app.login(&name, "not-the-password").await,
            401,
            "invalid_credentials",
        )
        .await;
    }
    // Past the limit even the right password waits.
    let resp = app.login(&name, PASSWORD).await;
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_error(resp, 429, "rate_limited").await;
    // Another user from the same address is not affected by dora's failures.
    let other = unique_name("eve");
    assert_eq!(
        app.register(&other, PASSWORD).await.status(),
        201,
        "registered"
    );
    assert_eq!(app.login(&other, PASSWORD).await.status().as_u16(), 200);
}

#[tokio::test]
async fn repeated_failures_from_one_address_are_throttled_across_usernames() {
    let app = spawn_app_with(|c| c.login_throttle.max_failures_per_ip = 3).await;
    for _ in 0..3 {
        assert_error(
            app.login(&unique_name("spray"), PASSWORD).await,
            401,
            "invalid_credentials",
        )
        .await;
    }
    let resp = app.login(&unique_name("spray"), PASSWORD).await;
    assert!(resp.headers().contains_key("retry-after"));
    assert_error(resp, 429, "rate_limited").await;
}

#[tokio::test]
async fn a_forged_cookie_is_rejected() {
    let app = spawn_app().await;
    let name = unique_name("fay");
    let resp = app.register(&name, PASSWORD).await;
    let cookie = set_cookie(&resp).unwrap();
    let value = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("sid=")
        .to_string();
    let promoted = value.replacen("shopper", "merchant", 1);
    let other_user = format!("999999{}", &value[value.find('.').unwrap()..]);
    let other_key = SessionKeys::new(
        b"not-the-server-secret-not-the-server",
        Duration::from_secs(60),
        false,
    )
    .sign(&Claims {
        sid: 1,
        shop_id: 0,
        epoch: 0,
        user_id: 1,
        role: app::api::Role::Merchant,
        expires_at: i64::MAX / 2,
        joined: 0,
        auth_at: 0,
    });
    for forged in [
        promoted,
        other_user,
        other_key,
        "garbage".into(),
        String::new(),
    ] {
        let resp = reqwest::Client::new()
            .get(app.url("/api/me"))
            .header("cookie", format!("sid={forged}"))
            .send()
            .await
            .unwrap();
        assert_error(resp, 401, "unauthenticated").await;
    }
}

#[tokio::test]
async fn an_expired_cookie_is_rejected() {
    let app = spawn_app().await;
    let resp = app.register(&unique_name("gus"), PASSWORD).await;
    let (_, user) = json(resp).await;
    let keys = SessionKeys::new(SECRET, Duration::from_secs(60), false);
    let now = chrono::Utc::now().timestamp();
    let expired = keys.sign(&Claims {
        sid: 1,
        shop_id: 0,
        epoch: 0,
        user_id: user["id"].as_i64().unwrap(),
        role: app::api::Role::Shopper,
        expires_at: now - 1,
        joined: 0,
        auth_at: 0,
    });
    let fresh = keys.sign(&Claims {
        sid: 1,
        shop_id: 0,
        epoch: 0,
        user_id: user["id"].as_i64().unwrap(),
        role: app::api::Role::Shopper,
        expires_at: now + 60,
        joined: 0,
        auth_at: 0,
    });
    let me = |v: String| {
        reqwest::Client::new()
            .get(app.url("/api/me"))
            .header("cookie", format!("sid={v}"))
            .send()
    };
    assert_error(me(expired).await.unwrap(), 401, "unauthenticated").await;
    assert_eq!(
        me(fresh).await.unwrap().status().as_u16(),
        200,
        "the same key with a future expiry is accepted"
    );
}

#[tokio::test]
async fn logout_clears_the_cookie() {
    let app = spawn_app().await;
    assert_eq!(
        app.register(&unique_name("hal"), PASSWORD).await.status(),
        201,
        "registered"
    );
    // Signed in by the registration: the session works before the sign-out.
    assert_eq!(json(app.get("/api/me").await).await.0, 200);
    let resp = app.post("/api/auth/logout", &json!({})).await;
    assert_eq!(resp.status().as_u16(), 204);
    assert!(set_cookie(&resp).unwrap().contains("Max-Age=0"));
    assert_error(app.get("/api/me").await, 401, "unauthenticated").await;
}

#[tokio::test]
async fn merchants_come_from_the_operator_and_shoppers_are_refused_merchant_routes() {
    let app = spawn_app().await;
    let merchant = unique_name("shop");
    server::domain::account::create_account(
        &app.db,
        app::api::Role::Merchant,
        None,
        &merchant,
        PASSWORD,
    )
    .await
    .unwrap()
    .expect("created");
    assert!(
        server::domain::account::create_account(
            &app.db,
            app::api::Role::Merchant,
            None,
            &merchant,
            PASSWORD
        )
        .await
        .unwrap()
        .is_none(),
        "taken"
    );

    // No session: 401.
    assert_error(
        app.get("/api/admin/merchants").await,
        401,
        "unauthenticated",
    )
    .await;
    // A shopper: 403.
    assert_eq!(
        app.register(&unique_name("ivy"), PASSWORD).await.status(),
        201,
        "registered"
    );
    assert_error(app.get("/api/admin/merchants").await, 403, "forbidden").await;
    // The merchant: 200.
    let (status, user) = json(app.login(&merchant, PASSWORD).await).await;
    assert_eq!((status, user["role"].as_str()), (200, Some("merchant")));
    let (status, body) = json(app.get("/api/admin/merchants").await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["merchants"][0]["username"], merchant.as_str());
}

#[tokio::test]
async fn the_admin_from_the_environment_is_created_at_start_up() {
    let name = unique_name("boss");
    let app = spawn_app_with(|c| c.admin = Some((name.clone(), PASSWORD.into()))).await;
    let (status, user) = json(app.login(&name, PASSWORD).await).await;
    assert_eq!((status, user["role"].as_str()), (200, Some("merchant")));
}
