//! The waiting room at a crowd's scale (issue: the waiting room II): a shopper's place is
//! numbered and signed into a value they hold, each instance keeps the line's board in memory,
//! and a poll compares the two without reading the line; admissions not claimed in time lapse.

use crate::helpers::*;
use app::api::Role;
use reqwest::{header, Client, Response};
use serde_json::{json, Value};

/// The `place` value a response hands the shopper, if it set one.
fn place_cookie(resp: &Response) -> Option<String> {
    resp.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("place="))
        .map(|c| c.split(';').next().unwrap().to_string())
}

/// A shopper's client that sends `place` (when given) beside the session.
fn holding(shopper: &Shopper, place: Option<&str>) -> Client {
    let more = place.map(|p| format!("place={p}")).unwrap_or_default();
    client_with_cookies(shopper.id, Role::Shopper, 0, &more)
}

/// `POST …/queue` as `client`: a join, or with `again` a join at the back after a used turn.
async fn join_request(app: &TestApp, client: &Client, id: i64, again: bool) -> Response {
    client
        .post(app.url(&format!("/api/activities/{id}/queue")))
        .json(&json!({ "again": again }))
        .send()
        .await
        .unwrap()
}

async fn join(app: &TestApp, shopper: &Shopper, id: i64) -> (Value, String) {
    let resp = join_request(app, &shopper.client, id, false).await;
    let cookie = place_cookie(&resp).expect("a join hands the shopper their place");
    let (code, body) = json(resp).await;
    assert_eq!(code, 200, "{body}");
    (body, cookie)
}

pub(crate) async fn poll(app: &TestApp, client: &Client, id: i64) -> (u16, Value, Option<String>) {
    let resp = client
        .get(app.url(&format!("/api/activities/{id}/queue")))
        .send()
        .await
        .unwrap();
    let cookie = place_cookie(&resp);
    let (code, body) = json(resp).await;
    (code, body, cookie)
}

async fn board(app: &TestApp, id: i64) -> Value {
    let resp = reqwest::get(app.url(&format!("/api/activities/{id}/line")))
        .await
        .unwrap();
    assert_eq!(
        resp.headers()[header::CACHE_CONTROL],
        "public, max-age=1, s-maxage=1",
        "a CDN may cache the board for a second"
    );
    assert!(resp.headers().get(header::SET_COOKIE).is_none());
    let (code, body) = json(resp).await;
    assert_eq!(code, 200, "{body}");
    body
}

async fn queue_figures(app: &TestApp, merchant: &Client, id: i64) -> Value {
    let resp = merchant
        .get(app.url(&format!("/api/admin/activities/{id}/stats")))
        .send()
        .await
        .unwrap();
    json(resp).await.1["queue"].clone()
}

/// Polls answered so far from where: `memory` or `redis`.
async fn polls(app: &TestApp, answered: &str) -> u64 {
    let wanted = format!("seckill_queue_polls_total{{answered=\"{answered}\"}} ");
    app.metrics()
        .await
        .lines()
        .find_map(|l| l.strip_prefix(&wanted).map(|n| n.trim().parse().unwrap()))
        .unwrap_or(0)
}

