//! The persister: reservations from RabbitMQ become orders in PostgreSQL. A batch is inserted in
//! one statement, idempotently (unique token), raising `activities.sold` under its CHECK; after the
//! commit the tokens are marked `confirmed` in Redis, and only then acknowledged. While PostgreSQL
//! or Redis is down, the batch is held (not rejected), so the delivery limit is not burnt.
//! Messages that keep failing reach the dead-letter queue, where `settle_dead_letter` returns
//! their stock and marks them `failed`. A message carries one reservation or a batch of them
//! (`journal.rs`); when PostgreSQL refuses some reservations of a batch, those are published
//! again one per message (confirmed) and the batch is acknowledged, so only they go toward the
//! dead letters.

use super::{
    deadline::Deadlines,
    giveback::{give_back, GiveBack},
    journal::{decode, encode, Reservation},
};
use crate::domain::order;
use crate::{
    buy::soldout::SoldOut,
    infra::{
        broker::{self, Broker, Consuming, Topology},
        metrics::Metrics,
        redis::Redis,
        telemetry,
    },
};
use anyhow::Context;
use app::api::OrderStatus;
use futures_util::StreamExt;
use lapin::{message::Delivery, options::*, BasicProperties, Confirmation};
use sqlx::PgPool;
use std::{collections::HashMap, sync::Arc, time::Duration};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Messages in flight to one consumer (each up to `journal::PER_MESSAGE` reservations).
const PREFETCH: u16 = 64;
/// Reservations written in one statement.
const MAX_BATCH: usize = 2_000;
/// How long a batch waits for more messages once it has one.
const LINGER: Duration = Duration::from_millis(5);

#[derive(Clone)]
pub struct Persister {
    pub db: PgPool,
    pub redis: Redis,
    pub broker: Broker,
    pub topology: Topology,
    pub metrics: Arc<Metrics>,
    pub sold_out: SoldOut,
    pub deadlines: Deadlines,
    pub consumer: String,
}

enum Failure {
    /// PostgreSQL or Redis unreachable: hold the batch and try again.
    Outage(anyhow::Error),
    /// The data itself was refused (a constraint, an unknown activity or user).
    Refused(anyhow::Error),
}

fn classify(e: sqlx::Error) -> Failure {
    match &e {
        sqlx::Error::Database(db)
            if db
                .code()
                .is_some_and(|c| c.starts_with("23") || c.starts_with("22")) =>
        {
            Failure::Refused(e.into())
        }
        _ => Failure::Outage(e.into()),
    }
}

async fn backoff(attempt: &mut u32) {
    *attempt = (*attempt + 1).min(6);
    tokio::time::sleep(Duration::from_millis(100 << *attempt)).await;
}

/// The deliveries whose reservations can be read; the others (unreadable or empty: no retry
/// can help) go to the dead letters at once.
async fn dead_letter_unreadable(
    batch: Vec<Delivery>,
) -> anyhow::Result<Vec<(Delivery, Vec<Reservation>)>> {
    let mut good = Vec::with_capacity(batch.len());
    for delivery in batch {
        match decode(&delivery.data) {
            Ok(rs) if !rs.is_empty() => good.push((delivery, rs)),
            decoded => {
                let error = decoded.err().map(|e| e.to_string()).unwrap_or_default();
                tracing::error!(%error, "unreadable reservation message dead-lettered");
                delivery
                    .nack(BasicNackOptions {
                        requeue: false,
                        ..Default::default()
                    })
                    .await?;
            }
        }
    }
    Ok(good)
}

/// What the persister clears in Redis after a commit, per home shard: its tokens out of the
/// unsettled set and their owners entries, and the keys of their records (a borrowing's, or the
/// release before's), which only a reservation not yet an order needs.
struct Settled {
    unsettled: String,
    owners: String,
    tokens: Vec<String>,
    records: Vec<String>,
}

