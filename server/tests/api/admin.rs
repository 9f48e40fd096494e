//! The admin console's own reads and the rules for its pages.

use crate::helpers::*;
use app::api::Role;
use serde_json::json;

#[tokio::test]
async fn the_console_lists_every_sale_with_its_status_and_figures() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let live = live_activity(&app, &merchant, 3, json!({"title": "Live one"})).await;
    let later = chrono::Utc::now() + chrono::Duration::hours(2);
    let upcoming = live_activity(
        &app,
        &merchant,
        7,
        json!({"title": "Later one", "starts_at": later.to_rfc3339(), "ends_at": (later + chrono::Duration::hours(1)).to_rfc3339()}),
    )
    .await;
    let live_id = live["id"].as_i64().unwrap();
    let buyers = shoppers(&app, 3).await;
    let mut tokens = Vec::new();
    for b in &buyers {
        let path = app.path(&b.client, live_id).await;
        let (status, body) = json(app.buy(&b.client, live_id, json!({"path": path})).await).await;
        assert_eq!(status, 202, "{body}");
        tokens.push(body["token"].as_str().unwrap().to_string());
    }
    assert_settled(&app, live_id, &tokens).await;

    let resp = merchant
        .get(app.url("/api/admin/activities"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let (status, list) = json(resp).await;
    assert_eq!(status, 200, "{list}");
    let items = list["activities"].as_array().unwrap();
    let find = |id: &serde_json::Value| items.iter().find(|a| a["id"] == *id).unwrap().clone();
    let (l, u) = (find(&live["id"]), find(&upcoming["id"]));
    assert_eq!(
        (
            l["status"].as_str(),
            l["remaining"].as_i64(),
            l["sold"].as_i64()
        ),
        (Some("sold_out"), Some(0), Some(3))
    );
    assert_eq!(
        (
            u["status"].as_str(),
            u["remaining"].as_i64(),
            u["sold"].as_i64()
        ),
        (Some("upcoming"), Some(7), Some(0))
    );
    assert_eq!(
        l["title"], "Live one",
        "the activity's own fields are there too"
    );
    assert_eq!(items[0]["id"], upcoming["id"], "newest start first");

    let (status, one) = json(
        merchant
            .get(app.url(&format!("/api/admin/activities/{live_id}")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, one["status"].as_str(), one["sold"].as_i64()),
        (200, Some("sold_out"), Some(3))
    );
    assert_error(
        merchant
            .get(app.url("/api/admin/activities/999999"))
            .send()
            .await
            .unwrap(),
        404,
        "not_found",
    )
    .await;
    assert_error(
        merchant
            .get(app.url("/api/admin/activities/abc"))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_input",
    )
    .await;

    // Shoppers and visitors are kept out of every admin read.
    for path in [
        "/api/admin/activities",
        &format!("/api/admin/activities/{live_id}"),
        &format!("/api/admin/activities/{live_id}/stock-additions"),
    ] {
        assert_error(
            buyers[0].client.get(app.url(path)).send().await.unwrap(),
            403,
            "forbidden",
        )
        .await;
        assert_error(app.get(path).await, 401, "unauthenticated").await;
    }
}

#[tokio::test]
async fn every_stock_addition_is_recorded_with_who_and_when() {
    let app = spawn_app().await;
    let user = server::domain::account::create_account(
        &app.db,
        app::api::Role::Merchant,
        None,
        &unique_name("audit"),
        "merchant-password",
    )
    .await
    .unwrap()
    .unwrap();
    let merchant = client_of_shop(user.id.0, Role::Merchant, user.shop.map_or(1, |s| s.id));
    let activity = live_activity(&app, &merchant, 5, json!({})).await;
    let id = activity["id"].as_i64().unwrap();
    let additions = || async {
        json(
            merchant
                .get(app.url(&format!("/api/admin/activities/{id}/stock-additions")))
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let (status, empty) = additions().await;
    assert_eq!(
        (status, empty["additions"].as_array().map(Vec::len)),
        (200, Some(0))
    );

    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    for add in [4, 6] {
        let resp = merchant
            .post(app.url(&format!("/api/admin/activities/{id}/stock")))
            .json(&json!({"add": add}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
    }
    // A refused addition is not recorded.
    let resp = merchant
        .post(app.url(&format!("/api/admin/activities/{id}/stock")))
        .json(&json!({"add": -3}))
        .send()
        .await
        .unwrap();
    assert_error(resp, 400, "invalid_input").await;

    let (_, list) = additions().await;
    let items = list["additions"].as_array().unwrap();
    assert_eq!(
        items
            .iter()
            .map(|a| a["added"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![6, 4],
        "newest first"
    );
    for a in items {
        assert_eq!(a["merchant"], user.username.as_str());
        let at = chrono::DateTime::parse_from_rfc3339(a["at"].as_str().unwrap()).unwrap();
        assert!(at > before && at <= chrono::Utc::now(), "{at}");
    }
    assert_error(
        merchant
            .get(app.url("/api/admin/activities/999999/stock-additions"))
            .send()
            .await
            .unwrap(),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn buy_attempts_are_counted_per_second_over_every_instance() {
    let app = spawn_app().await;
    let other = spawn_instance(&app.config).await;
    let merchant = merchant(&app).await;
    let activity = live_activity(&app, &merchant, 5, json!({})).await;
    let id = activity["id"].as_i64().unwrap();
    let buyers = shoppers(&app, 10).await;
    // Ten shoppers buy, half through each instance: five get units, five are told it is sold out
    // (some of them by an instance's own flag, without Redis): all ten are attempts.
    for (i, b) in buyers.iter().enumerate() {
        let target = if i % 2 == 0 { &app } else { &other };
        let path = target.path(&b.client, id).await;
        let status = target
            .buy(&b.client, id, json!({"path": path}))
            .await
            .status()
            .as_u16();
        assert!(status == 202 || status == 409, "{status}");
    }
    // Made-up activities are not counted.
    let path = app.path(&buyers[0].client, id).await;
    assert_eq!(
        app.buy(&buyers[0].client, 999_999, json!({"path": path}))
            .await
            .status()
            .as_u16(),
        404
    );

    let counted = eventually(5, "ten attempts flushed to Redis", || async {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}tries:{{a:{id}}}:*", app.config.redis_prefix))
            .query_async(&mut app.redis.conn())
            .await
            .unwrap();
        let mut total = 0i64;
        for k in &keys {
            let n: i64 = redis::cmd("GET")
                .arg(k)
                .query_async(&mut app.redis.conn())
                .await
                .unwrap();
            total += n;
        }
        (total == 10).then_some(keys.len())
    })
    .await;
    assert!(counted >= 1);
    let stray: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}tries:{{a:999999}}:*", app.config.redis_prefix))
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    assert!(stray.is_empty(), "{stray:?}");

    // The stats show the last complete second, summed over both instances. On a slow machine the
    // second of the ten may have passed before the first look: then one more attempt every two
    // seconds (never more than ten in a second) gives a later second to show.
    let nudged = std::cell::Cell::new(tokio::time::Instant::now());
    let seen = eventually(15, "the dashboard's rate shows the attempts", || async {
        let (_, stats) = json(
            merchant
                .get(app.url(&format!("/api/admin/activities/{id}/stats")))
                .send()
                .await
                .unwrap(),
        )
        .await;
        let n = stats["attempts_per_sec"].as_i64().unwrap();
        if n == 0 && nudged.get().elapsed() > std::time::Duration::from_secs(2) {
            nudged.set(tokio::time::Instant::now());
            let status = app
                .buy(&buyers[0].client, id, json!({"path": path}))
                .await
                .status()
                .as_u16();
            assert!(status == 409 || status == 403, "{status}");
        }
        (n > 0).then_some(n)
    })
    .await;
    assert!(seen <= 10, "{seen}");
}

#[tokio::test]
async fn admin_pages_send_visitors_to_sign_in_and_refuse_shoppers() {
    let app = spawn_app().await;
    let visitor = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for path in [
        "/admin",
        "/admin/activities/new",
        "/admin/activities/7?tab=orders",
    ] {
        let resp = visitor.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 303, "{path}");
        let expected = format!(
            "/login?next={}",
            form_urlencoded::byte_serialize(path.as_bytes()).collect::<String>()
        );
        assert_eq!(resp.headers()["location"], expected.as_str());
    }

    let shopper = shoppers(&app, 1).await.remove(0);
    let resp = shopper.client.get(app.url("/admin")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    assert_eq!(resp.headers()["cache-control"], "private, no-store");
    let html = resp.text().await.unwrap();
    assert!(html.contains("data-testid=\"forbidden\""), "{html}");

    let merchant = merchant(&app).await;
    let resp = merchant.get(app.url("/admin")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["cache-control"], "private, no-store");
    let html = resp.text().await.unwrap();
    assert!(!html.contains("data-testid=\"forbidden\""));
    assert!(
        html.contains("data-testid=\"admin-new-activity\""),
        "the console itself is rendered"
    );
}

#[tokio::test]
async fn a_merchant_sets_the_shops_time_zone_to_a_known_one_only() {
    let app = spawn_app().await;
    let merchant = merchant_of(&app, &unique_name("Zoned shop")).await;
    let set = |zone: &str| {
        merchant
            .post(app.url("/api/admin/shop"))
            .json(&serde_json::json!({ "time_zone": zone }))
            .send()
    };
    let (status, shop) = json(
        merchant
            .get(app.url("/api/admin/shop"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, shop["time_zone"].as_str()),
        (200, Some("UTC")),
        "{shop}"
    );
    let (status, shop) = json(set("Asia/Shanghai").await.unwrap()).await;
    assert_eq!(
        (status, shop["time_zone"].as_str()),
        (200, Some("Asia/Shanghai")),
        "{shop}"
    );
    for bad in [
        "Mars/Olympus_Mons",
        "",
        "posixrules",
        "Factory",
        "Asia/Shanghai'; --",
    ] {
        let body = assert_error(set(bad).await.unwrap(), 400, "invalid_input").await;
        assert!(
            body["message"].as_str().unwrap().contains("time_zone"),
            "{body}"
        );
    }
    // Unchanged by the refusals; written to the shop's audit.
    let (_, shop) = json(
        merchant
            .get(app.url("/api/admin/shop"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(shop["time_zone"], "Asia/Shanghai");
    let (_, audit) = json(
        merchant
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
            .any(|e| e["action"] == "shop.time_zone" && e["detail"] == "Asia/Shanghai"),
        "{audit}"
    );
    // Shoppers may not.
    let shopper = shoppers(&app, 1).await.remove(0);
    let resp = shopper
        .client
        .get(app.url("/api/admin/shop"))
        .send()
        .await
        .unwrap();
    assert_error(resp, 403, "forbidden").await;
}