#[tokio::test]
async fn a_numbered_place_is_followed_on_the_board_without_reading_the_line() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    // One unit: two admitted shoppers cover it, and admission stops there.
    let id = sale_with_line(&app, &merchant, 1, 2, 1000).await;
    let crowd = shoppers(&app, 6).await;
    let mut held = Vec::new();
    for s in &crowd {
        let (joined, place) = join(&app, s, id).await;
        assert_eq!(joined["state"], "drawing", "{joined}");
        assert!(
            joined.get("place").is_none(),
            "drawn places are numbered at the start"
        );
        held.push(place);
    }
    let before_start = board(&app, id).await;
    assert_eq!(
        (
            before_start["state"].as_str(),
            before_start["waiting"].as_i64()
        ),
        (Some("drawing"), Some(6)),
        "{before_start}"
    );
    eventually(20, "two admitted", || async {
        (queue_figures(&app, &merchant, id).await["admitted"] == 2).then_some(())
    })
    .await;

    // Each shopper's first poll after the start numbers the place, from the line, once.
    let mut waiting = Vec::new();
    let mut admitted = Vec::new();
    for (s, value) in crowd.iter().zip(&held) {
        let (code, status, renewed) = poll(&app, &holding(s, Some(value)), id).await;
        assert_eq!(code, 200, "{status}");
        match status["state"].as_str() {
            // An admission says its place too: a crowd's observer sees every one in order.
            Some("admitted") => {
                assert!(status["ticket"].is_string());
                admitted.push(status["place"].as_i64().expect("an admission's place"));
            }
            Some("waiting") => {
                let place = status["place"].as_i64().unwrap();
                assert_eq!(status["position"].as_i64(), Some(place - 2), "{status}");
                waiting.push((s, place, renewed.expect("a numbered place is handed back")));
            }
            other => panic!("{other:?}: {status}"),
        }
    }
    let mut places: Vec<i64> = waiting.iter().map(|w| w.1).collect();
    places.sort_unstable();
    assert_eq!(places, vec![3, 4, 5, 6], "places follow the two admitted");
    admitted.sort_unstable();
    assert_eq!(
        admitted,
        vec![1, 2],
        "the two admitted hold the first places"
    );

    // From now on a poll is the board and the signed place: no read of the line.
    let (memory, redis) = (polls(&app, "memory").await, polls(&app, "redis").await);
    for _ in 0..5 {
        for (s, place, value) in &waiting {
            let (code, status, renewed) = poll(&app, &holding(s, Some(value)), id).await;
            assert_eq!(code, 200, "{status}");
            assert_eq!(
                (
                    status["state"].as_str(),
                    status["position"].as_i64(),
                    status["ahead"].as_i64(),
                    status["waiting"].as_i64()
                ),
                (Some("waiting"), Some(place - 2), Some(place - 3), Some(4)),
                "{status}"
            );
            assert!(renewed.is_none(), "an unchanged place is not handed again");
        }
    }
    assert_eq!(polls(&app, "memory").await - memory, 20);
    assert_eq!(polls(&app, "redis").await, redis);
    // The line itself says the same (a client without the place value is answered from it).
    for (s, place, _) in &waiting {
        let (_, status, _) = poll(&app, &s.client, id).await;
        assert_eq!(status["position"].as_i64(), Some(place - 2), "{status}");
    }
    let now = board(&app, id).await;
    assert_eq!(
        (
            now["state"].as_str(),
            now["serving"].as_i64(),
            now["waiting"].as_i64(),
            now["units_left"].as_i64()
        ),
        (Some("admitting"), Some(2), Some(4), Some(1)),
        "{now}"
    );
}

#[tokio::test]
async fn a_place_value_the_server_did_not_sign_is_refused_never_a_better_place() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = sale_with_line(&app, &merchant, 1, 1, 1000).await;
    let other = sale_with_line(&app, &merchant, 1, 1, 1000).await;
    eventually(20, "the start", || async {
        (board(&app, id).await["state"] == "admitting").then_some(())
    })
    .await;
    let crowd = shoppers(&app, 4).await;
    let mut held = Vec::new();
    for (i, s) in crowd.iter().enumerate() {
        let (joined, value) = join(&app, s, id).await;
        assert_eq!(joined["place"].as_i64(), Some(i as i64 + 1), "{joined}");
        held.push(value);
    }
    let last = &crowd[3];
    let (_, elsewhere) = join(&app, last, other).await;
    let moved_up = held[3].replacen(".4.", ".1.", 1);
    assert_ne!(moved_up, held[3]);
    for (what, value) in [
        ("moved forward", moved_up.as_str()),
        ("garbage", "not-a-place"),
        ("another sale's", elsewhere.as_str()),
    ] {
        let (code, body, cookie) = poll(&app, &holding(last, Some(value)), id).await;
        assert_eq!(
            (code, body["error"].as_str()),
            (400, Some("invalid_input")),
            "{what}: {body}"
        );
        assert!(
            body["message"].as_str().unwrap().contains("place"),
            "{body}"
        );
        assert_eq!(
            cookie.as_deref(),
            Some(""),
            "{what}: the value is forgotten"
        );
    }
    // Another shopper's value (a shared browser) is not theirs: the line answers, with their own.
    let (code, body, cookie) = poll(&app, &holding(last, Some(&held[0])), id).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["place"].as_i64(), Some(4), "{body}");
    assert_eq!(cookie.as_deref(), Some(held[3].as_str()));
    let stats = queue_figures(&app, &merchant, id).await;
    assert_eq!(
        stats["waiting"].as_i64().unwrap() + stats["admitted"].as_i64().unwrap(),
        4
    );
}

