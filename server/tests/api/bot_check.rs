//! The proof-of-work bot check (docs/api.md, the bot check): a solution is good once, for its shopper
//! and sale, until it expires; anything else is `400 captcha_invalid` and changes nothing.
//! Solved here with the same crate a browser runs.

use crate::helpers::*;
use altcha::{Challenge, Payload};
use reqwest::Client;
use serde_json::{json, Value};
use signing::pow::{encode, ProofOfWork, CHALLENGE_TTL_SECS};

/// Solved as the page's wasm solves it.
fn solve(challenge: Challenge) -> String {
    signing::pow::solve(challenge).expect("solved")
}

async fn challenge(app: &TestApp, client: &Client, id: i64) -> Challenge {
    let resp = client
        .get(app.url(&format!("/api/activities/{id}/challenge")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store")
    );
    let (status, body) = json(resp).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body).unwrap()
}

async fn sale(app: &TestApp, merchant: &Client, fields: Value) -> i64 {
    let mut fields = fields;
    fields["per_user_limit"] = 3.into();
    // `live_activity` sends `captcha_required: false`; the check is named instead.
    fields["captcha_required"] = Value::Null;
    live_activity(app, merchant, 10, fields).await["id"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn a_proof_of_work_buys_once_and_only_for_its_shopper_and_sale() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let check = json!({"bot_check": "proof_of_work", "pow_difficulty": 1_000});
    let (a, b) = (
        sale(&app, &merchant, check.clone()).await,
        sale(&app, &merchant, check).await,
    );
    let mut shoppers = shoppers(&app, 2).await;
    let (owner, other) = (shoppers.remove(0), shoppers.remove(0));
    let (path_a, path_b) = (
        app.path(&owner.client, a).await,
        app.path(&owner.client, b).await,
    );
    let refused = |resp| assert_error(resp, 400, "captcha_invalid");

    // None at all.
    refused(app.buy(&owner.client, a, json!({"path": path_a})).await).await;
    let pow = solve(challenge(&app, &owner.client, a).await);
    // Another shopper's, and the same shopper's on another sale.
    let other_path = app.path(&other.client, a).await;
    refused(
        app.buy(&other.client, a, json!({"path": other_path, "pow": pow}))
            .await,
    )
    .await;
    refused(
        app.buy(&owner.client, b, json!({"path": path_b, "pow": pow}))
            .await,
    )
    .await;
    // Forged: the key changed, or the challenge rebound to another shopper.
    let mut forged: Payload = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &pow).unwrap(),
    )
    .unwrap();
    forged.solution.derived_key = "ab".repeat(32);
    refused(
        app.buy(
            &owner.client,
            a,
            json!({"path": path_a, "pow": encode(&forged)}),
        )
        .await,
    )
    .await;
    // Expired: made with the server's own secret, signed right, but 15 minutes too old.
    let old = ProofOfWork::new(SECRET).challenge(
        owner.id,
        a,
        1_000,
        chrono::Utc::now().timestamp() - CHALLENGE_TTL_SECS - 1,
    );
    refused(
        app.buy(&owner.client, a, json!({"path": path_a, "pow": solve(old)}))
            .await,
    )
    .await;
    for junk in [json!(""), json!("bm90IGpzb24="), json!("x".repeat(5000))] {
        refused(
            app.buy(&owner.client, a, json!({"path": path_a, "pow": junk}))
                .await,
        )
        .await;
    }
    assert_eq!(
        (app.remaining(a).await, app.remaining(b).await),
        (10, 10),
        "nothing refused took stock"
    );

    // The owner's, on its sale: once. A retry with its Idempotency-Key gets the first answer.
    let body = json!({"path": path_a, "pow": pow});
    let (status, first) = app.buy_keyed(&owner.client, a, "k1", body.clone()).await;
    assert_eq!(status, 202, "{first}");
    let (status, again) = app.buy_keyed(&owner.client, a, "k1", body.clone()).await;
    assert_eq!((status, &again["token"]), (202, &first["token"]));
    refused(app.buy(&owner.client, a, body.clone()).await).await;
    let (status, replay) = app.buy_keyed(&owner.client, a, "k2", body).await;
    assert_eq!(
        (status, replay["error"].as_str()),
        (400, Some("captcha_invalid"))
    );
    assert_eq!(app.remaining(a).await, 9);

    // A fresh one buys again (the limit is 3).
    let pow = solve(challenge(&app, &owner.client, a).await);
    let resp = app
        .buy(&owner.client, a, json!({"path": path_a, "pow": pow}))
        .await;
    assert_eq!(resp.status(), 202);
    assert_eq!(app.remaining(a).await, 8);
    let tokens = vec![
        first["token"].as_str().unwrap().to_string(),
        json(resp).await.1["token"].as_str().unwrap().to_string(),
    ];
    assert_settled(&app, a, &tokens).await;
}

