//! Blocked clients (a user `u:42` or an address `ip:1.2.3.4`), known to every instance: the gate
//! refuses them in-process, before any Redis call, on every sale. A block is written to one
//! sorted set (score: when it ends) and broadcast; every instance adds it to its list within
//! milliseconds and reloads the whole set whenever its subscription was interrupted.

use crate::infra::redis::Redis;
use parking_lot::RwLock;
use std::{collections::HashMap, sync::Arc};

/// Past this many entries, ended blocks are swept out on the next insert.
const SWEEP_ABOVE: usize = 10_000;

#[derive(Clone, Default)]
pub struct Blocks {
    until: Arc<RwLock<HashMap<String, i64>>>,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Blocks {
    /// How long `who` stays blocked (ms), if it is.
    pub fn remaining(&self, who: &str) -> Option<i64> {
        let until = *self.until.read().get(who)?;
        let left = until - now_ms();
        (left > 0).then_some(left)
    }

    fn insert(&self, who: &str, until: i64) {
        let mut map = self.until.write();
        if map.len() > SWEEP_ABOVE {
            let now = now_ms();
            map.retain(|_, t| *t > now);
        }
        let entry = map.entry(who.to_string()).or_default();
        *entry = (*entry).max(until);
    }

    /// Blocks `who` for `ms` on every instance.
    pub async fn block(&self, redis: &Redis, who: &str, ms: i64) -> redis::RedisResult<()> {
        let until = now_ms() + ms;
        self.insert(who, until);
        let mut conn = redis.conn();
        let _: () = redis::cmd("ZADD")
            .arg(redis.keys.blocks())
            .arg("GT")
            .arg(until)
            .arg(who)
            .query_async(&mut conn)
            .await?;
        let _: i64 = redis::cmd("PUBLISH")
            .arg(redis.keys.block_channel())
            .arg(format!("{who} {until}"))
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// A block broadcast (`who until`) arrived.
    pub fn on_message(&self, payload: &str) {
        if let Some((who, until)) = payload.rsplit_once(' ') {
            if let Ok(until) = until.parse() {
                self.insert(who, until);
            }
        }
    }

    /// Replaces the list with the blocks that have not ended, from Redis.
    pub async fn load(&self, redis: &Redis) -> redis::RedisResult<()> {
        let now = now_ms();
        let mut conn = redis.conn();
        let _: i64 = redis::cmd("ZREMRANGEBYSCORE")
            .arg(redis.keys.blocks())
            .arg("-inf")
            .arg(now)
            .query_async(&mut conn)
            .await?;
        let current: Vec<(String, i64)> = redis::cmd("ZRANGE")
            .arg(redis.keys.blocks())
            .arg(now)
            .arg("+inf")
            .arg("BYSCORE")
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await?;
        *self.until.write() = current.into_iter().collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broadcast_block_holds_until_it_ends() {
        let blocks = Blocks::default();
        blocks.on_message(&format!("ip:::1 {}", now_ms() + 60_000));
        blocks.on_message(&format!("u:7 {}", now_ms() - 1));
        blocks.on_message("garbage");
        assert!(blocks.remaining("ip:::1").is_some_and(|ms| ms > 59_000));
        assert_eq!(blocks.remaining("u:7"), None);
        assert_eq!(blocks.remaining("u:8"), None);
    }
}
