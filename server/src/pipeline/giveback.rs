//! Units going back on sale: a reservation that failed, or an order cancelled at its payment
//! deadline, returns its units to Redis and lowers the user's count, once per token whatever is
//! redelivered or retried, and tells every instance to clear its sold-out flag. The units go to
//! the token's home shard (where the user's count lives, so both change in one script); a
//! buyer whose home is another shard borrows them from there.

use crate::infra::scripts;
use crate::{
    buy::soldout::SoldOut,
    infra::{keys::TOKEN_TTL_SECS, redis::Redis},
};

pub struct GiveBack<'a> {
    pub token: uuid::Uuid,
    pub activity_id: i64,
    pub user_id: i64,
    pub quantity: i32,
    /// The token's final status: `failed` or `cancelled`.
    pub status: &'a str,
    pub reason: &'a str,
}

/// Returns the units unless this token's were returned before; true if this call returned them.
/// A token no gate of this layout made (no home shard in it) has nothing in Redis to return to.
pub async fn give_back(
    redis: &Redis,
    sold_out: &SoldOut,
    g: GiveBack<'_>,
) -> redis::RedisResult<bool> {
    let Some(home) = redis.keys.home_of(&g.token) else {
        tracing::warn!(order.token = %g.token, "token without a home shard; units not returned to Redis");
        return Ok(false);
    };
    let returned: i64 = scripts::give_back()
        .key(home.returned(&g.token))
        .key(home.token(&g.token))
        .key(home.stock())
        .key(home.holders())
        .key(home.unsettled())
        .key(home.owners())
        .arg(g.quantity)
        .arg(g.user_id)
        .arg(g.status)
        .arg(g.reason)
        .arg(g.activity_id)
        .arg(TOKEN_TTL_SECS)
        .arg(g.token.to_string())
        .invoke_async(&mut redis.conn())
        .await?;
    if returned == 1 {
        sold_out.announce(&mut redis.conn(), g.activity_id).await?;
    }
    Ok(returned == 1)
}
