//! The demand forecast of a sale, for its merchant: the crowd to expect from the interest shown
//! so far (reminders, page views before the start, the waiting room's line), the time to sell out,
//! and the settings that would serve it, each with its reason. The advice rests on figures
//! measured by `make bench` on the reference box (docs/benchmarks.md), not on guesses; a shop
//! whose machines differ measures its own with `make bench` and writes its figures here.

use super::{activity::ActivityRow, reminder, report, ApiError, ApiResult};
use crate::infra::redis::Redis;
use app::api::{Forecast, ForecastActual, ForecastBasis, Recommended};
use sqlx::PgPool;

/// `make bench`'s in-stock buy path on one 2-core box: 5,076 shoppers/s (median of five runs).
pub const BUYS_PER_SEC: i64 = 5_076;
/// All processes' CPU per buy on one box (docs/benchmarks.md, "CPU per buy by process").
pub const CPU_MS_PER_BUY: f64 = 0.285;
/// The gate script under redis-benchmark here: 13,000–20,000 calls/s; the lower bound.
pub const GATE_CALLS_PER_SEC: i64 = 13_000;
/// Of the measured maximum, what admission is set to: at 80 % the open-loop p99 stayed under 0.5 s.
const HEADROOM: f64 = 0.8;

pub fn basis() -> ForecastBasis {
    ForecastBasis {
        buys_per_sec: BUYS_PER_SEC,
        cpu_ms_per_buy: CPU_MS_PER_BUY,
        gate_calls_per_sec: GATE_CALLS_PER_SEC,
    }
}

/// What is known of a sale's demand before it starts.
#[derive(Clone, Copy, Debug)]
pub struct Interest {
    pub reminders: i64,
    pub page_views: i64,
    pub joined: i64,
    pub stock: i64,
    pub per_user_limit: i64,
}

/// The advice for a sale: the crowd to expect (at least everyone who showed interest), the time
/// to sell out, the settings, and why.
pub fn advise(i: Interest, basis: &ForecastBasis) -> (i64, Option<i64>, Recommended, Vec<String>) {
    let crowd = i.joined.max(i.reminders).max(i.page_views);
    let mut reasons = vec![format!(
        "At least {crowd} shoppers are expected: the most of {} reminders, {} page views before the start and {} in the line.",
        i.reminders, i.page_views, i.joined
    )];
    let capacity = basis.buys_per_sec.max(1);
    let admit = ((capacity as f64) * HEADROOM).floor().max(1.0) as i64;
    let waiting_room = crowd > admit || crowd > 2 * i.stock;
    reasons.push(if waiting_room {
        format!(
            "Waiting room on: {crowd} shoppers arriving in the first second are more than the {admit} buys/s to admit, or more than twice the {} units; a line keeps it fair and the gate fast.",
            i.stock
        )
    } else {
        format!("Waiting room optional: {crowd} shoppers fit within one second at {admit} buys/s.")
    });
    reasons.push(format!(
        "Admit {admit} shoppers/s: 80 % of the {capacity} buys/s one instance's box served in `make bench` ({} CPU-ms per buy over every process), where p99 stayed under 0.5 s; add instances to admit more.",
        basis.cpu_ms_per_buy
    ));
    let peak = if waiting_room { admit } else { crowd.max(1) };
    let gate = basis.gate_calls_per_sec.max(1);
    let shards = ((peak + gate - 1) / gate).clamp(1, 64);
    reasons.push(format!(
        "{shards} stock shard{}: at most {peak} gate calls/s, and one Redis ran {gate} gate calls/s in `make bench`.",
        if shards == 1 { "" } else { "s" }
    ));
    let (crowd_threshold, why) = crowd_threshold(crowd);
    reasons.push(format!("A drawing's crowd threshold of {why}"));
    let demand = crowd.saturating_mul(i.per_user_limit.max(1));
    let sell_out = (demand >= i.stock && i.stock > 0).then(|| {
        let per_sec = if waiting_room {
            admit
        } else {
            crowd.min(admit).max(1)
        };
        // Every admitted shopper buying up to the limit: units ÷ (shoppers/s × limit).
        (i.stock * 1000 / (per_sec * i.per_user_limit.max(1))).max(1)
    });
    reasons.push(match sell_out {
        Some(ms) => format!("Expected to sell out in about {} s, if every shopper buys up to the limit.", (ms + 999) / 1000),
        None => format!(
            "Not expected to sell out: {crowd} shoppers × {} per shopper is less than the {} units.",
            i.per_user_limit, i.stock
        ),
    });
    (
        crowd,
        sell_out,
        Recommended {
            admit_per_sec: admit,
            stock_shards: shards,
            waiting_room,
            crowd_threshold: i64::from(crowd_threshold),
        },
        reasons,
    )
}

