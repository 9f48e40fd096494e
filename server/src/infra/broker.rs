//! The RabbitMQ connection. When it is lost (or there is none yet: RabbitMQ was down at
//! start-up), the next caller opens a new one, so the server starts anyway and `/readyz` says what
//! is missing. lapin's own recovery is off: after a hard connection error from RabbitMQ 3.10 it
//! stayed "reconnecting" for good (seen under the bench), while every user of the broker here
//! already re-opens its channel after an error.
//!
//! `AMQP_URL` may name several nodes of a RabbitMQ cluster, comma-separated. A connection goes to
//! one of them (each process starts at a different one, spreading connections); when that node
//! dies, the next caller connects to the next node that answers. The queues are quorum queues
//! with a member on every node, so any live node serves them.

use anyhow::Context;
use lapin::{
    options::{BasicConsumeOptions, BasicQosOptions},
    protocol::constants::REPLY_SUCCESS,
    types::FieldTable,
    Connection, ConnectionProperties,
};
use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::sync::Mutex;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Clone)]
pub struct Broker {
    urls: Arc<[String]>,
    /// The node to try first: the one of the live connection, or the next after a failure.
    next: Arc<AtomicUsize>,
    conn: Arc<Mutex<Option<Arc<Connection>>>>,
    /// Held while a channel declares the topology: one declaration at a time per process.
    declaring: Arc<Mutex<()>>,
}

impl Broker {
    /// `urls`: one AMQP URL, or several (the nodes of a cluster) separated by commas.
    pub fn new(urls: &str) -> Broker {
        let urls: Arc<[String]> = urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(String::from)
            .collect();
        let start = rand::random_range(0..urls.len().max(1));
        Broker {
            urls,
            next: Arc::new(AtomicUsize::new(start)),
            conn: Arc::new(Mutex::new(None)),
            declaring: Arc::new(Mutex::new(())),
        }
    }

    /// The live connection, opening one if there is none or the last one is not connected.
    pub async fn connection(&self) -> anyhow::Result<Arc<Connection>> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            if conn.status().connected() {
                return Ok(conn.clone());
            }
        }
        if slot.take().is_some() && self.urls.len() > 1 {
            // The node of the lost connection is tried last.
            self.next.fetch_add(1, Ordering::Relaxed);
        }
        anyhow::ensure!(!self.urls.is_empty(), "AMQP_URL names no node");
        let first = self.next.load(Ordering::Relaxed);
        let mut failure = None;
        for step in 0..self.urls.len() {
            let index = (first + step) % self.urls.len();
            let props = ConnectionProperties::default().with_connection_name("seckill".into());
            let attempt = tokio::time::timeout(
                CONNECT_TIMEOUT,
                Connection::connect(&self.urls[index], props),
            )
            .await
            .context("connecting to RabbitMQ timed out")
            .and_then(|r| r.context("connecting to RabbitMQ"));
            match attempt {
                Ok(conn) => {
                    self.next.store(index, Ordering::Relaxed);
                    let conn = Arc::new(conn);
                    *slot = Some(conn.clone());
                    return Ok(conn);
                }
                Err(e) => {
                    if self.urls.len() > 1 {
                        tracing::warn!(error = %e, node = index, "RabbitMQ node unavailable; trying the next");
                    }
                    failure = Some(e);
                }
            }
        }
        Err(failure.expect("at least one node was tried"))
    }

    /// A fresh channel on the live connection, with this deployment's queues declared.
    ///
    /// The declarations of a process are made one at a time. RabbitMQ 3.10 answers a quorum
    /// queue's second declaration as soon as the first has written the queue down, before its
    /// Raft member runs; a consumer that then subscribes crashes its channel (`noproc` in
    /// `rabbit_quorum_queue:consume`), and RabbitMQ closes the whole connection with
    /// `INTERNAL_ERROR`, taking every channel of the process with it: the relay's confirms too.
    /// The relay, the persisters and the deadline consumer start together and each declares the
    /// topology: in turn, only the first creates the queues, and it returns once they run.
    pub async fn channel(&self, topology: &Topology) -> anyhow::Result<lapin::Channel> {
        let channel = self
            .connection()
            .await?
            .create_channel()
            .await
            .context("opening a channel")?;
        let _one_at_a_time = self.declaring.lock().await;
        topology
            .declare(&channel)
            .await
            .context("declaring the topology")?;
        Ok(channel)
    }

    /// A consumer of `queue` on a fresh channel with `prefetch` deliveries in hand. The channel
    /// is closed when the returned [`Consuming`] is dropped, and also when this future is
    /// dropped before it is ready (see [`Consuming`]).
    pub async fn consume(
        &self,
        topology: &Topology,
        queue: &str,
        tag: &str,
        prefetch: u16,
    ) -> anyhow::Result<Consuming> {
        let channel = CloseOnDrop(self.channel(topology).await?);
        channel
            .0
            .basic_qos(prefetch, BasicQosOptions::default())
            .await
            .context("setting the prefetch")?;
        let consumer = channel
            .0
            .basic_consume(
                queue.into(),
                tag.into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .context("starting the consumer")?;
        Ok(Consuming {
            consumer,
            _channel: channel,
        })
    }

    /// Ready means connected now.
    pub async fn check(&self) -> anyhow::Result<()> {
        let conn = self.connection().await?;
        anyhow::ensure!(conn.status().connected(), "RabbitMQ connection is not open");
        Ok(())
    }
}

