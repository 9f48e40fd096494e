//! Ended sessions, known to every instance without a read on the request path. A session is
//! over when it was signed out one by one (its id is in `revoked_sessions` until its cookie would
//! have expired) or when its user's session epoch moved past the one it was issued under (sign
//! out everywhere, a password change, a reset, a block). PostgreSQL holds both; every instance
//! keeps them in memory, loads them at start and whenever its subscription was interrupted, and
//! hears each change over Redis pub/sub within milliseconds. Checking a cookie is one read lock
//! and two hash lookups.

use super::{ApiError, ApiResult};
use crate::infra::redis::Redis;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

/// Past this many ended sessions, the expired ones are swept out on the next insert.
const SWEEP_ABOVE: usize = 100_000;

#[derive(Default)]
struct Ended {
    /// User id → the oldest session epoch still valid (users never revoked are absent: 0).
    epochs: HashMap<i64, i64>,
    /// Session id → when its cookie expires (unix seconds).
    sessions: HashMap<u128, i64>,
}

#[derive(Clone, Default)]
pub struct Revocations {
    ended: Arc<RwLock<Ended>>,
}

/// A session id: 128 random bits, written as 32 hex digits.
pub fn new_session_id() -> u128 {
    uuid::Uuid::new_v4().as_u128()
}

impl Revocations {
    /// Whether a correctly signed session of `user_id`, issued under `epoch`, is still on.
    pub fn admits(&self, user_id: i64, epoch: i64, sid: u128) -> bool {
        let ended = self.ended.read().expect("revocations lock");
        epoch >= ended.epochs.get(&user_id).copied().unwrap_or(0)
            && !ended.sessions.contains_key(&sid)
    }

    fn raise_epoch(&self, user_id: i64, epoch: i64) {
        let mut ended = self.ended.write().expect("revocations lock");
        let entry = ended.epochs.entry(user_id).or_default();
        *entry = (*entry).max(epoch);
    }

    fn end(&self, sid: u128, expires_at: i64) {
        let mut ended = self.ended.write().expect("revocations lock");
        if ended.sessions.len() > SWEEP_ABOVE {
            let now = Utc::now().timestamp();
            ended.sessions.retain(|_, exp| *exp > now);
        }
        ended.sessions.insert(sid, expires_at);
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
        sqlx::query("DELETE FROM revoked_sessions WHERE expires_at < now()")
            .execute(db)
            .await?;
        let epochs: Vec<(i64, i64)> =
            sqlx::query_as("SELECT id, session_epoch FROM users WHERE session_epoch > 0")
                .fetch_all(db)
                .await?;
        let sessions: Vec<(String, DateTime<Utc>)> =
            sqlx::query_as("SELECT sid, expires_at FROM revoked_sessions")
                .fetch_all(db)
                .await?;
        let sessions = sessions
            .into_iter()
            .filter_map(|(sid, exp)| Some((u128::from_str_radix(&sid, 16).ok()?, exp.timestamp())))
            .collect();
        *self.ended.write().expect("revocations lock") = Ended {
            epochs: epochs.into_iter().collect(),
            sessions,
        };
        Ok(())
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
        sqlx::query(
            "INSERT INTO revoked_sessions (sid, user_id, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (sid) DO NOTHING",
        )
        .bind(format!("{sid:032x}"))
        .bind(user_id)
        .bind(expires)
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
    Ok(sqlx::query_scalar(
        "UPDATE users SET session_epoch = session_epoch + 1 WHERE id = $1 RETURNING session_epoch",
    )
    .bind(user_id)
    .fetch_optional(db)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
