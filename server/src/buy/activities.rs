//! The activities as the buy path reads them, cached in-process for a few seconds. Once an
//! instance has read a sale's row, no buy of that sale waits on PostgreSQL again: an expired row
//! is answered at once and read again in the background, so a PostgreSQL that is slow, restarting
//! or cut off from the instance costs the crowd nothing (docs/reliability.md).

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
    /// The background re-reads in flight, by id: one at a time per sale.
    refreshing: Arc<parking_lot::Mutex<std::collections::HashSet<i64>>>,
    /// Until when PostgreSQL is taken as out of reach (a read failed or took longer than
    /// [`FRESH_READ_WAIT`]): [`ActivityCache::current`] answers from the cache meanwhile.
    down_until: Arc<parking_lot::Mutex<Option<Instant>>>,
}

const CACHE_TTL: Duration = Duration::from_secs(5);
/// A background re-read that has not answered by then is given up (PostgreSQL cut off: the
/// connection hangs rather than fails); the next request after it starts another.
const REFRESH_WAIT: Duration = Duration::from_secs(5);
/// How long [`ActivityCache::current`] waits for PostgreSQL before it answers from the cache.
const FRESH_READ_WAIT: Duration = Duration::from_millis(250);
/// After a failed or slow read, how long `current` answers from the cache without asking.
const DOWN_FOR: Duration = Duration::from_secs(2);
/// The most unknown ids remembered at once.
pub const MAX_UNKNOWN: usize = 10_000;

impl ActivityCache {
    /// The row of `id` as the buy path needs it: from the cache, read from PostgreSQL only when
    /// this instance never read it (an expired row is answered at once and read again in the
    /// background).
    pub async fn get(&self, db: &PgPool, id: i64) -> ApiResult<Arc<ActivityRow>> {
        let db = db.clone();
        self.get_or_load(id, move || async move { load(&db, id).await })
            .await
    }

