//! The relay: reservations go from the Redis journals (a stream per stock shard of each sale)
//! to RabbitMQ. A journal entry is
//! acknowledged (and deleted) only after the broker confirmed the message; entries a crashed or
//! cut-off relay left pending are re-claimed after a while by whichever relay runs. A message may
//! thus be published twice; the persister is idempotent on the token.

use crate::infra::{
    broker::{Broker, Topology},
    metrics::Metrics,
    redis::Redis,
};
use anyhow::Context;
use lapin::{options::*, BasicProperties, Channel, Confirmation};
use redis::{
    streams::{StreamAutoClaimReply, StreamId, StreamReadReply},
    Value,
};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use std::{
    collections::HashSet,
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
    pub db: PgPool,
    pub redis: Redis,
    pub broker: Broker,
    pub topology: Topology,
    pub metrics: Arc<Metrics>,
    pub consumer: String,
}

/// The journals the relay reads: those of sales on now are read every round, those of sales
/// that ended in the last week (a reservation granted in their last second may still be
/// there after an outage) every few seconds.
#[derive(Default)]
struct Journals {
    hot: Vec<String>,
    cold: Vec<String>,
    /// Journals whose consumer group exists (as far as this relay knows).
    grouped: HashSet<String>,
    listed_at: Option<Instant>,
    cold_read_at: Option<Instant>,
    reclaimed_at: Option<Instant>,
    lag_at: Option<Instant>,
}

/// How often the list of journals is read from the database.
const LIST_EVERY: Duration = Duration::from_secs(1);
const COLD_EVERY: Duration = Duration::from_secs(5);
/// How long the relay rests when no journal had anything.
const IDLE_PAUSE: Duration = Duration::from_millis(20);

fn due(at: Option<Instant>, every: Duration) -> bool {
    at.is_none_or(|t| t.elapsed() >= every)
}

impl Relay {
    pub async fn run(self) {
        let mut channel: Option<Channel> = None;
        let mut journals = Journals::default();
        loop {
            match self.step(&mut channel, &mut journals).await {
                Ok(0) => tokio::time::sleep(IDLE_PAUSE).await,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "relay step failed; retrying");
                    channel = None;
                    // A Redis that lost its data lost the groups too.
                    journals.grouped.clear();
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    async fn list(&self, journals: &mut Journals) -> anyhow::Result<()> {
        let sales: Vec<(i64, i16, bool)> = sqlx::query_as(
            "SELECT id, stock_shards, ends_at > now() - interval '5 minutes' FROM activities
             WHERE ends_at > now() - interval '7 days' AND starts_at < now() + interval '5 minutes'",
        )
        .fetch_all(&self.db)
        .await
        .context("listing the journals")?;
        let (mut hot, mut cold) = (Vec::new(), vec![self.redis.keys.legacy_journal()]);
        for (id, shards, on) in sales {
            let list = if on { &mut hot } else { &mut cold };
            list.extend(
                self.redis
                    .keys
                    .shards(id, shards)
                    .iter()
                    .map(|s| s.journal()),
            );
        }
        (journals.hot, journals.cold) = (hot, cold);
        journals.listed_at = Some(Instant::now());
        Ok(())
    }

    async fn ensure_group(&self, journal: &str) -> anyhow::Result<()> {
        let created: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(journal)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut self.redis.conn())
            .await;
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => Err(e).context("creating the relay group"),
            _ => Ok(()),
        }
    }

    /// New entries of one journal, or with `reclaim` the entries another relay left pending.
    async fn read(&self, journal: &str, reclaim: bool) -> anyhow::Result<Vec<StreamId>> {
        let mut redis = self.redis.conn();
        if reclaim {
            let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
                .arg(journal)
                .arg(GROUP)
                .arg(&self.consumer)
                .arg(RECLAIM_IDLE_MS)
                .arg("0-0")
                .arg("COUNT")
                .arg(BATCH)
                .query_async(&mut redis)
                .await
                .context("re-claiming pending journal entries")?;
            return Ok(reply.claimed);
        }
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(BATCH)
            .arg("STREAMS")
            .arg(journal)
            .arg(">")
            .query_async(&mut redis)
            .await
            .context("reading the journal")?;
        Ok(reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .collect())
    }

    async fn channel(&self) -> anyhow::Result<Channel> {
        let channel = self.broker.channel(&self.topology).await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .context("enabling confirms")?;
        Ok(channel)
    }

