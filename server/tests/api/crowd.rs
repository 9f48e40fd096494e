//! The load tool as a correctness check on a small crowd: invariants only, never a timing.

use crate::helpers::*;
use loadtest::crowd::{run, CrowdOptions};

/// A small crowd on `app`'s server: `users` shoppers for `stock` units, one each, bought at once a
/// second after the sale is made, no waiting room and no bot check, every order waited for.
fn small_crowd(app: &TestApp, users: usize, stock: i64) -> CrowdOptions {
    CrowdOptions {
        base_urls: vec![app.base.clone()],
        users,
        stock,
        per_user_limit: 1,
        concurrency: 64,
        lead_secs: 1,
        show_progress: false,
        settle: true,
        activity_id: None,
        rate: 0,
        retry_for: std::time::Duration::ZERO,
        stock_shards: None,
        homes_on_one_shard: false,
        waiting_room: Some(false),
        proof_of_work: None,
        greedy_every: 0,
        poll_window: None,
    }
}

#[tokio::test]
async fn a_small_flash_crowd_sells_exactly_the_stock_with_no_errors() {
    // Each simulated shopper comes from an address of its own, as behind a load balancer; the
    // address buckets are the production defaults.
    let app = spawn_app_with(|c| {
        c.trusted_proxies = 1;
        c.gate.ip_burst = server::infra::config::GateLimits::default().ip_burst;
        c.gate.ip_per_sec = server::infra::config::GateLimits::default().ip_per_sec;
    })
    .await;
    let opts = CrowdOptions {
        // Every shopper solves the sale's proof of work, as a browser does.
        proof_of_work: Some(2_000),
        ..small_crowd(&app, 400, 100)
    };
    let report = run(&deployment(&app.config), &opts).await.unwrap();
    report.print();
    assert!(report.invariants_hold(), "{report:?}");
    assert_eq!(report.accepted, 100);
    assert_eq!(report.tokens.len(), 100);
    assert_eq!(report.requests, 400);
    let unexpected: Vec<_> = report
        .outcomes
        .keys()
        .filter(|k| !matches!(k.as_str(), "accepted" | "sold_out"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "only the API's own answers: {:?}",
        report.outcomes
    );
    assert!(
        report.persisted_after_last_buy.is_some(),
        "every order persisted"
    );
}

#[tokio::test]
async fn greedy_shoppers_of_a_crowd_get_the_limit_and_no_more() {
    let app = spawn_app().await;
    let opts = CrowdOptions {
        per_user_limit: 2,
        // Every fifth shopper sends two buys of the whole limit at once.
        greedy_every: 5,
        ..small_crowd(&app, 200, 150)
    };
    let report = run(&deployment(&app.config), &opts).await.unwrap();
    report.print();
    assert!(report.invariants_hold(), "{report:?}");
    assert_eq!(report.requests, 240, "{report:?}");
    assert_eq!(report.accepted, 150);
    // The second buys reached the limit's check (not only the sold-out answer).
    assert!(
        report.outcomes.get("limit_reached").copied().unwrap_or(0) > 0,
        "{:?}",
        report.outcomes
    );
}

#[tokio::test]
async fn a_crowd_through_a_waiting_room_follows_the_board_and_sells_exactly_the_stock() {
    let app = spawn_app().await;
    // Admitted slowly enough (six a second) that the order of the admissions is measurable:
    // admitting a crowd in one or two steps would make any order as good as another.
    let merchant = merchant(&app).await;
    let sale = sale_with_line(&app, &merchant, 100, 4, 6).await;
    let opts = CrowdOptions {
        lead_secs: 3,
        activity_id: Some(sale),
        waiting_room: Some(true),
        ..small_crowd(&app, 300, 100)
    };
    let report = run(&deployment(&app.config), &opts).await.unwrap();
    report.print();
    assert!(report.invariants_hold(), "{report:?}");
    assert_eq!(report.accepted, 100);
    let queue = report.queue.as_ref().expect("a line's figures");
    // Admitted in the order of the places: the instants the shoppers saw their admission rank
    // as their places do (a poll's lag apart). Every admission answer carries its place, so
    // every admission the crowd saw is in the correlation, the first poll's ones too.
    let (rho, admitted) = queue.order_kept.expect("admissions seen");
    assert_eq!(
        admitted as u64, queue.admitted,
        "every admission seen with its place"
    );
    assert!(
        admitted >= 100 && rho >= 0.99,
        "rank correlation of place and admission {rho:.4} over {admitted} admitted"
    );
    // Like the page: once a place is numbered, its polls read the board, not the line.
    assert!(
        queue.board_polls > 0 && queue.board_polls <= queue.polls,
        "{queue:?}"
    );
    let metrics = app.metrics().await;
    let memory_or_redis = |answered: &str| {
        metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "seckill_queue_polls_total{{answered=\"{answered}\"}} "
                ))
            })
            .map_or(0, |n| n.trim().parse::<u64>().unwrap())
    };
    // What did reach the line's own endpoint: at most one read of the line per shopper to number
    // a place drawn before the start, and one to claim a turn (plus the few polls that land on a
    // board a quarter of a second behind).
    assert!(
        memory_or_redis("redis") <= 3 * 300,
        "{} polls read the line",
        memory_or_redis("redis")
    );
}

/// The load tool's crowd of one home (`--homes-on-one-shard`), the shape that borrows most: every
/// shopper's home is the first of the sale's four shards, so three quarters of the units are sold
/// by borrowing from the others, and still exactly the stock is sold.
#[tokio::test]
async fn a_crowd_of_one_home_buys_every_shards_units_by_borrowing() {
    let app = spawn_app().await;
    let opts = CrowdOptions {
        stock_shards: Some(4),
        homes_on_one_shard: true,
        ..small_crowd(&app, 200, 100)
    };
    let report = run(&deployment(&app.config), &opts).await.unwrap();
    report.print();
    assert!(report.invariants_hold(), "{report:?}");
    assert_eq!(report.accepted, 100);
    let buyers: Vec<i64> = sqlx::query_scalar("SELECT user_id FROM orders WHERE activity_id = $1")
        .bind(report.activity_id.0)
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(buyers.len(), 100);
    assert!(
        buyers.iter().all(|&u| app::api::home_shard(u, 4) == 0),
        "every buyer's home is the first shard"
    );
    // The home shard holds a quarter of the units: the rest were borrowed, a buy at a time.
    let borrowings = app
        .metric("seckill_gate_borrow_seconds_count")
        .await
        .unwrap_or(0.0);
    assert!(borrowings >= 75.0, "{borrowings} borrowings");
}
