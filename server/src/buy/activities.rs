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
    entries: Arc<parking_lot::RwLock<HashMap<i64, Entry>>>,
    unknown: Arc<parking_lot::RwLock<HashMap<i64, Instant>>>,
    /// The reads in flight, by id: a miss waits for the one read of its id.
    flights: Arc<parking_lot::Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>>,
}

const CACHE_TTL: Duration = Duration::from_secs(5);
/// How long a buy waits for an expired row to be read again before it goes on with the copy it
/// has (PostgreSQL slow or cut off from this instance: the sale goes on).
const REFRESH_WAIT: Duration = Duration::from_millis(500);
/// The most unknown ids remembered at once.
pub const MAX_UNKNOWN: usize = 10_000;

impl ActivityCache {
    pub async fn get(&self, db: &PgPool, id: i64) -> ApiResult<Arc<ActivityRow>> {
        self.get_or_load(id, || load(db, id)).await
    }

    /// The cached answer for `id` while it is fresh.
    fn fresh(&self, id: i64) -> Option<ApiResult<Arc<ActivityRow>>> {
        if let Some(at) = self.unknown.read().get(&id) {
            if at.elapsed() < CACHE_TTL {
                return Some(Err(ApiError::NotFound));
            }
        }
        let entries = self.entries.read();
        let (at, row) = entries.get(&id)?;
        (at.elapsed() < CACHE_TTL).then(|| Ok(row.clone()))
    }

    /// The row of `id`, from the cache while fresh, else from `read`: one read per id at a time
    /// (a crowd's first second sends one query per sale to PostgreSQL, not one per buy; the
    /// others wait for it and take its row).
    async fn get_or_load<F, Fut>(&self, id: i64, read: F) -> ApiResult<Arc<ActivityRow>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ApiResult<Option<ActivityRow>>>,
    {
        if let Some(fresh) = self.fresh(id) {
            return fresh;
        }
        let flight = self.flights.lock().entry(id).or_default().clone();
        let _turn = flight.lock().await;
        if let Some(fresh) = self.fresh(id) {
            return fresh;
        }
        let answer = self.read_through(id, read).await;
        self.flights.lock().remove(&id);
        answer
    }

    async fn read_through<F, Fut>(&self, id: i64, read: F) -> ApiResult<Arc<ActivityRow>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ApiResult<Option<ActivityRow>>>,
    {
        // With a copy at hand the read is bounded; a first read waits as long as the pool lets it.
        let loaded = if self.stale(id).is_some() {
            tokio::time::timeout(REFRESH_WAIT, read())
                .await
                .unwrap_or(Err(ApiError::Unavailable { retry_after: 1 }))
        } else {
            read().await
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
            let mut unknown = self.unknown.write();
            if unknown.len() >= MAX_UNKNOWN {
                unknown.clear();
            }
            unknown.insert(id, Instant::now());
            return Err(ApiError::NotFound);
        };
        // Rows of sales that exist: as many as there are sales. (An id probed before its sale
        // was created is not unknown any more.)
        if self.unknown.read().contains_key(&id) {
            self.unknown.write().remove(&id);
        }
        self.entries
            .write()
            .insert(id, (Instant::now(), row.clone()));
        Ok(row)
    }

    /// The row of `id` if this instance read it within [`CACHE_TTL`]; never a database read.
    pub fn cached(&self, id: i64) -> Option<Arc<ActivityRow>> {
        let entries = self.entries.read();
        let (at, row) = entries.get(&id)?;
        (at.elapsed() < CACHE_TTL).then(|| row.clone())
    }

    /// Unknown ids remembered now (at most [`MAX_UNKNOWN`]).
    pub fn unknown_len(&self) -> usize {
        self.unknown.read().len()
    }

    /// The last row read, however old (`Some(None)`: it was known not to exist).
    fn stale(&self, id: i64) -> Option<Option<Arc<ActivityRow>>> {
        if let Some((_, row)) = self.entries.read().get(&id) {
            return Some(Some(row.clone()));
        }
        self.unknown.read().contains_key(&id).then_some(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn row(id: i64) -> ActivityRow {
        let now = chrono::Utc::now();
        ActivityRow {
            id,
            title: "a sale".into(),
            description: String::new(),
            image_url: None,
            price_cents: 100,
            seckill_price_cents: 50,
            starts_at: now,
            ends_at: now + chrono::Duration::hours(1),
            total_stock: 10,
            sold: 0,
            per_user_limit: 1,
            captcha_required: false,
            payment_window_secs: 600,
            paused: false,
            stock_shards: 1,
            waiting_room: false,
            admit_per_sec: 100,
            shop_id: 1,
            bot_check: "none".into(),
            pow_difficulty: 0,
            accounts_created_before: None,
            line_method: "arrival_order".into(),
            drawing_seed: Vec::new(),
        }
    }

    /// A crowd's misses of one id at once: one read, and every miss gets its answer.
    async fn crowd(cache: &ActivityCache, id: i64, exists: bool) -> (usize, Vec<bool>) {
        let reads = AtomicUsize::new(0);
        let misses = (0..64).map(|_| {
            cache.get_or_load(id, || async {
                reads.fetch_add(1, Ordering::SeqCst);
                // A read slow enough that every miss arrives while it runs.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(exists.then(|| row(id)))
            })
        });
        let answers = futures_util::future::join_all(misses).await;
        (
            reads.load(Ordering::SeqCst),
            answers.iter().map(Result::is_ok).collect(),
        )
    }

    #[tokio::test]
    async fn concurrent_misses_of_one_sale_make_one_read() {
        let cache = ActivityCache::default();
        let (reads, answers) = crowd(&cache, 7, true).await;
        assert_eq!(reads, 1, "one read for 64 misses");
        assert!(answers.iter().all(|ok| *ok));
        let (reads, answers) = crowd(&cache, 8, false).await;
        assert_eq!(
            reads, 1,
            "one read for 64 misses of a sale that does not exist"
        );
        assert!(answers.iter().all(|ok| !*ok));
        assert!(cache.flights.lock().is_empty(), "no read left in flight");
        // Another sale is read on its own.
        assert_eq!(crowd(&cache, 9, true).await.0, 1);
    }
}
