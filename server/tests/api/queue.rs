//! The waiting room (issue: a fair line for the crowd): places drawn at random at the start,
//! admission in order and only while admitted shoppers could still find stock, tickets that the
//! buy path checks, one line served by every instance.

use crate::helpers::*;
use reqwest::Client;
use serde_json::{json, Value};
use signing::{tickets::TICKET_MS, Tickets};

async fn join(app: &TestApp, client: &Client, id: i64) -> Value {
    let resp = client
        .post(app.url(&format!("/api/activities/{id}/queue")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, body) = json(resp).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn status(app: &TestApp, client: &Client, id: i64) -> Value {
    let resp = client
        .get(app.url(&format!("/api/activities/{id}/queue")))
        .send()
        .await
        .unwrap();
    let (code, body) = json(resp).await;
    assert_eq!(code, 200, "{body}");
    body
}

/// Until the sale has started and the line has settled into this state for `client`.
async fn until_state(app: &TestApp, client: &Client, id: i64, state: &str) -> Value {
    eventually(20, &format!("queue state {state}"), || async {
        let s = status(app, client, id).await;
        (s["state"] == state).then_some(s)
    })
    .await
}

async fn stats(app: &TestApp, merchant: &Client, id: i64) -> Value {
    let resp = merchant
        .get(app.url(&format!("/api/admin/activities/{id}/stats")))
        .send()
        .await
        .unwrap();
    json(resp).await.1
}

async fn buy_with(app: &TestApp, client: &Client, id: i64, ticket: Option<&str>) -> (u16, Value) {
    let path = app.path(client, id).await;
    let mut body = json!({ "path": path });
    if let Some(t) = ticket {
        body["admission"] = t.into();
    }
    json(app.buy(client, id, body).await).await
}

#[tokio::test]
async fn a_sale_with_a_waiting_room_sells_only_against_a_valid_ticket_of_this_user_and_sale() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = sale_with_line(&app, &merchant, 5, 2, 1000).await;
    let other = sale_with_line(&app, &merchant, 5, 2, 1000).await;
    let activity = json(app.get(&format!("/api/activities/{id}")).await)
        .await
        .1;
    assert_eq!(
        (
            activity["waiting_room"].as_bool(),
            activity["admit_per_sec"].as_i64()
        ),
        (Some(true), Some(1000))
    );
    let buyers = shoppers(&app, 2).await;
    for b in &buyers {
        let joined = join(&app, &b.client, id).await;
        assert_eq!(joined["state"], "drawing", "{joined}");
        join(&app, &b.client, other).await;
    }
    let mine = until_state(&app, &buyers[0].client, id, "admitted").await;
    let ticket = mine["ticket"].as_str().unwrap().to_string();
    let theirs = until_state(&app, &buyers[1].client, id, "admitted").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let other_sale = until_state(&app, &buyers[0].client, other, "admitted").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();

    let now = chrono::Utc::now().timestamp_millis();
    let tickets = Tickets::new(SECRET);
    let expired = tickets.issue(buyers[0].id, id, now - 1);
    // Its last character changed (to `x`, or to `y` when it already was `x`: one ticket in 64).
    let last = if ticket.ends_with('x') { 'y' } else { 'x' };
    let forged = format!("{}{last}", &ticket[..ticket.len() - 1]);
    let stretched = ticket.replacen('.', "0.", 1);
    let foreign =
        Tickets::new(b"a secret this deployment never had!!").issue(buyers[0].id, id, now + 30_000);
    let refused: [(&str, Option<&str>); 7] = [
        ("none", None),
        ("garbage", Some("not-a-ticket")),
        ("forged", Some(&forged)),
        ("expiry moved", Some(&stretched)),
        ("expired", Some(&expired)),
        ("another user's", Some(&theirs)),
        ("another sale's", Some(&other_sale)),
    ];
    for (what, t) in refused {
        let (code, body) = buy_with(&app, &buyers[0].client, id, t).await;
        assert_eq!(
            (code, body["error"].as_str()),
            (403, Some("not_admitted")),
            "{what}: {body}"
        );
    }
    let (code, body) = buy_with(&app, &buyers[0].client, id, Some(&foreign)).await;
    assert_eq!(
        (code, body["error"].as_str()),
        (403, Some("not_admitted")),
        "another secret: {body}"
    );
    assert_eq!(app.remaining(id).await, 5, "a refused buy takes nothing");

    let (code, body) = buy_with(&app, &buyers[0].client, id, Some(&ticket)).await;
    assert_eq!(code, 202, "{body}");
    assert_eq!(app.remaining(id).await, 4);
    // A sale without a waiting room needs no ticket, and says so to the page.
    let open = live_activity(&app, &merchant, 5, json!({})).await["id"]
        .as_i64()
        .unwrap();
    assert_eq!(status(&app, &buyers[0].client, open).await["state"], "open");
    assert_eq!(buy_with(&app, &buyers[0].client, open, None).await.0, 202);
    // A ticket never outlives its time.
    assert!(mine["ticket_expires_at"].is_string());
    const _: () = assert!(TICKET_MS <= 120_000);
}

#[tokio::test]
async fn places_drawn_at_the_start_are_not_the_joining_order_and_later_arrivals_queue_behind() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    // One admission a second: the line barely moves while it is read.
    let id = sale_with_line(&app, &merchant, 1000, 3, 1).await;
    let crowd = shoppers(&app, 20).await;
    for s in &crowd {
        join(&app, &s.client, id).await;
    }
    // Joining again (another tab, a bot's retries) keeps the one place: the number drawn for it
    // stays what it was (a re-draw on every join would let a bot retry until its place is good).
    let line = app.redis.keys.queue(id).line();
    let app_ref = &app;
    let drawn = |user: i64| {
        let line = line.clone();
        async move {
            let score: Option<f64> = redis::cmd("ZSCORE")
                .arg(&line)
                .arg(user)
                .query_async(&mut app_ref.redis.conn())
                .await
                .unwrap();
            score.expect("a joined shopper has a place")
        }
    };
    for s in &crowd[..3] {
        let before = drawn(s.id).await;
        for _ in 0..3 {
            assert_eq!(join(&app, &s.client, id).await["state"], "drawing");
        }
        assert_eq!(drawn(s.id).await, before, "a re-join drew again");
    }
    let members: i64 = redis::cmd("ZCARD")
        .arg(&line)
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    assert_eq!(members, 20, "one place per shopper");
    eventually(20, "the start", || async {
        let s = status(&app, &crowd[19].client, id).await;
        (s["state"] != "drawing").then_some(())
    })
    .await;
    let late = shoppers(&app, 1).await.pop().unwrap();
    let late_place = join(&app, &late.client, id).await;

    // Everyone's place at once: admitted ones count as ahead of everyone still waiting.
    let mut places = Vec::new();
    for (joined, s) in crowd.iter().enumerate() {
        let st = status(&app, &s.client, id).await;
        let place = match st["state"].as_str() {
            Some("waiting") => st["position"].as_i64().unwrap(),
            Some("admitted") => 0,
            other => panic!("unexpected state {other:?}: {st}"),
        };
        places.push((place, joined));
    }
    let waiting: Vec<i64> = places.iter().map(|p| p.0).filter(|&p| p > 0).collect();
    let mut sorted = waiting.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        waiting.len(),
        "every place is distinct: {places:?}"
    );
    assert!(
        waiting.len() >= 15,
        "the line moves one a second: {places:?}"
    );
    let mut by_place = places.clone();
    by_place.sort_unstable();
    let order: Vec<usize> = by_place.iter().map(|p| p.1).collect();
    assert_ne!(
        order,
        (0..20).collect::<Vec<_>>(),
        "places must be drawn, not the joining order"
    );
    // Nor close to it, either way: pairs of shoppers in joining order are about half of all pairs
    // in a drawn line (95 of 190 on average, 15 either side being one standard deviation); the
    // joining order has none out of order, its reverse all of them.
    let out_of_order = (0..order.len())
        .flat_map(|i| (i + 1..order.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| order[i] > order[j])
        .count();
    assert!(
        (28..=162).contains(&out_of_order),
        "{out_of_order} of 190 pairs out of joining order: not a drawing ({order:?})"
    );
    // Arrived after the start: behind everyone who was there on time.
    assert_eq!(late_place["state"], "waiting", "{late_place}");
    let late_position = late_place["position"].as_i64().unwrap();
    assert!(
        late_position > *sorted.last().unwrap(),
        "{late_position} vs {sorted:?}"
    );
    // A re-join keeps it too.
    assert!(
        join(&app, &late.client, id).await["position"]
            .as_i64()
            .unwrap()
            <= late_position
    );
}

