//! The public report of an ended sale: after a crowd, its figures are the database's and the
//! crowd tool's own counts; it names no shopper; a sale in progress has none.

use crate::helpers::*;
use loadtest::crowd::{run, CrowdOptions};
use serde_json::Value;

/// A sale the crowd went through, ended now (its window closed by hand, as time would).
async fn crowd_sale(app: &TestApp, waiting_room: bool) -> loadtest::crowd::Report {
    let opts = CrowdOptions {
        base_urls: vec![app.base.clone()],
        users: 240,
        stock: 80,
        per_user_limit: 2,
        concurrency: 48,
        lead_secs: 2,
        show_progress: false,
        settle: true,
        activity_id: None,
        rate: 0,
        retry_for: std::time::Duration::ZERO,
        stock_shards: None,
        homes_on_one_shard: false,
        waiting_room: Some(waiting_room),
        proof_of_work: None,
        // Every fourth shopper sends two buys of the whole limit at once: some reach the limit.
        greedy_every: 4,
        poll_window: None,
    };
    let report = run(&deployment(&app.config), &opts).await.unwrap();
    assert!(report.invariants_hold(), "{report:?}");
    report
}

async fn end_now(app: &TestApp, id: i64) {
    sqlx::query("UPDATE activities SET ends_at = now() WHERE id = $1")
        .bind(id)
        .execute(&app.db)
        .await
        .unwrap();
}

async fn report_of(app: &TestApp, id: i64) -> (u16, Value) {
    json(app.get(&format!("/api/activities/{id}/report")).await).await
}

async fn scalar(app: &TestApp, sql: &str, id: i64) -> i64 {
    sqlx::query_scalar(sql)
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_crowd_sales_report_is_the_databases_and_the_crowds_counts_and_names_nobody() {
    let app = spawn_app().await;
    let crowd = crowd_sale(&app, true).await;
    let id = crowd.activity_id.0;

    // In progress: no report, on the API or the page.
    assert_error(
        app.get(&format!("/api/activities/{id}/report")).await,
        404,
        "not_found",
    )
    .await;
    let page = reqwest::Client::new()
        .get(app.url(&format!("/activities/{id}/report")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 404);

    end_now(&app, id).await;
    // The waiting room's figures are kept from Redis a moment after the end.
    let report = eventually(30, "the waiting room's figures in the report", || async {
        let (status, report) = report_of(&app, id).await;
        assert_eq!(status, 200, "{report}");
        (!report["waiting_room"].is_null()).then_some(report)
    })
    .await;

    // Units and orders: PostgreSQL's own sums.
    let units = &report["units"];
    assert_eq!(units["on_sale"], 80);
    assert_eq!(units["sold"], crowd.sold);
    assert_eq!(units["sold"], 80);
    let in_orders = scalar(&app, "SELECT coalesce(sum(quantity), 0)::bigint FROM orders WHERE activity_id = $1 AND status IN ('confirmed', 'paid')", id).await;
    assert_eq!(units["in_orders"], in_orders);
    assert_eq!(units["not_oversold"], true);
    let orders = scalar(
        &app,
        "SELECT count(*) FROM orders WHERE activity_id = $1",
        id,
    )
    .await;
    assert_eq!(report["orders"]["persisted"], orders);
    assert_eq!(report["orders"]["confirmed"], orders);
    let buyers = scalar(
        &app,
        "SELECT count(DISTINCT user_id) FROM orders WHERE activity_id = $1",
        id,
    )
    .await;
    assert_eq!(report["unique_buyers"], buyers);
    assert!(report["sold_out_after_ms"].as_i64().is_some(), "{report}");

    // Attempts: the crowd's own counts of what it sent and what it was answered.
    let attempts = &report["attempts"];
    let outcome = |k: &str| crowd.outcomes.get(k).copied().unwrap_or(0);
    // Every buy the crowd sent (a shopper told "sold out" in the line sends none).
    let sent: u64 = crowd
        .outcomes
        .iter()
        .filter(|(k, _)| k.as_str() != "sold_out_waiting")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        attempts["total"], sent,
        "{attempts} vs {:?}",
        crowd.outcomes
    );
    assert_eq!(attempts["accepted"], outcome("accepted"));
    assert_eq!(attempts["accepted"], orders);
    assert_eq!(attempts["refused"]["sold_out"], outcome("sold_out"));
    assert_eq!(attempts["refused"]["limit"], outcome("limit_reached"));
    let plotted: i64 = report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["attempts"].as_i64().unwrap())
        .sum();
    assert_eq!(attempts["total"], plotted);
    let sold_plotted: i64 = report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sold"].as_i64().unwrap())
        .sum();
    assert_eq!(sold_plotted, 80);

    // The waiting room: everyone joined; at least those the crowd saw admitted were.
    let line = &report["waiting_room"];
    let queue = crowd.queue.as_ref().unwrap();
    assert_eq!(line["joined"], 240);
    assert!(
        line["admitted"].as_u64().unwrap() >= queue.admitted,
        "{line} vs {queue:?}"
    );
    // The waits counted as the admitted reached their turn: both quantiles there, in order.
    let (p50, p99) = (line["wait_p50_ms"].as_i64(), line["wait_p99_ms"].as_i64());
    assert!(
        matches!((p50, p99), (Some(p50), Some(p99)) if 0 <= p50 && p50 <= p99),
        "waits at the turn: {line}"
    );
    // The drawing: its seed, hashing to the fingerprint published before the start.
    let seed = hex::decode(report["drawing"]["seed"].as_str().unwrap()).unwrap();
    use sha2::Digest;
    assert_eq!(
        report["drawing"]["commitment"],
        hex::encode(sha2::Sha256::digest(&seed))
    );

    // No shopper's identity: no username, in the JSON or the page.
    let html = reqwest::Client::new()
        .get(app.url(&format!("/activities/{id}/report")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"data-testid="sale-report""#), "{html}");
    assert!(html.contains(r#"data-testid="report-plot""#));
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT u.username FROM users u JOIN orders o ON o.user_id = u.id WHERE o.activity_id = $1",
    )
    .bind(id)
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert!(!names.is_empty());
    let body = report.to_string();
    for name in &names {
        assert!(
            !body.contains(name.as_str()) && !html.contains(name.as_str()),
            "{name} is named"
        );
    }
}