impl Persister {
    /// Consumes one reservations queue (`Topology::reservation_queues`) until the process ends.
    /// Consumes `queue` until `stop`; the batch in hand is written and acknowledged first (what
    /// the channel had prefetched goes back to the queue with it).
    pub async fn run(self, queue: String, stop: CancellationToken) {
        while !stop.is_cancelled() {
            if let Err(e) = self.consume(&queue, &stop).await {
                tracing::warn!(error = %format!("{e:#}"), "persister lost its channel; reconnecting");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    pub async fn run_dead_letters(self) {
        loop {
            if let Err(e) = self.consume_dead_letters().await {
                tracing::warn!(error = %format!("{e:#}"), "dead-letter consumer lost its channel; reconnecting");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    async fn open(&self, queue: &str, tag: &str) -> anyhow::Result<Consuming> {
        self.broker
            .consume(
                &self.topology,
                queue,
                &format!("{}-{tag}", self.consumer),
                PREFETCH,
            )
            .await
    }

    async fn consume(&self, queue: &str, stop: &CancellationToken) -> anyhow::Result<()> {
        let mut open = self.open(queue, "persister").await?;
        let consumer = &mut open.consumer;
        loop {
            let first = tokio::select! {
                next = consumer.next() => next.context("consumer ended")?.context("receiving")?,
                () = stop.cancelled() => return Ok(()),
            };
            let mut batch = vec![first];
            // Roughly: a message of the relay holds hundreds, one split out of a batch one.
            let mut reservations = batch[0].data.len() / 100;
            while reservations < MAX_BATCH {
                match tokio::time::timeout(LINGER, consumer.next()).await {
                    Ok(Some(d)) => {
                        let d = d.context("receiving")?;
                        reservations += d.data.len() / 100;
                        batch.push(d);
                    }
                    Ok(None) => break,
                    Err(_) => break,
                }
            }
            self.handle_batch(batch).await?;
        }
    }

    /// One batch of deliveries: the unreadable ones dead-lettered, the reservations written
    /// (one by one when the batch as a whole is refused), the refused ones handed back, the
    /// rest acknowledged at once.
    async fn handle_batch(&self, batch: Vec<Delivery>) -> anyhow::Result<()> {
        let good = dead_letter_unreadable(batch).await?;
        let reservations: Vec<Reservation> =
            good.iter().flat_map(|(_, rs)| rs.iter().cloned()).collect();
        if reservations.is_empty() {
            return Ok(());
        }
        let traced: Vec<String> = good
            .iter()
            .filter_map(|(delivery, _)| broker::header_text(delivery, "traceparent"))
            .collect();
        let traced: Vec<&str> = traced.iter().map(String::as_str).collect();
        let span = tracing::info_span!("persist", reservations = traced.len());
        telemetry::follow_batch(&span, &traced);
        let refused = self.persist(&reservations).instrument(span).await;
        self.answer(good, &refused.into_iter().collect()).await
    }

    /// Writes the reservations, holding on while PostgreSQL is out of reach; the tokens refused
    /// (no such sale or user), found one by one when the batch as a whole is refused.
    async fn persist(&self, reservations: &[Reservation]) -> Vec<uuid::Uuid> {
        let mut attempt = 0;
        loop {
            match self.write(reservations).await {
                Ok(missing) => return missing,
                Err(Failure::Outage(e)) => {
                    tracing::warn!(error = %format!("{e:#}"), batch = reservations.len(), "cannot persist now; holding the batch");
                    backoff(&mut attempt).await;
                }
                Err(Failure::Refused(e)) if reservations.len() > 1 => {
                    tracing::warn!(error = %format!("{e:#}"), "batch refused; persisting one by one");
                    let mut refused = Vec::new();
                    for r in reservations {
                        refused.extend(self.persist_alone(r).await);
                    }
                    return refused;
                }
                Err(Failure::Refused(e)) => {
                    tracing::warn!(error = %format!("{e:#}"), order.token = %reservations[0].token, "reservation refused");
                    return vec![reservations[0].token];
                }
            }
        }
    }

    /// One reservation written alone: its token when refused.
    async fn persist_alone(&self, r: &Reservation) -> Vec<uuid::Uuid> {
        let mut attempt = 0;
        loop {
            match self.write(std::slice::from_ref(r)).await {
                Ok(missing) => return missing,
                Err(Failure::Refused(e)) => {
                    tracing::warn!(error = %format!("{e:#}"), order.token = %r.token, "reservation refused");
                    return vec![r.token];
                }
                Err(Failure::Outage(_)) => backoff(&mut attempt).await,
            }
        }
    }

    /// Each delivery answered: a refused message of one back to the queue (dead-lettered after
    /// the delivery limit), the refused part of a batch sent again one per message, and one
    /// acknowledgement for everything written.
    async fn answer(
        &self,
        good: Vec<(Delivery, Vec<Reservation>)>,
        refused: &std::collections::HashSet<uuid::Uuid>,
    ) -> anyhow::Result<()> {
        let mut last_written = None;
        for (delivery, rs) in good {
            let alone = rs.len() == 1;
            let bad: Vec<Reservation> = rs
                .into_iter()
                .filter(|r| refused.contains(&r.token))
                .collect();
            if bad.is_empty() {
                last_written = Some(delivery);
            } else if alone {
                delivery
                    .nack(BasicNackOptions {
                        requeue: true,
                        ..Default::default()
                    })
                    .await?;
            } else {
                // Part of a batch: the batch counts as written (its other reservations are
                // orders now).
                self.split_out(&bad).await?;
                last_written = Some(delivery);
            }
        }
        // One acknowledgement for the whole batch: `multiple` covers every delivery of this
        // channel up to the last one written (the refused ones were handed back just above, and
        // batches are handled one after the other).
        if let Some(delivery) = last_written {
            delivery.ack(BasicAckOptions { multiple: true }).await?;
        }
        Ok(())
    }

    /// Publishes each of these reservations alone on the reservations queue, confirmed. Should it
    /// fail, the batch is not acknowledged: it comes back, its written reservations are no-ops.
    async fn split_out(&self, refused: &[Reservation]) -> anyhow::Result<()> {
        let channel = self.broker.channel(&self.topology).await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .context("enabling confirms")?;
        for r in refused {
            let confirm = channel
                .basic_publish(
                    "".into(),
                    self.topology.reservations.as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &encode(std::slice::from_ref(r))?,
                    BasicProperties::default()
                        .with_delivery_mode(2)
                        .with_content_type("application/json".into())
                        .with_message_id(r.token.to_string().into()),
                )
                .await
                .context("publishing a refused reservation alone")?
                .await
                .context("awaiting its confirm")?;
            anyhow::ensure!(
                confirm == Confirmation::Ack(None),
                "the broker did not take a refused reservation: {confirm:?}"
            );
            tracing::warn!(order.token = %r.token, "reservation refused in a batch; sent again alone");
        }
        let _ = channel.close(200, "done".into()).await;
        Ok(())
    }

    /// Inserts the batch and marks its tokens in Redis; returns the tokens that could not become
    /// orders (their activity or user does not exist).
    #[tracing::instrument(name = "commit", skip_all, fields(reservations = batch.len()))]
    async fn write(&self, batch: &[Reservation]) -> Result<Vec<uuid::Uuid>, Failure> {
        let tokens: Vec<uuid::Uuid> = batch.iter().map(|r| r.token).collect();
        let activities: Vec<i64> = batch.iter().map(|r| r.activity_id).collect();
        let users: Vec<i64> = batch.iter().map(|r| r.user_id).collect();
        let quantities: Vec<i32> = batch.iter().map(|r| r.quantity).collect();
        let reserved: Vec<i64> = batch.iter().map(|r| r.reserved_ms).collect();

        let mut tx = crate::infra::db::begin(&self.db).await.map_err(classify)?;
        // The new orders come back from the insert itself; only tokens already orders (a message
        // published twice) or refused (no such sale or user) need a second look.
        let mut rows = order::insert_confirmed(
            &mut tx,
            &tokens,
            &activities,
            &users,
            &quantities,
            &reserved,
        )
        .await
        .map_err(classify)?;
        let inserted = rows.len();
        if inserted < tokens.len() {
            let new: std::collections::HashSet<uuid::Uuid> = rows.iter().map(|p| p.token).collect();
            let others: Vec<uuid::Uuid> = tokens
                .iter()
                .filter(|t| !new.contains(t))
                .copied()
                .collect();
            rows.extend(order::persisted(&mut tx, &others).await.map_err(classify)?);
        }
        tx.commit().await.map_err(classify)?;
        self.metrics.persisted.inc_by(inserted as u64);

        let by_token: HashMap<uuid::Uuid, &order::Persisted> =
            rows.iter().map(|p| (p.token, p)).collect();
        self.mark_in_redis(&rows).await?;
        let due: Vec<(uuid::Uuid, i32)> = rows
            .iter()
            .filter(|p| p.status == OrderStatus::Confirmed.as_str())
            .map(|p| (p.token, p.payment_window_secs))
            .collect();
        self.deadlines.schedule(&due).await;
        Ok(tokens
            .into_iter()
            .filter(|t| !by_token.contains_key(t))
            .collect())
    }

    /// The orders out of Redis: per home shard, their tokens out of the unsettled set (one `ZREM`)
    /// and the owners hash (one `HDEL`), and their reservation records deleted (one `DEL`), in one
    /// pipeline per slot (on a cluster a pipeline goes to one node; a home shard's keys
    /// share its slot). An order's state is the database's from now on: a poll that finds the
    /// token neither unsettled nor with a record of its own asks it (`http/orders.rs`). Three
    /// commands a shard and batch, where each order cost two (`HSET`, `EXPIRE`) before.
    async fn mark_in_redis(&self, rows: &[order::Persisted]) -> Result<(), Failure> {
        let keys = &self.redis.keys;
        let mut by_home: HashMap<String, Settled> = HashMap::new();
        for p in rows {
            if let Some(home) = keys.home_of(&p.token) {
                let settled = by_home.entry(home.unsettled()).or_insert_with(|| Settled {
                    unsettled: home.unsettled(),
                    owners: home.owners(),
                    tokens: Vec::new(),
                    records: Vec::new(),
                });
                settled.tokens.push(p.token.to_string());
                settled.records.push(home.token(&p.token));
            }
        }
        let settled: Vec<Settled> = by_home.into_values().collect();
        self.redis
            .by_slot(
                &settled,
                |s| Some(s.unsettled.clone()),
                |pipe, key, s| {
                    pipe.zrem(key, &s.tokens).ignore();
                    pipe.hdel(&s.owners, &s.tokens).ignore();
                    pipe.del(&s.records).ignore();
                },
            )
            .await
            .map_err(|e| Failure::Outage(anyhow::Error::new(e).context("settling tokens in Redis")))
    }

    async fn consume_dead_letters(&self) -> anyhow::Result<()> {
        let mut open = self
            .open(&self.topology.dead_letters, "dead-letters")
            .await?;
        let consumer = &mut open.consumer;
        while let Some(delivery) = consumer.next().await {
            let delivery = delivery.context("receiving")?;
            match decode(&delivery.data) {
                Ok(rs) => {
                    for r in rs {
                        let mut attempt = 0;
                        while let Err(e) = self.settle_dead_letter(&r).await {
                            tracing::warn!(error = %format!("{e:#}"), order.token = %r.token, "cannot settle dead letter yet");
                            backoff(&mut attempt).await;
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "unreadable dead letter dropped: nothing to return")
                }
            }
            delivery.ack(BasicAckOptions::default()).await?;
        }
        anyhow::bail!("dead-letter consumer ended")
    }

    /// A reservation that could not be persisted: unless an order exists for its token after all,
    /// record it `failed` and return its stock and the user's count (once, whatever is redelivered).
    pub async fn settle_dead_letter(&self, r: &Reservation) -> anyhow::Result<()> {
        let recorded = order::record_failed(
            &self.db,
            r.token,
            r.activity_id,
            r.user_id,
            r.quantity,
            r.reserved_ms,
        )
        .await;
        // No row: the sale or the user does not exist, nothing to record in the database;
        // Redis still gets its stock.
        let status = recorded?;
        match status {
            Some(OrderStatus::Failed) | None => {
                let g = GiveBack {
                    token: r.token,
                    activity_id: r.activity_id,
                    user_id: r.user_id,
                    quantity: r.quantity,
                    status: OrderStatus::Failed.as_str(),
                    reason: "could not be persisted",
                };
                if give_back(&self.redis, &self.sold_out, g).await? {
                    self.metrics.dead_lettered.inc();
                    tracing::warn!(order.token = %r.token, activity.id = r.activity_id, "reservation failed; stock returned");
                }
            }
            // An order exists for this token after all (a duplicate was persisted): nothing to return.
            Some(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::error::{DatabaseError, ErrorKind};
    use std::borrow::Cow;

    /// A PostgreSQL error with its SQLSTATE, as sqlx hands it over.
    #[derive(Debug)]
    struct Sqlstate(&'static str);

    impl std::fmt::Display for Sqlstate {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }

    impl std::error::Error for Sqlstate {}

    impl DatabaseError for Sqlstate {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> ErrorKind {
            ErrorKind::Other
        }
    }

    fn refused(code: &'static str) -> bool {
        matches!(
            classify(sqlx::Error::Database(Box::new(Sqlstate(code)))),
            Failure::Refused(_)
        )
    }

    #[test]
    fn the_data_is_refused_for_good_and_anything_else_is_waited_out() {
        // Integrity (23: unique, foreign key, CHECK) and data (22: out of range) errors: no retry
        // can help, the reservation goes to the dead letters.
        for code in ["23505", "23503", "23514", "22003"] {
            assert!(refused(code), "{code} is refused");
        }
        // The server shutting down (a restart), a serialization failure, too many connections:
        // the batch is held and tried again, never dead-lettered.
        for code in ["57P01", "40001", "53300"] {
            assert!(!refused(code), "{code} is waited out");
        }
        assert!(matches!(
            classify(sqlx::Error::PoolTimedOut),
            Failure::Outage(_)
        ));
    }
}