    /// The row of `id` as PostgreSQL has it now (a sale's page: a merchant's change shows at
    /// once), unless PostgreSQL does not answer within [`FRESH_READ_WAIT`] or failed a moment
    /// ago: then the copy this instance has, however old.
    pub async fn current(&self, db: &PgPool, id: i64) -> ApiResult<Arc<ActivityRow>> {
        let down = self
            .down_until
            .lock()
            .is_some_and(|until| Instant::now() < until);
        if !down {
            let read = tokio::time::timeout(FRESH_READ_WAIT, load(db, id))
                .await
                .unwrap_or(Err(ApiError::Unavailable { retry_after: 1 }));
            match read {
                Ok(row) => return self.store(id, row),
                Err(e @ ApiError::Unavailable { .. }) => {
                    self.mark_down();
                    if self.stale(id).is_none() {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        self.stale(id)
            .ok_or(ApiError::Unavailable { retry_after: 1 })?
            .ok_or(ApiError::NotFound)
    }

    fn mark_down(&self) {
        *self.down_until.lock() = Some(Instant::now() + DOWN_FOR);
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

    /// The row of `id`: fresh from the cache; expired, the copy at once and `read` again in the
    /// background; never read (or known to be no sale), from `read`, one read per id at a time (a crowd's first second
    /// sends one query per sale to PostgreSQL, not one per buy; the others wait for it and take
    /// its row).
    async fn get_or_load<F, Fut>(&self, id: i64, read: F) -> ApiResult<Arc<ActivityRow>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ApiResult<Option<ActivityRow>>> + Send + 'static,
    {
        if let Some(fresh) = self.fresh(id) {
            return fresh;
        }
        // A sale once read: its copy at once. An id once found to be no sale is read again
        // before it is refused again (the sale may have been created since).
        if let Some(Some(copy)) = self.stale(id) {
            self.refresh(id, read);
            return Ok(copy);
        }
        let flight = self.flights.lock().entry(id).or_default().clone();
        let _turn = flight.lock().await;
        if let Some(fresh) = self.fresh(id) {
            return fresh;
        }
        let answer = match read().await {
            Ok(row) => self.store(id, row),
            Err(e) => Err(e),
        };
        self.flights.lock().remove(&id);
        answer
    }

    /// Reads `id` again in a task of its own, unless a re-read of it is in flight.
    fn refresh<F, Fut>(&self, id: i64, read: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ApiResult<Option<ActivityRow>>> + Send + 'static,
    {
        if !self.refreshing.lock().insert(id) {
            return;
        }
        let cache = self.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(REFRESH_WAIT, read()).await {
                Ok(Ok(row)) => {
                    let _ = cache.store(id, row);
                }
                Ok(Err(e)) => {
                    tracing::debug!(activity = id, error = %e, "re-reading a sale's row failed; its copy serves");
                    cache.mark_down();
                }
                Err(_) => cache.mark_down(),
            }
            cache.refreshing.lock().remove(&id);
        });
    }

    /// Keeps what PostgreSQL answered for `id` (`None`: no such sale) and returns it.
    fn store(&self, id: i64, row: Option<ActivityRow>) -> ApiResult<Arc<ActivityRow>> {
        let Some(row) = row.map(Arc::new) else {
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

    /// Takes `row` as the sale's row now (this instance just changed it).
    pub fn put(&self, row: ActivityRow) {
        let _ = self.store(row.id, Some(row));
    }

    /// The sale changed elsewhere (a broadcast said so): its copy is out of date, so its next
    /// use reads it again (in the background, the copy serving meanwhile, as for any expired row).
    pub fn expire(&self, id: i64) {
        if let Some((at, _)) = self.entries.write().get_mut(&id) {
            *at = Instant::now()
                .checked_sub(CACHE_TTL)
                .unwrap_or_else(Instant::now);
        }
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
            halted: false,
            fail_open: false,
            crowd_policy: "off".into(),
            crowd_threshold: 100,
        }
    }

    /// A crowd's misses of one id at once.
    async fn crowd(cache: &ActivityCache, id: i64, exists: bool) -> (usize, Vec<bool>) {
        let reads = Arc::new(AtomicUsize::new(0));
        let misses = (0..64).map(|_| {
            let reads = reads.clone();
            cache.get_or_load(id, move || async move {
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

    /// PostgreSQL cut off: a read never answers. A buy of a sale whose row has expired takes
    /// the copy at once; one re-read is in flight for the whole crowd, and its answer replaces
    /// the copy once PostgreSQL is back.
    #[tokio::test]
    async fn an_expired_row_is_answered_at_once_while_its_read_hangs() {
        let cache = ActivityCache::default();
        let old = Instant::now().checked_sub(CACHE_TTL * 2).unwrap();
        cache.entries.write().insert(7, (old, Arc::new(row(7))));
        let reads = Arc::new(AtomicUsize::new(0));
        let hanging = (0..64).map(|_| {
            let reads = reads.clone();
            cache.get_or_load(7, move || async move {
                reads.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<ApiResult<Option<ActivityRow>>>().await
            })
        });
        // Were a buy to wait on the read, it would wait forever: the guard's minute ends it.
        let answers = tokio::time::timeout(
            Duration::from_secs(60),
            futures_util::future::join_all(hanging),
        )
        .await;
        assert!(answers.is_ok(), "no buy waits on a read that hangs");
        let answers = answers.unwrap_or_default();
        assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|r| r.id == 7)));
        assert_eq!(cache.refreshing.lock().len(), 1, "one re-read in flight");

        // PostgreSQL answers again: the re-read after the hung one replaces the copy.
        cache.refreshing.lock().clear();
        let mut renamed = row(7);
        renamed.title = "read again".into();
        let answer = cache
            .get_or_load(7, move || async move { Ok(Some(renamed)) })
            .await
            .unwrap();
        assert_eq!(
            answer.title, "a sale",
            "the copy answers while the re-read runs"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while cache.cached(7).is_none_or(|r| r.title != "read again") {
            assert!(Instant::now() < deadline, "the re-read replaced the copy");
            tokio::task::yield_now().await;
        }
    }

    /// An id probed before its sale existed: once that answer has expired, the next request
    /// reads again and finds the sale, rather than being told "no such sale" from the old copy.
    #[tokio::test]
    async fn an_id_once_unknown_is_read_again_once_expired() {
        let cache = ActivityCache::default();
        let old = Instant::now().checked_sub(CACHE_TTL * 2).unwrap();
        cache.unknown.write().insert(7, old);
        let found = cache.get_or_load(7, || async { Ok(Some(row(7))) }).await;
        assert!(
            found.is_ok_and(|r| r.id == 7),
            "the sale created since is found"
        );
    }
}
