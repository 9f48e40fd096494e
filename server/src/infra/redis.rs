//! The Redis handle the rest of the server is given: a multiplexed connection and the key
//! layout, cloned cheaply. This is the one place that opens Redis connections.

use super::{keys::Keys, retry::until_available};
use anyhow::Context;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::time::Duration;

/// A connection (reconnecting by itself) and where this deployment's keys live.
#[derive(Clone)]
pub struct Redis {
    pub conn: ConnectionManager,
    pub keys: Keys,
}

impl Redis {
    /// A clone of the connection, for the `&mut` that redis-rs' commands take.
    pub fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }
}

/// A multiplexed connection with short timeouts, waiting for Redis to come up at start-up.
pub async fn connect(url: &str) -> anyhow::Result<ConnectionManager> {
    let client = redis::Client::open(url).context("REDIS_URL")?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    until_available("Redis", || {
        let client = client.clone();
        let config = config.clone();
        async move { Ok(ConnectionManager::new_with_config(client, config).await?) }
    })
    .await
}