/// A consuming channel, closed when dropped, however its holder ends: returned, failed, or
/// aborted at any await. lapin keeps a channel open while anything of it is alive, and a
/// `basic_consume` whose future is dropped before the broker's answer still registers the
/// consumer on the channel: the broker then delivers to a consumer nobody reads, and what it
/// delivered waits unacknowledged until the connection closes (seen: a persister aborted while
/// starting held a reservation back for good). Closing the channel hands every delivery it
/// held back to the queue.
pub struct Consuming {
    pub consumer: lapin::Consumer,
    /// Dropped after the consumer (fields drop in order).
    _channel: CloseOnDrop,
}

struct CloseOnDrop(lapin::Channel);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        let channel = self.0.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // Already closed with its connection: nothing left to hand back.
                let _ = channel.close(REPLY_SUCCESS, "consumer done".into()).await;
            });
        }
    }
}

/// Names of this deployment's exchanges and queues.
#[derive(Clone, Debug)]
pub struct Topology {
    /// The first reservations queue (the only one unless more are configured).
    pub reservations: String,
    /// Every reservations queue: `reservations`, then `reservations.1`… Each stock shard's
    /// journal goes to one of them (`reservation_queue_of`), so their leaders, spread over the
    /// nodes of a cluster, share the reservations as the Redis masters share the stock.
    pub reservation_queues: Vec<String>,
    pub dead_letters: String,
    pub dead_letter_exchange: String,
    /// Idle queues are deleted after this long (tests use it; production leaves it unset).
    pub expires_ms: Option<u32>,
    /// Deliveries of one message before it is dead-lettered.
    pub delivery_limit: u32,
    /// Expired payment deadlines are dead-lettered through this exchange into `timeouts`.
    pub deadline_exchange: String,
    pub timeouts: String,
    prefix: String,
}

impl Topology {
    pub fn new(prefix: &str, expires_ms: Option<u32>) -> Topology {
        Topology {
            reservations: format!("{prefix}.reservations"),
            reservation_queues: vec![format!("{prefix}.reservations")],
            dead_letters: format!("{prefix}.reservations.dead"),
            dead_letter_exchange: format!("{prefix}.dlx"),
            expires_ms,
            delivery_limit: 5,
            deadline_exchange: format!("{prefix}.deadlines"),
            timeouts: format!("{prefix}.timeouts"),
            prefix: prefix.to_string(),
        }
    }

    /// The same names with `queues` reservations queues (at least one).
    #[must_use]
    pub fn with_reservation_queues(mut self, queues: usize) -> Topology {
        self.reservation_queues = (0..queues.max(1))
            .map(|k| match k {
                0 => self.reservations.clone(),
                k => format!("{}.{k}", self.reservations),
            })
            .collect();
        self
    }

    /// The reservations queue a journal's entries are published on: fixed per journal (per stock
    /// shard), and the shards of a sale spread over the queues as their slots are over the masters.
    pub fn reservation_queue_of(&self, journal: &str) -> &str {
        let n = self.reservation_queues.len();
        &self.reservation_queues[usize::from(super::keys::slot(journal)) % n]
    }

    /// The delay queue for one payment-window length. All its messages share one TTL, so they
    /// expire in order at the head, which is where a quorum queue dead-letters them.
    pub fn deadline_queue(&self, window_secs: i32) -> String {
        format!("{}.deadline.{window_secs}s", self.prefix)
    }

    fn quorum(&self) -> lapin::types::FieldTable {
        use lapin::types::{AMQPValue, FieldTable};
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        if let Some(ms) = self.expires_ms {
            args.insert("x-expires".into(), AMQPValue::LongUInt(ms));
        }
        args
    }

