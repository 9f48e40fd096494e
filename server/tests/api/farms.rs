//! Farms demoted at the draw (issue: the cord and the crowd's shape): a drawn line groups its
//! entries by network, the one each joined from and the one its account signed up from; under
//! `demote` the entries of a group over the threshold are drawn after everyone else, the line
//! admits in that order, and the published drawing says so in a form `scripts/verify-drawing`
//! recomputes. Behind one trusted proxy here, so each join says its address in `X-Forwarded-For`.

use crate::helpers::*;
use crate::line::{paused_drawn_sale, poll, published_drawing, verify};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Shoppers who join sale `id`'s line, each from its address; their receipts.
async fn join_from(app: &TestApp, crowd: &[(Shopper, String)], id: i64) -> Vec<String> {
    let joins = futures_util::stream::iter(crowd.iter().map(|(s, address)| async move {
        let resp = s
            .client
            .post(app.url(&format!("/api/activities/{id}/queue")))
            .header("x-forwarded-for", address.as_str())
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let (code, joined) = json(resp).await;
        assert_eq!(
            (code, joined["state"].as_str()),
            (200, Some("drawing")),
            "{joined}"
        );
        joined["receipt"]
            .as_str()
            .unwrap()
            .split('.')
            .next()
            .unwrap()
            .to_string()
    }));
    futures_util::StreamExt::collect(futures_util::StreamExt::buffered(joins, 16)).await
}

async fn set_crowd(
    app: &TestApp,
    merchant: &reqwest::Client,
    id: i64,
    body: Value,
) -> (u16, Value) {
    json(
        merchant
            .post(app.url(&format!("/api/admin/activities/{id}/crowd")))
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// A change of the policy refused with `status` and `code`.
async fn refused(
    app: &TestApp,
    merchant: &reqwest::Client,
    id: i64,
    body: Value,
    status: u16,
    code: &str,
) {
    let (got, answer) = set_crowd(app, merchant, id, body).await;
    assert_eq!(
        (got, answer["error"].as_str()),
        (status, Some(code)),
        "{answer}"
    );
}

async fn settings_of(app: &TestApp, merchant: &reqwest::Client, id: i64) -> (u16, Value) {
    let url = app.url(&format!("/api/admin/activities/{id}/crowd"));
    json(merchant.get(url).send().await.unwrap()).await
}

/// 60 entries from one /24, 40 from 40 networks (five of whose accounts were made on the farm's
/// network) and an office of 20 on one /24, as many as the threshold: the 65 are drawn after the
/// other 55, the line numbers every shopper's place as the verifier does, and any change to the
/// published groups is caught.
#[tokio::test]
async fn a_farm_on_one_24_is_drawn_after_a_crowd_of_distinct_networks() {
    let app = spawn_app_with(|c| c.trusted_proxies = 1).await;
    let merchant = merchant(&app).await;
    let id = paused_drawn_sale(&app, &merchant, 8, 5).await;
    let (code, settings) = set_crowd(
        &app,
        &merchant,
        id,
        json!({"policy": "demote", "threshold": 20}),
    )
    .await;
    assert_eq!(code, 200, "{settings}");
    assert_eq!(
        (settings["policy"].as_str(), settings["threshold"].as_i64()),
        (Some("demote"), Some(20))
    );
    assert!(
        settings["proposed_threshold"].as_i64().unwrap() >= 20,
        "{settings}"
    );
    assert!(settings["outcome"].is_null(), "{settings}");

    let farm = shoppers(&app, 60).await;
    let people = shoppers(&app, 40).await;
    let office = shoppers(&app, 20).await;
    // Five people's accounts were made on the farm's network; they join from networks of their own.
    let made_there: Vec<i64> = people[..5].iter().map(|s| s.id).collect();
    sqlx::query("UPDATE users SET signup_network = '198.51.100.0/24' WHERE id = ANY($1)")
        .bind(&made_there)
        .execute(&app.db)
        .await
        .unwrap();
    let crowd: Vec<(Shopper, String)> = farm
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, format!("198.51.100.{}", i + 1)))
        .chain(
            people
                .into_iter()
                .enumerate()
                .map(|(i, s)| (s, format!("203.0.{}.9", i + 1))),
        )
        .chain(
            office
                .into_iter()
                .enumerate()
                .map(|(i, s)| (s, format!("192.0.2.{}", i + 1))),
        )
        .collect();
    let receipts = join_from(&app, &crowd, id).await;
    let kinds: HashMap<&str, &str> = receipts
        .iter()
        .enumerate()
        .map(|(i, r)| (r.as_str(), if i < 65 { "demoted" } else { "kept" }))
        .collect();

    let drawing = published_drawing(&app, id).await;
    assert_eq!(
        drawing["crowd"],
        json!({"policy": "demote", "threshold": 20, "entries": 120, "groups_over": 1,
               "entries_over": 65, "demoted": 65}),
        "{}",
        drawing["rule"]
    );
    let places = drawing["places"].as_array().unwrap();
    for (i, p) in places.iter().enumerate() {
        let expected = if i < 55 { "kept" } else { "demoted" };
        assert_eq!(
            kinds[p["receipt"].as_str().unwrap()],
            expected,
            "place {}: {p}",
            i + 1
        );
        assert_eq!(p["demoted"].as_bool().unwrap_or(false), i >= 55, "{p}");
        assert!(!p["groups"].as_array().unwrap().is_empty(), "{p}");
    }
    let (code, out, err) = verify(&drawing, &["--places"]);
    assert_eq!(code, 0, "{err}");
    let recomputed: HashMap<String, i64> = serde_json::from_str(&out).unwrap();

    // The line admits in the drawing's order: every shopper's place, as the line numbers it, is
    // the verifier's.
    let app = &app;
    let told = futures_util::stream::iter(crowd.iter().map(|(s, _)| async move {
        let status = eventually(10, "a numbered place", || async {
            let (code, status, _) = poll(app, &s.client, id).await;
            assert_eq!(code, 200, "{status}");
            status["place"].as_i64()
        })
        .await;
        status
    }));
    let told: Vec<i64> =
        futures_util::StreamExt::collect(futures_util::StreamExt::buffered(told, 16)).await;
    for (receipt, place) in receipts.iter().zip(&told) {
        assert_eq!(recomputed[receipt], *place, "receipt {receipt}");
    }

    // A group hash changed, or a farm's entry shown as kept, is caught.
    let farm_entry = places
        .iter()
        .find(|p| receipts[..60].iter().any(|r| p["receipt"] == r.as_str()))
        .unwrap();
    let mut moved = drawing.clone();
    moved["places"][0]["groups"] = farm_entry["groups"].clone();
    let mut unflagged = drawing.clone();
    unflagged["places"][119]["demoted"] = json!(false);
    for (what, tampered) in [("a group", &moved), ("a demotion", &unflagged)] {
        let (code, _, err) = verify(tampered, &[]);
        assert_eq!(code, 1, "{what} changed goes unnoticed: {err}");
    }
    // The merchant sees what the draw did; the policy no longer changes.
    let (_, settings) = settings_of(app, &merchant, id).await;
    assert_eq!(settings["outcome"], drawing["crowd"]);
    let off = json!({"policy": "off", "threshold": 20});
    refused(app, &merchant, id, off, 409, "already_started").await;
}