/// The waiting room admits in the order of the places drawn: every admission step takes the next
/// places after the last one it admitted. Each admitted shopper's claim deadline is its step's
/// time plus the claim window, so in drawn order the deadlines never go back.
#[tokio::test]
async fn shoppers_are_admitted_in_the_order_of_their_drawn_places() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    // Four admissions a second: twelve shoppers take at least three steps.
    let id = sale_with_line(&app, &merchant, 1000, 3, 4).await;
    let crowd = shoppers(&app, 12).await;
    for s in &crowd {
        assert_eq!(join(&app, &s.client, id).await["state"], "drawing");
    }
    let keys = app.redis.keys.queue(id);
    let score = |key: String, user: i64| {
        let app = &app;
        async move {
            let score: Option<f64> = redis::cmd("ZSCORE")
                .arg(key)
                .arg(user)
                .query_async(&mut app.redis.conn())
                .await
                .unwrap();
            score
        }
    };
    eventually(30, "all twelve admitted", || async {
        let admitted: i64 = redis::cmd("ZCARD")
            .arg(keys.admitted())
            .query_async(&mut app.redis.conn())
            .await
            .unwrap();
        (admitted == 12).then_some(())
    })
    .await;
    let mut by_place = Vec::new();
    for s in &crowd {
        let place = score(keys.line(), s.id).await.expect("a place drawn");
        let deadline = score(keys.admitted(), s.id).await.expect("admitted");
        by_place.push((place, deadline as i64, s.id));
    }
    by_place.sort_by(|a, b| a.0.total_cmp(&b.0));
    let deadlines: Vec<i64> = by_place.iter().map(|p| p.1).collect();
    let steps: std::collections::BTreeSet<i64> = deadlines.iter().copied().collect();
    assert!(
        steps.len() >= 3,
        "admitted over several steps: {by_place:?}"
    );
    assert!(
        deadlines.windows(2).all(|w| w[0] <= w[1]),
        "admitted out of the drawn order (place, claim deadline, shopper): {by_place:?}"
    );
}