    /// Declares the delay queue of one window length (idempotent).
    pub async fn declare_deadline_queue(
        &self,
        channel: &lapin::Channel,
        window_secs: i32,
    ) -> lapin::Result<String> {
        use lapin::{options::*, types::AMQPValue};
        let name = self.deadline_queue(window_secs);
        let mut args = self.quorum();
        args.insert(
            "x-message-ttl".into(),
            AMQPValue::LongLongInt(i64::from(window_secs) * 1000),
        );
        args.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(self.deadline_exchange.as_str().into()),
        );
        args.insert(
            "x-dead-letter-routing-key".into(),
            AMQPValue::LongString(self.timeouts.as_str().into()),
        );
        args.insert(
            "x-dead-letter-strategy".into(),
            AMQPValue::LongString("at-least-once".into()),
        );
        args.insert(
            "x-overflow".into(),
            AMQPValue::LongString("reject-publish".into()),
        );
        channel
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                args,
            )
            .await?;
        Ok(name)
    }

    /// Declares everything (idempotent): a durable quorum queue that dead-letters at-least-once
    /// after the delivery limit (RabbitMQ 3.10 has no default limit: a poison message would loop),
    /// a durable quorum queue for the dead letters, and the queue of payment deadlines.
    pub async fn declare(&self, channel: &lapin::Channel) -> lapin::Result<()> {
        declare_exchange(channel, &self.dead_letter_exchange).await?;
        for (k, queue) in self.reservation_queues.iter().enumerate() {
            declare_queue(channel, queue, self.reservations_arguments(k > 0)).await?;
        }
        declare_queue(channel, &self.dead_letters, self.quorum()).await?;
        bind(channel, &self.dead_letters, &self.dead_letter_exchange).await?;
        declare_exchange(channel, &self.deadline_exchange).await?;
        declare_queue(channel, &self.timeouts, self.quorum()).await?;
        bind(channel, &self.timeouts, &self.deadline_exchange).await?;
        Ok(())
    }

    /// The reservations queue: quorum, dead-lettered at-least-once after the delivery limit,
    /// refusing publishes when full (the relay keeps the entries in the journal then). The
    /// queues after the first are led by the node with the fewest leaders, not all by the node
    /// of the instance that declared them first (not the first queue: a queue declared again with
    /// other arguments is refused, and the first one predates the others).
    fn reservations_arguments(&self, balanced: bool) -> lapin::types::FieldTable {
        use lapin::types::AMQPValue;
        let mut args = self.quorum();
        let text = |s: &str| AMQPValue::LongString(s.into());
        args.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongUInt(self.delivery_limit),
        );
        args.insert(
            "x-dead-letter-exchange".into(),
            text(&self.dead_letter_exchange),
        );
        args.insert("x-dead-letter-routing-key".into(), text(&self.dead_letters));
        args.insert("x-dead-letter-strategy".into(), text("at-least-once"));
        args.insert("x-overflow".into(), text("reject-publish"));
        if balanced {
            args.insert("x-queue-leader-locator".into(), text("balanced"));
        }
        args
    }
}

async fn declare_exchange(channel: &lapin::Channel, name: &str) -> lapin::Result<()> {
    use lapin::{options::ExchangeDeclareOptions, types::FieldTable, ExchangeKind};
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    channel
        .exchange_declare(
            name.into(),
            ExchangeKind::Direct,
            durable,
            FieldTable::default(),
        )
        .await
}

async fn declare_queue(
    channel: &lapin::Channel,
    name: &str,
    args: lapin::types::FieldTable,
) -> lapin::Result<()> {
    use lapin::options::QueueDeclareOptions;
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    channel
        .queue_declare(name.into(), durable, args)
        .await
        .map(drop)
}

/// The queue bound to the exchange by its own name.
async fn bind(channel: &lapin::Channel, queue: &str, exchange: &str) -> lapin::Result<()> {
    use lapin::{options::QueueBindOptions, types::FieldTable};
    channel
        .queue_bind(
            queue.into(),
            exchange.into(),
            queue.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
}

/// AMQP headers of one text value (a message's `traceparent`).
pub fn text_header(name: &str, value: &str) -> lapin::types::FieldTable {
    let mut headers = lapin::types::FieldTable::default();
    headers.insert(
        name.into(),
        lapin::types::AMQPValue::LongString(value.into()),
    );
    headers
}

/// A text header of a delivery, if it has one.
pub fn header_text(delivery: &lapin::message::Delivery, name: &str) -> Option<String> {
    let headers = delivery.properties.headers().as_ref()?;
    match headers.inner().get(name)? {
        lapin::types::AMQPValue::LongString(text) => {
            Some(String::from_utf8_lossy(text.as_bytes()).into_owned())
        }
        _ => None,
    }
}
