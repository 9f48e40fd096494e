//! Redis's append-only file rewritten by the workers between sales, never during one unless it
//! has grown past its ceiling (`pipeline/compaction.rs`). The tests share one Redis (or one
//! cluster): the policy here finds every node due at once, and the rewrites are counted by each
//! node's own `aof_rewrites`.

use crate::helpers::*;
use serde_json::json;
use server::infra::redis::info_number;
use server::pipeline::compaction::{Compactor, Decision, Policy};
use std::collections::HashMap;
use std::time::Duration;

/// Every node's rewrites so far, and whether one runs now.
async fn rewrites(compactor: &Compactor) -> HashMap<String, (u64, bool)> {
    let field = |info: &str, name: &str| info_number(info, name).unwrap();
    compactor
        .infos()
        .await
        .unwrap()
        .into_iter()
        .map(|(node, info)| {
            let running = field(&info, "aof_rewrite_in_progress") == 1
                || field(&info, "aof_rewrite_scheduled") == 1;
            (node, (field(&info, "aof_rewrites"), running))
        })
        .collect()
}

/// Waits until no node rewrites, then returns the counts.
async fn settled(compactor: &Compactor) -> HashMap<String, u64> {
    eventually(120, "no AOF rewrite running", || async {
        let now = rewrites(compactor).await;
        now.values()
            .all(|(_, running)| !running)
            .then(|| now.into_iter().map(|(node, (n, _))| (node, n)).collect())
    })
    .await
}

/// One round, asserting every node got `expected`.
async fn round_expecting(compactor: &Compactor, expected: Decision) {
    let decided = compactor.round().await.unwrap();
    assert!(!decided.is_empty(), "no node was looked at");
    for (node, decision) in decided {
        assert_eq!(decision, expected, "node {node}");
    }
}

/// One round that holds every node, and after it no node has rewritten (`what`: the case).
async fn held(compactor: &Compactor, what: &str) {
    let before = settled(compactor).await;
    round_expecting(compactor, Decision::Held).await;
    assert_eq!(settled(compactor).await, before, "a rewrite started {what}");
}

/// Waits until every node has rewritten once more than `before`, and none runs.
async fn rewritten_since(compactor: &Compactor, before: &HashMap<String, u64>) {
    eventually(120, "every node rewrote its AOF", || async {
        let now = settled(compactor).await;
        now.iter().all(|(node, n)| *n > before[node]).then_some(())
    })
    .await
}

#[tokio::test]
async fn an_aof_is_rewritten_between_sales_and_during_one_only_past_its_ceiling() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 10, json!({})).await["id"]
        .as_i64()
        .unwrap();
    // Every node is due: any growth at all, past no minimum.
    let due = Policy {
        growth_percent: 0,
        min_bytes: 0,
        ceiling_bytes: u64::MAX,
        lead: Duration::from_secs(600),
    };
    let mut compactor = Compactor {
        db: app.db.clone(),
        redis: app.redis.clone(),
        metrics: app.state.reconciler.metrics.clone(),
        policy: due,
    };

    // A sale on: held, and no node rewrites.
    held(&compactor, "during a sale").await;
    let before = settled(&compactor).await;

    // Past the ceiling, the sale on: rewritten all the same.
    compactor.policy.ceiling_bytes = 0;
    round_expecting(&compactor, Decision::Ceiling).await;
    rewritten_since(&compactor, &before).await;
    compactor.policy.ceiling_bytes = u64::MAX;

    // The sale starts in an hour: on within a lead of two hours, not within one of ten minutes.
    sqlx::query(
        "UPDATE activities SET starts_at = now() + interval '1 hour', \
         ends_at = now() + interval '2 hours' WHERE id = $1",
    )
    .bind(id)
    .execute(&app.db)
    .await
    .unwrap();
    compactor.policy.lead = Duration::from_secs(7200);
    held(&compactor, "within a sale's lead").await;
    let before = settled(&compactor).await;
    compactor.policy.lead = Duration::from_secs(600);
    round_expecting(&compactor, Decision::BetweenSales).await;
    rewritten_since(&compactor, &before).await;

    // On now but sold out in the database: between sales.
    sqlx::query(
        "UPDATE activities SET starts_at = now() - interval '1 minute', sold = total_stock \
         WHERE id = $1",
    )
    .bind(id)
    .execute(&app.db)
    .await
    .unwrap();
    let before = settled(&compactor).await;
    round_expecting(&compactor, Decision::BetweenSales).await;
    rewritten_since(&compactor, &before).await;
    let text = app.metrics().await;
    assert!(
        text.contains("seckill_redis_aof_rewrites_total{reason=\"between_sales\"}"),
        "{text}"
    );
}

/// The workers of an instance look at the AOFs by themselves: the growth gauge they set shows on
/// its `/metrics`.
#[tokio::test]
async fn the_workers_report_how_far_the_aof_has_grown() {
    let app = spawn_app_with(|c| {
        c.aof_check_every = Some(Duration::from_millis(200));
        // Nothing is ever due: this instance rewrites nothing under the other tests.
        c.aof_policy.min_bytes = u64::MAX;
        c.aof_policy.ceiling_bytes = u64::MAX;
    })
    .await;
    let probe = app.redis.keys.captcha("aof-growth-probe");
    eventually(30, "the AOF growth gauge above zero", || {
        let (app, probe) = (&app, probe.clone());
        async move {
            let mut conn = app.redis.conn();
            let _: () = redis::cmd("SET")
                .arg(&probe)
                .arg("x")
                .arg("EX")
                .arg(60)
                .query_async(&mut conn)
                .await
                .unwrap();
            app.metric("seckill_redis_aof_growth_bytes")
                .await
                .filter(|v| *v > 0.0)
        }
    })
    .await;
}

/// A round that cannot ask PostgreSQL whether a sale is on rewrites nothing, and is counted: the
/// alert `SeckillRedisAofUnwatched` watches that count.
#[tokio::test]
async fn the_workers_count_their_failed_looks_at_the_aof() {
    let app = spawn_app().await;
    const FAILED: &str = "seckill_redis_aof_rounds_failed_total";
    assert_eq!(app.metric(FAILED).await, Some(0.0));
    // A database nobody answers at: every round fails at its first question.
    let nowhere = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(200))
        .connect_lazy("postgres://seckill@127.0.0.1:1/nowhere")
        .unwrap();
    let compactor = Compactor {
        db: nowhere,
        redis: app.redis.clone(),
        metrics: app.state.reconciler.metrics.clone(),
        // Nothing would be due if it got that far: the shared Redis is rewritten by no round here.
        policy: Policy {
            growth_percent: 0,
            min_bytes: u64::MAX,
            ceiling_bytes: u64::MAX,
            lead: Duration::from_secs(600),
        },
    };
    assert!(compactor.round().await.is_err());
    let rounds = tokio::spawn(compactor.run_periodically(Duration::from_millis(100)));
    eventually(30, "two failed rounds counted", || {
        let app = &app;
        async move { app.metric(FAILED).await.filter(|n| *n >= 2.0) }
    })
    .await;
    rounds.abort();
}
