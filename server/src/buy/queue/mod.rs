//! A sale's waiting room: a fair line in front of the buy path. Everyone who joins before the
//! start gets a random place (drawn at joining, revealed at the start: arriving ten minutes early
//! gives no edge over ten seconds early); later arrivals queue behind in order of arrival. Every
//! instance runs the same admission step a few times a second (`admit.lua`): the next places are
//! admitted at the sale's rate, and only while the admitted shoppers who may still buy are fewer
//! than twice the units left (Xiaomi's 1.5–2× of the stock), so the gate only sees shoppers who
//! could still find stock; admission resumes when units come back. An admission is a signed
//! ticket bound to user and sale that the gate checks in-process. The line lives in Redis under
//! one hash tag per sale (`infra/keys.rs`), so every instance serves it.

use super::activities::ActivityCache;
use crate::infra::scripts;
use crate::{
    domain::{
        activity::{self, ActivityRow},
        rfc3339, ApiResult,
    },
    infra::redis::Redis,
};
use app::api::{QueueFigures, QueueStatus};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD as B64, Engine};
use hmac::{Hmac, Mac};
use redis::Script;
use sha2::Sha256;
use sqlx::PgPool;
use std::{collections::HashMap, sync::Arc, time::Duration};

/// How long an admission lasts: time to answer the bot check and buy, not to come back later.
pub const TICKET_MS: i64 = 90_000;
/// Admitted shoppers who may still buy, at most this many times the units left.
pub const WINDOW_PER_UNIT: f64 = 2.0;
/// How often each instance runs the admission step.
const STEP: Duration = Duration::from_millis(250);
/// A line outlives its sale by a day (for the console), then Redis drops it.
const KEEP_AFTER_END_MS: i64 = 24 * 3600 * 1000;
/// The places drawn before the start are below 2^50; arrivals after it are 2^50 + n.
const DRAW_RANGE: u64 = (1 << 50) - (1 << 20);

/// Admission tickets: `<expiry ms>.<HMAC of user, sale and expiry>`.
#[derive(Clone)]
pub struct Tickets {
    key: Arc<[u8]>,
}

impl Tickets {
    pub fn new(secret: &[u8]) -> Tickets {
        Tickets { key: secret.into() }
    }

    fn mac(&self, user: i64, activity: i64, expires_ms: i64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(format!("admission\0{user}\0{activity}\0{expires_ms}").as_bytes());
        mac
    }

    pub fn issue(&self, user: i64, activity: i64, expires_ms: i64) -> String {
        let mac = self.mac(user, activity, expires_ms).finalize().into_bytes();
        format!("{expires_ms}.{}", B64.encode(&mac[..18]))
    }

    /// Whether `ticket` admits `user` to `activity` at `now_ms`: in-process, a few microseconds.
    pub fn admits(&self, ticket: &str, user: i64, activity: i64, now_ms: i64) -> bool {
        let Some((expires, mac)) = ticket.split_once('.') else {
            return false;
        };
        let (Ok(expires_ms), Ok(mac)) = (expires.parse::<i64>(), B64.decode(mac)) else {
            return false;
        };
        mac.len() == 18
            && expires_ms > now_ms
            && expires_ms <= now_ms + TICKET_MS
            && self
                .mac(user, activity, expires_ms)
                .verify_truncated_left(&mac)
                .is_ok()
    }
}

#[derive(Clone)]
pub struct WaitingRoom {
    db: PgPool,
    redis: Redis,
    activities: ActivityCache,
    tickets: Tickets,
    scripts: Arc<Scripts>,
}

struct Scripts {
    join: &'static Script,
    status: &'static Script,
    admit: &'static Script,
}

impl WaitingRoom {
    pub fn new(db: PgPool, redis: Redis, activities: ActivityCache, secret: &[u8]) -> WaitingRoom {
        WaitingRoom {
            db,
            redis,
            activities,
            tickets: Tickets::new(secret),
            scripts: Arc::new(Scripts {
                join: scripts::join(),
                status: scripts::status(),
                admit: scripts::admit(),
            }),
        }
    }

    pub fn tickets(&self) -> &Tickets {
        &self.tickets
    }

