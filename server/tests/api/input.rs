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

/// Every route whose one path parameter is an id (`http/input.rs`'s `InPath`): a bad id is
/// `400 invalid_input` naming the id, for the shopper or merchant the route is for, whatever
/// the body; a good id reaches the handler.
#[tokio::test]
async fn a_bad_path_id_is_invalid_input_on_every_route_that_takes_one() {
    use reqwest::Method;
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let shopper = shoppers(&app, 1).await.remove(0).client;
    let routes = [
        (Method::GET, "/api/activities/{id}", &app.client),
        (Method::GET, "/api/activities/{id}/stock", &app.client),
        (Method::GET, "/api/activities/{id}/report", &app.client),
        (
            Method::GET,
            "/api/activities/{id}/calendar.ics",
            &app.client,
        ),
        (Method::GET, "/api/activities/{id}/reminder", &shopper),
        (Method::POST, "/api/activities/{id}/reminder", &shopper),
        (Method::DELETE, "/api/reminders/{id}", &shopper),
        (Method::GET, "/api/admin/activities/{id}", &merchant),
        (Method::POST, "/api/admin/activities/{id}/stock", &merchant),
        (Method::POST, "/api/admin/activities/{id}/pause", &merchant),
        (Method::POST, "/api/admin/activities/{id}/resume", &merchant),
        (Method::GET, "/api/admin/activities/{id}/stats", &merchant),
        (
            Method::GET,
            "/api/admin/activities/{id}/forecast",
            &merchant,
        ),
        (
            Method::GET,
            "/api/admin/activities/{id}/stock-additions",
            &merchant,
        ),
        (Method::GET, "/api/activities/{id}/queue", &shopper),
        (Method::GET, "/api/activities/{id}/line", &app.client),
        (Method::GET, "/api/activities/{id}/drawing", &app.client),
        (Method::GET, "/api/activities/{id}/path", &shopper),
        (Method::GET, "/api/activities/{id}/challenge", &shopper),
    ];
    for (method, route, client) in routes {
        for bad in ["abc", "0", "-1", "1e3", "99999999999999999999"] {
            let resp = client
                .request(method.clone(), app.url(&route.replace("{id}", bad)))
                .json(&json!({"add": 1}))
                .send()
                .await
                .unwrap();
            let body = assert_error(resp, 400, "invalid_input").await;
            assert!(
                body["message"].as_str().unwrap().starts_with("id:"),
                "{method} {route} with {bad}: {body}"
            );
        }
        // A good id that names nothing: the handler's own answer, not the id's.
        let resp = client
            .request(method.clone(), app.url(&route.replace("{id}", "987654321")))
            .json(&json!({"add": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{method} {route}");
    }
    // The order routes' token: a UUID, or `400 invalid_input` naming the token.
    for (method, route) in [
        (Method::GET, "/api/orders/{token}"),
        (Method::POST, "/api/orders/{token}/pay"),
    ] {
        for bad in ["abc", "0", "00000001-6b17-8e00-800c-4a858413df6", "{}"] {
            let resp = shopper
                .request(method.clone(), app.url(&route.replace("{token}", bad)))
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            let body = assert_error(resp, 400, "invalid_input").await;
            assert!(
                body["message"].as_str().unwrap().starts_with("token:"),
                "{method} {route} with {bad}: {body}"
            );
        }
        let unknown = "00000001-6b17-8e00-800c-4a858413df6f";
        let resp = shopper
            .request(method.clone(), app.url(&route.replace("{token}", unknown)))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{method} {route}");
    }
}
