//! The emergency cord (docs/api.md "The cord"): a stop of a shop's or the platform's sales on
//! every instance, places and reservations kept, undone by its release; a sale's fail-open past
//! the bot check and the waiting room, the stock and the per-user limit still holding; every
//! pull audited; nobody but the shop's merchants and the operator may pull it.

use crate::helpers::*;
use reqwest::Client;
use serde_json::{json, Value};

async fn post(app: &TestApp, client: &Client, path: &str, body: Value) -> (u16, Value) {
    json(client.post(app.url(path)).json(&body).send().await.unwrap()).await
}

async fn get(app: &TestApp, client: &Client, path: &str) -> (u16, Value) {
    json(client.get(app.url(path)).send().await.unwrap()).await
}

async fn sale(app: &TestApp, merchant: &Client, stock: i64) -> i64 {
    live_activity(app, merchant, stock, json!({})).await["id"]
        .as_i64()
        .unwrap()
}

/// A buy of one unit by a new shopper on `app`: its status and error code.
async fn try_buy(app: &TestApp, id: i64) -> (u16, Value) {
    let shopper = shoppers(app, 1).await.remove(0);
    let path = app.path(&shopper.client, id).await;
    json(app.buy(&shopper.client, id, json!({"path": path})).await).await
}

/// A buy refused as a stopped sale's are: `403 paused`.
fn stopped((status, body): (u16, Value)) {
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("paused")),
        "{body}"
    );
}

