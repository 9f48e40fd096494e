//! A sale's waiting room: a fair line in front of the buy path. Everyone who joins before the
//! start gets a random place (drawn at joining, revealed at the start: arriving ten minutes early
//! gives no edge over ten seconds early); later arrivals queue behind in order of arrival. Every
//! instance runs the same admission step a few times a second (`admit.lua`): the next places are
//! admitted at the sale's rate, and only while the admitted shoppers who may still buy are fewer
//! than twice the units left (Xiaomi's 1.5–2× of the stock), so the gate only sees shoppers who
//! could still find stock; admission resumes when units come back. An admission is a signed
//! ticket bound to user and sale that the gate checks in-process; an admission not claimed within
//! the claim window lapses and its slot goes to the next in line. The line lives in Redis under
//! one hash tag per sale (`infra/keys.rs`), so every instance serves it.
//!
//! Polls cost Redis nothing: a shopper's place is numbered (in admission order) and signed into
//! a value they hold (`places.rs`), and each instance keeps the line's board (how many places
//! were admitted, how many wait, units left) in memory (`board.rs`). A poll compares the two;
//! only the turn itself (claiming the admission) and numbering a place drawn before the start
//! read the line, once per shopper.
//!
//! Bots are left waiting (Cloudflare's "infinite queue"): a blocked client, or a shopper whose
//! bot check failed `SECKILL_QUEUE_BOT_FAILS` times on the sale, joins and polls like everyone
//! and sees the line move, but is never admitted: at the front they stay next. Configured so
//! (`SECKILL_QUEUE_SHADOW=false`), they are refused with `403 blocked` instead.

mod board;
mod crowd;
mod health;
mod places;
pub mod ticket_keys;

pub use board::{Boards, LineMeta, FRESH_FOR};
use health::Hold;
pub use health::{health, HELD_REASONS};
use parking_lot::Mutex;
pub use places::{Held, Places, COOKIE};

use super::{activities::ActivityCache, blocks::Blocks, heat::READ_DEADLINE};
use crate::infra::{keys::address_bucket, scripts};
use crate::{
    domain::{
        activity::{self, ActivityRow},
        crowd::rule as crowd_rule,
        drawing::{self, Receipts},
        rfc3339, ApiError, ApiResult,
    },
    infra::{config::QueueLimits, metrics::Metrics, redis::Redis},
};
use app::api::{
    poll_after_ms, CrowdPolicy, Drawing, LineBoard, LineState, QueueFigures, QueueState,
    QueueStatus, SaleId, UserId,
};
use redis::Script;
use signing::{tickets::TICKET_MS, Tickets};
use sqlx::PgPool;
use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
    sync::Arc,
    time::Duration,
};

/// The first place after the start: places drawn before it are below.
const AFTER_START: i64 = 1 << 50;
/// Admitted shoppers who may still buy, at most this many times the units left.
pub const WINDOW_PER_UNIT: f64 = 2.0;
/// How often each instance runs the admission step.
const STEP: Duration = Duration::from_millis(250);
/// A line outlives its sale by a day (for the console), then Redis drops it.
const KEEP_AFTER_END_MS: i64 = 24 * 3600 * 1000;

#[derive(Clone)]
pub struct WaitingRoom {
    db: PgPool,
    redis: Redis,
    activities: ActivityCache,
    tickets: Tickets,
    places: Places,
    boards: Boards,
    metrics: Arc<Metrics>,
    limits: QueueLimits,
    scripts: Arc<Scripts>,
    blocks: Blocks,
    /// (user, sale) the line said it keeps out: their polls need not ask it again.
    kept_out: Arc<Mutex<HashSet<(i64, i64)>>>,
    receipts: Receipts,
    /// Published drawings (they never change once the seed is out), by sale.
    drawings: Arc<Mutex<HashMap<i64, Arc<Drawing>>>>,
    /// Sales whose line was ordered by its crowd policy at the start (`crowd.rs`).
    crowds_done: Arc<Mutex<HashSet<i64>>>,
    /// Each line's figures as the console last read them here: shown while the line's shard
    /// does not answer within the pages' deadline.
    figures_read: Arc<Mutex<HashMap<i64, QueueFigures>>>,
}

