//! Reminders: one per shopper and sale, withdrawable, counted for the merchant; a sale's
//! calendar entry; the clear errors of bad asks.

use crate::helpers::*;
use serde_json::{json, Value};

async fn upcoming(app: &TestApp, merchant: &reqwest::Client) -> (i64, String) {
    let now = chrono::Utc::now();
    let sale = live_activity(
        app,
        merchant,
        10,
        json!({
            "starts_at": (now + chrono::Duration::hours(2)).to_rfc3339(),
            "ends_at": (now + chrono::Duration::hours(3)).to_rfc3339(),
        }),
    )
    .await;
    (
        sale["id"].as_i64().unwrap(),
        sale["starts_at"].as_str().unwrap().to_string(),
    )
}

async fn ask(app: &TestApp, client: &reqwest::Client, id: i64) -> (u16, Value) {
    json(
        client
            .post(app.url(&format!("/api/activities/{id}/reminder")))
            .json(&json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn reminders_of(app: &TestApp, merchant: &reqwest::Client, id: i64) -> i64 {
    let (status, stats) = json(
        merchant
            .get(app.url(&format!("/api/admin/activities/{id}/stats")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{stats}");
    stats["reminders"].as_i64().unwrap()
}

#[tokio::test]
async fn one_reminder_per_shopper_withdrawable_and_counted_for_the_merchant() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let (id, starts_at) = upcoming(&app, &merchant).await;
    let mut shoppers = shoppers(&app, 2).await;
    let (b, a) = (shoppers.pop().unwrap(), shoppers.pop().unwrap());

    let (status, first) = ask(&app, &a.client, id).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["activity_id"], id);
    assert_eq!(first["starts_at"], starts_at);
    // A second ask answers with the same reminder; nothing new is made.
    let (status, again) = ask(&app, &a.client, id).await;
    assert_eq!((status, &again), (200, &first));
    let (status, read) = json(
        a.client
            .get(app.url(&format!("/api/activities/{id}/reminder")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, &read["reminder"]), (200, &first));
    let (status, other) = ask(&app, &b.client, id).await;
    assert_eq!(status, 201);
    assert_ne!(other["id"], first["id"]);
    assert_eq!(reminders_of(&app, &merchant, id).await, 2);

    // Someone else's reminder cannot be withdrawn (nor told apart from one that does not exist).
    let theirs = other["id"].as_i64().unwrap();
    let resp = a
        .client
        .delete(app.url(&format!("/api/reminders/{theirs}")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(resp, 404, "not_found").await;
    assert_eq!(reminders_of(&app, &merchant, id).await, 2);

    // Withdrawn: gone, counted no more, and withdrawn only once.
    let mine = first["id"].as_i64().unwrap();
    let resp = a
        .client
        .delete(app.url(&format!("/api/reminders/{mine}")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    let (status, read) = json(
        a.client
            .get(app.url(&format!("/api/activities/{id}/reminder")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, &read["reminder"]), (200, &Value::Null));
    assert_eq!(reminders_of(&app, &merchant, id).await, 1);
    let resp = a
        .client
        .delete(app.url(&format!("/api/reminders/{mine}")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(resp, 404, "not_found").await;
    // Asked again after withdrawing: a new one.
    let (status, renewed) = ask(&app, &a.client, id).await;
    assert_eq!(status, 201);
    assert_ne!(renewed["id"], first["id"]);
}

#[tokio::test]
async fn bad_asks_get_clear_errors_and_change_nothing() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let shopper = shoppers(&app, 1).await.remove(0);
    let live = live_activity(&app, &merchant, 5, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let (status, body) = ask(&app, &shopper.client, live).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("already_started")),
        "{body}"
    );
    let ended = live_activity(&app, &merchant, 5, json!({})).await["id"]
        .as_i64()
        .unwrap();
    sqlx::query("UPDATE activities SET ends_at = now() WHERE id = $1")
        .bind(ended)
        .execute(&app.db)
        .await
        .unwrap();
    let (status, body) = ask(&app, &shopper.client, ended).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (410, Some("ended")),
        "{body}"
    );
    let (status, body) = ask(&app, &shopper.client, 987_654_321).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );
    let resp = shopper
        .client
        .post(app.url("/api/activities/abc/reminder"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(resp, 400, "invalid_input").await;
    let resp = shopper
        .client
        .delete(app.url("/api/reminders/abc"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(resp, 400, "invalid_input").await;
    let (id, _) = upcoming(&app, &merchant).await;
    let resp = reqwest::Client::new()
        .post(app.url(&format!("/api/activities/{id}/reminder")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_error(resp, 401, "unauthenticated").await;
    for sale in [live, ended, id] {
        assert_eq!(reminders_of(&app, &merchant, sale).await, 0);
    }
}

#[tokio::test]
async fn a_sales_calendar_entry_names_its_start_in_utc_and_links_back() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let (id, starts_at) = upcoming(&app, &merchant).await;
    let resp = reqwest::Client::new()
        .get(app.url(&format!("/api/activities/{id}/calendar.ics")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "text/calendar; charset=utf-8"
    );
    let ics = resp.text().await.unwrap();
    let start = chrono::DateTime::parse_from_rfc3339(&starts_at).unwrap();
    let dtstart = format!("DTSTART:{}", start.format("%Y%m%dT%H%M%SZ"));
    assert!(ics.lines().any(|l| l == dtstart), "{dtstart} in {ics}");
    assert!(ics.contains(&format!("/activities/{id}")), "{ics}");
    assert!(ics.starts_with("BEGIN:VCALENDAR"), "{ics}");
}

#[tokio::test]
async fn the_forecast_counts_the_interest_shown_and_advises_from_the_bench() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let (id, _) = upcoming(&app, &merchant).await;
    for shopper in shoppers(&app, 3).await {
        assert_eq!(ask(&app, &shopper.client, id).await.0, 201);
    }
    for _ in 0..5 {
        let page = reqwest::Client::new()
            .get(app.url(&format!("/activities/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status().as_u16(), 200);
    }
    let forecast_of = |client: &reqwest::Client| {
        client
            .get(app.url(&format!("/api/admin/activities/{id}/forecast")))
            .send()
    };
    let (status, f) = json(forecast_of(&merchant).await.unwrap()).await;
    assert_eq!(status, 200, "{f}");
    assert_eq!(
        (f["reminders"].as_i64(), f["page_views"].as_i64()),
        (Some(3), Some(5)),
        "{f}"
    );
    assert_eq!(f["expected_crowd"], 5);
    // Five shoppers for ten units, one each: no sell-out, no line needed, one shard.
    assert_eq!(f["expected_sell_out_ms"], Value::Null);
    assert_eq!(f["recommended"]["waiting_room"], false);
    assert_eq!(f["recommended"]["stock_shards"], 1);
    // The advice rests on the bench's figures, and says so.
    let basis = f["basis"]["buys_per_sec"].as_i64().unwrap();
    assert_eq!(f["recommended"]["admit_per_sec"], basis * 8 / 10);
    assert!(
        f["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("make bench")),
        "{f}"
    );
    assert_eq!(f["actual"], Value::Null);

    // Another shop's merchant: not found.
    let other = merchant_of(&app, &unique_name("other shop")).await;
    assert_error(forecast_of(&other).await.unwrap(), 404, "not_found").await;
    // After the sale: what happened beside it.
    sqlx::query("UPDATE activities SET starts_at = now() - interval '2 minutes', ends_at = now() WHERE id = $1")
        .bind(id)
        .execute(&app.db)
        .await
        .unwrap();
    let (status, f) = json(forecast_of(&merchant).await.unwrap()).await;
    assert_eq!(status, 200, "{f}");
    assert_eq!(f["actual"]["attempts"], 0, "{f}");
    assert_eq!(f["actual"]["sold_out_after_ms"], Value::Null);
}