    /// Joins `user` (whose account was created at `joined`) to the line of sale `id` (keeping
    /// the place held, if any) and says where they stand. `again`: an admission that was used or
    /// lapsed queues once more, at the back. An account the sale does not admit takes no place.
    pub async fn join(
        &self,
        user: i64,
        joined: i64,
        id: i64,
        again: bool,
    ) -> ApiResult<QueueStatus> {
        let row = self.activities.get(&self.db, id).await?;
        row.admits_account(joined)?;
        if row.waiting_room && chrono::Utc::now() < row.ends_at {
            let keys = self.redis.keys.queue(id);
            let _: i64 = self
                .scripts
                .join
                .key(keys.line())
                .key(keys.admitted())
                .key(keys.meta())
                .arg(user)
                .arg(row.starts_at.timestamp_millis())
                .arg(rand::random::<u64>() % DRAW_RANGE)
                .arg(u8::from(again))
                .arg(row.ends_at.timestamp_millis() + KEEP_AFTER_END_MS)
                .invoke_async(&mut self.redis.conn())
                .await?;
        }
        self.status_of(user, &row).await
    }

    /// Where `user` stands in the line of sale `id`.
    pub async fn status(&self, user: i64, id: i64) -> ApiResult<QueueStatus> {
        let row = self.activities.get(&self.db, id).await?;
        self.status_of(user, &row).await
    }

    async fn status_of(&self, user: i64, row: &ActivityRow) -> ApiResult<QueueStatus> {
        let now = chrono::Utc::now();
        let done = |state: &str, waiting: i64, poll_after_ms: i64| QueueStatus {
            state: state.into(),
            position: None,
            ahead: None,
            waiting,
            estimated_wait_secs: None,
            ticket: None,
            ticket_expires_at: None,
            poll_after_ms,
        };
        if !row.waiting_room {
            return Ok(done("open", 0, 60_000));
        }
        if now >= row.ends_at {
            return Ok(done("ended", 0, 60_000));
        }
        let keys = self.redis.keys.queue(row.id);
        let (state, ahead, waiting, expiry, units): (String, i64, i64, i64, i64) = self
            .scripts
            .status
            .key(keys.line())
            .key(keys.admitted())
            .key(keys.meta())
            .arg(user)
            .arg(row.starts_at.timestamp_millis())
            .invoke_async(&mut self.redis.conn())
            .await?;
        // Spread the polls of a large crowd over half a second.
        let jitter = i64::from(rand::random::<u16>() % 500);
        Ok(match state.as_str() {
            "drawing" => {
                let to_start = (row.starts_at - now).num_milliseconds();
                done("drawing", waiting, to_start.clamp(0, 2_000) + jitter)
            }
            // The units are gone: nobody still waiting (or admitted) can buy now. Units of unpaid
            // orders may come back, and with them the line moves again.
            _ if units == 0 => done("sold_out", waiting, 2_000 + jitter),
            "admitted" => QueueStatus {
                ticket: Some(self.tickets.issue(user, row.id, expiry)),
                ticket_expires_at: chrono::DateTime::from_timestamp_millis(expiry).map(rfc3339),
                ..done("admitted", waiting, 5_000)
            },
            "waiting" => {
                let rate = i64::from(row.admit_per_sec.max(1));
                let wait_secs = (ahead + rate) / rate;
                QueueStatus {
                    position: Some(ahead + 1),
                    ahead: Some(ahead),
                    estimated_wait_secs: Some(wait_secs),
                    // Near the front every second; far back less often (the place only moves
                    // forward), at most every five seconds.
                    ..done(
                        "waiting",
                        waiting,
                        (wait_secs * 200).clamp(1_000, 5_000) + jitter,
                    )
                }
            }
            other => done(other, waiting, 2_000 + jitter),
        })
    }

    /// The admitted shopper is done buying (bought, or found nothing to buy): their place in
    /// the admitted window goes to the next in line. Not awaited by the buyer; a lost one only
    /// keeps the place until the ticket lapses.
    pub fn leave(&self, user: i64, id: i64) {
        let redis = self.redis.clone();
        tokio::spawn(async move {
            let result: redis::RedisResult<i64> = redis::cmd("ZREM")
                .arg(redis.keys.queue(id).admitted())
                .arg(user)
                .query_async(&mut redis.conn())
                .await;
            if let Err(e) = result {
                tracing::debug!(error = %e, activity.id = id, "leaving the admitted window");
            }
        });
    }