/// `observe` counts the farm and moves nobody: the order is the plain drawing's.
#[tokio::test]
async fn observe_counts_the_farm_and_moves_nobody() {
    let app = spawn_app_with(|c| c.trusted_proxies = 1).await;
    let merchant = merchant(&app).await;
    let id = paused_drawn_sale(&app, &merchant, 6, 5).await;
    // Refused changes change nothing.
    for body in [
        json!({"policy": "demote", "threshold": 1}),
        json!({"policy": "everyone", "threshold": 20}),
    ] {
        refused(&app, &merchant, id, body, 400, "invalid_input").await;
    }
    let (code, _) = set_crowd(
        &app,
        &merchant,
        id,
        json!({"policy": "observe", "threshold": 5}),
    )
    .await;
    assert_eq!(code, 200);
    let crowd: Vec<(Shopper, String)> = shoppers(&app, 16)
        .await
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let address = if i < 10 {
                format!("198.51.100.{i}")
            } else {
                format!("192.0.{i}.1")
            };
            (s, address)
        })
        .collect();
    join_from(&app, &crowd, id).await;
    let drawing = published_drawing(&app, id).await;
    assert_eq!(
        drawing["crowd"],
        json!({"policy": "observe", "threshold": 5, "entries": 16, "groups_over": 1,
               "entries_over": 10, "demoted": 0})
    );
    assert!(drawing["places"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p.get("demoted").is_none()));
    let (code, _, err) = verify(&drawing, &[]);
    assert_eq!(code, 0, "{err}");
    // The plain rule's order: the drawing without its groups checks out as a drawing of no policy.
    let mut plain = drawing.clone();
    plain.as_object_mut().unwrap().remove("crowd");
    let (code, _, err) = verify(&plain, &[]);
    assert_eq!(code, 0, "{err}");
    // The count is kept for the report, once the draw has run.
    eventually(10, "the draw's outcome kept", || async {
        let (_, settings) = settings_of(&app, &merchant, id).await;
        (settings["outcome"] == drawing["crowd"]).then_some(())
    })
    .await;
}

/// Only a line that draws its places groups its entries.
#[tokio::test]
async fn a_sale_whose_line_does_not_draw_groups_nobody() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 10, json!({"waiting_room": false})).await["id"]
        .as_i64()
        .unwrap();
    let demote = json!({"policy": "demote", "threshold": 20});
    refused(&app, &merchant, id, demote, 400, "invalid_input").await;
}
