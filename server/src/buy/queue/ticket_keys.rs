//! Where the admission tickets' key generation in use is kept: one hash in Redis that
//! `server rotate-ticket-key` increments, and every instance reads every two seconds. The tickets
//! themselves (keys, signing, checking, the key set) are `signing::tickets`.

use crate::infra::redis::Redis;
use signing::Tickets;

/// Reads the generation in use from Redis (absent: 0) and makes `tickets` follow it.
pub async fn follow(tickets: &Tickets, redis: &Redis) -> redis::RedisResult<()> {
    let (generation, since): (Option<u64>, Option<i64>) = redis::cmd("HMGET")
        .arg(redis.keys.ticket_keys())
        .arg("generation")
        .arg("since_ms")
        .query_async(&mut redis.conn())
        .await?;
    let generation = generation.unwrap_or(0);
    if generation != tickets.generation() {
        tickets.use_generation(generation, since.unwrap_or(0));
    }
    Ok(())
}

/// Puts the next key generation in use everywhere (`server rotate-ticket-key`): the number of
/// the new generation.
pub async fn rotate(redis: &Redis) -> redis::RedisResult<u64> {
    let now = chrono::Utc::now().timestamp_millis();
    let (generation, ()): (u64, ()) = redis::pipe()
        .atomic()
        .hincr(redis.keys.ticket_keys(), "generation", 1)
        .hset(redis.keys.ticket_keys(), "since_ms", now)
        .query_async(&mut redis.conn())
        .await?;
    Ok(generation)
}
