//! The borrowing: when the home shard of a sharded sale is out of units, the other shards are
//! asked in turn to lend them (`lend.lua`), and the home shard settles the pending borrowing
//! either way (`settle.lua`); a lent unit's writes are confirmed on a replica before the `202`.

use super::Gate;
use crate::{
    buy::batch::{Answer, IDEMPOTENCY_TTL_SECS},
    domain::activity::ActivityRow,
    infra::{
        keys::{ShardKeys, TOKEN_TTL_SECS},
        replication::{Confirmed, Witness},
    },
};
use app::api::Token;

/// One buy as the scripts see it.
struct Buy<'a> {
    user: i64,
    activity: i64,
    quantity: i64,
    token: uuid::Uuid,
    idempotency: Option<&'a str>,
}

/// `lend.lua`'s answer when the shard lent the units.
const LENT: &str = "ok";
/// What a shard that lent the units to a token holds under its `lent` key (`lend.lua`).
const LENT_MARK: &str = "1";

impl Gate {
    /// The home shard is out of units: a unit borrowed from the other shards, and the home
    /// shard's pending borrowing settled either way. `detail`: the gate's "token quantity".
    pub(super) async fn borrow_for(
        &self,
        activity: &ActivityRow,
        user: i64,
        home: &ShardKeys,
        home_index: i16,
        // The token may be an earlier request's, resumed by its Idempotency-Key: its quantity is
        // the one first asked for (and held), whatever this retry asks.
        (token, quantity): (uuid::Uuid, i64),
        idempotency: Option<&str>,
    ) -> redis::RedisResult<Answer> {
        let buy = Buy {
            user,
            activity: activity.id,
            quantity,
            token,
            idempotency,
        };
        let started = std::time::Instant::now();
        let lender = self.borrow(&buy, activity.stock_shards, home_index).await?;
        self.settle(&buy, home, lender.is_some()).await?;
        let answer = match lender {
            Some(lender) => {
                self.confirm(vec![
                    Witness::value(lender.lent(&token), LENT_MARK),
                    super::borrowed(
                        home,
                        (user, idempotency),
                        self.limits.idempotency_strings,
                        (&token, quantity),
                    ),
                ])
                .await?;
                Answer::Ok(Token(token))
            }
            // Every shard asked held fewer than the quantity: none at all for a single unit.
            None => Answer::SoldOut { left: quantity - 1 },
        };
        let borrowing = &self.parts.metrics.borrow_seconds;
        borrowing.observe(started.elapsed().as_secs_f64());
        Ok(answer)
    }

    /// Until the writes these witnesses show are on a replica of the node holding them (see
    /// `infra/replication.rs`).
    pub(super) async fn confirm(&self, witnesses: Vec<Witness>) -> redis::RedisResult<()> {
        let replication = &self.parts.replication;
        let answers =
            futures_util::future::join_all(witnesses.into_iter().map(|w| replication.confirm(w)))
                .await;
        for answer in answers {
            match answer? {
                Confirmed::Replicated => {}
                Confirmed::NoReplica => {
                    self.parts.metrics.unreplicated.inc();
                }
                Confirmed::NotYet | Confirmed::Deposed | Confirmed::Elsewhere => {
                    return Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "the reservation is not on a replica yet",
                    )))
                }
            }
        }
        Ok(())
    }

    /// Asks the other shards, in an order fixed by the token (so a resumed borrowing asks the
    /// shard that lent first), until one lends the units.
    async fn borrow(
        &self,
        buy: &Buy<'_>,
        shards: i16,
        home: i16,
    ) -> redis::RedisResult<Option<ShardKeys>> {
        let redis = &self.parts.redis;
        let start = (buy.token.as_u128() % shards as u128) as i16;
        let now_ms = chrono::Utc::now().timestamp_millis();
        for step in 0..shards {
            let index = (start + step) % shards;
            if index == home {
                continue;
            }
            let lender = redis.keys.shard(buy.activity, index, shards);
            let answer: String = self
                .lend
                .key(lender.stock())
                .key(lender.journal())
                .key(lender.lent(&buy.token))
                .arg(buy.token.to_string())
                .arg(buy.activity)
                .arg(buy.user)
                .arg(buy.quantity)
                .arg(now_ms)
                .arg(TOKEN_TTL_SECS)
                .invoke_async(&mut redis.conn())
                .await?;
            if answer == LENT {
                self.parts.metrics.borrowed.inc();
                return Ok(Some(lender));
            }
        }
        Ok(None)
    }

    async fn settle(&self, buy: &Buy<'_>, home: &ShardKeys, lent: bool) -> redis::RedisResult<()> {
        let redis = &self.parts.redis;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let strings = self.limits.idempotency_strings;
        let _: i64 = self
            .settle
            .key(home.token(&buy.token))
            .key(home.holders())
            .key(home.idempotency_answers())
            .key(home.unsettled())
            .key(match buy.idempotency {
                Some(k) if strings => home.idempotency(buy.user, k),
                _ => redis.keys.unused(home),
            })
            .arg(if lent { "lent" } else { "none" })
            .arg(buy.user)
            .arg(buy.quantity)
            .arg(buy.token.to_string())
            .arg(IDEMPOTENCY_TTL_SECS)
            .arg(buy.idempotency.unwrap_or_default())
            .arg(now_ms)
            .arg(u8::from(strings))
            .invoke_async(&mut redis.conn())
            .await?;
        Ok(())
    }
}
