//! Each sale's line board ([`LineBoard`]), kept in memory by every instance for a quarter of a
//! second: one Redis read per sale per instance per refresh, however many shoppers poll. It is
//! served as is at `GET /api/activities/{id}/line` (a CDN or nginx may cache it for a second),
//! and it answers the polls of shoppers who hold a numbered place (`GET …/queue`).

use crate::{
    domain::{activity::ActivityRow, ApiResult},
    infra::redis::Redis,
};
use app::api::{poll_after_ms, LineBoard};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
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
        let mut slots = self
            .slots
            .lock()
            .expect("the boards' lock is never poisoned");
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
        let board = Arc::new(self.read(row).await?);
        *held = Some((Instant::now(), board.clone()));
        Ok(board)
    }

    async fn read(&self, row: &ActivityRow) -> ApiResult<LineBoard> {
        let now = chrono::Utc::now();
        let mut board = LineBoard {
            state: "open".into(),
            serving: 0,
            waiting: 0,
            units_left: -1,
            admit_per_sec: row.admit_per_sec,
            admitted_last_sec: 0,
            poll_after_ms: 60_000,
            paused_reason: None,
        };
        if !row.waiting_room {
            return Ok(board);
        }
        if now >= row.ends_at {
            board.state = "ended".into();
            return Ok(board);
        }
        let keys = self.redis.keys.queue(row.id);
        let mut conn = self.redis.conn();
        type Meta = (
            Option<String>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<String>,
        );
        let meta: Meta = redis::cmd("HMGET")
            .arg(keys.meta())
            .arg(&[
                "cursor", "admitted", "stock", "sec", "sec_n", "prev_n", "held",
            ])
            .query_async(&mut conn)
            .await?;
        let (cursor, admitted, stock, sec, sec_n, prev_n, held) = meta;
        let from = cursor.map_or("-inf".to_string(), |c| format!("({c}"));
        let waiting: i64 = redis::cmd("ZCOUNT")
            .arg(keys.line())
            .arg(from)
            .arg("+inf")
            .query_async(&mut conn)
            .await?;
        let now_sec = now.timestamp();
        board.admitted_last_sec = match sec {
            Some(s) if s == now_sec => prev_n.unwrap_or(0),
            Some(s) if s == now_sec - 1 => sec_n.unwrap_or(0),
            _ => 0,
        };
        board.serving = admitted.unwrap_or(0);
        board.waiting = waiting;
        board.units_left = stock.unwrap_or(-1);
        let rate = i64::from(row.admit_per_sec.max(1));
        board.paused_reason = if row.paused {
            Some("merchant".into())
        } else {
            held.filter(|h| !h.is_empty())
        };
        board.state = if now < row.starts_at {
            "drawing"
        } else if board.units_left == 0 {
            "sold_out"
        } else if board.paused_reason.is_some() {
            "paused"
        } else {
            "admitting"
        }
        .into();
        board.poll_after_ms = if now < row.starts_at {
            // Nothing moves before the start: ask again at it (or every 30 s until then).
            (row.starts_at - now).num_milliseconds().clamp(250, 30_000)
        } else {
            poll_after_ms(waiting / rate)
        };
        Ok(board)
    }
}
