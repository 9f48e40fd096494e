//! Stock shards: one sale's stock split over several Redis keys (on a cluster, several masters).
//! The promises of a single stock hold: exact stock, exact per-user limit, no unit stranded in
//! a shard, idempotent retries, units of cancelled orders back on sale. `make test` runs these
//! against the single Redis and against a 3 + 3 Redis Cluster.

use crate::helpers::*;
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};
use server::infra::keys::{home_shard, token_home};
use std::collections::HashSet;

async fn sharded_sale(app: &TestApp, stock: i64, shards: i16, fields: Value) -> i64 {
    let merchant = merchant(app).await;
    let mut body = json!({"stock_shards": shards});
    for (k, v) in fields.as_object().unwrap() {
        body[k] = v.clone();
    }
    let activity = live_activity(app, &merchant, stock, body).await;
    assert_eq!(activity["stock_shards"], shards, "{activity}");
    activity["id"].as_i64().unwrap()
}

async fn buy_once(app: &TestApp, s: &Shopper, id: i64) -> (u16, Value) {
    let path = app.path(&s.client, id).await;
    json(app.buy(&s.client, id, json!({"path": path})).await).await
}

#[tokio::test]
async fn two_thousand_buyers_for_a_hundred_units_over_four_shards_get_exactly_a_hundred() {
    let app = spawn_app().await;
    let id = sharded_sale(&app, 100, 4, json!({})).await;
    assert_eq!(shard_stock(&app, id).await, vec![25, 25, 25, 25]);
    let buyers = shoppers(&app, 2000).await;

    let paths: Vec<String> = stream::iter(&buyers)
        .map(|s| app.path(&s.client, id))
        .buffered(64)
        .collect()
        .await;
    let app = &app;
    // Each buyer as a client is told to behave: a `503` (the instance shedding load under 2,000
    // buys at once on two cores) is asked again with the same Idempotency-Key after its
    // Retry-After, and gets the first request's answer if it had one.
    let requests = buyers
        .iter()
        .zip(paths)
        .enumerate()
        .map(|(i, (s, path))| async move {
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let answer = app
                    .buy_keyed(&s.client, id, &format!("b{i}"), json!({"path": path}))
                    .await;
                if answer.0 != 503 || tokio::time::Instant::now() > deadline {
                    return answer;
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await; // paced: the 503's Retry-After, as a client waits
            }
        });
    let answers = futures_util::future::join_all(requests).await;

    let accepted = tokens_of(&answers);
    let mut refusals = std::collections::BTreeMap::<String, usize>::new();
    for (status, body) in answers.iter().filter(|(s, _)| *s != 202) {
        *refusals
            .entry(format!("{status} {}", body["error"]))
            .or_default() += 1;
    }
    assert_eq!(
        accepted.len(),
        100,
        "{refusals:?} shards left {:?}",
        shard_stock(app, id).await
    );
    assert_eq!(accepted.iter().collect::<HashSet<_>>().len(), 100);
    for (status, body) in answers.iter().filter(|(s, _)| *s != 202) {
        assert_eq!(
            (*status, body["error"].as_str()),
            (409, Some("sold_out")),
            "{body}"
        );
    }
    // The tokens come from every shard, so every shard's journal carried orders.
    let homes: HashSet<i16> = accepted
        .iter()
        .map(|t| token_home(&t.parse().unwrap()).unwrap().1)
        .collect();
    assert_eq!(homes.len(), 4, "{homes:?}");
    assert_settled(app, id, &accepted).await;
    assert_eq!(shard_stock(app, id).await, vec![0, 0, 0, 0]);
    assert_eq!(app.order_units(id, "confirmed").await, 100);
}

#[tokio::test]
async fn one_user_firing_fifty_concurrent_buys_on_a_sharded_sale_gets_exactly_two() {
    let app = spawn_app().await;
    let id = sharded_sale(&app, 100, 4, json!({"per_user_limit": 2})).await;
    let shopper = shoppers(&app, 1).await.remove(0);
    // The user's home shard has one unit only: the second unit must be borrowed, and the
    // limit still counted at home.
    let home = home_shard(shopper.id, 4) as usize;
    let _: () = redis::cmd("SET")
        .arg(app.shard_keys(id).await[home].stock())
        .arg(1)
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    let before: i64 = shard_stock(&app, id).await.iter().sum();
    let path = app.path(&shopper.client, id).await;

    let keys: Vec<String> = (0..50).map(|i| format!("k-{i}")).collect();
    let requests = keys
        .iter()
        .map(|key| app.buy_keyed(&shopper.client, id, key, json!({"path": path})));
    let answers = futures_util::future::join_all(requests).await;

    let accepted = tokens_of(&answers);
    assert_eq!(accepted.len(), 2, "{answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != 202) {
        let code = body["error"].as_str().unwrap();
        assert!(
            matches!(
                (*status, code),
                (403, "limit_reached") | (429, "rate_limited") | (403, "blocked")
            ),
            "{body}"
        );
    }
    assert_eq!(shard_stock(&app, id).await.iter().sum::<i64>(), before - 2);
    assert_eq!(shard_stock(&app, id).await[home], 0);
    // Both orders are the user's, and no unit was held for nothing.
    let holders: Option<i64> = redis::cmd("HGET")
        .arg(app.shard_keys(id).await[home].holders())
        .arg(shopper.id)
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    assert_eq!(holders, Some(2));
    // Once the pipeline is idle (the journals drained, nothing unsettled), the shopper has
    // exactly two orders: not two at some instant and more later. (The stock was set by hand
    // above, so the sale's totals do not add up; only the orders are counted.)
    eventually(60, "the pipeline is idle", || async {
        (app.journal_len(id).await == 0 && app.unsettled_len(id).await == 0).then_some(())
    })
    .await;
    let orders: Vec<(i64, i32)> =
        sqlx::query_as("SELECT user_id, quantity FROM orders WHERE activity_id = $1")
            .bind(id)
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(orders, [(shopper.id, 1), (shopper.id, 1)]);
}

