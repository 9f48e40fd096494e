//! Hot sales found and served locally (issue: the cord and the crowd's shape): a sale nobody
//! marked hot gets a flash of page views; within seconds every instance sees its heat and serves
//! its state from memory, and its Redis reads per view fall to near zero, while its forecast still
//! counts every view.

use crate::helpers::*;
use serde_json::json;

/// Reads of sales' state so far: (from memory, from Redis).
async fn state_reads(app: &TestApp) -> (f64, f64) {
    let text = app.metrics().await;
    let read = |from: &str| {
        metric_in(
            &text,
            &format!("seckill_sale_state_reads_total{{answered=\"{from}\"}}"),
        )
        .unwrap_or(0.0)
    };
    (read("memory"), read("redis"))
}

/// `n` views of sale `id`'s page, `at_once` at a time.
async fn views(app: &TestApp, id: i64, n: usize, at_once: usize) {
    let path = format!("/activities/{id}");
    let each = futures_util::stream::iter((0..n).map(|_| async {
        let resp = app.get(&path).await;
        assert_eq!(resp.status(), 200);
    }));
    futures_util::StreamExt::collect::<Vec<()>>(futures_util::StreamExt::buffer_unordered(
        each, at_once,
    ))
    .await;
}

#[tokio::test]
async fn a_flash_of_page_views_makes_a_sale_hot_and_its_redis_reads_per_view_fall() {
    let app = spawn_app_with(|c| c.hot_views_per_sec = 30).await;
    let merchant = merchant(&app).await;
    let starts = chrono::Utc::now() + chrono::Duration::hours(1);
    let id = live_activity(
        &app,
        &merchant,
        10,
        json!({"starts_at": starts.to_rfc3339(), "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339()}),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let stats = || async {
        let url = app.url(&format!("/api/admin/activities/{id}/stats"));
        json(merchant.get(url).send().await.unwrap()).await.1
    };
    assert_eq!(stats().await["hot"], false);

    // Cold: every view reads the sale's state from Redis.
    let (memory_before, redis_before) = state_reads(&app).await;
    views(&app, id, 20, 1).await;
    let (memory_cold, redis_cold) = state_reads(&app).await;
    assert_eq!(
        (memory_cold - memory_before, redis_cold - redis_before),
        (0.0, 20.0)
    );

    // A flash of views, far above 30 a second, until the dashboard says the sale is hot.
    let mut sent = 20;
    let seen = eventually(20, "the sale seen hot", || {
        sent += 60;
        async {
            views(&app, id, 60, 12).await;
            let s = stats().await;
            (s["hot"] == true).then_some(s)
        }
    })
    .await;
    assert!(seen["views_per_sec"].as_i64().unwrap() >= 30, "{seen}");

    // Hot: 300 more views read Redis a handful of times (once a second), not 300.
    let (memory, redis) = state_reads(&app).await;
    views(&app, id, 300, 12).await;
    sent += 300;
    let (memory_hot, redis_hot) = state_reads(&app).await;
    let per_view = (redis_hot - redis) / 300.0;
    assert!(
        memory_hot - memory >= 290.0,
        "{} from memory",
        memory_hot - memory
    );
    assert!(per_view <= 0.05, "{per_view} Redis reads per view once hot");
    eprintln!(
        "heat: Redis reads per view {:.2} cold, {per_view:.3} hot ({} reads for 300 views)",
        (redis_cold - redis_before) / 20.0,
        redis_hot - redis
    );

    // Every view still counts for the forecast, those added a second later included.
    let forecast = || async {
        let url = app.url(&format!("/api/admin/activities/{id}/forecast"));
        json(merchant.get(url).send().await.unwrap()).await.1
    };
    eventually(10, "every view in the forecast", || async {
        (forecast().await["page_views"].as_i64() == Some(sent)).then_some(())
    })
    .await;
}
