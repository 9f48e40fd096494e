//! A drawn line's crowds from one network (`domain/crowd.rs`): each entry drawn before the start
//! keeps its groups in the line; at the start one instance counts them and, under `demote`, moves
//! the entries of groups over the threshold behind everyone else, before anyone is admitted. The
//! published drawing is ordered by the same function, so the line and the drawing agree.

use super::WaitingRoom;
use crate::domain::{
    activity::ActivityRow,
    crowd::{self, Entry, DEMOTED_FROM},
    ApiResult,
};
use app::api::{CrowdOutcome, CrowdPolicy, DrawnPlace};
use std::{collections::HashMap, net::IpAddr};

/// How long one instance holds the turn to order a line (a dead holder's turn passes after it).
const ORDER_LOCK_MS: i64 = 10_000;
/// Places moved per command.
const MOVES_PER_COMMAND: usize = 1_000;

impl WaitingRoom {
    /// The groups of `user`'s entry in sale `row`'s line, as `join.lua` keeps them: the network
    /// they join from, and the one their account signed up from when known; '' for a sale that
    /// groups none.
    pub(super) async fn groups_of(
        &self,
        user: i64,
        ip: IpAddr,
        row: &ActivityRow,
    ) -> ApiResult<String> {
        if !row.groups_crowds() {
            return Ok(String::new());
        }
        let signed_up: Option<String> =
            sqlx::query_scalar!("SELECT signup_network FROM users WHERE id = $1", user)
                .fetch_optional(&self.db)
                .await?
                .flatten();
        let mut groups = self.receipts.group(row.id, &crowd::network(ip));
        if let Some(net) = signed_up {
            groups.push(',');
            groups.push_str(&self.receipts.group(row.id, &net));
        }
        Ok(groups)
    }

    /// Every place drawn before the start of sale `row`, with its user, in the drawing's order,
    /// and what the crowd policy found.
    pub(super) async fn drawn(
        &self,
        row: &ActivityRow,
    ) -> ApiResult<(Vec<(i64, DrawnPlace)>, Option<CrowdOutcome>)> {
        let keys = self.redis.keys.queue(row.id);
        let mut conn = self.redis.conn();
        let receipts: HashMap<i64, String> = redis::cmd("HGETALL")
            .arg(keys.receipts())
            .query_async(&mut conn)
            .await?;
        let mut groups: HashMap<i64, String> = match row.groups_crowds() {
            true => {
                redis::cmd("HGETALL")
                    .arg(keys.groups())
                    .query_async(&mut conn)
                    .await?
            }
            false => HashMap::new(),
        };
        let mut users: HashMap<String, i64> = HashMap::with_capacity(receipts.len());
        let entries: Vec<Entry> = receipts
            .into_iter()
            .map(|(user, receipt)| {
                users.insert(receipt.clone(), user);
                Entry {
                    receipt,
                    groups: crowd::parse_groups(&groups.remove(&user).unwrap_or_default()),
                }
            })
            .collect();
        let (places, outcome) =
            crowd::draw(&row.drawing_seed, entries, row.crowd(), row.crowd_threshold);
        let places = places
            .into_iter()
            .map(|p| (users.get(&p.receipt).copied().unwrap_or(0), p))
            .collect();
        Ok((places, outcome))
    }

    /// Whether sale `row`'s line has been ordered by its crowd policy (asked of Redis until this
    /// instance knows it has).
    pub(super) async fn crowd_ordered(&self, row: &ActivityRow) -> ApiResult<bool> {
        if self.crowds_done.lock().contains(&row.id) {
            return Ok(true);
        }
        let done: Option<i64> = redis::cmd("HGET")
            .arg(self.redis.keys.queue(row.id).meta())
            .arg("crowd_done")
            .query_async(&mut self.redis.conn())
            .await?;
        if done.is_some() {
            self.crowds_done.lock().insert(row.id);
        }
        Ok(done.is_some())
    }

    /// Orders sale `row`'s line by its crowd policy once the start has come, if no instance has:
    /// whether it is done (admission waits for it under `demote`).
    pub(super) async fn order_crowds(&self, row: &ActivityRow) -> ApiResult<bool> {
        if self.crowds_done.lock().contains(&row.id) {
            return Ok(true);
        }
        let keys = self.redis.keys.queue(row.id);
        let turn: i64 = self
            .scripts
            .draw_crowd
            .key(keys.meta())
            .arg(row.starts_at.timestamp_millis())
            .arg(ORDER_LOCK_MS)
            .invoke_async(&mut self.redis.conn())
            .await?;
        match turn {
            2 => {}
            1 => self.order_now(row).await?,
            _ => return Ok(false),
        }
        self.crowds_done.lock().insert(row.id);
        Ok(true)
    }

    /// The draw itself: the demoted places behind everyone (numbered from [`DEMOTED_FROM`] in the
    /// drawing's order, so that a second pass after a crash moves them to the same places), the
    /// outcome kept in PostgreSQL for the report, and the line marked done.
    async fn order_now(&self, row: &ActivityRow) -> ApiResult<()> {
        let (places, outcome) = self.drawn(row).await?;
        let keys = self.redis.keys.queue(row.id);
        let mut conn = self.redis.conn();
        if row.crowd() == CrowdPolicy::Demote {
            let demoted: Vec<i64> = places
                .iter()
                .filter(|(_, p)| p.demoted)
                .map(|(user, _)| *user)
                .collect();
            for (chunk_at, chunk) in demoted.chunks(MOVES_PER_COMMAND).enumerate() {
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(keys.line()).arg("XX");
                for (i, user) in chunk.iter().enumerate() {
                    let k = (chunk_at * MOVES_PER_COMMAND + i) as i64;
                    zadd.arg(DEMOTED_FROM + k).arg(*user);
                }
                zadd.query_async::<()>(&mut conn).await?;
            }
        }
        if let Some(outcome) = &outcome {
            sqlx::query!(
                "UPDATE activities SET crowd_outcome = $2 WHERE id = $1",
                row.id,
                sqlx::types::Json(outcome) as _
            )
            .execute(&self.db)
            .await?;
            tracing::info!(
                activity.id = row.id,
                policy = %outcome.policy,
                threshold = outcome.threshold,
                entries = outcome.entries,
                groups_over = outcome.groups_over,
                entries_over = outcome.entries_over,
                demoted = outcome.demoted,
                "the draw grouped the line's entries by network"
            );
        }
        redis::cmd("HSET")
            .arg(keys.meta())
            .arg("crowd_done")
            .arg(1)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }
}
