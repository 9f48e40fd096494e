//! Each sale's line board ([`LineBoard`]), kept in memory by every instance for a quarter of a
//! second: one Redis read per sale per instance per refresh, however many shoppers poll. It is
//! served as is at `GET /api/activities/{id}/line` (a CDN or nginx may cache it for a second),
//! and it answers the polls of shoppers who hold a numbered place (`GET …/queue`). A read that
//! does not answer within the pages' deadline leaves the board as last read.

use crate::{
    buy::heat::READ_DEADLINE,
    domain::{activity::ActivityRow, ApiError, ApiResult},
    infra::{keys::QueueKeys, redis::Redis},
};
use app::api::{poll_after_ms, LineBoard, LineState};
use parking_lot::Mutex;
use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

/// How long an instance serves a board before reading the line again.
pub const FRESH_FOR: Duration = Duration::from_millis(250);
/// Boards not asked for in this long are dropped (sales that ended, lines nobody polls).
const IDLE: Duration = Duration::from_secs(60);

type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Arc<LineBoard>)>>>;

#[derive(Clone)]
pub struct Boards {
    redis: Redis,
    slots: Arc<Mutex<HashMap<i64, (Instant, Slot)>>>,
}

impl Boards {
    pub fn new(redis: Redis) -> Boards {
        Boards {
            redis,
            slots: Arc::default(),
        }
    }

    fn slot(&self, id: i64) -> Slot {
        let mut slots = self.slots.lock();
        let now = Instant::now();
        if slots.len() > 256 {
            slots.retain(|_, (used, _)| now.duration_since(*used) < IDLE);
        }
        let (used, slot) = slots.entry(id).or_insert_with(|| (now, Slot::default()));
        *used = now;
        slot.clone()
    }

    /// The sale's board, at most [`FRESH_FOR`] old: the first poll after that reads the line
    /// while the others of the instance wait for its answer (one read, not one per poll).
    pub async fn get(&self, row: &ActivityRow) -> ApiResult<Arc<LineBoard>> {
        let slot = self.slot(row.id);
        let mut held = slot.lock().await;
        if let Some((at, board)) = held.as_ref() {
            if at.elapsed() < FRESH_FOR {
                return Ok(board.clone());
            }
        }
        // Within the pages' deadline: a line on a slow or failing-over shard is shown as last
        // read (for another [`FRESH_FOR`], so that polls do not queue behind the slow read).
        let read = tokio::time::timeout(READ_DEADLINE, self.read(row)).await;
        let board = match (read, held.as_ref()) {
            (Ok(Ok(board)), _) => Arc::new(board),
            (_, Some((_, last))) => last.clone(),
            (Ok(Err(e)), None) => return Err(e),
            (Err(_), None) => return Err(ApiError::Unavailable { retry_after: 1 }),
        };
        *held = Some((Instant::now(), board.clone()));
        Ok(board)
    }

    async fn read(&self, row: &ActivityRow) -> ApiResult<LineBoard> {
        let now = chrono::Utc::now();
        let mut board = LineBoard {
            state: LineState::Open,
            serving: 0,
            waiting: 0,
            units_left: -1,
            admit_per_sec: row.admit_per_sec,
            admitted_last_sec: 0,
            buying: 0,
            poll_after_ms: 60_000,
            paused_reason: None,
        };
        if !row.lines_up() {
            return Ok(board);
        }
        if now >= row.ends_at {
            board.state = LineState::Ended;
            return Ok(board);
        }
        let meta = LineMeta::read(&self.redis, &self.redis.keys.queue(row.id)).await?;
        board.admitted_last_sec = meta.admitted_last_sec(now.timestamp());
        board.serving = meta.admitted;
        board.waiting = meta.waiting;
        board.units_left = meta.stock.unwrap_or(-1);
        board.buying = meta.buying;
        board.paused_reason = if row.paused {
            Some("merchant".into())
        } else if row.halted {
            Some("cord".into())
        } else {
            meta.held
        };
        board.state = if now < row.starts_at {
            LineState::Drawing
        } else if board.units_left == 0 {
            LineState::SoldOut
        } else if board.paused_reason.is_some() {
            LineState::Paused
        } else {
            LineState::Admitting
        };
        board.poll_after_ms = if now < row.starts_at {
            // Nothing moves before the start: ask again at it (or every 30 s until then).
            (row.starts_at - now).num_milliseconds().clamp(250, 30_000)
        } else {
            poll_after_ms(meta.waiting / i64::from(row.admit_per_sec.max(1)))
        };
        Ok(board)
    }
}

/// What a line's meta hash, line and admitted set say at one read: an `HMGET` and two `ZCOUNT`s.
pub struct LineMeta {
    /// Places admitted since the start.
    pub admitted: i64,
    /// In the line, not admitted yet.
    pub waiting: i64,
    /// Units left as the admission step last saw them.
    pub stock: Option<i64>,
    /// Admitted with a live turn (claimed or not yet), not done buying.
    pub buying: i64,
    /// Admissions that lapsed unclaimed.
    pub lapsed: i64,
    /// Why admission is held back, if it is.
    pub held: Option<String>,
    sec: Option<i64>,
    sec_n: Option<i64>,
    prev_n: Option<i64>,
}

impl LineMeta {
    pub async fn read(redis: &Redis, keys: &QueueKeys) -> ApiResult<LineMeta> {
        let mut conn = redis.conn();
        type Meta = (
            Option<String>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<String>,
        );
        let fields = [
            "cursor", "admitted", "stock", "sec", "sec_n", "prev_n", "lapsed", "held",
        ];
        let (cursor, admitted, stock, sec, sec_n, prev_n, lapsed, held): Meta = redis::cmd("HMGET")
            .arg(keys.meta())
            .arg(&fields)
            .query_async(&mut conn)
            .await?;
        let from = cursor.map_or("-inf".to_string(), |c| format!("({c}"));
        let (waiting, buying): (i64, i64) = redis::pipe()
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
        Ok(LineMeta {
            admitted: admitted.unwrap_or(0),
            waiting,
            buying,
            stock,
            lapsed: lapsed.unwrap_or(0),
            held: held.filter(|h| !h.is_empty()),
            sec,
            sec_n,
            prev_n,
        })
    }

    /// Admissions during the last complete second before `now_sec`.
    pub fn admitted_last_sec(&self, now_sec: i64) -> i64 {
        match self.sec {
            Some(s) if s == now_sec => self.prev_n.unwrap_or(0),
            Some(s) if s == now_sec - 1 => self.sec_n.unwrap_or(0),
            _ => 0,
        }
    }
}
