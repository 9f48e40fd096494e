//! A sale's stock in Redis: split over its shards, warmed before the sale is announced, grown
//! by each addition exactly once per shard, and read back (units left, per shard or in all).

use super::{ActivityRow, OwedAddition};
use crate::domain::ApiResult;
use crate::infra::redis::Redis;

/// How `total` units split over `shards`: as evenly as possible, the first shards taking the rest.
pub fn split(total: i64, shards: i16) -> Vec<i64> {
    let k = i64::from(shards.max(1));
    (0..k)
        .map(|i| total / k + i64::from(i < total % k))
        .collect()
}

/// Puts an activity's stock (split over its shards) and switches into Redis unless they are
/// there already.
pub async fn warm(redis: &Redis, row: &ActivityRow, remaining: i64) -> ApiResult<()> {
    let shards = redis.keys.shards(row.id, row.stock_shards);
    let parts = split(remaining.max(0), row.stock_shards);
    let writes = shards.iter().zip(parts).map(|(shard, units)| {
        let mut conn = redis.conn();
        async move {
            redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(shard.stock())
                .arg(units)
                .arg("NX")
                .ignore()
                .cmd("HSETNX")
                .arg(shard.meta())
                .arg("paused")
                .arg(if row.stopped() { "1" } else { "0" })
                .ignore()
                .query_async::<()>(&mut conn)
                .await
        }
    });
    for written in futures_util::future::join_all(writes).await {
        written?;
    }
    Ok(())
}

/// How long a shard remembers that it took an addition: far longer than an addition stays owed
/// (the reconciler carries owed ones over every round).
const ADDITION_MARK_TTL_SECS: i64 = 8 * 24 * 3600;

/// Puts an addition's units on sale in Redis (after the database took them), spread over the
/// sale's shards, each shard once whatever is retried or delivered late; a shard Redis does not
/// hold is warmed from what the database says is left. Returns the units on sale.
pub async fn add_to_stock(redis: &Redis, owed: &OwedAddition) -> ApiResult<i64> {
    let script = crate::infra::scripts::add_stock();
    let adds = split(owed.added, owed.stock_shards);
    let fallbacks = split(owed.remaining.max(0), owed.stock_shards);
    let shards = redis.keys.shards(owed.activity_id, owed.stock_shards);
    let calls = shards
        .iter()
        .zip(adds)
        .zip(fallbacks)
        .map(|((shard, add), fallback)| {
            let mut conn = redis.conn();
            let mut invocation = script.key(shard.stock());
            invocation
                .key(shard.added(owed.addition))
                .arg(add)
                .arg(fallback)
                .arg(ADDITION_MARK_TTL_SECS);
            async move { invocation.invoke_async::<i64>(&mut conn).await }
        });
    let mut on_sale = 0;
    for units in futures_util::future::join_all(calls).await {
        on_sale += units?.max(0);
    }
    Ok(on_sale)
}

/// Each shard's units as Redis counts them (`None`: the shard is not in Redis).
pub async fn shard_stock(
    redis: &Redis,
    id: i64,
    shards: i16,
) -> redis::RedisResult<Vec<Option<i64>>> {
    let reads = redis.keys.shards(id, shards).into_iter().map(|shard| {
        let mut conn = redis.conn();
        async move {
            redis::cmd("GET")
                .arg(shard.stock())
                .query_async::<Option<i64>>(&mut conn)
                .await
        }
    });
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .collect()
}

/// Each shard's units as Redis counts them, each read given `deadline` to answer: a shard whose
/// master is slow or away fails alone (`Err`), the others answer.
pub async fn shard_stock_within(
    redis: &Redis,
    id: i64,
    shards: i16,
    deadline: std::time::Duration,
) -> Vec<redis::RedisResult<Option<i64>>> {
    let reads = redis.keys.shards(id, shards).into_iter().map(|shard| {
        let mut conn = redis.conn();
        async move {
            let mut get = redis::cmd("GET");
            get.arg(shard.stock());
            let read = get.query_async::<Option<i64>>(&mut conn);
            tokio::time::timeout(deadline, read)
                .await
                .unwrap_or_else(|_| {
                    Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "the shard did not answer in time",
                    )))
                })
        }
    });
    futures_util::future::join_all(reads).await
}

/// Units still for sale over every shard; `None` when Redis holds none of the sale's shards.
pub async fn in_redis(redis: &Redis, id: i64, shards: i16) -> redis::RedisResult<Option<i64>> {
    let stock = shard_stock(redis, id, shards).await?;
    Ok(stock
        .iter()
        .any(Option::is_some)
        .then(|| stock.iter().flatten().map(|n| (*n).max(0)).sum()))
}

/// Units still for sale, as Redis counts them (0 when the sale is not in Redis).
pub async fn remaining(redis: &Redis, id: i64, shards: i16) -> ApiResult<i64> {
    Ok(in_redis(redis, id, shards).await?.unwrap_or(0))
}