/// Past this many, the instance forgets whom it keeps out (the line still knows).
const KEPT_OUT_MAX: usize = 100_000;

struct Scripts {
    join: &'static Script,
    status: &'static Script,
    admit: &'static Script,
    draw_crowd: &'static Script,
}

/// A shopper's standing, and the place value to hand them when it changed.
pub struct Standing {
    pub status: QueueStatus,
    pub place: Option<String>,
}

impl WaitingRoom {
    pub fn new(
        db: PgPool,
        redis: Redis,
        activities: ActivityCache,
        metrics: Arc<Metrics>,
        secret: &[u8],
        limits: QueueLimits,
        blocks: Blocks,
    ) -> WaitingRoom {
        WaitingRoom {
            blocks,
            kept_out: Arc::default(),
            receipts: Receipts::new(secret),
            drawings: Arc::default(),
            crowds_done: Arc::default(),
            figures_read: Arc::default(),
            db,
            boards: Boards::new(redis.clone()),
            redis,
            activities,
            tickets: Tickets::new(secret),
            places: Places::new(secret),
            metrics,
            limits,
            scripts: Arc::new(Scripts {
                join: scripts::join(),
                status: scripts::status(),
                admit: scripts::admit(),
                draw_crowd: scripts::draw_crowd(),
            }),
        }
    }

    /// Places signed with the secret before a rotation are still held (`SECKILL_SECRET_PREVIOUS`).
    pub fn accepting(mut self, previous: Option<&[u8]>) -> WaitingRoom {
        self.places = self.places.accepting(previous);
        self
    }

    pub fn tickets(&self) -> &Tickets {
        &self.tickets
    }

    /// Joins `user` (whose account was created at `joined`) to the line of sale `id` (keeping
    /// the place held, if any) and says where they stand. `again`: an admission that was used or
    /// lapsed queues once more, at the back. An account the sale does not admit takes no place;
    /// a client the line keeps out (see the module's notes) is shown one and never admitted.
    pub async fn join(
        &self,
        user: UserId,
        joined: i64,
        ip: IpAddr,
        sale: SaleId,
        again: bool,
    ) -> ApiResult<Standing> {
        let (UserId(user), SaleId(id)) = (user, sale);
        let row = self.activities.get(&self.db, id).await?;
        row.admits_account(joined)?;
        let (mut numbered, mut signed_receipt) = (None, None);
        if row.lines_up() && chrono::Utc::now() < row.ends_at {
            if self.blocked(user, ip) {
                return self.kept_waiting(user, &row, None).await;
            }
            let keys = self.redis.keys.queue(id);
            let receipt = drawing::new_receipt();
            let rate = if row.stopped() { 0 } else { row.admit_per_sec };
            let groups = self.groups_of(user, ip, &row).await?;
            let (score, drawn, held): (i64, i64, String) = self
                .scripts
                .join
                .key(keys.line())
                .key(keys.admitted())
                .key(keys.meta())
                .key(keys.suspects())
                .key(keys.receipts())
                .key(keys.unclaimed())
                .key(keys.joined())
                .key(keys.groups())
                .arg(user)
                .arg(row.starts_at.timestamp_millis())
                .arg(drawing::score(&row.drawing_seed, &receipt))
                .arg(u8::from(again))
                .arg(row.ends_at.timestamp_millis() + KEEP_AFTER_END_MS)
                .arg(self.limits.bot_fails)
                .arg(&receipt)
                .arg(row.method().as_str())
                .arg(rate)
                .arg(self.limits.claim.as_millis() as i64)
                .arg(groups)
                .invoke_async(&mut self.redis.conn())
                .await?;
            if score < 0 {
                self.remember_kept_out(user, id);
                return self.kept_waiting(user, &row, None).await;
            }
            signed_receipt = (!held.is_empty()).then(|| self.receipts.sign(id, &held));
            numbered = Some(if score >= AFTER_START {
                drawn + score - AFTER_START
            } else {
                0
            });
        }
        let Some(mut status) = self.status_of(user, &row).await? else {
            self.remember_kept_out(user, id);
            return self.kept_waiting(user, &row, None).await;
        };
        status.receipt = signed_receipt;
        let place = numbered.map(|n| status.place.unwrap_or(n).max(n));
        if let Some(n) = place.filter(|&n| n > 0) {
            status.place = Some(n);
        }
        let place = place.map(|n| self.places.sign(user, id, n));
        Ok(Standing { status, place })
    }

