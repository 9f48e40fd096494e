//! The bare ceilings `make bench` sets beside the product (`seckill-load ceiling`): the same axum, hyper
//! and Redis client as the product, with nothing else. `GET /hello` answers a fixed body; `POST
//! /decrement` runs one EVALSHA that checks a counter and decrements it. No middleware, no
//! session, no JSON, no journal: the least a request costs on this machine. A ratio to the
//! product's own `/healthz` would hide the cost of the product's stack; a ratio to these does not.

use axum::{
    extract::State,
    http::StatusCode,
    routing::{get, post},
    serve::ListenerExt,
    Router,
};
use redis::{aio::ConnectionManager, Script};
use std::sync::Arc;

/// The whole of the work the bare handler asks of Redis: check and take one unit.
const CHECK_AND_DECREMENT: &str = r"
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
if left < 1 then return -1 end
return redis.call('DECR', KEYS[1])";

struct Ceiling {
    redis: ConnectionManager,
    script: Script,
    key: String,
}

/// Serves the two bare handlers on `addr` until the process ends; the counter `key` starts at
/// `stock`.
pub async fn serve(addr: &str, redis_url: &str, key: String, stock: i64) -> anyhow::Result<()> {
    let mut redis = ConnectionManager::new(redis::Client::open(redis_url)?).await?;
    redis::cmd("SET")
        .arg(&key)
        .arg(stock)
        .query_async::<()>(&mut redis)
        .await?;
    let state = Arc::new(Ceiling {
        redis,
        script: Script::new(CHECK_AND_DECREMENT),
        key,
    });
    let app = Router::new()
        .route("/hello", get(|| async { "ok" }))
        .route("/decrement", post(decrement))
        .with_state(state);
    // The product sets TCP_NODELAY on its connections too.
    let listener = tokio::net::TcpListener::bind(addr).await?.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tracing::info!(%addr, "bare ceilings: GET /hello, POST /decrement");
    axum::serve(listener, app).await?;
    Ok(())
}

async fn decrement(State(ceiling): State<Arc<Ceiling>>) -> (StatusCode, &'static str) {
    let taken = ceiling
        .script
        .key(&ceiling.key)
        .invoke_async::<i64>(&mut ceiling.redis.clone())
        .await;
    match taken {
        Ok(left) if left >= 0 => (StatusCode::ACCEPTED, "taken"),
        Ok(_) => (StatusCode::GONE, "sold out"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "redis"),
    }
}
