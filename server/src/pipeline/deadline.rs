//! Payment deadlines. Each confirmed order gets a delayed message (a TTL queue per payment-window
//! length, dead-lettering into the timeout queue); a sweeper over the database catches any
//! deadline whose message went missing. At the deadline an order still unpaid is cancelled by a
//! conditional update, and only then do its units go back on sale.

use super::giveback::{give_back, GiveBack};
use crate::domain::order;
use crate::{
    buy::soldout::SoldOut,
    infra::{
        broker::{Broker, Topology},
        redis::Redis,
    },
};
use anyhow::Context;
use app::api::OrderStatus;
use futures_util::StreamExt;
use lapin::{options::*, BasicProperties, Channel, Confirmation};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use std::{collections::HashSet, sync::Arc, time::Duration};
use tokio::sync::Mutex;

/// A deadline message: the orders of one persisted batch that share a payment window (one
/// message per window and batch, not per order). `token` is the single-order form earlier
/// versions wrote; both are read.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Due {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<uuid::Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tokens: Vec<uuid::Uuid>,
}

impl Due {
    fn tokens(self) -> impl Iterator<Item = uuid::Uuid> {
        self.token.into_iter().chain(self.tokens)
    }
}

/// A publishing channel and its unconfirmed sequence numbers.
type Publisher = (Channel, HashSet<i32>);

#[derive(Clone)]
pub struct Deadlines {
    pub db: PgPool,
    pub redis: Redis,
    pub sold_out: SoldOut,
    pub broker: Broker,
    pub topology: Topology,
    /// The channel deadlines are published on, with the sequence numbers not yet confirmed.
    publisher: Arc<Mutex<Option<Publisher>>>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Expiry {
    /// This call cancelled the order.
    Cancelled,
    /// Paid, already cancelled, or not an order: nothing to do.
    Settled,
    /// The deadline has not passed.
    NotDue,
}

impl Deadlines {
    pub fn new(
        db: PgPool,
        redis: Redis,
        sold_out: SoldOut,
        broker: Broker,
        topology: Topology,
    ) -> Deadlines {
        Deadlines {
            db,
            redis,
            sold_out,
            broker,
            topology,
            publisher: Arc::default(),
        }
    }

    /// Publishes the delayed messages of newly confirmed orders. A failure is logged, not
    /// raised: the sweeper cancels those orders at their deadline all the same.
    pub async fn schedule(&self, orders: &[(uuid::Uuid, i32)]) {
        if orders.is_empty() {
            return;
        }
        if let Err(e) = self.try_schedule(orders).await {
            *self.publisher.lock().await = None;
            tracing::warn!(error = %format!("{e:#}"), orders = orders.len(), "deadline messages not published; the sweeper will cancel them");
        }
    }