    /// The drawing of sale `id` (a waiting room whose places are drawn): its commitment before
    /// the start, its seed and every place with its receipt after. `404` for other sales.
    pub async fn drawing(&self, SaleId(id): SaleId) -> ApiResult<Arc<Drawing>> {
        if let Some(done) = self.drawings.lock().get(&id) {
            return Ok(done.clone());
        }
        let row = self.activities.get(&self.db, id).await?;
        if !row.draws() {
            return Err(ApiError::NotFound);
        }
        let keys = self.redis.keys.queue(id);
        let mut conn = self.redis.conn();
        if !row.drawing_revealed(chrono::Utc::now()) {
            let joined: Option<i64> = redis::cmd("HGET")
                .arg(keys.meta())
                .arg("drawn")
                .query_async(&mut conn)
                .await?;
            let joined = joined.unwrap_or(0);
            return Ok(Arc::new(drawing::drawing(
                id,
                &row.drawing_seed,
                None,
                joined,
                crowd_rule(row.crowd(), row.crowd_threshold),
            )));
        }
        let (places, outcome) = self.drawn(&row).await?;
        let joined = places.len() as i64;
        let places = places.into_iter().map(|(_, p)| p).collect();
        let done = Arc::new(drawing::drawing(
            id,
            &row.drawing_seed,
            Some((places, outcome)),
            joined,
            crowd_rule(row.crowd(), row.crowd_threshold),
        ));
        let mut drawings = self.drawings.lock();
        if drawings.len() > 64 {
            drawings.clear();
        }
        drawings.insert(id, done.clone());
        Ok(done)
    }

    /// The line's board of sale `id`, as every shopper may see it.
    pub async fn board(&self, SaleId(id): SaleId) -> ApiResult<Arc<LineBoard>> {
        let row = self.activities.get(&self.db, id).await?;
        self.boards.get(&row).await
    }

    /// Where `user` stands in the line of sale `id`, from the place value they hold when it is
    /// numbered (no Redis call), else from the line itself. A forged value is refused.
    pub async fn status(
        &self,
        user: UserId,
        ip: IpAddr,
        sale: SaleId,
        held: Option<&str>,
    ) -> ApiResult<Standing> {
        let (UserId(user), SaleId(id)) = (user, sale);
        let row = self.activities.get(&self.db, id).await?;
        let held = match held.map(|v| self.places.read(v, user, id)) {
            Some(Held::Forged) => {
                return Err(ApiError::invalid(
                    "place",
                    "not a place this line gave; join the line again",
                ))
            }
            Some(Held::Place(n)) => Some(n),
            Some(Held::NotTheirs) | None => None,
        };
        let on = row.lines_up() && chrono::Utc::now() < row.ends_at;
        if on && self.keeps_out(user, ip, id) {
            return self.kept_waiting(user, &row, held).await;
        }
        if let (Some(place), true) = (held, on) {
            let board = self.boards.get(&row).await?;
            let jitter = i64::from(rand::random::<u16>() % 500);
            if let Some(status) = board.status_of(place, jitter) {
                self.metrics.queue_poll("memory");
                return Ok(Standing {
                    status,
                    place: None,
                });
            }
        }
        self.metrics.queue_poll("redis");
        let Some(mut status) = self.status_of(user, &row).await? else {
            self.remember_kept_out(user, id);
            return self.kept_waiting(user, &row, held).await;
        };
        if status.state == QueueState::Waiting && row.lines_up() {
            // Admission held back (the pipeline behind, the merchant's pause): the place is kept.
            if self.boards.get(&row).await?.state == LineState::Paused {
                status.state = QueueState::Paused;
                status.estimated_wait_secs = None;
            }
        }
        let place = match (held, status.place) {
            (Some(had), Some(now)) if now == had => None,
            (_, Some(now)) => Some(self.places.sign(user, id, now)),
            _ => None,
        };
        Ok(Standing { status, place })
    }