#[tokio::test]
async fn two_instances_serve_one_line_and_admission_stops_while_admitted_shoppers_cover_the_stock()
{
    let a = spawn_app().await;
    let b = spawn_instance(&a.config).await;
    let merchant = merchant(&a).await;
    let id = sale_with_line(&a, &merchant, 2, 2, 1000).await;
    let crowd = shoppers(&a, 8).await;
    for (i, s) in crowd.iter().enumerate() {
        join(if i % 2 == 0 { &a } else { &b }, &s.client, id).await;
    }
    // Two units: at most four admitted shoppers may still be buying.
    let figures = eventually(20, "four admitted", || async {
        let q = stats(&a, &merchant, id).await["queue"].clone();
        (q["admitted"] == 4).then_some(q)
    })
    .await;
    assert_eq!(
        (figures["in_flight"].as_i64(), figures["waiting"].as_i64()),
        (Some(4), Some(4)),
        "{figures}"
    );
    // Both instances tell each shopper the same.
    let mut admitted = Vec::new();
    let mut positions = Vec::new();
    for s in &crowd {
        let (on_a, on_b) = (
            status(&a, &s.client, id).await,
            status(&b, &s.client, id).await,
        );
        assert_eq!(
            (&on_a["state"], &on_a["position"]),
            (&on_b["state"], &on_b["position"])
        );
        match on_a["state"].as_str() {
            Some("admitted") => admitted.push((s, on_a["ticket"].as_str().unwrap().to_string())),
            Some("waiting") => positions.push(on_a["position"].as_i64().unwrap()),
            other => panic!("{other:?}"),
        }
    }
    positions.sort_unstable();
    assert_eq!(positions, vec![1, 2, 3, 4]);
    // Several admission steps later (four a second on each instance), still no fifth.
    let seen_at = std::time::Instant::now();
    eventually(10, "a second of admission steps", || async {
        let q = stats(&b, &merchant, id).await["queue"].clone();
        assert_eq!(
            q["admitted"], 4,
            "admission must wait while the stock is covered: {q}"
        );
        (seen_at.elapsed() > std::time::Duration::from_secs(1)).then_some(())
    })
    .await;

    // One buys (on A, with the ticket B's line gave): one unit left for three admitted → still no
    // admission. The second unit sells (on B): the line hears "sold out" on both instances.
    let (code, body) = buy_with(&a, &admitted[0].0.client, id, Some(&admitted[0].1)).await;
    assert_eq!(code, 202, "{body}");
    let (code, body) = buy_with(&b, &admitted[1].0.client, id, Some(&admitted[1].1)).await;
    assert_eq!(code, 202, "{body}");
    let waiter = crowd
        .iter()
        .find(|s| admitted.iter().all(|(x, _)| x.id != s.id))
        .unwrap();
    until_state(&a, &waiter.client, id, "sold_out").await;
    until_state(&b, &waiter.client, id, "sold_out").await;
    assert_eq!(stats(&a, &merchant, id).await["queue"]["admitted"], 4);
    // An admitted shopper who finds nothing left is told so by the gate, not let through.
    let (code, body) = buy_with(&a, &admitted[2].0.client, id, Some(&admitted[2].1)).await;
    assert_eq!(
        (code, body["error"].as_str()),
        (409, Some("sold_out")),
        "{body}"
    );
}

