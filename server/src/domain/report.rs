//! The public report of an ended sale (docs/storefront.md, "The report of a sale"): its units and
//! orders from PostgreSQL (the sums that prove nothing was oversold), its buy attempts by
//! outcome (`sale_attempts`), its waiting room's figures (kept from Redis into `sale_lines` once
//! the sale has ended) and its drawing's seed. Computed when asked, as the orders' figures move
//! until the last payment window closes; it names no shopper.

use super::{
    activity::{self, ActivityRow},
    drawing::{self, hex},
    rfc3339, ApiError, ApiResult,
};
use crate::infra::redis::Redis;
use app::api::{
    AttemptsReport, CrowdOutcome, DrawingReport, ErrorCode, LineReport, OrderStatus, OrdersReport,
    SaleId, SaleReport, TimelineStep, UnitsReport, ACCEPTED,
};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::PgPool;
use std::{collections::HashMap, time::Duration};

/// Steps of the timeline, at most.
pub const STEPS: i64 = 60;
/// How often each instance looks for ended sales whose waiting room is not kept yet.
const KEEP_EVERY: Duration = Duration::from_secs(5);

/// The report of sale `id`; `404` while it has not ended (or does not exist).
pub async fn of_sale(db: &PgPool, id: i64) -> ApiResult<SaleReport> {
    let row = activity::load(db, id).await?.ok_or(ApiError::NotFound)?;
    of_row(db, &row).await
}

/// The report of the sale whose row the caller has read; `404` while it has not ended.
pub async fn of_row(db: &PgPool, row: &ActivityRow) -> ApiResult<SaleReport> {
    let id = row.id;
    let now = Utc::now();
    if now < row.ends_at {
        return Err(ApiError::NotFound);
    }
    Ok(SaleReport {
        activity_id: SaleId(row.id),
        title: row.title.clone(),
        starts_at: rfc3339(row.starts_at),
        ends_at: rfc3339(row.ends_at),
        generated_at: rfc3339(now),
        units: units(db, row).await?,
        orders: orders(db, id).await?,
        unique_buyers: sqlx::query_scalar!(
            r#"SELECT count(DISTINCT user_id) AS "n!" FROM orders
               WHERE activity_id = $1 AND status IN ('confirmed', 'paid')"#,
            id
        )
        .fetch_one(db)
        .await?,
        sold_out_after_ms: sold_out_after(db, row).await?,
        attempts: attempts(db, id).await?,
        waiting_room: match row.waiting_room {
            true => line(db, id).await?,
            false => None,
        },
        drawing: row.draws().then(|| DrawingReport {
            commitment: drawing::commitment(&row.drawing_seed),
            seed: hex(&row.drawing_seed),
        }),
        timeline: timeline(db, row).await?,
        cord: super::cord::of_sale(db, id).await?,
        crowd: crowd_outcome(db, id).await?,
    })
}

/// What the draw of sale `id` did with crowds from one network (`domain/crowd.rs`), once it
/// has run.
pub async fn crowd_outcome(db: &PgPool, id: i64) -> ApiResult<Option<CrowdOutcome>> {
    let found = sqlx::query_scalar!(
        r#"SELECT crowd_outcome AS "outcome: Json<CrowdOutcome>" FROM activities WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(found.flatten().map(|Json(o)| o))
}

async fn units(db: &PgPool, row: &ActivityRow) -> ApiResult<UnitsReport> {
    let (on_sale, sold, in_orders) = sqlx::query!(
        r#"SELECT a.total_stock, a.sold,
                  (SELECT coalesce(sum(quantity), 0) FROM orders o
                   WHERE o.activity_id = a.id AND o.status IN ('confirmed', 'paid')) AS "in_orders!"
           FROM activities a WHERE a.id = $1"#,
        row.id
    )
    .fetch_one(db)
    .await
    .map(|r| (r.total_stock, r.sold, r.in_orders))?;
    Ok(UnitsReport {
        on_sale,
        sold,
        in_orders,
        not_oversold: in_orders == sold && sold <= on_sale,
    })
}

async fn orders(db: &PgPool, id: i64) -> ApiResult<OrdersReport> {
    let rows = sqlx::query!(
        r#"SELECT status, count(*) AS "n!" FROM orders WHERE activity_id = $1 GROUP BY status"#,
        id
    )
    .fetch_all(db)
    .await?;
    let mut report = OrdersReport::default();
    for r in rows {
        report.persisted += r.n;
        match r.status.parse() {
            Ok(OrderStatus::Confirmed) => report.confirmed = r.n,
            Ok(OrderStatus::Paid) => report.paid = r.n,
            Ok(OrderStatus::Cancelled) => report.cancelled = r.n,
            Ok(OrderStatus::Queued | OrderStatus::Failed) | Err(_) => report.failed += r.n,
        }
    }
    Ok(report)
}

/// From the start to the reservation that took the sale's last unit (every reservation that
/// held units, in the order they were taken), if one did.
async fn sold_out_after(db: &PgPool, row: &ActivityRow) -> ApiResult<Option<i64>> {
    let at: Option<DateTime<Utc>> = sqlx::query_scalar!(
        "SELECT min(reserved_at) FROM (
             SELECT reserved_at, sum(quantity) OVER (ORDER BY reserved_at, id) AS taken
             FROM orders WHERE activity_id = $1 AND status <> 'failed'
         ) t WHERE taken >= $2",
        row.id,
        row.total_stock
    )
    .fetch_one(db)
    .await?;
    Ok(at.map(|at| (at - row.starts_at).num_milliseconds().max(0)))
}

