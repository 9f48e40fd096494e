//! The activities as the buy path reads them, cached in-process for a few seconds.

use crate::domain::{
    activity::{load, ActivityRow},
    ApiError, ApiResult,
};
use sqlx::PgPool;
use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

/// Activity rows cached for a few seconds: the fields the buy path needs (window, limit, captcha
/// switch, price) never change after creation, and `paused` is decided in Redis, so a stale copy
/// is harmless.
#[derive(Clone, Default)]
pub struct ActivityCache {
    entries: Arc<std::sync::RwLock<HashMap<i64, (Instant, Option<Arc<ActivityRow>>)>>>,
}

const CACHE_TTL: Duration = Duration::from_secs(5);

impl ActivityCache {
    pub async fn get(&self, db: &PgPool, id: i64) -> ApiResult<Arc<ActivityRow>> {
        if let Some((at, row)) = self.entries.read().expect("cache lock").get(&id) {
            if at.elapsed() < CACHE_TTL {
                return row.clone().ok_or(ApiError::NotFound);
            }
        }
        let row = match load(db, id).await {
            Ok(row) => row.map(Arc::new),
            // PostgreSQL is down or restarting: the sale goes on with what this instance last
            // read (Redis decides the buy; the row only gives its window, limit and captcha rule).
            Err(e @ ApiError::Unavailable { .. }) => {
                return self.stale(id).ok_or(e)?.ok_or(ApiError::NotFound)
            }
            Err(e) => return Err(e),
        };
        let mut entries = self.entries.write().expect("cache lock");
        if entries.len() > 10_000 {
            entries.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        }
        entries.insert(id, (Instant::now(), row.clone()));
        row.ok_or(ApiError::NotFound)
    }

    /// The last row read, however old (`Some(None)`: it was known not to exist).
    fn stale(&self, id: i64) -> Option<Option<Arc<ActivityRow>>> {
        self.entries
            .read()
            .expect("cache lock")
            .get(&id)
            .map(|(_, row)| row.clone())
    }
}