#[tokio::test]
async fn one_solution_sent_in_parallel_to_two_instances_buys_once() {
    let app = spawn_app().await;
    let second = spawn_instance(&app.config).await;
    let merchant = merchant(&app).await;
    let id = sale(
        &app,
        &merchant,
        json!({"bot_check": "proof_of_work", "pow_difficulty": 1_000}),
    )
    .await;
    let shopper = shoppers(&app, 1).await.remove(0);
    let path = app.path(&shopper.client, id).await;
    let pow = solve(challenge(&app, &shopper.client, id).await);
    // Ten buys with the one solution at once, half through each instance, each its own request
    // (no Idempotency-Key): the solution is spent once, whichever instance gets there first.
    let body = json!({"path": path, "pow": pow});
    let buys = (0..10).map(|i| {
        let instance = if i % 2 == 0 { &app } else { &second };
        let body = body.clone();
        let client = &shopper.client;
        async move { json(instance.buy(client, id, body).await).await }
    });
    let answers = futures_util::future::join_all(buys).await;
    let granted = tokens_of(&answers);
    assert_eq!(granted.len(), 1, "{answers:?}");
    let spent = answers
        .iter()
        .filter(|(status, body)| *status == 400 && body["error"] == "captcha_invalid")
        .count();
    // The rest were refused as spent, or told to wait by the shopper's bucket (burst 5): at least
    // four reached the spend check with the solution the first one used.
    assert!(spent >= 4, "{answers:?}");
    assert!(
        answers.iter().all(|(status, body)| *status == 202
            || *status == 400
            || body["error"] == "rate_limited"),
        "{answers:?}"
    );
    assert_eq!(app.remaining(id).await, 9, "one unit taken");
    assert_settled(&app, id, &granted).await;
}

#[tokio::test]
async fn an_image_captcha_sale_takes_the_proof_of_work_instead() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = sale(
        &app,
        &merchant,
        json!({"bot_check": "image", "pow_difficulty": 1_000}),
    )
    .await;
    let shopper = shoppers(&app, 1).await.remove(0);
    let path = app.path(&shopper.client, id).await;
    assert_error(
        app.buy(&shopper.client, id, json!({"path": path})).await,
        400,
        "captcha_invalid",
    )
    .await;
    let pow = solve(challenge(&app, &shopper.client, id).await);
    let resp = app
        .buy(&shopper.client, id, json!({"path": path, "pow": pow}))
        .await;
    assert_eq!(resp.status(), 202);
    assert_eq!(app.remaining(id).await, 9);
}

#[tokio::test]
async fn the_check_is_the_merchants_choice_and_old_clients_keep_their_meaning() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let created = |fields: Value| {
        let (app, merchant) = (&app, &merchant);
        async move {
            let a = live_activity(app, merchant, 5, fields).await;
            (
                a["bot_check"].as_str().unwrap().to_string(),
                a["captcha_required"].as_bool().unwrap(),
                a["pow_difficulty"].as_i64().unwrap(),
            )
        }
    };
    // `live_activity` sends `captcha_required: false` unless told otherwise.
    assert_eq!(created(json!({})).await, ("none".into(), false, 30_000));
    assert_eq!(
        created(json!({"captcha_required": true})).await,
        ("image".into(), true, 30_000)
    );
    assert_eq!(
        created(json!({"captcha_required": null, "bot_check": "proof_of_work", "pow_difficulty": 200_000})).await,
        ("proof_of_work".into(), false, 200_000)
    );
    for (fields, field) in [
        (
            json!({"bot_check": "proof_of_work", "captcha_required": true}),
            "bot_check",
        ),
        (json!({"bot_check": "puzzle"}), "bot_check"),
        (
            json!({"bot_check": "proof_of_work", "captcha_required": null, "pow_difficulty": 999}),
            "pow_difficulty",
        ),
    ] {
        let resp = merchant
            .post(app.url("/api/admin/activities"))
            .json(&live_activity_body(1, fields))
            .send()
            .await
            .unwrap();
        let error = assert_error(resp, 400, "invalid_input").await;
        assert!(
            error["message"].as_str().unwrap().contains(field),
            "{error}"
        );
    }
    // A challenge needs a session and a sale that exists.
    let anonymous = app.get("/api/activities/1/challenge").await;
    assert_error(anonymous, 401, "unauthenticated").await;
    let shopper = shoppers(&app, 1).await.remove(0);
    let resp = shopper
        .client
        .get(app.url("/api/activities/999999999/challenge"))
        .send()
        .await
        .unwrap();
    assert_error(resp, 404, "not_found").await;
}