#[tokio::test]
async fn a_sale_whose_units_sit_in_one_shard_still_sells_every_unit() {
    let app = spawn_app().await;
    let id = sharded_sale(&app, 12, 4, json!({})).await;
    move_all_units_to(&app, id, 3).await;
    // Shoppers of every home shard: most must borrow from shard 3.
    let buyers = shoppers(&app, 40).await;
    assert_eq!(
        buyers
            .iter()
            .map(|s| home_shard(s.id, 4))
            .collect::<HashSet<_>>()
            .len(),
        4
    );

    let answers: Vec<(u16, Value)> = stream::iter(&buyers)
        .map(|s| buy_once(&app, s, id))
        .buffered(8)
        .collect()
        .await;

    let accepted = tokens_of(&answers);
    assert_eq!(accepted.len(), 12, "{answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != 202) {
        assert_eq!(
            (*status, body["error"].as_str()),
            (409, Some("sold_out")),
            "{body}"
        );
    }
    assert_settled(&app, id, &accepted).await;
    assert_eq!(shard_stock(&app, id).await, vec![0, 0, 0, 0]);
    let metrics = app.metrics().await;
    let borrowed = metric_in(&metrics, "seckill_borrowed_reservations_total").unwrap_or(0.0);
    assert!(
        borrowed >= 6.0,
        "most units were lent by shard 3: {borrowed}"
    );
    // Each borrowing is timed, those that found nothing too.
    let timed = metric_in(&metrics, "seckill_gate_borrow_seconds_count").unwrap_or(0.0);
    assert!(
        timed >= borrowed,
        "{timed} borrowings timed of {borrowed} lent"
    );
}

#[tokio::test]
async fn an_idempotency_key_retry_on_a_sharded_sale_takes_nothing_more_even_when_borrowing() {
    let app = spawn_app().await;
    let id = sharded_sale(&app, 40, 4, json!({"per_user_limit": 5})).await;
    let shopper = shoppers(&app, 1).await.remove(0);
    let home = home_shard(shopper.id, 4) as usize;
    // Nothing at home: the buy borrows.
    move_all_units_to(&app, id, (home + 2) % 4).await;
    let path = app.path(&shopper.client, id).await;

    let requests = (0..20).map(|_| {
        app.buy_keyed(
            &shopper.client,
            id,
            "retry-after-timeout",
            json!({"path": path}),
        )
    });
    let answers = futures_util::future::join_all(requests).await;

    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
    assert_eq!(answers[0].0, 202, "{answers:?}");
    assert_eq!(shard_stock(&app, id).await.iter().sum::<i64>(), 39);
    let token = answers[0].1["token"].as_str().unwrap().to_string();
    assert_settled(&app, id, std::slice::from_ref(&token)).await;
    // Later retries answer the same too.
    let (status, body) = app
        .buy_keyed(
            &shopper.client,
            id,
            "retry-after-timeout",
            json!({"path": path}),
        )
        .await;
    assert_eq!(
        (status, body["token"].as_str()),
        (202, Some(token.as_str()))
    );
    assert_eq!(app.remaining(id).await, 39);
    // The settled borrowing left the token as the key's first answer: a retry is no borrowing.
    let first: Option<String> = redis::cmd("HGET")
        .arg(
            app.redis
                .keys
                .shard(id, home as i16, 4)
                .idempotency_answers(),
        )
        .arg(server::infra::keys::idempotency_field(
            shopper.id,
            "retry-after-timeout",
        ))
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    assert_eq!(first.as_deref(), Some(token.as_str()));
}