async fn attempts(db: &PgPool, id: i64) -> ApiResult<AttemptsReport> {
    let rows = sqlx::query!(
        r#"SELECT outcome, sum(n)::bigint AS "n!" FROM sale_attempts WHERE activity_id = $1 GROUP BY outcome"#,
        id
    )
    .fetch_all(db)
    .await?;
    let mut report = AttemptsReport::default();
    for r in rows {
        report.total += r.n;
        let refused = &mut report.refused;
        if r.outcome == ACCEPTED {
            report.accepted += r.n;
            continue;
        }
        match r.outcome.parse::<ErrorCode>() {
            Ok(ErrorCode::CaptchaInvalid) => refused.bot_check += r.n,
            Ok(ErrorCode::LimitReached) => refused.limit += r.n,
            Ok(ErrorCode::SoldOut) => refused.sold_out += r.n,
            Ok(ErrorCode::Blocked | ErrorCode::AccountBlocked) => refused.blocked += r.n,
            Ok(ErrorCode::RateLimited) => refused.rate_limited += r.n,
            _ => refused.other += r.n,
        }
    }
    Ok(report)
}

async fn line(db: &PgPool, id: i64) -> ApiResult<Option<LineReport>> {
    let kept = sqlx::query!(
        "SELECT joined, admitted, lapsed, wait_bounds_ms, wait_counts FROM sale_lines WHERE activity_id = $1",
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(kept.map(|k| {
        let waits: Vec<(i64, i64)> = k.wait_bounds_ms.into_iter().zip(k.wait_counts).collect();
        LineReport {
            joined: k.joined,
            admitted: k.admitted,
            lapsed: k.lapsed,
            wait_p50_ms: quantile(&waits, 0.50),
            wait_p90_ms: quantile(&waits, 0.90),
            wait_p99_ms: quantile(&waits, 0.99),
        }
    }))
}

/// The `q`-quantile of a histogram of (upper bound, count), as its bucket's upper bound.
pub fn quantile(histogram: &[(i64, i64)], q: f64) -> Option<i64> {
    let mut buckets = histogram.to_vec();
    buckets.sort_unstable();
    let total: i64 = buckets.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).ceil().max(1.0) as i64;
    let mut seen = 0;
    buckets.into_iter().find_map(|(bound, n)| {
        seen += n;
        (seen >= rank).then_some(bound)
    })
}

/// Attempts and units taken per step, from the start to the last of either (within the sale),
/// in at most [`STEPS`] equal steps of whole seconds.
async fn timeline(db: &PgPool, row: &ActivityRow) -> ApiResult<Vec<TimelineStep>> {
    let last: Option<DateTime<Utc>> = sqlx::query_scalar!(
        r#"SELECT greatest(
               (SELECT max(second) + interval '1 second' FROM sale_attempts WHERE activity_id = $1),
               (SELECT max(reserved_at) FROM orders WHERE activity_id = $1))"#,
        row.id
    )
    .fetch_one(db)
    .await?;
    let Some(last) = last else {
        return Ok(vec![]);
    };
    let span = (last.min(row.ends_at) - row.starts_at)
        .num_milliseconds()
        .max(1);
    let step = ((span + STEPS - 1) / STEPS + 999) / 1000 * 1000;
    let steps = (span + step - 1) / step;
    let mut timeline: Vec<TimelineStep> = (0..steps)
        .map(|i| TimelineStep {
            from_ms: i * step,
            attempts: 0,
            sold: 0,
        })
        .collect();
    // Summed per step by PostgreSQL (a step's number; before the start counts in the first,
    // after the last attempt in the last): a few rows, not one per order.
    let place = |step_no: i64| usize::try_from(step_no.clamp(0, steps - 1)).unwrap_or(0);
    let attempts = sqlx::query!(
        r#"SELECT floor(extract(epoch FROM second - $2) * 1000 / $3)::bigint AS "step!", sum(n)::bigint AS "n!"
           FROM sale_attempts WHERE activity_id = $1 GROUP BY 1"#,
        row.id,
        row.starts_at,
        step as f64
    )
    .fetch_all(db)
    .await?;
    for a in attempts {
        timeline[place(a.step)].attempts += a.n;
    }
    let sold = sqlx::query!(
        r#"SELECT floor(extract(epoch FROM reserved_at - $2) * 1000 / $3)::bigint AS "step!", sum(quantity)::bigint AS "n!"
           FROM orders WHERE activity_id = $1 AND status <> 'failed' GROUP BY 1"#,
        row.id,
        row.starts_at,
        step as f64
    )
    .fetch_all(db)
    .await?;
    for s in sold {
        timeline[place(s.step)].sold += s.n;
    }
    Ok(timeline)
}