/// The threshold proposed for a crowd of `crowd` shoppers expected: 1 % of it, at least 20. An
/// office, a campus or a carrier's shared addresses bring tens of people from one network, a
/// farm thousands.
pub fn crowd_threshold(crowd: i64) -> (i32, String) {
    let t = (crowd / 100).clamp(20, i64::from(app::api::CROWD_THRESHOLD_MAX)) as i32;
    (
        t,
        format!(
            "{t}: 1 % of the {crowd} shoppers expected, at least 20 — more than an office, a campus or a carrier's shared addresses usually bring from one network, far fewer than a farm."
        ),
    )
}

/// Counts one render of sale `id`'s page before its start (what the forecast calls a page view).
pub async fn count_view(redis: &Redis, row: &ActivityRow) -> redis::RedisResult<()> {
    if chrono::Utc::now() >= row.starts_at {
        return Ok(());
    }
    let key = redis.keys.views(row.id);
    redis::pipe()
        .cmd("INCR")
        .arg(&key)
        .ignore()
        .cmd("PEXPIREAT")
        .arg(&key)
        .arg(row.ends_at.timestamp_millis() + 86_400_000)
        .ignore()
        .query_async::<()>(&mut redis.conn())
        .await
}

/// The forecast of a sale of the merchant's shop, with what happened once it has ended.
pub async fn of_sale(db: &PgPool, redis: &Redis, row: &ActivityRow) -> ApiResult<Forecast> {
    let mut conn = redis.conn();
    let page_views: Option<i64> = redis::cmd("GET")
        .arg(redis.keys.views(row.id))
        .query_async(&mut conn)
        .await?;
    let joined: i64 = match row.waiting_room {
        true => {
            redis::cmd("ZCARD")
                .arg(redis.keys.queue(row.id).line())
                .query_async(&mut conn)
                .await?
        }
        false => 0,
    };
    let interest = Interest {
        reminders: reminder::count(db, row.id).await?,
        page_views: page_views.unwrap_or(0),
        joined,
        stock: row.total_stock,
        per_user_limit: i64::from(row.per_user_limit),
    };
    let basis = basis();
    let (expected_crowd, expected_sell_out_ms, recommended, reasons) = advise(interest, &basis);
    // The row read for the forecast serves the report: no second read of it.
    let actual = match report::of_row(db, row).await {
        Ok(r) => Some(ForecastActual {
            attempts: r.attempts.total,
            unique_buyers: r.unique_buyers,
            joined: r.waiting_room.map(|w| w.joined),
            sold_out_after_ms: r.sold_out_after_ms,
        }),
        Err(ApiError::NotFound) => None,
        Err(e) => return Err(e),
    };
    Ok(Forecast {
        reminders: interest.reminders,
        page_views: interest.page_views,
        joined,
        expected_crowd,
        expected_sell_out_ms,
        recommended,
        reasons,
        basis,
        actual,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interest(reminders: i64, views: i64, joined: i64, stock: i64) -> Interest {
        Interest {
            reminders,
            page_views: views,
            joined,
            stock,
            per_user_limit: 1,
        }
    }

    #[test]
    fn a_small_crowd_needs_no_line_and_one_shard() {
        let (crowd, sell_out, r, reasons) = advise(interest(30, 120, 0, 100), &basis());
        assert_eq!(crowd, 120);
        assert_eq!(
            (r.waiting_room, r.stock_shards, r.admit_per_sec),
            (false, 1, 4_060)
        );
        // 120 shoppers arriving at once take the 100 units in well under a second.
        assert_eq!(sell_out, Some(833));
        assert_eq!(reasons.len(), 6);
        // A crowd of 120: the threshold's floor.
        assert_eq!(r.crowd_threshold, 20);
    }

    #[test]
    fn a_million_reminders_ask_for_a_line_and_the_rate_the_bench_measured() {
        let (crowd, sell_out, r, _) = advise(interest(1_000_000, 50_000, 0, 40_000), &basis());
        assert_eq!(crowd, 1_000_000);
        assert!(r.waiting_room);
        assert_eq!(r.crowd_threshold, 10_000);
        assert_eq!(r.admit_per_sec, 4_060);
        // 40,000 units at 4,060 shoppers/s.
        assert_eq!(sell_out, Some(9_852));
        // Admission caps the gate's calls: one Redis is enough for 4,060 calls/s.
        assert_eq!(r.stock_shards, 1);
        // Without a line, the whole crowd would hit the gate in the first second.
        let fast = ForecastBasis {
            buys_per_sec: 100_000,
            ..basis()
        };
        let (_, _, r, _) = advise(interest(0, 0, 60_000, 40_000), &fast);
        assert_eq!((r.waiting_room, r.stock_shards), (false, 5));
    }

    #[test]
    fn too_few_shoppers_do_not_sell_out() {
        let (_, sell_out, _, reasons) = advise(interest(10, 20, 0, 500), &basis());
        assert_eq!(sell_out, None);
        assert!(
            reasons
                .last()
                .unwrap()
                .starts_with("Not expected to sell out"),
            "{reasons:?}"
        );
    }
}
