//! Ended sessions, known to every instance without a read on the request path. A session is
//! over when it was signed out one by one (its id is in `revoked_sessions` until its cookie would
//! have expired) or when its user's session epoch moved past the one it was issued under (sign
//! out everywhere, a password change, a reset, a block). PostgreSQL holds both; every instance
//! keeps them in memory, loads them at start and whenever its subscription was interrupted,
//! hears each change over Redis pub/sub within milliseconds, and re-reads what changed since its
//! last look every `SECKILL_SESSION_RELOAD_SECS` (so a lost broadcast is honoured within that period).
//! Checking a cookie is one read lock and two hash lookups; ending one is O(log n) (the ended
//! sessions are also kept ordered by expiry, and the expired ones are dropped from the front by
//! a timer, a bounded number at a time), whatever their number.

use super::{ApiError, ApiResult};
use crate::infra::redis::Redis;
use chrono::{DateTime, Utc};
use parking_lot::RwLock;
use sqlx::PgPool;
use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

/// Each re-read starts this long before the last one did: a row stamped before a slow commit
/// became visible is read by the next look.
const RELOAD_OVERLAP: Duration = Duration::from_secs(60);
/// Sessions dropped (expired) or added (re-read) per hold of the write lock: the request path
/// waits at most that.
const SWEEP_BATCH: usize = 4096;

#[derive(Default)]
struct Ended {
    /// User id → the oldest session epoch still valid (users never revoked are absent: 0).
    epochs: HashMap<i64, i64>,
    /// Session id → when its cookie expires (unix seconds).
    sessions: HashMap<u128, i64>,
    /// The same sessions by expiry, to drop the expired ones from the front.
    by_expiry: BTreeSet<(i64, u128)>,
}

impl Ended {
    fn insert(&mut self, sid: u128, expires_at: i64) {
        if let Some(old) = self.sessions.insert(sid, expires_at) {
            self.by_expiry.remove(&(old, sid));
        }
        self.by_expiry.insert((expires_at, sid));
    }

    /// Drops up to `at_most` sessions expired by `now`; how many it dropped.
    fn drop_expired(&mut self, now: i64, at_most: usize) -> usize {
        let mut dropped = 0;
        while dropped < at_most {
            match self.by_expiry.first() {
                Some(&(exp, sid)) if exp <= now => {
                    self.by_expiry.pop_first();
                    self.sessions.remove(&sid);
                    dropped += 1;
                }
                _ => break,
            }
        }
        dropped
    }
}

#[derive(Clone, Default)]
pub struct Revocations {
    ended: Arc<RwLock<Ended>>,
}

impl Revocations {
    /// Whether a correctly signed session of `user_id`, issued under `epoch`, is still on.
    pub fn admits(&self, user_id: i64, epoch: i64, sid: u128) -> bool {
        let ended = self.ended.read();
        epoch >= ended.epochs.get(&user_id).copied().unwrap_or(0)
            && !ended.sessions.contains_key(&sid)
    }

    fn raise_epoch(&self, user_id: i64, epoch: i64) {
        let mut ended = self.ended.write();
        let entry = ended.epochs.entry(user_id).or_default();
        *entry = (*entry).max(epoch);
    }

    fn end(&self, sid: u128, expires_at: i64) {
        let mut ended = self.ended.write();
        // A few expired ones go with each insert; the timer takes the rest.
        ended.drop_expired(Utc::now().timestamp(), 2);
        ended.insert(sid, expires_at);
    }

    /// Ended sessions known here (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.ended.read().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every session expired by `now`, [`SWEEP_BATCH`] at a time.
    pub fn drop_expired(&self, now: i64) -> usize {
        let mut total = 0;
        loop {
            let dropped = self.ended.write().drop_expired(now, SWEEP_BATCH);
            total += dropped;
            if dropped < SWEEP_BATCH {
                return total;
            }
        }
    }