#[tokio::test]
async fn a_cancelled_orders_unit_goes_back_to_a_shard_and_sells_again() {
    let app = spawn_app().await;
    let id = sharded_sale(&app, 2, 2, json!({"payment_window_secs": 1})).await;
    let buyers = shoppers(&app, 3).await;
    let mut tokens = Vec::new();
    for s in &buyers[..2] {
        let (status, body) = buy_once(&app, s, id).await;
        assert_eq!(status, 202, "{body}");
        tokens.push(body["token"].as_str().unwrap().to_string());
    }
    let (status, body) = buy_once(&app, &buyers[2], id).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("sold_out")),
        "{body}"
    );
    assert_settled(&app, id, &tokens).await;

    // Nobody pays: after a second both are cancelled and their units are back.
    eventually(30, "both orders cancelled and their units back", || async {
        (app.order_units(id, "cancelled").await == 2 && app.remaining(id).await == 2).then_some(())
    })
    .await;
    let (status, body) = buy_once(&app, &buyers[2], id).await;
    assert_eq!(status, 202, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    eventually(30, "the resold unit is an order", || async {
        (app.order_units(id, "confirmed").await == 1).then_some(())
    })
    .await;
    assert_eq!(app.remaining(id).await, 1);
    assert!(!tokens.contains(&token));
}

#[tokio::test]
async fn shards_are_checked_and_adding_stock_spreads_over_them() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let now = chrono::Utc::now();
    for bad in [json!(0), json!(65), json!("four")] {
        let resp = merchant
            .post(app.url("/api/admin/activities"))
            .json(&json!({
                "title": "t", "price_cents": 100, "seckill_price_cents": 50,
                "starts_at": now.to_rfc3339(), "ends_at": (now + chrono::Duration::hours(1)).to_rfc3339(),
                "stock": 100, "stock_shards": bad,
            }))
            .send()
            .await
            .unwrap();
        let (status, body) = json(resp).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_input")),
            "{bad}: {body}"
        );
    }
    let id = sharded_sale(&app, 10, 4, json!({})).await;
    assert_eq!(shard_stock(&app, id).await, vec![3, 3, 2, 2]);
    let resp = merchant
        .post(app.url(&format!("/api/admin/activities/{id}/stock")))
        .json(&json!({"add": 6}))
        .send()
        .await
        .unwrap();
    let (status, body) = json(resp).await;
    assert_eq!(
        (status, body["remaining"].as_i64()),
        (200, Some(16)),
        "{body}"
    );
    assert_eq!(shard_stock(&app, id).await, vec![5, 5, 3, 3]);
    // The figures the merchant sees sum the shards.
    let (_, stats) = json(
        merchant
            .get(app.url(&format!("/api/admin/activities/{id}/stats")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stats["remaining"], 16, "{stats}");
    let (_, stock) = json(app.get(&format!("/api/activities/{id}/stock")).await).await;
    assert_eq!(stock["remaining"], 16, "{stock}");
}

/// With several reservations queues, the shards of a sale spread over them, and every queue has
/// a consumer: every accepted unit becomes an order. A queue left without a consumer keeps its
/// reservations and the sale never settles.
#[tokio::test]
async fn the_shards_of_a_sale_spread_over_the_reservations_queues_and_every_unit_becomes_an_order()
{
    let app = spawn_app_with(|c| c.reservation_queues = 3).await;
    let id = sharded_sale(&app, 80, 8, json!({})).await;
    let topology = server::infra::broker::Topology::new(&app.config.amqp_prefix, None)
        .with_reservation_queues(3);
    let queues: HashSet<&str> = app
        .shard_keys(id)
        .await
        .iter()
        .map(|shard| topology.reservation_queue_of(&shard.journal()))
        .collect();
    assert!(queues.len() >= 2, "eight shards on one queue: {queues:?}");
    let buyers = shoppers(&app, 120).await;
    let app = &app;
    let answers: Vec<(u16, Value)> = stream::iter(&buyers)
        .map(|s| buy_once(app, s, id))
        .buffer_unordered(32)
        .collect()
        .await;
    let accepted = tokens_of(&answers);
    assert_eq!(accepted.len(), 80);
    assert_settled(app, id, &accepted).await;
    assert_eq!(app.order_units(id, "confirmed").await, 80);
}

#[tokio::test]
async fn a_buy_of_more_than_is_left_leaves_the_rest_on_sale_for_smaller_buys() {
    let app = spawn_app().await;
    for shards in [1_i16, 2] {
        let n = usize::try_from(shards).unwrap();
        // One unit on each shard and a limit of two: no shard holds the two units asked for.
        let id = sharded_sale(
            &app,
            i64::from(shards),
            shards,
            json!({"per_user_limit": 2}),
        )
        .await;
        let buyers = shoppers(&app, n + 1).await;
        let path = app.path(&buyers[0].client, id).await;
        let resp = app
            .buy(&buyers[0].client, id, json!({"path": path, "quantity": 2}))
            .await;
        let (status, body) = json(resp).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (409, Some("sold_out")),
            "{shards} shard(s): {body}"
        );
        // At once, each unit left still sells to a buy of one: the refusal of two did not
        // mark the sale sold out.
        for buyer in &buyers[1..] {
            let (status, body) = buy_once(&app, buyer, id).await;
            assert_eq!(status, 202, "{shards} shard(s): {body}");
        }
        assert_eq!(shard_stock(&app, id).await, vec![0; n]);
    }
}