#[tokio::test]
async fn an_admission_not_claimed_in_time_lapses_and_the_next_in_line_is_admitted() {
    let app = spawn_app_with(|c| c.queue.claim = std::time::Duration::from_secs(1)).await;
    let merchant = merchant(&app).await;
    // One unit: two admitted at a time.
    let id = sale_with_line(&app, &merchant, 1, 1, 1000).await;
    eventually(20, "the start", || async {
        (board(&app, id).await["state"] == "admitting").then_some(())
    })
    .await;
    let crowd = shoppers(&app, 4).await;
    let mut held = Vec::new();
    for s in &crowd {
        held.push(join(&app, s, id).await.1);
    }
    // The first comes for the turn at once: claimed, the ticket lasts its 90 s.
    let mine = eventually(20, "the first admitted", || async {
        let (_, s, _) = poll(&app, &holding(&crowd[0], Some(&held[0])), id).await;
        (s["state"] == "admitted").then_some(s)
    })
    .await;
    // The second never comes: within a second its admission lapses and the third's turn comes.
    let third = eventually(20, "the third admitted", || async {
        let (_, s, _) = poll(&app, &holding(&crowd[2], Some(&held[2])), id).await;
        (s["state"] == "admitted").then_some(s)
    })
    .await;
    assert!(third["ticket"].is_string());
    let (_, second, _) = poll(&app, &holding(&crowd[1], Some(&held[1])), id).await;
    assert_eq!(second["state"], "passed", "{second}");
    let figures = queue_figures(&app, &merchant, id).await;
    assert_eq!(
        (figures["lapsed"].as_i64(), figures["admitted"].as_i64()),
        (Some(1), Some(3)),
        "{figures}"
    );
    // The claimed turn outlives the claim window.
    let (_, first, _) = poll(&app, &holding(&crowd[0], Some(&held[0])), id).await;
    assert_eq!(first["state"], "admitted", "{first}");
    assert_eq!(first["ticket"], mine["ticket"]);
    let path = app.path(&crowd[0].client, id).await;
    let (code, body) = json(
        app.buy(
            &crowd[0].client,
            id,
            json!({"path": path, "admission": mine["ticket"]}),
        )
        .await,
    )
    .await;
    assert_eq!(code, 202, "{body}");
}

