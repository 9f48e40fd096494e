//! The relay: reservations go from the Redis journal (a stream) to RabbitMQ. A journal entry is
//! acknowledged (and deleted) only after the broker confirmed the message; entries a crashed or
//! cut-off relay left pending are re-claimed after a while by whichever relay runs. A message may
//! thus be published twice; the persister is idempotent on the token.

use crate::infra::{
    broker::{Broker, Topology},
    keys::Keys,
    metrics::Metrics,
};
use anyhow::Context;
use lapin::{options::*, BasicProperties, Channel, Confirmation};
use redis::{
    aio::ConnectionManager,
    streams::{StreamAutoClaimReply, StreamId, StreamReadReply},
    Value,
};
use serde::{Deserialize, Serialize};
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

const GROUP: &str = "relay";
const BATCH: usize = 2_000;
/// Entries pending longer than this are taken over from their (presumably dead) relay.
const RECLAIM_IDLE_MS: u64 = 5_000;
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// One reservation as it travels to the persister.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub token: uuid::Uuid,
    pub activity_id: i64,
    pub user_id: i64,
    pub quantity: i32,
    pub reserved_ms: i64,
}

fn field<T: std::str::FromStr>(entry: &StreamId, name: &str) -> Option<T> {
    match entry.map.get(name)? {
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        Value::Int(i) => i.to_string().parse().ok(),
        _ => None,
    }
}

impl Reservation {
    fn from_entry(entry: &StreamId) -> Option<Reservation> {
        Some(Reservation {
            token: field(entry, "token")?,
            activity_id: field(entry, "activity_id")?,
            user_id: field(entry, "user_id")?,
            quantity: field(entry, "quantity")?,
            reserved_ms: field(entry, "reserved_ms")?,
        })
    }
}

pub struct Relay {
    pub redis: ConnectionManager,
    pub keys: Keys,
    pub broker: Broker,
    pub topology: Topology,
    pub metrics: Arc<Metrics>,
    pub consumer: String,
}

impl Relay {
    pub async fn run(self) {
        let mut channel: Option<Channel> = None;
        let mut last_reclaim = Instant::now() - Duration::from_secs(60);
        loop {
            let result = self.step(&mut channel, &mut last_reclaim).await;
            if let Err(e) = result {
                tracing::warn!(error = %format!("{e:#}"), "relay step failed; retrying");
                channel = None;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    async fn ensure_group(&self) -> anyhow::Result<()> {
        let created: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(self.keys.journal())
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut self.redis.clone())
            .await;
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => Err(e).context("creating the relay group"),
            _ => Ok(()),
        }
    }

    async fn channel(&self) -> anyhow::Result<Channel> {
        let channel = self.broker.channel(&self.topology).await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .context("enabling confirms")?;
        Ok(channel)
    }

    /// Relays one batch; returns how many entries were confirmed.
    async fn step(
        &self,
        channel: &mut Option<Channel>,
        last_reclaim: &mut Instant,
    ) -> anyhow::Result<usize> {
        if channel.as_ref().is_none_or(|c| !c.status().connected()) {
            *channel = Some(self.channel().await?);
            self.ensure_group().await?;
        }
        let channel = channel.as_ref().expect("set above");
        let mut redis = self.redis.clone();

        let mut entries = Vec::new();
        if last_reclaim.elapsed() > Duration::from_secs(1) {
            *last_reclaim = Instant::now();
            let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
                .arg(self.keys.journal())
                .arg(GROUP)
                .arg(&self.consumer)
                .arg(RECLAIM_IDLE_MS)
                .arg("0-0")
                .arg("COUNT")
                .arg(BATCH)
                .query_async(&mut redis)
                .await
                .context("re-claiming pending journal entries")?;
            entries = reply.claimed;
        }
        if entries.is_empty() {
            let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(GROUP)
                .arg(&self.consumer)
                .arg("COUNT")
                .arg(BATCH)
                .arg("BLOCK")
                .arg(500)
                .arg("STREAMS")
                .arg(self.keys.journal())
                .arg(">")
                .query_async(&mut redis)
                .await
                .context("reading the journal")?;
            entries = reply
                .into_iter()
                .flat_map(|r| r.keys)
                .flat_map(|k| k.ids)
                .collect();
        }
        let lag: i64 = redis::cmd("XLEN")
            .arg(self.keys.journal())
            .query_async(&mut redis)
            .await?;
        self.metrics.journal_lag.set(lag);
        if entries.is_empty() {
            return Ok(0);
        }

        let mut pending = Vec::with_capacity(entries.len());
        let mut done = Vec::with_capacity(entries.len());
        for entry in &entries {
            let Some(reservation) = Reservation::from_entry(entry) else {
                // Only the gate script writes here; an unreadable entry cannot become an order.
                tracing::error!(journal.id = %entry.id, "unreadable journal entry dropped");
                done.push(entry.id.clone());
                continue;
            };
            let payload = serde_json::to_vec(&reservation)?;
            let properties = BasicProperties::default()
                .with_delivery_mode(2)
                .with_content_type("application/json".into())
                .with_message_id(reservation.token.to_string().into());
            let confirm = channel
                .basic_publish(
                    "".into(),
                    self.topology.reservations.as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &payload,
                    properties,
                )
                .await
                .context("publishing")?;
            pending.push((entry.id.clone(), confirm));
        }
        let mut failed = 0;
        for (id, confirm) in pending {
            match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
                Ok(Ok(Confirmation::Ack(None))) => done.push(id),
                Ok(Ok(other)) => {
                    failed += 1;
                    tracing::warn!(journal.id = %id, confirmation = ?other, "broker did not take the reservation");
                }
                Ok(Err(e)) => return Err(e).context("awaiting a confirm"),
                Err(_) => anyhow::bail!("no confirm from RabbitMQ within {CONFIRM_TIMEOUT:?}"),
            }
        }
        if !done.is_empty() {
            let _: () = redis::pipe()
                .cmd("XACK")
                .arg(self.keys.journal())
                .arg(GROUP)
                .arg(&done)
                .ignore()
                .cmd("XDEL")
                .arg(self.keys.journal())
                .arg(&done)
                .ignore()
                .query_async(&mut redis)
                .await
                .context("acknowledging journal entries")?;
            self.metrics.relayed.inc_by(done.len() as u64);
        }
        if failed > 0 {
            anyhow::bail!(
                "{failed} reservations were not confirmed; they stay pending and will be re-sent"
            );
        }
        Ok(done.len())
    }
}