    /// A broadcast arrived: `epoch <user> <epoch>` or `session <sid hex> <expires>`.
    pub fn on_message(&self, payload: &str) {
        let mut parts = payload.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("epoch"), Some(user), Some(epoch)) => {
                if let (Ok(user), Ok(epoch)) = (user.parse(), epoch.parse()) {
                    self.raise_epoch(user, epoch);
                }
            }
            (Some("session"), Some(sid), Some(exp)) => {
                if let (Ok(sid), Ok(exp)) = (u128::from_str_radix(sid, 16), exp.parse()) {
                    self.end(sid, exp);
                }
            }
            _ => tracing::warn!(payload, "unreadable session broadcast"),
        }
    }

    /// Replaces what this instance knows with the database's (and forgets sessions whose cookies
    /// have expired anyway).
    pub async fn load(&self, db: &PgPool) -> sqlx::Result<()> {
        sqlx::query!("DELETE FROM revoked_sessions WHERE expires_at < now()")
            .execute(db)
            .await?;
        let epochs = sqlx::query!("SELECT id, session_epoch FROM users WHERE session_epoch > 0")
            .fetch_all(db)
            .await?;
        let sessions = sqlx::query!("SELECT sid, expires_at FROM revoked_sessions")
            .fetch_all(db)
            .await?;
        let mut fresh = Ended {
            epochs: epochs
                .into_iter()
                .map(|u| (u.id, u.session_epoch))
                .collect(),
            ..Ended::default()
        };
        for ended in sessions {
            if let Ok(sid) = u128::from_str_radix(&ended.sid, 16) {
                fresh.insert(sid, ended.expires_at.timestamp());
            }
        }
        *self.ended.write() = fresh;
        Ok(())
    }

    /// Adds what changed in the database since `since` (the database's clock), and returns the
    /// time to ask from next.
    pub async fn reload_since(
        &self,
        db: &PgPool,
        since: DateTime<Utc>,
    ) -> sqlx::Result<DateTime<Utc>> {
        let now: DateTime<Utc> = sqlx::query_scalar!(r#"SELECT now() AS "now!""#)
            .fetch_one(db)
            .await?;
        let epochs = sqlx::query!(
            "SELECT id, session_epoch FROM users WHERE session_epoch_at >= $1",
            since
        )
        .fetch_all(db)
        .await?;
        let sessions = sqlx::query!(
            "SELECT sid, expires_at FROM revoked_sessions WHERE revoked_at >= $1 AND expires_at > now()",
            since
        )
        .fetch_all(db)
        .await?;
        for user in epochs {
            self.raise_epoch(user.id, user.session_epoch);
        }
        // Most rows re-read are known already (the overlap, the broadcasts, the load at start):
        // sorted out under the read lock, the others added a batch per hold of the write lock.
        let unknown: Vec<(u128, i64)> = {
            let ended = self.ended.read();
            sessions
                .into_iter()
                .filter_map(|r| {
                    Some((
                        u128::from_str_radix(&r.sid, 16).ok()?,
                        r.expires_at.timestamp(),
                    ))
                })
                .filter(|(sid, exp)| ended.sessions.get(sid) != Some(exp))
                .collect()
        };
        for batch in unknown.chunks(SWEEP_BATCH) {
            let mut ended = self.ended.write();
            for &(sid, exp) in batch {
                ended.insert(sid, exp);
            }
        }
        Ok(now - chrono::Duration::from_std(RELOAD_OVERLAP).expect("a small duration"))
    }

    /// Every `every`: re-reads what changed (a lost broadcast is honoured by then) and drops the
    /// expired sessions. Runs until the process ends.
    pub async fn run(self, db: PgPool, every: Duration) {
        let mut since = Utc::now() - chrono::Duration::from_std(RELOAD_OVERLAP).expect("small");
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.reload_since(&db, since).await {
                Ok(next) => since = next,
                Err(e) => tracing::warn!(error = %e, "ended sessions not re-read; next time"),
            }
            self.drop_expired(Utc::now().timestamp());
        }
    }

    /// Ends one session (sign out): recorded, then known here at once and broadcast.
    pub async fn end_session(
        &self,
        db: &PgPool,
        redis: &Redis,
        user_id: i64,
        sid: u128,
        expires_at: i64,
    ) -> ApiResult<()> {
        let expires = DateTime::from_timestamp(expires_at, 0)
            .ok_or_else(|| ApiError::invalid("sid", "expiry out of range"))?;
        sqlx::query!(
            "INSERT INTO revoked_sessions (sid, user_id, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (sid) DO NOTHING",
            format!("{sid:032x}"),
            user_id,
            expires
        )
        .execute(db)
        .await?;
        self.end(sid, expires_at);
        self.broadcast(redis, format!("session {sid:032x} {expires_at}"))
            .await;
        Ok(())
    }

    /// Makes every session of `user_id` issued before `epoch` invalid here at once and, by
    /// broadcast, everywhere (the caller has stored the epoch with the change that caused it).
    pub async fn announce_epoch(&self, redis: &Redis, user_id: i64, epoch: i64) {
        self.raise_epoch(user_id, epoch);
        self.broadcast(redis, format!("epoch {user_id} {epoch}"))
            .await;
    }

    /// The database already holds the change: an instance that misses this broadcast learns it
    /// when it reloads (after any interruption of its subscription).
    async fn broadcast(&self, redis: &Redis, message: String) {
        let sent: redis::RedisResult<i64> = redis::cmd("PUBLISH")
            .arg(redis.keys.session_channel())
            .arg(&message)
            .query_async(&mut redis.conn())
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, message, "session change not broadcast; other instances learn it on reload");
        }
    }
}