#[tokio::test]
async fn admission_stops_while_the_pipeline_is_behind_and_resumes_by_itself() {
    // No relay or persister yet: every unit sold stays in the journal, not in the database.
    let app = spawn_app_with(|c| {
        c.run_workers = false;
        c.queue.max_backlog = 2;
    })
    .await;
    let merchant = merchant(&app).await;
    let starts = chrono::Utc::now() + chrono::Duration::seconds(1);
    let id = live_activity(
        &app,
        &merchant,
        50,
        json!({
            "starts_at": starts.to_rfc3339(),
            "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339(),
            "waiting_room": true,
            "admit_per_sec": 2,
        }),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let crowd = shoppers(&app, 8).await;
    for s in &crowd {
        join(&app, s, id).await;
    }
    // Whoever is admitted buys, until two units wait for the database: admission stops.
    let bought = std::sync::Mutex::new(std::collections::HashSet::new());
    let figures = eventually(30, "admission held back", || async {
        for s in &crowd {
            let (_, status, _) = poll(&app, &s.client, id).await;
            if status["state"] == "admitted" && bought.lock().unwrap().insert(s.id) {
                let path = app.path(&s.client, id).await;
                let body = json!({"path": path, "admission": status["ticket"]});
                assert_eq!(json(app.buy(&s.client, id, body).await).await.0, 202);
            }
        }
        let q = queue_figures(&app, &merchant, id).await;
        (q["held_back"] == "backlog").then_some(q)
    })
    .await;
    let held_at = figures["admitted"].as_i64().unwrap();
    let bought = bought.into_inner().unwrap();
    // Those still waiting are told (within a board's freshness), and keep their places.
    eventually(5, "the waiters told", || async {
        let mut paused = 0;
        for s in crowd.iter().filter(|s| !bought.contains(&s.id)) {
            let (_, status, _) = poll(&app, &s.client, id).await;
            match status["state"].as_str() {
                Some("paused") => {
                    assert!(status["position"].as_i64().is_some(), "{status}");
                    assert!(status["estimated_wait_secs"].is_null(), "{status}");
                    paused += 1;
                }
                // Admitted in the step before admission stopped, not buying yet.
                Some("admitted") => {}
                Some("waiting") => return None,
                other => panic!("{other:?}: {status}"),
            }
        }
        (paused >= 3).then_some(())
    })
    .await;
    let on_board = board(&app, id).await;
    assert_eq!(
        (
            on_board["state"].as_str(),
            on_board["paused_reason"].as_str()
        ),
        (Some("paused"), Some("backlog")),
        "{on_board}"
    );
    assert!(app.metrics().await.contains(&format!(
        "seckill_queue_admission_held{{activity=\"{id}\",reason=\"backlog\"}} 1"
    )));
    // Two more seconds (four admissions' worth at the sale's rate): nobody else let in.
    let seen_at = std::time::Instant::now();
    eventually(10, "two seconds held", || async {
        let q = queue_figures(&app, &merchant, id).await;
        assert_eq!(q["admitted"].as_i64(), Some(held_at), "{q}");
        (seen_at.elapsed() > std::time::Duration::from_secs(2)).then_some(())
    })
    .await;

    // The relay and the persister start: the backlog drains, and admission resumes by itself.
    app.state.spawn_workers();
    eventually(30, "admission resumed", || async {
        let q = queue_figures(&app, &merchant, id).await;
        (q["held_back"].is_null() && q["admitted"].as_i64().unwrap() > held_at).then_some(())
    })
    .await;
    // Nothing was lost: every unit sold is an order.
    let sold = bought.len() as i64;
    eventually(30, "every unit sold an order", || async {
        let orders: i64 = sqlx::query_scalar("SELECT count(*) FROM orders WHERE activity_id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
        assert!(orders <= sold, "{orders} orders of {sold} units");
        (orders == sold).then_some(())
    })
    .await;
}

/// Until `client`'s poll of sale `id` answers `state`.
async fn until(app: &TestApp, client: &Client, id: i64, state: &str) -> Value {
    eventually(20, &format!("queue state {state}"), || async {
        let (code, body, _) = poll(app, client, id).await;
        assert_eq!(code, 200, "{body}");
        (body["state"] == state).then_some(body)
    })
    .await
}

async fn join_again(app: &TestApp, client: &Client, id: i64) -> (u16, Value) {
    json(join_request(app, client, id, true).await).await
}

/// Bots left waiting: a shopper whose bot check failed past the bound joins and polls like
/// everyone, and is never admitted, while the shopper who joined after them is.
#[tokio::test]
async fn a_shopper_who_keeps_failing_the_bot_check_is_left_waiting_and_told_nothing_different() {
    let app = spawn_app_with(|c| c.queue.bot_fails = 3).await;
    let merchant = merchant(&app).await;
    let id = live_activity(
        &app,
        &merchant,
        10,
        json!({
            "waiting_room": true,
            "admit_per_sec": 1000,
            "bot_check": "proof_of_work",
            "pow_difficulty": 1_000,
        }),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let mut crowd = shoppers(&app, 2).await;
    let (bot, honest) = (crowd.remove(0), crowd.remove(0));
    join(&app, &bot, id).await;
    let ticket = until(&app, &bot.client, id, "admitted").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let path = app.path(&bot.client, id).await;
    let junk = json!({"path": path, "admission": ticket, "pow": "bm90IGEgcHJvb2Y="});
    for _ in 0..3 {
        assert_error(
            app.buy(&bot.client, id, junk.clone()).await,
            400,
            "captcha_invalid",
        )
        .await;
    }
    let suspects = app.redis.keys.queue(id).suspects();
    let bot_id = bot.id;
    eventually(5, "the failures counted in the line", || async {
        let n: Option<i64> = redis::cmd("HGET")
            .arg(&suspects)
            .arg(bot_id)
            .query_async(&mut app.redis.conn())
            .await
            .unwrap();
        (n == Some(3)).then_some(())
    })
    .await;

    // Its turn is over at once: it waits, as far as it can tell, like anyone.
    let (code, now, _) = poll(&app, &bot.client, id).await;
    assert_eq!((code, &now["state"]), (200, &json!("waiting")), "{now}");
    assert!(now["ticket"].is_null(), "{now}");
    // The bot queues again: it gets a place like anyone, first in line, and the shopper who
    // comes after it is admitted while the bot still waits.
    let (code, rejoined) = join_again(&app, &bot.client, id).await;
    assert_eq!(code, 200, "{rejoined}");
    assert_eq!(rejoined["state"], "waiting", "{rejoined}");
    join(&app, &honest, id).await;
    until(&app, &honest.client, id, "admitted").await;
    for _ in 0..3 {
        let (code, seen, _) = poll(&app, &bot.client, id).await;
        assert_eq!(code, 200, "{seen}");
        assert_eq!(seen["state"], "waiting", "{seen}");
        assert!(seen["ticket"].is_null(), "{seen}");
        for field in [
            "position",
            "ahead",
            "estimated_wait_secs",
            "place",
            "poll_after_ms",
        ] {
            assert!(seen[field].is_i64(), "a waiter's {field}: {seen}");
        }
    }
    let line = app.redis.keys.queue(id).line();
    let held: Option<f64> = redis::cmd("ZSCORE")
        .arg(&line)
        .arg(bot.id)
        .query_async(&mut app.redis.conn())
        .await
        .unwrap();
    assert_eq!(held, None, "the bot holds no place in the line itself");
}

/// A blocked client is left waiting too, or refused `403 blocked` when the configuration says
/// to tell it.
#[tokio::test]
async fn a_blocked_client_is_left_waiting_or_told_as_configured() {
    for shadow in [true, false] {
        let app = spawn_app_with(|c| c.queue.shadow = shadow).await;
        let merchant = merchant(&app).await;
        let id = sale_with_line(&app, &merchant, 10, 0, 1000).await;
        let mut crowd = shoppers(&app, 2).await;
        let (blocked, other) = (crowd.remove(0), crowd.remove(0));
        app.state
            .blocks
            .block(&app.redis, &format!("u:{}", blocked.id), 60_000)
            .await
            .unwrap();
        join(&app, &other, id).await;
        until(&app, &other.client, id, "admitted").await;
        let resp = join_request(&app, &blocked.client, id, false).await;
        if shadow {
            let (code, body) = json(resp).await;
            assert_eq!(code, 200, "{body}");
            assert_eq!(body["state"], "waiting", "{body}");
            // First in line once the board shows the other admitted, and never admitted.
            eventually(5, "the blocked shopper first in line", || async {
                let (code, body, _) = poll(&app, &blocked.client, id).await;
                assert_eq!((code, &body["state"]), (200, &json!("waiting")), "{body}");
                (body["ahead"] == 0).then_some(())
            })
            .await;
            let (_, body, _) = poll(&app, &blocked.client, id).await;
            assert_eq!(body["state"], "waiting", "{body}");
        } else {
            assert_error(resp, 403, "blocked").await;
            let (code, body, _) = poll(&app, &blocked.client, id).await;
            assert_eq!((code, &body["error"]), (403, &json!("blocked")), "{body}");
        }
    }
}

/// A sale with a drawn line starting in `in_secs`, paused: nobody is admitted, so that every
/// place stays numbered on the shopper's poll.
pub(crate) async fn paused_drawn_sale(
    app: &TestApp,
    merchant: &Client,
    in_secs: i64,
    rate: i32,
) -> i64 {
    let id = sale_with_line(app, merchant, 10, in_secs, rate).await;
    let resp = merchant
        .post(app.url(&format!("/api/admin/activities/{id}/pause")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    id
}

/// Sale `id`'s drawing once its seed is published (2 s after the start).
pub(crate) async fn published_drawing(app: &TestApp, id: i64) -> Value {
    eventually(30, "the seed published after the start", || async {
        let d = drawing_of(app, id).await;
        d["seed"].is_string().then_some(d)
    })
    .await
}

pub(crate) async fn drawing_of(app: &TestApp, id: i64) -> Value {
    let (code, body) = json(app.get(&format!("/api/activities/{id}/drawing")).await).await;
    assert_eq!(code, 200, "{body}");
    body
}

/// Runs `scripts/verify-drawing` on `drawing` with `args`: its exit code and output.
pub(crate) fn verify(drawing: &Value, args: &[&str]) -> (i32, String, String) {
    let file = std::env::temp_dir().join(format!("drawing-{}.json", unique_name("d")));
    std::fs::write(&file, drawing.to_string()).unwrap();
    let out = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/verify-drawing"
        ))
        .arg(&file)
        .args(args)
        .output()
        .expect("python3 runs the verifier");
    std::fs::remove_file(&file).ok();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A drawing anyone can verify: a thousand shoppers join before the start; the seed's hash is
/// public before it, the seed after; the verifier (its own code, not the server's) recomputes
/// from the seed and the receipts the places the server gave, and catches any change.
#[tokio::test]
async fn the_drawing_of_a_thousand_is_recomputed_from_the_published_seed_and_receipts() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = paused_drawn_sale(&app, &merchant, 8, 1000).await;
    let (_, activity) = json(app.get(&format!("/api/activities/{id}")).await).await;
    let commitment = activity["drawing_commitment"].as_str().unwrap().to_string();
    assert_eq!(commitment.len(), 64, "{activity}");
    assert!(activity.get("drawing_seed").is_none(), "{activity}");
    let before = drawing_of(&app, id).await;
    assert_eq!(before["commitment"], commitment.as_str());
    assert!(
        before["seed"].is_null() && before["places"] == json!([]),
        "{before}"
    );

    let crowd = shoppers(&app, 1000).await;
    let app = &app;
    let joins = futures_util::stream::iter(crowd.iter().map(|s| async move {
        let (joined, _) = join(app, s, id).await;
        assert_eq!(joined["state"], "drawing", "{joined}");
        joined["receipt"].as_str().unwrap().to_string()
    }));
    let receipts: Vec<String> =
        futures_util::StreamExt::collect(futures_util::StreamExt::buffered(joins, 32)).await;
    assert!(
        chrono::Utc::now()
            < chrono::DateTime::parse_from_rfc3339(activity["starts_at"].as_str().unwrap())
                .unwrap(),
        "every join came before the start"
    );
    // A second join keeps the place and its receipt.
    assert_eq!(
        join(app, &crowd[0], id).await.0["receipt"],
        receipts[0].as_str()
    );

    let drawing = published_drawing(app, id).await;
    assert_eq!(drawing["joined"], 1000);
    let (_, activity) = json(app.get(&format!("/api/activities/{id}")).await).await;
    assert_eq!(activity["drawing_seed"], drawing["seed"]);
    let (code, out, err) = verify(&drawing, &["--commitment", &commitment, "--places"]);
    assert_eq!(code, 0, "{err}");
    let recomputed: std::collections::HashMap<String, i64> = serde_json::from_str(&out).unwrap();
    assert_eq!(recomputed.len(), 1000);
    // Each shopper's place, as the server numbers it, is the verifier's.
    let told = futures_util::stream::iter(crowd.iter().map(|s| async move {
        let (code, status, _) = poll(app, &s.client, id).await;
        assert_eq!(code, 200, "{status}");
        status["place"]
            .as_i64()
            .unwrap_or_else(|| panic!("a place: {status}"))
    }));
    let told: Vec<i64> =
        futures_util::StreamExt::collect(futures_util::StreamExt::buffered(told, 32)).await;
    for (receipt, place) in receipts.iter().zip(&told) {
        let id = receipt.split('.').next().unwrap();
        assert_eq!(recomputed[id], *place, "receipt {id}");
    }
    let (code, out, _) = verify(&drawing, &["--receipt", &receipts[7]]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("place {} of 1000", told[7])), "{out}");

    // Any change to what was published is caught.
    let mut seed = drawing.clone();
    let s = seed["seed"].as_str().unwrap().to_string();
    let flipped = if s.starts_with('0') { "1" } else { "0" };
    seed["seed"] = format!("{flipped}{}", &s[1..]).into();
    let mut swapped = drawing.clone();
    let (a, b) = (
        swapped["places"][0]["receipt"].clone(),
        swapped["places"][1]["receipt"].clone(),
    );
    swapped["places"][0]["receipt"] = b;
    swapped["places"][1]["receipt"] = a;
    let mut receipt = drawing.clone();
    receipt["places"][500]["receipt"] = "00000000000000000000000000000000".into();
    for (what, tampered, args) in [
        ("the seed", &seed, vec![]),
        ("two places swapped", &swapped, vec![]),
        ("a receipt", &receipt, vec![]),
        (
            "the commitment seen before",
            &drawing,
            vec!["--commitment", "00"],
        ),
    ] {
        let (code, _, err) = verify(tampered, &args);
        assert_eq!(code, 1, "{what} changed goes unnoticed: {err}");
    }
}

/// The merchant's methods: arrival order only numbers those who come before the start in the
/// order they came; pass-through admits an arrival at once while nobody waits (no waiting page),
/// and lines up those who come faster than the rate.
#[tokio::test]
async fn arrival_order_and_pass_through_order_the_line_as_the_merchant_chose() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let starts = chrono::Utc::now() + chrono::Duration::seconds(3);
    let in_order = live_activity(
        &app,
        &merchant,
        100,
        json!({
            "starts_at": starts.to_rfc3339(),
            "waiting_room": true,
            "admit_per_sec": 1,
            "line_method": "arrival_order",
        }),
    )
    .await;
    assert_eq!(in_order["line_method"], "arrival_order");
    assert!(
        in_order.get("drawing_commitment").is_none(),
        "no drawing: {in_order}"
    );
    let id = in_order["id"].as_i64().unwrap();
    let crowd = shoppers(&app, 5).await;
    for s in &crowd {
        let (joined, _) = join(&app, s, id).await;
        assert!(joined.get("receipt").is_none(), "{joined}");
    }
    // Admitted one a second, in the order they came.
    let seen = std::sync::Mutex::new(Vec::new());
    eventually(20, "all five admitted", || async {
        for (i, s) in crowd.iter().enumerate() {
            if !seen.lock().unwrap().contains(&i) {
                let (_, status, _) = poll(&app, &s.client, id).await;
                if status["state"] == "admitted" {
                    seen.lock().unwrap().push(i);
                }
            }
        }
        (seen.lock().unwrap().len() == 5).then_some(())
    })
    .await;
    let admitted = seen.into_inner().unwrap();
    let mut sorted = admitted.clone();
    sorted.sort();
    assert_eq!(admitted, sorted, "arrival order");
    assert_error(
        app.get(&format!("/api/activities/{id}/drawing")).await,
        404,
        "not_found",
    )
    .await;

    let passing = live_activity(
        &app,
        &merchant,
        100,
        json!({"waiting_room": true, "admit_per_sec": 2, "line_method": "pass_through"}),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    // The admission step has seen the stock (the window needs it).
    eventually(10, "the line knows the units", || async {
        (board(&app, passing).await["units_left"] == 100).then_some(())
    })
    .await;
    let more = shoppers(&app, 6).await;
    let (first, _) = join(&app, &more[0], passing).await;
    assert_eq!(first["state"], "admitted", "straight through: {first}");
    assert!(first["ticket"].is_string(), "{first}");
    // A burst past the rate (2 a second, one second's worth at most) waits in line.
    let mut states = Vec::new();
    for s in &more[1..] {
        states.push(
            join(&app, s, passing).await.0["state"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert!(states.iter().any(|s| s == "waiting"), "{states:?}");
    let figures = queue_figures(&app, &merchant, passing).await;
    assert!(figures["admitted"].as_i64().unwrap() >= 1, "{figures}");
}

/// The kid a ticket's header names.
fn kid_of(ticket: &str) -> String {
    use base64::Engine;
    let header = ticket.split('.').next().unwrap();
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .unwrap();
    serde_json::from_slice::<Value>(&header).unwrap()["kid"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn jwks(app: &TestApp) -> Vec<String> {
    let resp = reqwest::get(app.url("/.well-known/jwks.json"))
        .await
        .unwrap();
    assert_eq!(resp.headers()[header::CACHE_CONTROL], "public, max-age=60");
    let (code, body) = json(resp).await;
    assert_eq!(code, 200, "{body}");
    body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            assert_eq!(
                (&k["kty"], &k["crv"], &k["alg"]),
                (&json!("OKP"), &json!("Ed25519"), &json!("EdDSA"))
            );
            k["kid"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Tickets anyone can verify: their key is in the published set; a rotation (`server
/// rotate-ticket-key`, no restart) signs new tickets with the next key, already published, and
/// a ticket of the old key still buys until it expires.
#[tokio::test]
async fn tickets_name_a_published_key_and_a_rotation_keeps_old_tickets_good() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = sale_with_line(&app, &merchant, 10, 0, 1000).await;
    let crowd = shoppers(&app, 2).await;
    join(&app, &crowd[0], id).await;
    let old = until(&app, &crowd[0].client, id, "admitted").await["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let before = jwks(&app).await;
    assert_eq!(
        before,
        ["admission-0", "admission-1"],
        "the current key and the next"
    );
    assert_eq!(kid_of(&old), "admission-0");

    let out = server_command(&app, "rotate-ticket-key").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    join(&app, &crowd[1], id).await;
    let new = eventually(10, "tickets signed with the next key", || async {
        let (_, body, _) = poll(&app, &crowd[1].client, id).await;
        body["ticket"]
            .as_str()
            .filter(|t| kid_of(t) == "admission-1")
            .map(str::to_string)
    })
    .await;
    assert_ne!(old, new);
    assert_eq!(
        jwks(&app).await,
        ["admission-0", "admission-1", "admission-2"],
        "the old key until its tickets expire, the current, the next"
    );
    // Both buy: the old ticket is good until it expires.
    for (s, ticket) in [(&crowd[0], &old), (&crowd[1], &new)] {
        let path = app.path(&s.client, id).await;
        let (code, body) = json(
            app.buy(&s.client, id, json!({"path": path, "admission": ticket}))
                .await,
        )
        .await;
        assert_eq!(code, 202, "{body}");
    }
}

/// Leavers: shoppers who join and never come back. Their turns lapse and go to those behind,
/// who are admitted while, in the same crowd without leavers, the same shoppers still wait; no
/// unit is held by a lapsed turn.
#[tokio::test]
async fn the_turns_of_shoppers_who_left_lapse_and_those_behind_wait_less() {
    let app = spawn_app_with(|c| c.queue.claim = std::time::Duration::from_secs(1)).await;
    let merchant = merchant(&app).await;
    // Two units: four admitted at a time.
    let with_leavers = sale_with_line(&app, &merchant, 2, 0, 1000).await;
    let without = sale_with_line(&app, &merchant, 2, 0, 1000).await;
    let crowd = shoppers(&app, 6).await;
    for id in [with_leavers, without] {
        for s in &crowd {
            join(&app, s, id).await;
        }
    }
    // On the first sale the first two leave (never poll); on the second everyone stays, and
    // the first four come for their turns (claimed: 90 s each).
    let stay = |id: i64, who: std::ops::Range<usize>| {
        let (app, crowd) = (&app, &crowd);
        async move {
            eventually(20, "turns claimed", || async {
                let mut all = true;
                for s in &crowd[who.clone()] {
                    let (_, st, _) = poll(app, &s.client, id).await;
                    all &= st["state"] == "admitted";
                }
                all.then_some(())
            })
            .await
        }
    };
    stay(without, 0..4).await;
    // The leavers' turns lapse within the claim window, and the fifth and sixth are admitted.
    stay(with_leavers, 2..6).await;
    let figures = queue_figures(&app, &merchant, with_leavers).await;
    assert_eq!(figures["lapsed"], 2, "{figures}");
    // Without leavers, the fifth and sixth still wait behind four claimed turns.
    for s in &crowd[4..6] {
        let (_, st, _) = poll(&app, &s.client, without).await;
        assert_eq!(st["state"], "waiting", "{st}");
    }
    assert_eq!(queue_figures(&app, &merchant, without).await["lapsed"], 0);
    // Nothing bought and nothing held: every unit of both sales is still on sale.
    assert_eq!(app.remaining(with_leavers).await, 2);
    assert_eq!(app.remaining(without).await, 2);
}

/// A rotation of the secret (the new one in `SECKILL_SECRET`, the old in
/// `SECKILL_SECRET_PREVIOUS`): an instance restarted with both keeps what the old one signed (a
/// session, a buy path, a place in a sale's line) and signs anew with the new one; an instance
/// given the new one alone refuses them (docs/deploy.md "The secret").
#[tokio::test]
async fn a_rotated_secret_keeps_the_sessions_paths_and_places_the_one_before_signed() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let sale = live_activity(&app, &merchant, 5, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let line = sale_with_line(&app, &merchant, 1, 1, 1000).await;
    eventually(20, "the start", || async {
        (board(&app, line).await["state"] == "admitting").then_some(())
    })
    .await;
    let shopper = &shoppers(&app, 1).await[0];
    let (joined, place) = join(&app, shopper, line).await;
    assert_eq!(joined["place"].as_i64(), Some(1), "{joined}");
    let path = app.path(&shopper.client, sale).await;

    let new_secret = b"the secret after the rotation: thirty-two bytes or more".to_vec();
    let mut config = app.config.clone();
    config.secret = server::infra::config::Secret(new_secret.clone());
    config.secret_previous = Some(server::infra::config::Secret(SECRET.to_vec()));
    let rotated = spawn_instance(&config).await;
    config.secret_previous = None;
    let new_only = spawn_instance(&config).await;
    // A session of the new secret, holding the place the old one signed.
    let renewed = client_signed_with(
        &new_secret,
        shopper.id,
        Role::Shopper,
        0,
        &format!("place={place}"),
    );

    let me = |instance: &TestApp, client: &Client| {
        let request = client.get(instance.url("/api/me"));
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(me(&rotated, &shopper.client).await, 200, "the old session");
    assert_eq!(me(&new_only, &shopper.client).await, 401, "the old session");
    assert_eq!(me(&new_only, &renewed).await, 200, "a new session");

    let (code, status, _) = poll(&rotated, &renewed, line).await;
    assert_eq!(
        (code, status["place"].as_i64()),
        (200, Some(1)),
        "the old place: {status}"
    );
    let (code, status, forgotten) = poll(&new_only, &renewed, line).await;
    assert_eq!(code, 400, "the old place on the new secret alone: {status}");
    assert_eq!(forgotten.as_deref(), Some(""), "{status}");

    let refused = new_only.buy(&renewed, sale, json!({ "path": path })).await;
    assert_error(refused, 400, "bad_path").await;
    assert_eq!(app.remaining(sale).await, 5, "a refused buy takes nothing");
    let (code, body) = json(
        rotated
            .buy(&shopper.client, sale, json!({ "path": path }))
            .await,
    )
    .await;
    assert_eq!(code, 202, "the old session and path: {body}");
    assert_eq!(app.remaining(sale).await, 4);
    // What the rotated instance signs now is the new secret's: the other instance takes it.
    let other = &shoppers(&app, 1).await[0];
    let session = client_signed_with(&new_secret, other.id, Role::Shopper, 0, "");
    let new_path = rotated.path(&session, sale).await;
    let (code, body) = json(
        new_only
            .buy(&session, sale, json!({ "path": new_path }))
            .await,
    )
    .await;
    assert_eq!(code, 202, "a path the rotated instance signed: {body}");
    assert_eq!(app.remaining(sale).await, 3);
}
