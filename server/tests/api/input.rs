//! docs/api.md's rules for every mutating request: 415, 413, 400 naming the field; nothing changes.

use crate::helpers::*;
use serde_json::json;

async fn user_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_body_that_is_not_json_gets_415() {
    let app = spawn_app().await;
    let body = r#"{"username":"ann_415","password":"long-enough"}"#;
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        assert_error(
            app.post_raw("/api/auth/register", ct, body).await,
            415,
            "unsupported_media_type",
        )
        .await;
    }
    assert_eq!(user_count(&app).await, 0);
}

#[tokio::test]
async fn a_post_without_content_type_gets_415_even_without_a_body() {
    let app = spawn_app().await;
    let resp = reqwest::Client::new()
        .post(app.url("/api/auth/logout"))
        .send()
        .await
        .unwrap();
    assert_error(resp, 415, "unsupported_media_type").await;
}

#[tokio::test]
async fn a_body_over_16_kib_gets_413() {
    let app = spawn_app().await;
    let big = json!({"username": "ann_413", "password": "x".repeat(17 * 1024)}).to_string();
    assert_error(
        app.post_raw("/api/auth/register", "application/json", big)
            .await,
        413,
        "payload_too_large",
    )
    .await;
    assert_eq!(user_count(&app).await, 0);
}

#[tokio::test]
async fn a_streamed_body_over_16_kib_without_length_gets_413() {
    let app = spawn_app().await;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..20).map(|_| Ok(vec![b' '; 1024])).collect();
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    assert_error(
        app.post_raw("/api/auth/register", "application/json", body)
            .await,
        413,
        "payload_too_large",
    )
    .await;
}

#[tokio::test]
async fn malformed_json_gets_400_invalid_input() {
    let app = spawn_app().await;
    for body in ["{", "", "[]", "null", "{\"username\": }"] {
        assert_error(
            app.post_raw("/api/auth/register", "application/json", body)
                .await,
            400,
            "invalid_input",
        )
        .await;
    }
    assert_eq!(user_count(&app).await, 0);
}

#[tokio::test]
async fn a_wrong_type_gets_400_naming_the_field() {
    let app = spawn_app().await;
    let resp = app
        .post(
            "/api/auth/register",
            &json!({"username": "ann_type", "password": 12345678}),
        )
        .await;
    let body = assert_error(resp, 400, "invalid_input").await;
    assert!(
        body["message"].as_str().unwrap().starts_with("password"),
        "{body}"
    );
    let resp = app
        .post("/api/auth/login", &json!({"password": "whatever-1"}))
        .await;
    let body = assert_error(resp, 400, "invalid_input").await;
    assert!(
        body["message"].as_str().unwrap().starts_with("username"),
        "{body}"
    );
}