    /// Where `user` stands, or `None` for a shopper the line keeps out quietly (`shadow`).
    async fn status_of(&self, user: i64, row: &ActivityRow) -> ApiResult<Option<QueueStatus>> {
        let now = chrono::Utc::now();
        let done = QueueStatus::plain;
        if !row.lines_up() {
            return Ok(Some(done(QueueState::Open, 0, 60_000)));
        }
        if now >= row.ends_at {
            return Ok(Some(done(QueueState::Ended, 0, 60_000)));
        }
        // Under `demote`, places are numbered once the draw has moved the farms behind: until
        // then (a moment after the start) the line is still drawing.
        if row.crowd() == CrowdPolicy::Demote
            && row.draws()
            && now >= row.starts_at
            && !self.crowd_ordered(row).await?
        {
            let jitter = i64::from(rand::random::<u16>() % 250);
            return Ok(Some(done(QueueState::Drawing, 0, 250 + jitter)));
        }
        let keys = self.redis.keys.queue(row.id);
        let (state, ahead, waiting, expiry, units, place): (String, i64, i64, i64, i64, i64) = self
            .scripts
            .status
            .key(keys.line())
            .key(keys.admitted())
            .key(keys.meta())
            .key(keys.unclaimed())
            .key(keys.suspects())
            .key(keys.joined())
            .key(keys.waits())
            .arg(user)
            .arg(row.starts_at.timestamp_millis())
            .arg(TICKET_MS)
            .arg(self.limits.bot_fails)
            .invoke_async(&mut self.redis.conn())
            .await?;
        // The script's answer, read once: a shopper's state, or `shadow`.
        if state == "shadow" {
            return Ok(None);
        }
        let state: QueueState = state
            .parse()
            .map_err(|e| ApiError::Internal(anyhow::anyhow!("the line's status script: {e}")))?;
        // Spread the polls of a large crowd over half a second.
        let jitter = i64::from(rand::random::<u16>() % 500);
        Ok(Some(match state {
            QueueState::Drawing => {
                let to_start = (row.starts_at - now).num_milliseconds();
                done(state, waiting, to_start.clamp(0, 2_000) + jitter)
            }
            // The units are gone: nobody still waiting (or admitted) can buy now. Units of unpaid
            // orders may come back, and with them the line moves again.
            _ if units == 0 => done(QueueState::SoldOut, waiting, 2_000 + jitter),
            QueueState::Admitted => QueueStatus {
                ticket: Some(self.tickets.issue(user, row.id, expiry)),
                ticket_expires_at: chrono::DateTime::from_timestamp_millis(expiry).map(rfc3339),
                place: (place > 0).then_some(place),
                ..done(state, waiting, 5_000)
            },
            QueueState::Waiting => {
                let rate = i64::from(row.admit_per_sec.max(1));
                let wait_secs = (ahead + rate) / rate;
                QueueStatus {
                    position: Some(ahead + 1),
                    ahead: Some(ahead),
                    estimated_wait_secs: Some(wait_secs),
                    place: Some(place),
                    units_left: (units >= 0).then_some(units),
                    ..done(state, waiting, poll_after_ms(wait_secs) + jitter)
                }
            }
            // The turn was used or lapsed: only "join again" changes that.
            QueueState::Passed => done(state, waiting, 10_000 + jitter),
            other => done(other, waiting, 2_000 + jitter),
        }))
    }

    /// Whether `user` or their address is blocked (known in-process on every instance).
    fn blocked(&self, user: i64, ip: IpAddr) -> bool {
        self.blocks.remaining(&format!("u:{user}")).is_some()
            || self
                .blocks
                .remaining(&format!("ip:{}", address_bucket(ip)))
                .is_some()
    }