    async fn try_schedule(&self, orders: &[(uuid::Uuid, i32)]) -> anyhow::Result<()> {
        let mut slot = self.publisher.lock().await;
        if slot.as_ref().is_none_or(|(c, _)| !c.status().connected()) {
            let channel = self.broker.channel(&self.topology).await?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await?;
            *slot = Some((channel, HashSet::new()));
        }
        let (channel, declared) = slot.as_mut().expect("set above");
        let mut by_window: std::collections::BTreeMap<i32, Vec<uuid::Uuid>> = Default::default();
        for (token, window) in orders {
            by_window.entry(*window).or_default().push(*token);
        }
        let mut confirms = Vec::with_capacity(by_window.len());
        for (window, tokens) in by_window {
            if declared.insert(window) {
                self.topology
                    .declare_deadline_queue(channel, window)
                    .await?;
            }
            let body = serde_json::to_vec(&Due {
                token: None,
                tokens,
            })?;
            let confirm = channel
                .basic_publish(
                    "".into(),
                    self.topology.deadline_queue(window).as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &body,
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await?;
            confirms.push(confirm);
        }
        for confirm in confirms {
            match tokio::time::timeout(Duration::from_secs(10), confirm)
                .await
                .context("confirm timed out")??
            {
                Confirmation::Ack(None) => {}
                other => anyhow::bail!("deadline message not taken: {other:?}"),
            }
        }
        Ok(())
    }

    /// Cancels the order if it is still unpaid past its deadline, and returns its units once.
    pub async fn expire(&self, token: uuid::Uuid) -> anyhow::Result<Expiry> {
        let cancelled = order::cancel_if_overdue(&self.db, token).await?;

        let current = order::state_of(&self.db, token).await?;
        match current {
            // Cancelled now or by an earlier attempt that died before Redis: return the units (once).
            Some((OrderStatus::Cancelled, activity_id, user_id, quantity)) => {
                let g = GiveBack {
                    token,
                    activity_id,
                    user_id,
                    quantity,
                    status: OrderStatus::Cancelled.as_str(),
                    reason: "payment window closed",
                };
                give_back(&self.redis, &self.sold_out, g).await?;
                order::units_returned(&self.db, token).await?;
                if cancelled {
                    tracing::info!(order.token = %token, activity.id = activity_id, "unpaid order cancelled; stock returned");
                    return Ok(Expiry::Cancelled);
                }
                Ok(Expiry::Settled)
            }
            Some((OrderStatus::Confirmed, ..)) => Ok(Expiry::NotDue),
            _ => Ok(Expiry::Settled),
        }
    }

    /// Consumes the timeout queue until the process ends.
    pub async fn run_timeouts(self, consumer_tag: String) {
        loop {
            if let Err(e) = self.consume_timeouts(&consumer_tag).await {
                tracing::warn!(error = %format!("{e:#}"), "deadline consumer lost its channel; reconnecting");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    async fn consume_timeouts(&self, tag: &str) -> anyhow::Result<()> {
        let mut open = self
            .broker
            .consume(
                &self.topology,
                &self.topology.timeouts,
                &format!("{tag}-deadlines"),
                200,
            )
            .await?;
        let consumer = &mut open.consumer;
        while let Some(delivery) = consumer.next().await {
            let delivery = delivery?;
            match serde_json::from_slice::<Due>(&delivery.data) {
                Ok(due) => {
                    for token in due.tokens() {
                        let mut attempt = 0u32;
                        while let Err(e) = self.expire(token).await {
                            tracing::warn!(error = %format!("{e:#}"), order.token = %token, "cannot settle a deadline yet");
                            attempt = (attempt + 1).min(6);
                            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                        }
                    }
                }
                Err(e) => tracing::error!(error = %e, "unreadable deadline message dropped"),
            }
            delivery.ack(BasicAckOptions::default()).await?;
        }
        anyhow::bail!("deadline consumer ended")
    }

    /// The backstop: cancels overdue orders whose message went missing, and finishes
    /// cancellations that died between the database and Redis.
    pub async fn run_sweeper(self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            if let Err(e) = self.sweep().await {
                tracing::warn!(error = %format!("{e:#}"), "deadline sweep failed");
            }
        }
    }

    pub async fn sweep(&self) -> anyhow::Result<usize> {
        let overdue = order::overdue(&self.db).await?;
        let mut cancelled = 0;
        for token in overdue {
            if self.expire(token).await? == Expiry::Cancelled {
                cancelled += 1;
            }
        }
        if cancelled > 0 {
            tracing::info!(cancelled, "sweeper cancelled overdue orders");
        }
        Ok(cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::Due;

    #[test]
    fn both_message_forms_are_read() {
        let a = uuid::Uuid::new_v4();
        let b = uuid::Uuid::new_v4();
        let old: Due = serde_json::from_str(&format!(r#"{{"token":"{a}"}}"#)).unwrap();
        assert_eq!(old.tokens().collect::<Vec<_>>(), vec![a]);
        let written = serde_json::to_string(&Due {
            token: None,
            tokens: vec![a, b],
        })
        .unwrap();
        assert_eq!(written, format!(r#"{{"tokens":["{a}","{b}"]}}"#));
        let new: Due = serde_json::from_str(&written).unwrap();
        assert_eq!(new.tokens().collect::<Vec<_>>(), vec![a, b]);
    }
}