/// Moves a user's session epoch on (ending every session issued before) and returns the new one.
pub async fn next_epoch<'e>(db: impl sqlx::PgExecutor<'e>, user_id: i64) -> ApiResult<Option<i64>> {
    Ok(sqlx::query_scalar!(
        "UPDATE users SET session_epoch = session_epoch + 1, session_epoch_at = clock_timestamp()
         WHERE id = $1 RETURNING session_epoch",
        user_id
    )
    .fetch_optional(db)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use signing::new_session_id;

    #[test]
    fn broadcasts_end_sessions_and_epochs() {
        let r = Revocations::default();
        let sid = new_session_id();
        assert!(r.admits(7, 0, sid));
        r.on_message(&format!(
            "session {sid:032x} {}",
            Utc::now().timestamp() + 60
        ));
        assert!(!r.admits(7, 0, sid));
        assert!(r.admits(7, 0, new_session_id()));
        r.on_message("epoch 7 2");
        assert!(!r.admits(7, 1, new_session_id()));
        assert!(r.admits(7, 2, new_session_id()));
        // An older epoch arriving late does not lower it.
        r.on_message("epoch 7 1");
        assert!(!r.admits(7, 1, new_session_id()));
        assert!(r.admits(8, 0, new_session_id()));
        r.on_message("garbage");
        r.on_message("epoch x y");
    }

    #[test]
    fn two_hundred_thousand_ended_sessions_then_ten_thousand_more_are_all_kept_and_expire() {
        let r = Revocations::default();
        let now = Utc::now().timestamp();
        let ended: Vec<u128> = (0..200_000).map(|_| new_session_id()).collect();
        for (i, sid) in ended.iter().enumerate() {
            // Half already expired (as the oldest logouts of a week would be), half not.
            let exp = if i % 2 == 0 { now - 10 } else { now + 3600 };
            r.end(*sid, exp);
        }
        let more: Vec<u128> = (0..10_000).map(|_| new_session_id()).collect();
        for sid in &more {
            r.end(*sid, now + 3600);
        }
        assert!(more.iter().all(|sid| !r.admits(1, 0, *sid)));
        assert!(ended
            .iter()
            .skip(1)
            .step_by(2)
            .all(|sid| !r.admits(1, 0, *sid)));
        // The timer drops exactly the expired ones.
        let kept_before = r.len();
        let dropped = r.drop_expired(now);
        assert_eq!(r.len(), kept_before - dropped);
        assert_eq!(r.len(), 110_000);
        assert!(more.iter().all(|sid| !r.admits(1, 0, *sid)));
        // Ending a session again (a retried sign-out) keeps one entry, with the later expiry.
        r.end(more[0], now + 7200);
        assert_eq!(r.len(), 110_000);
        assert_eq!(r.drop_expired(now + 3601), 109_999);
        assert!(!r.admits(1, 0, more[0]));
    }
}