    /// Whether this instance knows to keep `user` out of sale `id`'s line: a blocked client,
    /// or a shopper the line said it keeps out (a join still asks the line, which drops the
    /// place they held).
    fn keeps_out(&self, user: i64, ip: IpAddr, id: i64) -> bool {
        self.blocked(user, ip) || self.kept_out.lock().contains(&(user, id))
    }

    fn remember_kept_out(&self, user: i64, id: i64) {
        let mut kept = self.kept_out.lock();
        if kept.len() >= KEPT_OUT_MAX {
            kept.clear();
        }
        kept.insert((user, id));
    }

    /// The answer of a shopper the line keeps out: what everyone at their place sees, except
    /// that the turn never comes (at the front they stay next); or `403 blocked` when the
    /// configuration says to tell them.
    async fn kept_waiting(
        &self,
        user: i64,
        row: &ActivityRow,
        held: Option<i64>,
    ) -> ApiResult<Standing> {
        if !self.limits.shadow {
            return Err(ApiError::Blocked { retry_after: 60 });
        }
        let board = self.boards.get(row).await?;
        let jitter = i64::from(rand::random::<u16>() % 500);
        let status = kept_waiting(&board, held, jitter);
        let place = status.place.unwrap_or(0);
        let place = (held != Some(place)).then(|| self.places.sign(user, row.id, place));
        Ok(Standing { status, place })
    }

    /// `user` failed the bot check on sale `row` once more: counted in the line, which keeps
    /// them out past `SECKILL_QUEUE_BOT_FAILS`. Not awaited by the buyer.
    pub fn suspect(&self, user: i64, row: &ActivityRow) {
        if self.limits.bot_fails == 0 {
            return;
        }
        let redis = self.redis.clone();
        let (id, expire_at) = (row.id, row.ends_at.timestamp_millis() + KEEP_AFTER_END_MS);
        tokio::spawn(async move {
            let key = redis.keys.queue(id).suspects();
            let result: redis::RedisResult<(i64, i64)> = redis::pipe()
                .hincr(&key, user, 1)
                .cmd("PEXPIREAT")
                .arg(&key)
                .arg(expire_at)
                .query_async(&mut redis.conn())
                .await;
            if let Err(e) = result {
                tracing::debug!(error = %e, activity.id = id, "counting a failed bot check");
            }
        });
    }

