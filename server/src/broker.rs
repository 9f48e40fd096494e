//! The RabbitMQ connection. lapin recovers a dropped connection by itself; when there is none yet
//! (RabbitMQ was down at start-up) the next caller tries again, so the server starts anyway and
//! `/readyz` says what is missing.

use anyhow::Context;
use lapin::{Connection, ConnectionProperties};
use std::{sync::Arc, time::Duration};
use tokio::sync::Mutex;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Clone)]
pub struct Broker {
    url: Arc<str>,
    conn: Arc<Mutex<Option<Arc<Connection>>>>,
}

impl Broker {
    pub fn new(url: &str) -> Broker {
        Broker { url: url.into(), conn: Arc::new(Mutex::new(None)) }
    }

    /// The live connection, opening one if there is none or the last one is closed for good.
    pub async fn connection(&self) -> anyhow::Result<Arc<Connection>> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            let status = conn.status();
            if status.connected() || status.reconnecting() || status.connecting() {
                return Ok(conn.clone());
            }
        }
        let props = ConnectionProperties::default()
            .with_connection_name("seckill".into())
            .enable_auto_recover();
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect(&self.url, props))
            .await
            .context("connecting to RabbitMQ timed out")?
            .context("connecting to RabbitMQ")?;
        let conn = Arc::new(conn);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Ready means connected now (not merely recovering).
    pub async fn check(&self) -> anyhow::Result<()> {
        let conn = self.connection().await?;
        anyhow::ensure!(conn.status().connected(), "RabbitMQ connection is recovering");
        Ok(())
    }
}