#[tokio::test]
async fn a_shopper_whose_turn_was_used_joins_again_at_the_back_only_when_asking_again() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let starts = chrono::Utc::now() + chrono::Duration::seconds(2);
    let id = live_activity(
        &app,
        &merchant,
        10,
        json!({
            "starts_at": starts.to_rfc3339(),
            "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339(),
            "waiting_room": true,
            "admit_per_sec": 1000,
            "per_user_limit": 2,
        }),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let crowd = shoppers(&app, 3).await;
    for s in &crowd {
        join(&app, &s.client, id).await;
    }
    let mine = until_state(&app, &crowd[0].client, id, "admitted").await;
    let (code, body) = buy_with(&app, &crowd[0].client, id, mine["ticket"].as_str()).await;
    assert_eq!(code, 202, "{body}");
    // The turn is used: a plain join keeps that (no second turn by reloading the page)...
    until_state(&app, &crowd[0].client, id, "passed").await;
    assert_eq!(join(&app, &crowd[0].client, id).await["state"], "passed");
    // ...and asking again queues once more, behind everyone who joined before.
    let late = shoppers(&app, 1).await.pop().unwrap();
    let before_again = join(&app, &late.client, id).await;
    let again = json(
        crowd[0]
            .client
            .post(app.url(&format!("/api/activities/{id}/queue")))
            .json(&json!({"again": true}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again.0, 200, "{}", again.1);
    assert_ne!(again.1["state"], "passed", "{}", again.1);
    let place = |v: &Value| v["position"].as_i64().unwrap_or(0);
    if again.1["state"] == "waiting" && before_again["state"] == "waiting" {
        assert!(
            place(&again.1) > place(&before_again),
            "{again:?} vs {before_again}"
        );
    }
    // A second turn comes, and with it the second unit of the limit.
    let second = until_state(&app, &crowd[0].client, id, "admitted").await;
    assert_ne!(second["ticket"], mine["ticket"]);
    let (code, body) = buy_with(&app, &crowd[0].client, id, second["ticket"].as_str()).await;
    assert_eq!(code, 202, "{body}");
}