    /// The admitted shopper is done buying (bought, or found nothing to buy): their place in
    /// the admitted window goes to the next in line. Not awaited by the buyer; a lost one only
    /// keeps the place until the ticket lapses.
    pub fn leave(&self, user: i64, id: i64) {
        let redis = self.redis.clone();
        tokio::spawn(async move {
            let keys = redis.keys.queue(id);
            let result: redis::RedisResult<(i64, i64)> = redis::pipe()
                .cmd("ZREM")
                .arg(keys.admitted())
                .arg(user)
                .cmd("ZREM")
                .arg(keys.unclaimed())
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
        let read = tokio::time::timeout(READ_DEADLINE, LineMeta::read(&self.redis, &keys)).await;
        let meta = match read {
            Ok(Ok(meta)) => meta,
            failed => {
                return match self.figures_read.lock().get(&row.id) {
                    Some(last) => Ok(last.clone()),
                    None => Err(match failed {
                        Ok(Err(e)) => e,
                        _ => ApiError::Unavailable { retry_after: 1 },
                    }),
                }
            }
        };
        let figures = QueueFigures {
            waiting: meta.waiting,
            admitted: meta.admitted,
            in_flight: meta.buying,
            admitted_last_sec: meta.admitted_last_sec(chrono::Utc::now().timestamp()),
            admit_per_sec: row.admit_per_sec,
            lapsed: meta.lapsed,
            held_back: meta.held,
        };
        let mut read = self.figures_read.lock();
        if read.len() > 10_000 {
            read.clear();
        }
        read.insert(row.id, figures.clone());
        Ok(figures)
    }

    /// One admission step for one sale: at the sale's rate, slowed or stopped while the
    /// pipeline behind the gate is (see [`health`]). Returns why it was held back, if it was.
    async fn admit(&self, row: &ActivityRow) -> ApiResult<Option<Hold>> {
        let asked = std::time::Instant::now();
        let units = activity::stock::remaining(&self.redis, row.id, row.stock_shards).await?;
        let backlog = (row.total_stock - units - row.sold).max(0);
        let redis = asked.elapsed();
        let (factor, held) = health(&self.limits, backlog, redis);
        for reason in HELD_REASONS {
            self.metrics
                .queue_held(row.id, reason, held == Some(reason));
        }
        let window = if row.stopped() {
            0
        } else {
            (units as f64 * WINDOW_PER_UNIT).ceil() as i64
        };
        // Under `demote`, nobody is admitted before the line is ordered by its crowds; under
        // `observe`, the count is taken once at the start.
        if row.groups_crowds()
            && !self.order_crowds(row).await?
            && row.crowd() == CrowdPolicy::Demote
        {
            return Ok(None);
        }
        let keys = self.redis.keys.queue(row.id);
        let (_admitted, _live): (i64, i64) = self
            .scripts
            .admit
            .key(keys.line())
            .key(keys.admitted())
            .key(keys.meta())
            .key(keys.unclaimed())
            .arg(row.starts_at.timestamp_millis())
            .arg(f64::from(row.admit_per_sec) * factor)
            .arg(window)
            .arg(self.limits.claim.as_millis() as i64)
            .arg(row.ends_at.timestamp_millis() + KEEP_AFTER_END_MS)
            .arg(units)
            .arg(held.unwrap_or(""))
            .invoke_async(&mut self.redis.conn())
            .await?;
        Ok(held.map(|reason| Hold {
            reason,
            factor,
            backlog,
            redis,
        }))
    }

    /// The admission steps of every sale with a waiting room that is on (or starts within a few
    /// seconds), for as long as the process runs.
    pub async fn run(self) {
        let mut sales: Vec<ActivityRow> = Vec::new();
        let mut listed_at: Option<tokio::time::Instant> = None;
        let mut failing: HashMap<i64, bool> = HashMap::new();
        let mut holding: HashMap<i64, bool> = HashMap::new();
        let mut tick = tokio::time::interval(STEP);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if listed_at.is_none_or(|at| at.elapsed() > Duration::from_secs(2)) {
                // The tickets' key generation follows a rotation within two seconds.
                if let Err(e) = ticket_keys::follow(&self.tickets, &self.redis).await {
                    tracing::warn!(error = %e, "reading the tickets' key generation");
                }
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
                // Logged when it starts and stops failing or holding back, not four times a
                // second.
                let was_failing = failing.insert(row.id, result.is_err()).unwrap_or(false);
                let was_held = match &result {
                    Ok(hold) => holding.insert(row.id, hold.is_some()),
                    Err(_) => holding.get(&row.id).copied(),
                };
                health::log_step(row.id, &result, was_failing, was_held.unwrap_or(false));
            }
        }
    }

    async fn on_now(&self) -> ApiResult<Vec<ActivityRow>> {
        activity::lines_on_now(&self.db).await
    }
}

/// What a shopper the line keeps out is told, from the board and the place they hold: the
/// line as everyone sees it, their place at the back when they have none, and never their turn.
pub fn kept_waiting(board: &LineBoard, held: Option<i64>, jitter_ms: i64) -> QueueStatus {
    let shown = match board.state {
        LineState::Admitting | LineState::Paused => held
            .filter(|&p| p > 0)
            .unwrap_or(board.serving + board.waiting + 1)
            .max(board.serving + 1),
        _ => held.unwrap_or(0),
    };
    board.status_of(shown, jitter_ms).unwrap_or_else(|| {
        // Never their turn: at worst next in line (the place shown is past `serving`).
        let state = if board.state == LineState::Paused {
            QueueState::Paused
        } else {
            QueueState::Waiting
        };
        QueueStatus::plain(state, board.waiting, board.poll_after_ms)
    })
}