    /// The console's view of a sale's line.
    pub async fn figures(&self, row: &ActivityRow) -> ApiResult<QueueFigures> {
        let keys = self.redis.keys.queue(row.id);
        let mut conn = self.redis.conn();
        // cursor, admitted, sec, sec_n, prev_n
        type Meta = (
            Option<String>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
        );
        let meta: Meta = redis::cmd("HMGET")
            .arg(keys.meta())
            .arg(&["cursor", "admitted", "sec", "sec_n", "prev_n"])
            .query_async(&mut conn)
            .await?;
        let (cursor, admitted, sec, sec_n, prev_n) = meta;
        let from = cursor.map_or("-inf".to_string(), |c| format!("({c}"));
        let (waiting, in_flight): (i64, i64) = redis::pipe()
            .cmd("ZCOUNT")
            .arg(keys.line())
            .arg(from)
            .arg("+inf")
            .cmd("ZCOUNT")
            .arg(keys.admitted())
            .arg(chrono::Utc::now().timestamp_millis())
            .arg("+inf")
            .query_async(&mut conn)
            .await?;
        let now_sec = chrono::Utc::now().timestamp();
        let admitted_last_sec = match sec {
            Some(s) if s == now_sec => prev_n.unwrap_or(0),
            Some(s) if s == now_sec - 1 => sec_n.unwrap_or(0),
            _ => 0,
        };
        Ok(QueueFigures {
            waiting,
            admitted: admitted.unwrap_or(0),
            in_flight,
            admitted_last_sec,
            admit_per_sec: row.admit_per_sec,
        })
    }

    /// One admission step for one sale.
    async fn admit(&self, row: &ActivityRow) -> ApiResult<i64> {
        let units = activity::remaining(&self.redis, row.id, row.stock_shards).await?;
        let window = if row.paused {
            0
        } else {
            (units as f64 * WINDOW_PER_UNIT).ceil() as i64
        };
        let keys = self.redis.keys.queue(row.id);
        let (admitted, _live): (i64, i64) = self
            .scripts
            .admit
            .key(keys.line())
            .key(keys.admitted())
            .key(keys.meta())
            .arg(row.starts_at.timestamp_millis())
            .arg(row.admit_per_sec)
            .arg(window)
            .arg(TICKET_MS)
            .arg(row.ends_at.timestamp_millis() + KEEP_AFTER_END_MS)
            .arg(units)
            .invoke_async(&mut self.redis.conn())
            .await?;
        Ok(admitted)
    }

    /// The admission steps of every sale with a waiting room that is on (or starts within a few
    /// seconds), for as long as the process runs.
    pub async fn run(self) {
        let mut sales: Vec<ActivityRow> = Vec::new();
        let mut listed_at: Option<tokio::time::Instant> = None;
        let mut failing: HashMap<i64, bool> = HashMap::new();
        let mut tick = tokio::time::interval(STEP);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if listed_at.is_none_or(|at| at.elapsed() > Duration::from_secs(2)) {
                match self.on_now().await {
                    Ok(list) => {
                        sales = list;
                        listed_at = Some(tokio::time::Instant::now());
                    }
                    Err(e) => tracing::warn!(error = ?e, "listing the waiting rooms"),
                }
            }
            let now = chrono::Utc::now();
            for row in sales.iter().filter(|r| r.ends_at > now) {
                let result = self.admit(row).await;
                // Logged when it starts and stops failing, not four times a second.
                let was_failing = failing.insert(row.id, result.is_err()).unwrap_or(false);
                match result {
                    Err(e) if !was_failing => {
                        tracing::warn!(error = ?e, activity.id = row.id, "admission step failed")
                    }
                    Ok(_) if was_failing => {
                        tracing::info!(activity.id = row.id, "admission steps work again")
                    }
                    _ => {}
                }
            }
        }
    }

    async fn on_now(&self) -> ApiResult<Vec<ActivityRow>> {
        activity::lines_on_now(&self.db).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_bound_to_user_sale_and_time() {
        let tickets = Tickets::new(b"0123456789abcdef0123456789abcdef");
        let now = 1_700_000_000_000;
        let ticket = tickets.issue(7, 9, now + 60_000);
        assert!(tickets.admits(&ticket, 7, 9, now));
        assert!(!tickets.admits(&ticket, 8, 9, now), "another user");
        assert!(!tickets.admits(&ticket, 7, 10, now), "another sale");
        assert!(!tickets.admits(&ticket, 7, 9, now + 60_000), "lapsed");
        let forged = ticket.replacen(&(now + 60_000).to_string(), &(now + 80_000).to_string(), 1);
        assert!(!tickets.admits(&forged, 7, 9, now), "expiry moved");
        let other = Tickets::new(b"another secret of thirty-two byt").issue(7, 9, now + 60_000);
        assert!(!tickets.admits(&other, 7, 9, now), "another secret");
        let far = tickets.issue(7, 9, now + TICKET_MS + 1);
        assert!(
            !tickets.admits(&far, 7, 9, now),
            "longer than a ticket lives"
        );
        for junk in ["", ".", "abc", "1.", "x.y", &ticket[..ticket.len() - 2]] {
            assert!(!tickets.admits(junk, 7, 9, now), "{junk:?}");
        }
    }
}