fn ids(pull: &Value) -> Vec<i64> {
    let mut ids: Vec<i64> = pull["sales"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

async fn pulls(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM cord_pulls")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_shops_stop_holds_its_sales_on_every_instance_until_released_and_keeps_what_was_sold() {
    let first = spawn_app().await;
    let second = spawn_instance(&first.config).await;
    let shop = unique_name("cord");
    let merchant = merchant_of(&first, &shop).await;
    let other = merchant_of(&first, &unique_name("other")).await;
    let (on, paused, elsewhere) = (
        sale(&first, &merchant, 10).await,
        sale(&first, &merchant, 10).await,
        sale(&first, &other, 10).await,
    );
    assert_eq!(try_buy(&second, on).await.0, 202);
    let (status, _) = post(
        &first,
        &merchant,
        &format!("/api/admin/activities/{paused}/pause"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200);

    let (status, pull) = post(
        &first,
        &merchant,
        "/api/admin/cord/stop",
        json!({"reason": "the payment provider is down"}),
    )
    .await;
    assert_eq!(status, 200, "{pull}");
    assert_eq!(pull["action"], "stop");
    let mut both = vec![on, paused];
    both.sort_unstable();
    assert_eq!(ids(&pull), both, "the pull names what it changed");
    // Every instance refuses at once (the gate's switch is in Redis); the other shop sells on.
    stopped(try_buy(&second, on).await);
    assert_eq!(try_buy(&second, elsewhere).await.0, 202);
    assert_eq!(first.remaining(on).await, 9, "what was sold stays sold");
    let (_, activity) = get(&first, &merchant, &format!("/api/activities/{on}")).await;
    assert_eq!(
        (&activity["halted"], &activity["paused"]),
        (&json!(true), &json!(false)),
        "the stop is the cord's, the pause the merchant's"
    );
    // The merchant's resume does not undo the stop; a sale made under it is stopped too.
    let (status, _) = post(
        &first,
        &merchant,
        &format!("/api/admin/activities/{on}/resume"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200);
    stopped(try_buy(&first, on).await);
    let made = live_activity(&first, &merchant, 5, json!({})).await;
    assert_eq!(made["halted"], true, "{made}");
    let made = made["id"].as_i64().unwrap();
    stopped(try_buy(&second, made).await);
    let (_, state) = get(&first, &merchant, "/api/admin/cord").await;
    assert_eq!(
        state["shops_stopped"].as_array().unwrap().len(),
        1,
        "{state}"
    );

    let (status, pull) = post(
        &first,
        &merchant,
        "/api/admin/cord/release",
        json!({"reason": "the provider is back"}),
    )
    .await;
    assert_eq!(status, 200, "{pull}");
    let mut three = vec![on, paused, made];
    three.sort_unstable();
    assert_eq!(ids(&pull), three);
    assert_eq!(try_buy(&second, on).await.0, 202);
    assert_eq!(try_buy(&second, made).await.0, 202);
    // The merchant's own pause outlives the release.
    stopped(try_buy(&second, paused).await);

    // Both pulls audited, with who, why and what they changed.
    let (_, audit) = get(&first, &merchant, "/api/admin/audit").await;
    let entries = audit["entries"].as_array().unwrap();
    let stop = entries
        .iter()
        .find(|e| e["action"] == "cord.stop")
        .expect("the stop audited");
    assert!(
        stop["detail"]
            .as_str()
            .unwrap()
            .starts_with("the payment provider is down — changed 2 sale(s)"),
        "{stop}"
    );
    assert!(entries.iter().any(|e| e["action"] == "cord.release"));
    let (_, state) = get(&first, &merchant, "/api/admin/cord").await;
    assert_eq!(state["shops_stopped"], json!([]));
    assert_eq!(
        state["pulls"][0]["action"], "release",
        "newest first: {state}"
    );
    assert_eq!(state["pulls"][1]["reason"], "the payment provider is down");
}

#[tokio::test]
async fn the_platforms_stop_holds_every_shop_and_outlasts_a_shops_own_release() {
    let app = spawn_app().await;
    let op = operator(&app).await;
    let a = merchant_of(&app, &unique_name("a")).await;
    let b = merchant_of(&app, &unique_name("b")).await;
    let (sale_a, sale_b) = (sale(&app, &a, 5).await, sale(&app, &b, 5).await);
    let (status, pull) = post(
        &app,
        &op,
        "/api/operator/cord/stop",
        json!({"reason": "bad deploy"}),
    )
    .await;
    assert_eq!(status, 200, "{pull}");
    assert!(pull["shop_id"].is_null() && pull["activity_id"].is_null());
    assert!(ids(&pull).contains(&sale_a) && ids(&pull).contains(&sale_b));
    for id in [sale_a, sale_b] {
        stopped(try_buy(&app, id).await);
    }
    // A shop's own stop and release leave the platform's in force.
    for cord in ["stop", "release"] {
        let (status, _) = post(
            &app,
            &a,
            &format!("/api/admin/cord/{cord}"),
            json!({"reason": "ours too"}),
        )
        .await;
        assert_eq!(status, 200);
    }
    stopped(try_buy(&app, sale_a).await);
    let (_, state) = get(&app, &a, "/api/admin/cord").await;
    assert_eq!(state["platform_stopped"], true, "{state}");

    let (status, pull) = post(
        &app,
        &op,
        "/api/operator/cord/release",
        json!({"reason": "rolled back"}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(ids(&pull).contains(&sale_a) && ids(&pull).contains(&sale_b));
    for id in [sale_a, sale_b] {
        assert_eq!(try_buy(&app, id).await.0, 202);
    }
    let (_, audit) = get(&app, &op, "/api/operator/audit").await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "cord.stop" && e["target"] == "the platform"),
        "{audit}"
    );
}

#[tokio::test]
async fn nobody_but_the_shops_merchants_and_the_operator_pulls_the_cord_and_a_refused_pull_changes_nothing(
) {
    let app = spawn_app().await;
    let merchant = merchant_of(&app, &unique_name("own")).await;
    let stranger = merchant_of(&app, &unique_name("strange")).await;
    let id = sale(&app, &merchant, 5).await;
    let shopper = shoppers(&app, 1).await.remove(0).client;
    let anonymous = Client::new();
    let before = pulls(&app).await;
    let fail_open = format!("/api/admin/activities/{id}/fail-open");
    let body = json!({"on": true, "reason": "captcha broken"});
    for (client, path, body, status, code) in [
        (
            &anonymous,
            "/api/admin/cord/stop",
            json!({"reason": "x"}),
            401,
            "unauthenticated",
        ),
        (
            &shopper,
            "/api/admin/cord/stop",
            json!({"reason": "x"}),
            403,
            "forbidden",
        ),
        (
            &merchant,
            "/api/operator/cord/stop",
            json!({"reason": "x"}),
            403,
            "forbidden",
        ),
        (&shopper, fail_open.as_str(), body.clone(), 403, "forbidden"),
        (
            &stranger,
            fail_open.as_str(),
            body.clone(),
            404,
            "not_found",
        ),
        (
            &merchant,
            "/api/admin/cord/stop",
            json!({"reason": "  "}),
            400,
            "invalid_input",
        ),
        (
            &merchant,
            "/api/admin/cord/stop",
            json!({}),
            400,
            "invalid_input",
        ),
        (
            &merchant,
            "/api/admin/cord/stop",
            json!({"reason": "r".repeat(501)}),
            400,
            "invalid_input",
        ),
        (
            &merchant,
            fail_open.as_str(),
            json!({"on": "yes", "reason": "x"}),
            400,
            "invalid_input",
        ),
    ] {
        let resp = client.post(app.url(path)).json(&body).send().await.unwrap();
        assert_error(resp, status, code).await;
    }
    let op = operator(&app).await;
    let (status, _) = post(
        &app,
        &op,
        "/api/operator/cord/stop",
        json!({"reason": "x", "shop_id": i64::MAX}),
    )
    .await;
    assert_eq!(status, 404, "no such shop");
    assert_eq!(pulls(&app).await, before, "no refused pull was recorded");
    assert_eq!(try_buy(&app, id).await.0, 202, "and the sale sells on");
}

#[tokio::test]
async fn a_fail_open_sale_takes_buys_past_its_bot_check_and_line_while_the_stock_and_limit_hold() {
    let first = spawn_app().await;
    let second = spawn_instance(&first.config).await;
    let merchant = merchant(&first).await;
    let activity = live_activity(
        &first,
        &merchant,
        3,
        json!({"captcha_required": true, "waiting_room": true, "admit_per_sec": 1}),
    )
    .await;
    let id = activity["id"].as_i64().unwrap();
    assert_eq!(activity["fail_open"], false);
    // Closed: no ticket, no captcha, no buy.
    let code = try_buy(&second, id).await.1["error"].clone();
    assert!(
        code == "not_admitted" || code == "captcha_invalid",
        "{code}"
    );

    let (status, switched) = post(
        &first,
        &merchant,
        &format!("/api/admin/activities/{id}/fail-open"),
        json!({"on": true, "reason": "the captcha service is down"}),
    )
    .await;
    assert_eq!((status, switched["fail_open"].clone()), (200, json!(true)));
    // The other instance hears of it through the broadcast.
    let shoppers = shoppers(&first, 4).await;
    let mut granted = 0;
    for shopper in &shoppers {
        let path = second.path(&shopper.client, id).await;
        let answer = eventually(10, "the fail-open on the other instance", || async {
            let (status, body) =
                json(second.buy(&shopper.client, id, json!({"path": path})).await).await;
            (body["error"] != "not_admitted" && body["error"] != "captcha_invalid")
                .then_some((status, body))
        })
        .await;
        match answer {
            (202, _) => granted += 1,
            (409, body) => assert_eq!(body["error"], "sold_out"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(granted, 3, "the stock holds");
    // The per-user limit holds.
    let path = second.path(&shoppers[0].client, id).await;
    let (status, body) = json(
        second
            .buy(&shoppers[0].client, id, json!({"path": path}))
            .await,
    )
    .await;
    assert!(
        status == 403 && body["error"] == "limit_reached" || body["error"] == "sold_out",
        "{status} {body}"
    );
    let (_, line) = get(
        &first,
        &shoppers[0].client,
        &format!("/api/activities/{id}/queue"),
    )
    .await;
    assert_eq!(line["state"], "open", "{line}");

    let (status, switched) = post(
        &first,
        &merchant,
        &format!("/api/admin/activities/{id}/fail-open"),
        json!({"on": false, "reason": "the captcha is back"}),
    )
    .await;
    assert_eq!((status, switched["fail_open"].clone()), (200, json!(false)));
    let (_, line) = get(
        &first,
        &shoppers[0].client,
        &format!("/api/activities/{id}/queue"),
    )
    .await;
    assert_ne!(line["state"], "open", "the line is back: {line}");
    let (_, state) = get(&first, &merchant, "/api/admin/cord").await;
    let actions: Vec<&str> = state["pulls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["activity_id"] == id)
        .map(|p| p["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["fail_closed", "fail_open"], "{state}");

    // The public report shows the pulls that changed the sale: what and when, not who or why.
    sqlx::query("UPDATE activities SET ends_at = now() WHERE id = $1")
        .bind(id)
        .execute(&first.db)
        .await
        .unwrap();
    let (status, report) = json(first.get(&format!("/api/activities/{id}/report")).await).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        report["cord"],
        json!([
            {"at": report["cord"][0]["at"], "action": "fail_open", "scope": "sale"},
            {"at": report["cord"][1]["at"], "action": "fail_closed", "scope": "sale"},
        ])
    );
    assert!(!report.to_string().contains("captcha service"), "no reason");
}
