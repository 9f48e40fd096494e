//! Admission's brakes: how much of its rate a line admits while the pipeline behind the gate or
//! Redis falls behind.

use crate::{domain::error::ApiResult, infra::config::QueueLimits};
use std::time::Duration;

/// Why admission is held back: the pipeline behind the gate (units taken and not in the
/// database yet), or Redis answering slowly.
pub const HELD_REASONS: [&str; 2] = ["backlog", "redis_slow"];

/// How much of its rate a line admits now (1: all of it, 0: none) and why it holds back. Each
/// signal slows admission from half its bound and stops it at the bound; the worse one counts.
/// Admission resumes by itself as the signals come back under their bounds.
pub fn health(limits: &QueueLimits, backlog: i64, redis: Duration) -> (f64, Option<&'static str>) {
    let share = |value: f64, bound: f64| (2.0 * (1.0 - value / bound)).clamp(0.0, 1.0);
    let by_backlog = share(backlog as f64, limits.max_backlog as f64);
    let by_redis = share(redis.as_secs_f64(), limits.max_redis.as_secs_f64());
    match (by_backlog, by_redis) {
        (b, r) if b >= 1.0 && r >= 1.0 => (1.0, None),
        (b, r) if b <= r => (b, Some(HELD_REASONS[0])),
        (_, r) => (r, Some(HELD_REASONS[1])),
    }
}

/// Why, and by how much, an admission step held a sale's admissions back (logged when it
/// starts and ends).
pub(super) struct Hold {
    pub reason: &'static str,
    /// The share of the sale's rate admitted (0: none).
    pub factor: f64,
    /// Units reserved but not yet orders.
    pub backlog: i64,
    /// How long the step's read of the stock took.
    pub redis: Duration,
}

/// Logs an admission step of sale `id` when admission starts or stops failing or being held
/// back.
pub(super) fn log_step(id: i64, step: &ApiResult<Option<Hold>>, was_failing: bool, was_held: bool) {
    match step {
        Err(e) if !was_failing => {
            tracing::warn!(error = ?e, activity.id = id, "admission step failed")
        }
        Ok(Some(hold)) if !was_held => tracing::warn!(
            activity.id = id,
            reason = hold.reason,
            factor = hold.factor,
            backlog = hold.backlog,
            redis = ?hold.redis,
            "admission held back"
        ),
        Ok(None) if was_held => tracing::info!(activity.id = id, "admission no longer held back"),
        Ok(_) if was_failing => tracing::info!(activity.id = id, "admission steps work again"),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_slows_from_half_a_bound_and_stops_at_it() {
        let limits = QueueLimits {
            claim: Duration::from_secs(15),
            max_backlog: 1000,
            max_redis: Duration::from_millis(200),
            bot_fails: 5,
            shadow: true,
        };
        let quick = Duration::from_millis(5);
        assert_eq!(health(&limits, 0, quick), (1.0, None));
        assert_eq!(health(&limits, 500, quick), (1.0, None));
        assert_eq!(health(&limits, 750, quick), (0.5, Some("backlog")));
        assert_eq!(health(&limits, 1000, quick), (0.0, Some("backlog")));
        assert_eq!(health(&limits, 5000, quick), (0.0, Some("backlog")));
        let (factor, why) = health(&limits, 0, Duration::from_millis(150));
        assert!((factor - 0.5).abs() < 1e-9, "{factor}");
        assert_eq!(why, Some("redis_slow"));
        assert_eq!(
            health(&limits, 0, Duration::from_millis(300)),
            (0.0, Some("redis_slow"))
        );
        // Both behind: the worse one says how much, and why.
        let (factor, why) = health(&limits, 900, Duration::from_millis(150));
        assert!((factor - 0.2).abs() < 1e-9, "{factor}");
        assert_eq!(why, Some("backlog"));
    }
}
