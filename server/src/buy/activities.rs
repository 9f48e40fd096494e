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
///
/// Ids found not to exist are remembered apart, at most [`MAX_UNKNOWN`] of them (the set is
/// emptied when full: a flood of made-up ids costs a bounded map, never a scan per request).
/// An activity's row and when it was read.
type Entry = (Instant, Arc<ActivityRow>);

#[derive(Clone, Default)]
pub struct ActivityCache {
    entries: Arc<std::sync::RwLock<HashMap<i64, Entry>>>,
    unknown: Arc<std::sync::RwLock<HashMap<i64, Instant>>>,
}

const CACHE_TTL: Duration = Duration::from_secs(5);
/// How long a buy waits for an expired row to be read again before it goes on with the copy it
/// has (PostgreSQL slow or cut off from this instance: the sale goes on).
const REFRESH_WAIT: Duration = Duration::from_millis(500);
/// The most unknown ids remembered at once.
pub const MAX_UNKNOWN: usize = 10_000;

impl ActivityCache {
    pub async fn get(&self, db: &PgPool, id: i64) -> ApiResult<Arc<ActivityRow>> {
        if let Some(at) = self.unknown.read().expect("cache lock").get(&id) {
            if at.elapsed() < CACHE_TTL {
                return Err(ApiError::NotFound);
            }
        }
        if let Some((at, row)) = self.entries.read().expect("cache lock").get(&id) {
            if at.elapsed() < CACHE_TTL {
                return Ok(row.clone());
            }
        }
        // With a copy at hand the read is bounded; a first read waits as long as the pool lets it.
        let loaded = if self.stale(id).is_some() {
            tokio::time::timeout(REFRESH_WAIT, load(db, id))
                .await
                .unwrap_or(Err(ApiError::Unavailable { retry_after: 1 }))
        } else {
            load(db, id).await
        };
        let row = match loaded {
            Ok(row) => row.map(Arc::new),
            // PostgreSQL is down, restarting or out of reach: the sale goes on with what this
            // instance last read (Redis decides the buy; the row only gives its window, limit and
            // captcha rule).
            Err(e @ ApiError::Unavailable { .. }) => {
                return self.stale(id).ok_or(e)?.ok_or(ApiError::NotFound)
            }
            Err(e) => return Err(e),
        };
        let Some(row) = row else {
            let mut unknown = self.unknown.write().expect("cache lock");
            if unknown.len() >= MAX_UNKNOWN {
                unknown.clear();
            }
            unknown.insert(id, Instant::now());
            return Err(ApiError::NotFound);
        };
        // Rows of sales that exist: as many as there are sales. (An id probed before its sale
        // was created is not unknown any more.)
        if self.unknown.read().expect("cache lock").contains_key(&id) {
            self.unknown.write().expect("cache lock").remove(&id);
        }
        self.entries
            .write()
            .expect("cache lock")
            .insert(id, (Instant::now(), row.clone()));
        Ok(row)
    }

    /// The row of `id` if this instance read it within [`CACHE_TTL`]; never a database read.
    pub fn cached(&self, id: i64) -> Option<Arc<ActivityRow>> {
        let entries = self.entries.read().expect("cache lock");
        let (at, row) = entries.get(&id)?;
        (at.elapsed() < CACHE_TTL).then(|| row.clone())
    }

    /// Unknown ids remembered now (at most [`MAX_UNKNOWN`]).
    pub fn unknown_len(&self) -> usize {
        self.unknown.read().expect("cache lock").len()
    }

    /// The last row read, however old (`Some(None)`: it was known not to exist).
    fn stale(&self, id: i64) -> Option<Option<Arc<ActivityRow>>> {
        if let Some((_, row)) = self.entries.read().expect("cache lock").get(&id) {
            return Some(Some(row.clone()));
        }
        self.unknown
            .read()
            .expect("cache lock")
            .contains_key(&id)
            .then_some(None)
    }
}