    /// Relays one round over the journals; returns how many entries were confirmed.
    async fn step(
        &self,
        channel: &mut Option<Channel>,
        journals: &mut Journals,
    ) -> anyhow::Result<usize> {
        if channel.as_ref().is_none_or(|c| !c.status().connected()) {
            *channel = Some(self.channel().await?);
        }
        let channel = channel.as_ref().expect("set above");
        if due(journals.listed_at, LIST_EVERY) {
            self.list(journals).await?;
        }
        let mut round: Vec<String> = journals.hot.clone();
        if due(journals.cold_read_at, COLD_EVERY) {
            journals.cold_read_at = Some(Instant::now());
            round.extend(journals.cold.iter().cloned());
        }
        let reclaim = due(journals.reclaimed_at, Duration::from_secs(1));
        if reclaim {
            journals.reclaimed_at = Some(Instant::now());
        }
        for journal in &round {
            if !journals.grouped.contains(journal) {
                self.ensure_group(journal).await?;
                journals.grouped.insert(journal.clone());
            }
        }
        let reads = round.iter().map(|journal| async move {
            let mut entries = if reclaim {
                self.read(journal, true).await?
            } else {
                Vec::new()
            };
            if entries.is_empty() {
                entries = self.read(journal, false).await?;
            }
            anyhow::Ok((journal, entries))
        });
        let mut batches = Vec::new();
        for read in futures_util::future::join_all(reads).await {
            let (journal, entries) = read?;
            if !entries.is_empty() {
                batches.push((journal, entries));
            }
        }
        if due(journals.lag_at, Duration::from_secs(1)) {
            journals.lag_at = Some(Instant::now());
            self.metrics.journal_lag.set(self.lag(&round).await?);
        }
        if batches.is_empty() {
            return Ok(0);
        }

        let mut pending = Vec::new();
        let mut done: Vec<(&String, Vec<String>)> = Vec::new();
        for (journal, entries) in &batches {
            let mut unreadable = Vec::new();
            for entry in entries {
                let Some(reservation) = Reservation::from_entry(entry) else {
                    // Only the gate scripts write here; an unreadable entry cannot become an order.
                    tracing::error!(journal.id = %entry.id, "unreadable journal entry dropped");
                    unreadable.push(entry.id.clone());
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
                pending.push((done.len(), entry.id.clone(), confirm));
            }
            done.push((*journal, unreadable));
        }
        let mut failed = 0;
        for (index, id, confirm) in pending {
            match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
                Ok(Ok(Confirmation::Ack(None))) => done[index].1.push(id),
                Ok(Ok(other)) => {
                    failed += 1;
                    tracing::warn!(journal.id = %id, confirmation = ?other, "broker did not take the reservation");
                }
                Ok(Err(e)) => return Err(e).context("awaiting a confirm"),
                Err(_) => anyhow::bail!("no confirm from RabbitMQ within {CONFIRM_TIMEOUT:?}"),
            }
        }
        let mut confirmed = 0;
        for (journal, ids) in done.iter().filter(|(_, ids)| !ids.is_empty()) {
            let _: () = redis::pipe()
                .cmd("XACK")
                .arg(*journal)
                .arg(GROUP)
                .arg(ids)
                .ignore()
                .cmd("XDEL")
                .arg(*journal)
                .arg(ids)
                .ignore()
                .query_async(&mut self.redis.conn())
                .await
                .context("acknowledging journal entries")?;
            confirmed += ids.len();
        }
        self.metrics.relayed.inc_by(confirmed as u64);
        if failed > 0 {
            anyhow::bail!(
                "{failed} reservations were not confirmed; they stay pending and will be re-sent"
            );
        }
        Ok(confirmed)
    }

    /// Entries in the given journals not yet confirmed by RabbitMQ.
    async fn lag(&self, journals: &[String]) -> anyhow::Result<i64> {
        Ok(entries(&self.redis, journals).await? as i64)
    }
}

/// Entries in the given journals (asked at once: on a cluster they live on several masters).
pub async fn entries(redis: &Redis, journals: &[String]) -> redis::RedisResult<u64> {
    let lengths = journals.iter().map(|journal| {
        let mut conn = redis.conn();
        async move {
            redis::cmd("XLEN")
                .arg(journal)
                .query_async::<u64>(&mut conn)
                .await
        }
    });
    let mut total = 0;
    for length in futures_util::future::join_all(lengths).await {
        total += length?;
    }
    Ok(total)
}