/// Keeps, once a sale with a waiting room has ended, what Redis knows of its line (joined,
/// admitted, lapsed, the waits) in `sale_lines`, before the line's keys expire. Every instance
/// looks; the first to write wins, and the rest find the row.
pub async fn keep_lines(db: PgPool, redis: Redis) {
    let mut every = tokio::time::interval(KEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if let Err(e) = keep_ended_lines(&db, &redis).await {
            tracing::warn!(error = %e, "ended waiting rooms not kept yet; trying again");
        }
    }
}

async fn keep_ended_lines(db: &PgPool, redis: &Redis) -> anyhow::Result<()> {
    // Two seconds after the end: a claim an instance was answering at the end is counted.
    let ended = sqlx::query_scalar!(
        "SELECT id FROM activities a
         WHERE waiting_room AND ends_at < now() - interval '2 seconds'
           AND ends_at > now() - interval '1 day'
           AND NOT EXISTS (SELECT 1 FROM sale_lines l WHERE l.activity_id = a.id)
         LIMIT 100"
    )
    .fetch_all(db)
    .await?;
    for id in ended {
        let keys = redis.keys.queue(id);
        let mut conn = redis.conn();
        let (admitted, lapsed): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
            .arg(keys.meta())
            .arg(&["admitted", "lapsed"])
            .query_async(&mut conn)
            .await?;
        let joined: i64 = redis::cmd("ZCARD")
            .arg(keys.line())
            .query_async(&mut conn)
            .await?;
        let waits: HashMap<i64, i64> = redis::cmd("HGETALL")
            .arg(keys.waits())
            .query_async(&mut conn)
            .await?;
        let (bounds, counts): (Vec<i64>, Vec<i64>) =
            waits.into_iter().map(|(b, n)| (bucket_bound(b), n)).unzip();
        sqlx::query!(
            "INSERT INTO sale_lines (activity_id, joined, admitted, lapsed, wait_bounds_ms, wait_counts)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (activity_id) DO NOTHING",
            id,
            joined,
            admitted.unwrap_or(0),
            lapsed.unwrap_or(0),
            &bounds,
            &counts
        )
        .execute(db)
        .await?;
    }
    Ok(())
}

/// The longest wait (ms) in bucket `b` of `status.lua`'s histogram: 2^(b/8) − 1, rounded.
pub fn bucket_bound(b: i64) -> i64 {
    (2f64.powf(b as f64 / 8.0) - 1.0).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_histogram() {
        let waits = [(1_000, 50), (10, 40), (100_000, 10)];
        assert_eq!(quantile(&waits, 0.50), Some(1_000));
        assert_eq!(quantile(&waits, 0.40), Some(10));
        assert_eq!(quantile(&waits, 0.90), Some(1_000));
        assert_eq!(quantile(&waits, 0.99), Some(100_000));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn wait_buckets_are_nine_percent_wide() {
        assert_eq!(bucket_bound(0), 0);
        assert_eq!(bucket_bound(80), 1_023);
        // The bucket `status.lua` puts a wait in holds it, ceil(8·log2(ms + 1)): the wait is at
        // most the bucket's bound and above the one before's (before rounding).
        let exact = |b: i64| 2f64.powf(b as f64 / 8.0) - 1.0;
        for ms in [0i64, 1, 2, 7, 999, 1_000, 60_000, 3_600_000] {
            let b = (8.0 * ((ms + 1) as f64).log2()).ceil() as i64;
            assert!(bucket_bound(b) >= ms, "{ms} in bucket {b}");
            assert!(ms == 0 || exact(b - 1) < ms as f64, "{ms} in bucket {b}");
        }
    }
}
