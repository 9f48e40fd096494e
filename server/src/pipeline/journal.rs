//! The relay: reservations go from the Redis journals (a stream per stock shard of each sale)
//! to RabbitMQ. A journal entry is
//! acknowledged (and deleted) only after the broker confirmed the message; entries a crashed or
//! cut-off relay left pending are re-claimed after a while by whichever relay runs. A message may
//! thus be published twice; the persister is idempotent on the token.
//!
//! Only entries already on a replica are published: a master cut off with a minority journals
//! reservations that its replica never gets (their buys were answered `503`), and the failover
//! discards them; published, they would become orders the new master's stock never
//! counted (sold twice, a shopper past the limit, the last `202`s refused by the database). So
//! after each read the relay confirms the journal's slot as the gate does
//! (`infra/replication.rs`); unconfirmed entries stay pending and are read again once idle. A
//! master with no replica connected at all is taken at its word, as the gate takes it.
//!
//! One message carries up to [`PER_MESSAGE`] reservations of one journal (a JSON array): a quorum
//! queue's cost is per message (its Raft log, its confirm, its delivery and acknowledgement), not
//! per byte. The persister splits a batch in which PostgreSQL refuses a reservation, so that only
//! that reservation goes the way of the dead letters.

use crate::domain::activity;
use crate::infra::{
    broker::{self, Broker, Topology},
    metrics::Metrics,
    redis::Redis,
    replication::{Confirmed, Replication, Witness},
    telemetry,
};
use anyhow::Context;
use lapin::{options::*, BasicProperties, Channel, Confirmation, PublisherConfirm};
use redis::{
    streams::{StreamAutoClaimReply, StreamId, StreamReadReply},
    Value,
};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use std::{
    collections::{HashSet, VecDeque},
    sync::Arc,
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

const GROUP: &str = "relay";
const BATCH: usize = 2_000;
/// Entries pending longer than this are taken over from their (presumably dead) relay.
const RECLAIM_IDLE_MS: u64 = 5_000;
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// Reservations per AMQP message.
pub const PER_MESSAGE: usize = 250;

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

/// A message's reservations: a JSON array, or one JSON object (the form of earlier versions, and
/// of a reservation split out of a refused batch).
pub fn decode(body: &[u8]) -> serde_json::Result<Vec<Reservation>> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => serde_json::from_slice(body),
        _ => serde_json::from_slice(body).map(|r| vec![r]),
    }
}

/// The body of a message of these reservations (one alone is sent as an object).
pub fn encode(reservations: &[Reservation]) -> serde_json::Result<Vec<u8>> {
    match reservations {
        [one] => serde_json::to_vec(one),
        many => serde_json::to_vec(many),
    }
}

/// A reservation read from a journal, with the W3C traceparent of its buy when it was traced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Journaled {
    pub reservation: Reservation,
    pub traceparent: Option<String>,
}

/// What one journal entry holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// Its reservations, in the order they were granted.
    pub reservations: Vec<Journaled>,
    /// Lines of a batch entry that could not be read (only the scripts write here: a bug).
    pub unreadable: usize,
}

/// A journal entry's reservations. An entry of this release (`gate.lua`, `lend.lua`) is one
/// script call's: `activity_id`, and `reservations`, a line `token user quantity reserved_ms`
/// (then the traceparent when traced) per reservation. An entry of releases before, which the
/// release before's gates still write during a rolling upgrade, is one reservation, a field each.
pub fn read_entry(entry: &StreamId) -> Entry {
    let Some(lines) = field::<String>(entry, "reservations") else {
        let traceparent = field::<String>(entry, "traceparent");
        return match per_buy(entry) {
            Some(reservation) => Entry {
                reservations: vec![Journaled {
                    reservation,
                    traceparent,
                }],
                unreadable: 0,
            },
            None => Entry {
                reservations: Vec::new(),
                unreadable: 1,
            },
        };
    };
    let activity_id = field::<i64>(entry, "activity_id");
    let mut read = Entry::default();
    for line in lines.split('\n') {
        match activity_id.and_then(|activity_id| line_of(activity_id, line)) {
            Some(journaled) => read.reservations.push(journaled),
            None => read.unreadable += 1,
        }
    }
    read
}

fn line_of(activity_id: i64, line: &str) -> Option<Journaled> {
    let mut parts = line.split(' ');
    let reservation = Reservation {
        token: parts.next()?.parse().ok()?,
        activity_id,
        user_id: parts.next()?.parse().ok()?,
        quantity: parts.next()?.parse().ok()?,
        reserved_ms: parts.next()?.parse().ok()?,
    };
    let traceparent = parts.next().map(str::to_string);
    if parts.next().is_some() {
        return None;
    }
    Some(Journaled {
        reservation,
        traceparent,
    })
}

/// An entry of releases before batch entries: one reservation, a field each.
fn per_buy(entry: &StreamId) -> Option<Reservation> {
    Some(Reservation {
        token: field(entry, "token")?,
        activity_id: field(entry, "activity_id")?,
        user_id: field(entry, "user_id")?,
        quantity: field(entry, "quantity")?,
        reserved_ms: field(entry, "reserved_ms")?,
    })
}

#[derive(Clone)]
pub struct Relay {
    pub db: PgPool,
    /// `ack.lua`: XACK, then trim the journal below what is still unconfirmed.
    pub ack: &'static redis::Script,
    pub redis: Redis,
    pub broker: Broker,
    pub topology: Topology,
    pub metrics: Arc<Metrics>,
    pub consumer: String,
    /// Confirms that what was read is on a replica before it is published.
    pub replication: Replication,
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

fn due(at: Option<Instant>, every: Duration, now: Instant) -> bool {
    at.is_none_or(|t| now.saturating_duration_since(t) >= every)
}

/// How often the hot journals' pending entries are looked at for re-claiming.
const RECLAIM_EVERY: Duration = Duration::from_secs(1);

impl Journals {
    /// The journals one round reads, each with whether the entries a failed round or a dead relay
    /// left pending are re-claimed first: the hot ones every round (re-claimed each second), the
    /// cold ones every `COLD_EVERY` and re-claimed each time. A cold journal's re-claim must not
    /// hang on its round falling in the same round as the hot journals' second: the two drift
    /// apart, and an entry left pending in a cold journal would wait there for as long.
    fn plan(&mut self, now: Instant) -> Vec<(String, bool)> {
        let reclaim = due(self.reclaimed_at, RECLAIM_EVERY, now);
        if reclaim {
            self.reclaimed_at = Some(now);
        }
        let mut round: Vec<(String, bool)> =
            self.hot.iter().map(|j| (j.clone(), reclaim)).collect();
        if due(self.cold_read_at, COLD_EVERY, now) {
            self.cold_read_at = Some(now);
            round.extend(self.cold.iter().map(|j| (j.clone(), true)));
        }
        round
    }
}

/// Rounds published and awaiting their confirms at once: the next round is read and published
/// while the broker writes the last one to its log.
const ROUNDS_IN_FLIGHT: usize = 3;

/// One message published, awaiting its confirm.
struct Message {
    /// Its journal's index in the round's `done`.
    journal: usize,
    /// The journal entries it carries reservations of (whole or in part), in order.
    ids: Vec<String>,
    reservations: usize,
    confirm: PublisherConfirm,
}

/// One round's messages, published, awaiting the broker's confirms before their journal entries
/// are acknowledged.
struct Round {
    pending: Vec<Message>,
    /// Per journal, the entries to acknowledge (unreadable ones from the start).
    done: Vec<(String, Vec<String>)>,
    /// When its last message was published (for the confirm's latency).
    published: Instant,
}

impl Relay {
    /// Relays until `stop`, then settles the rounds it has published (their entries acknowledged
    /// once confirmed; a round that fails stays pending and is re-claimed) and returns.
    pub async fn run(self, stop: CancellationToken) {
        let mut channel: Option<Channel> = None;
        let mut journals = Journals::default();
        let mut rounds: VecDeque<Round> = VecDeque::new();
        loop {
            if stop.is_cancelled() {
                while let Some(round) = rounds.pop_front() {
                    if let Err(e) = self.settle(round).await {
                        tracing::warn!(error = %format!("{e:#}"), "a round not settled at shutdown; its entries are re-claimed");
                    }
                }
                return;
            }
            let sent = if rounds.len() < ROUNDS_IN_FLIGHT {
                self.send(&mut channel, &mut journals).await
            } else {
                Ok(None)
            };
            let stepped = match sent {
                Ok(Some(round)) => {
                    rounds.push_back(round);
                    Ok(())
                }
                // Nothing new, or enough in flight: settle the oldest round, else rest.
                Ok(None) => match rounds.pop_front() {
                    Some(round) => self.settle(round).await,
                    None => {
                        tokio::select! {
                            () = tokio::time::sleep(IDLE_PAUSE) => {}
                            () = stop.cancelled() => {}
                        }
                        Ok(())
                    }
                },
                Err(e) => Err(e),
            };
            if let Err(e) = stepped {
                tracing::warn!(error = %format!("{e:#}"), "relay step failed; retrying");
                channel = None;
                // Their entries stay pending and are re-claimed (`RECLAIM_IDLE_MS`).
                rounds.clear();
                // A Redis that lost its data lost the groups too.
                journals.grouped.clear();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    async fn list(&self, journals: &mut Journals) -> anyhow::Result<()> {
        let sales = activity::journal_sales(&self.db)
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
                    .flat_map(|s| s.journals()),
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

    /// Reads one round over the journals and publishes it; `None` when no journal had anything.
    async fn send(
        &self,
        channel: &mut Option<Channel>,
        journals: &mut Journals,
    ) -> anyhow::Result<Option<Round>> {
        if channel.as_ref().is_none_or(|c| !c.status().connected()) {
            *channel = Some(self.channel().await?);
        }
        let channel = channel.as_ref().expect("set above");
        let batches = self.read_round(journals).await?;
        if batches.is_empty() {
            return Ok(None);
        }
        self.publish(channel, &batches).await.map(Some)
    }

    /// One round's entries, per journal that had any: the hot journals each time, the cold ones
    /// every `COLD_EVERY`, and each second the entries another relay read and never acknowledged.
    async fn read_round(
        &self,
        journals: &mut Journals,
    ) -> anyhow::Result<Vec<(String, Vec<StreamId>)>> {
        let now = Instant::now();
        if due(journals.listed_at, LIST_EVERY, now) {
            self.list(journals).await?;
        }
        let round = journals.plan(now);
        for (journal, _) in &round {
            if !journals.grouped.contains(journal) {
                self.ensure_group(journal).await?;
                journals.grouped.insert(journal.clone());
            }
        }
        let reads = round.iter().map(|(journal, reclaim)| async move {
            let mut entries = if *reclaim {
                self.read(journal, true).await?
            } else {
                Vec::new()
            };
            if entries.is_empty() {
                entries = self.read(journal, false).await?;
            }
            anyhow::Ok((journal.clone(), entries))
        });
        let mut read = Vec::new();
        for one in futures_util::future::join_all(reads).await {
            let (journal, entries) = one?;
            if !entries.is_empty() {
                read.push((journal, entries));
            }
        }
        let confirms = read.iter().map(|(journal, entries)| {
            // The newest entry read: the node the wait asks must hold it (and so the rest), by its
            // content, which names tokens no other entry has (a deposed master and the replica
            // promoted in its place each number their entries from the clock: ids can meet).
            let (newest, holding) = entries.last().map_or(("0-0", String::new()), |e| {
                let holding = field::<String>(e, "reservations").or_else(|| field(e, "token"));
                (e.id.as_str(), holding.unwrap_or_default())
            });
            self.replication
                .confirm(Witness::entry(journal.clone(), newest, holding))
        });
        let confirmed = futures_util::future::join_all(confirms).await;
        let mut batches = Vec::new();
        for ((journal, entries), confirmed) in read.into_iter().zip(confirmed) {
            match confirmed {
                // A master with no replica connected at all answers its buys as a single Redis
                // does (`infra/replication.rs`): its entries go on as its answers did. A deposed
                // one's entries (`Deposed`) are held like those not on a replica yet.
                Ok(Confirmed::Replicated | Confirmed::NoReplica) => {
                    batches.push((journal, entries));
                }
                other => {
                    // Pending, read again once idle (`RECLAIM_IDLE_MS`).
                    self.metrics.relay_held.inc();
                    tracing::warn!(journal, entries = entries.len(), outcome = ?other, "journal entries not on a replica yet; held back");
                }
            }
        }
        if due(journals.lag_at, Duration::from_secs(1), now) {
            journals.lag_at = Some(now);
            let names: Vec<String> = round.into_iter().map(|(journal, _)| journal).collect();
            self.metrics.journal_lag.set(self.lag(&names).await?);
        }
        Ok(batches)
    }

    /// Publishes the entries' reservations, up to `PER_MESSAGE` a message, without awaiting the
    /// confirms; entries with nothing readable are only acknowledged. An entry whose reservations
    /// span two messages is acknowledged only once both are confirmed (`settle`).
    async fn publish(
        &self,
        channel: &Channel,
        batches: &[(String, Vec<StreamId>)],
    ) -> anyhow::Result<Round> {
        let mut pending = Vec::new();
        let mut done: Vec<(String, Vec<String>)> = Vec::new();
        for (journal, entries) in batches {
            let mut unreadable = Vec::new();
            let mut readable: Vec<(&str, Journaled)> = Vec::with_capacity(entries.len());
            for entry in entries {
                let read = read_entry(entry);
                if read.unreadable > 0 {
                    // Only the gate scripts write here; an unreadable line cannot become an order.
                    tracing::error!(journal.id = %entry.id, lines = read.unreadable, "unreadable journal lines dropped");
                }
                if read.reservations.is_empty() {
                    unreadable.push(entry.id.clone());
                }
                readable.extend(
                    read.reservations
                        .into_iter()
                        .map(|r| (entry.id.as_str(), r)),
                );
            }
            for chunk in readable.chunks(PER_MESSAGE) {
                let mut ids: Vec<String> = chunk.iter().map(|(id, _)| id.to_string()).collect();
                ids.dedup();
                let reservations: Vec<Reservation> =
                    chunk.iter().map(|(_, r)| r.reservation.clone()).collect();
                let traced: Vec<&str> = chunk
                    .iter()
                    .filter_map(|(_, r)| r.traceparent.as_deref())
                    .collect();
                let queue = self.topology.reservation_queue_of(journal);
                let span = tracing::info_span!("relay", reservations = traced.len());
                telemetry::follow_batch(&span, &traced);
                let confirm = self
                    .publish_one(channel, queue, &reservations, &span)
                    .instrument(span.clone())
                    .await?;
                pending.push(Message {
                    journal: done.len(),
                    ids,
                    reservations: reservations.len(),
                    confirm,
                });
            }
            done.push((journal.to_string(), unreadable));
        }
        Ok(Round {
            pending,
            done,
            published: Instant::now(),
        })
    }

    /// One persistent message of reservations on a reservations queue, named by its first token;
    /// when traced, its `traceparent` header names the relay's span (`span`).
    async fn publish_one(
        &self,
        channel: &Channel,
        queue: &str,
        reservations: &[Reservation],
        span: &tracing::Span,
    ) -> anyhow::Result<PublisherConfirm> {
        let mut properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".into())
            .with_message_id(reservations[0].token.to_string().into());
        let traceparent = telemetry::traceparent(span);
        if !traceparent.is_empty() {
            properties = properties.with_headers(broker::text_header("traceparent", &traceparent));
        }
        channel
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                &encode(reservations)?,
                properties,
            )
            .await
            .context("publishing")
    }

    /// Awaits a round's confirms, then acknowledges (and deletes) its confirmed journal entries.
    async fn settle(&self, round: Round) -> anyhow::Result<()> {
        let Round {
            pending,
            mut done,
            published,
        } = round;
        let confirms = !pending.is_empty();
        let mut failed = 0;
        let mut taken = Vec::new();
        let mut not_taken: HashSet<String> = HashSet::new();
        let mut relayed = 0;
        for message in pending {
            match tokio::time::timeout(CONFIRM_TIMEOUT, message.confirm).await {
                Ok(Ok(Confirmation::Ack(None))) => {
                    relayed += message.reservations;
                    taken.push((message.journal, message.ids));
                }
                Ok(Ok(other)) => {
                    failed += message.reservations;
                    tracing::warn!(journal.id = %message.ids[0], reservations = message.reservations, confirmation = ?other, "broker did not take the reservations");
                    not_taken.extend(message.ids);
                }
                Ok(Err(e)) => return Err(e).context("awaiting a confirm"),
                Err(_) => anyhow::bail!("no confirm from RabbitMQ within {CONFIRM_TIMEOUT:?}"),
            }
        }
        if confirms {
            self.metrics
                .publish_confirm
                .observe(published.elapsed().as_secs_f64());
        }
        // An entry is acknowledged once every message carrying its reservations is confirmed.
        for (journal, ids) in taken {
            done[journal]
                .1
                .extend(ids.into_iter().filter(|id| !not_taken.contains(id)));
        }
        for (journal, ids) in done.iter_mut().filter(|(_, ids)| !ids.is_empty()) {
            ids.dedup();
            let _: i64 = self
                .ack
                .key(&*journal)
                .arg(GROUP)
                .arg(&*ids)
                .invoke_async(&mut self.redis.conn())
                .await
                .context("acknowledging journal entries")?;
        }
        self.metrics.relayed.inc_by(relayed as u64);
        if failed > 0 {
            anyhow::bail!(
                "{failed} reservations were not confirmed; they stay pending and will be re-sent"
            );
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(n: u128) -> Reservation {
        Reservation {
            token: uuid::Uuid::from_u128(n),
            activity_id: 7,
            user_id: n as i64,
            quantity: 1,
            reserved_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn a_message_carries_one_reservation_or_a_batch() {
        let one = vec![reservation(1)];
        let body = encode(&one).unwrap();
        assert_eq!(
            body[0], b'{',
            "one alone is an object, as earlier versions wrote"
        );
        assert_eq!(decode(&body).unwrap(), one);

        let many: Vec<Reservation> = (1..=PER_MESSAGE as u128).map(reservation).collect();
        let body = encode(&many).unwrap();
        assert_eq!(body[0], b'[');
        assert_eq!(decode(&body).unwrap(), many);

        assert_eq!(decode(b"  [ ]").unwrap(), Vec::<Reservation>::new());
        assert!(decode(b"{\"token\": 1}").is_err());
        assert!(decode(b"not json").is_err());
    }

    fn entry(fields: &[(&str, Value)]) -> StreamId {
        StreamId {
            id: "1-0".into(),
            map: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            ..Default::default()
        }
    }

    fn one(reservation: Reservation, traceparent: Option<&str>) -> Entry {
        Entry {
            reservations: vec![Journaled {
                reservation,
                traceparent: traceparent.map(str::to_string),
            }],
            unreadable: 0,
        }
    }

    #[test]
    fn an_entry_of_the_release_before_reads_as_its_reservation_whatever_form_redis_gives_each_field(
    ) {
        let token = uuid::Uuid::from_u128(9);
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let full = entry(&[
            ("token", bulk(&token.to_string())),
            ("activity_id", Value::SimpleString("7".into())),
            ("user_id", Value::Int(42)),
            ("quantity", bulk("2")),
            ("reserved_ms", bulk("1700000000000")),
        ]);
        let expected = Reservation {
            token,
            activity_id: 7,
            user_id: 42,
            quantity: 2,
            reserved_ms: 1_700_000_000_000,
        };
        assert_eq!(read_entry(&full), one(expected.clone(), None));
        let mut traced = full.clone();
        traced.map.insert("traceparent".into(), bulk("00-ab-cd-01"));
        assert_eq!(read_entry(&traced), one(expected, Some("00-ab-cd-01")));
        // A field missing, unreadable or of another type: no reservation, not a made-up one.
        let unreadable = Entry {
            reservations: Vec::new(),
            unreadable: 1,
        };
        let mut missing = full.clone();
        missing.map.remove("quantity");
        assert_eq!(read_entry(&missing), unreadable);
        let mut garbled = full.clone();
        garbled.map.insert("user_id".into(), bulk("forty-two"));
        assert_eq!(read_entry(&garbled), unreadable);
        let mut nil = full;
        nil.map.insert("activity_id".into(), Value::Nil);
        assert_eq!(read_entry(&nil), unreadable);
    }

    #[test]
    fn a_batch_entry_reads_as_its_reservations_in_order_and_drops_only_its_unreadable_lines() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let (a, b) = (uuid::Uuid::from_u128(1), uuid::Uuid::from_u128(2));
        let lines = format!("{a} 42 2 1700000000000\n{b} 43 1 1700000000005 00-ab-cd-01");
        let batch = entry(&[("activity_id", bulk("7")), ("reservations", bulk(&lines))]);
        let reservation = |token, user_id, quantity, reserved_ms| Reservation {
            token,
            activity_id: 7,
            user_id,
            quantity,
            reserved_ms,
        };
        assert_eq!(
            read_entry(&batch),
            Entry {
                reservations: vec![
                    Journaled {
                        reservation: reservation(a, 42, 2, 1_700_000_000_000),
                        traceparent: None,
                    },
                    Journaled {
                        reservation: reservation(b, 43, 1, 1_700_000_000_005),
                        traceparent: Some("00-ab-cd-01".into()),
                    },
                ],
                unreadable: 0,
            }
        );
        for bad in [
            "not-a-token 42 2 1700000000000",
            "{a} 42 2",
            "{a} 42 two 1700000000000",
            "{a} 42 2 1700000000000 00-ab-cd-01 more",
            "",
        ] {
            let bad = bad.replace("{a}", &a.to_string());
            let mixed = entry(&[
                ("activity_id", bulk("7")),
                (
                    "reservations",
                    bulk(&format!("{bad}\n{b} 43 1 1700000000005")),
                ),
            ]);
            assert_eq!(
                read_entry(&mixed),
                Entry {
                    reservations: vec![Journaled {
                        reservation: reservation(b, 43, 1, 1_700_000_000_005),
                        traceparent: None,
                    }],
                    unreadable: 1,
                },
                "{bad:?}"
            );
        }
        let no_sale = entry(&[("reservations", bulk(&lines))]);
        assert_eq!(
            read_entry(&no_sale),
            Entry {
                reservations: Vec::new(),
                unreadable: 2,
            }
        );
    }

    #[test]
    fn a_periodic_step_is_due_first_and_then_once_its_period_has_passed() {
        let now = Instant::now();
        assert!(due(None, Duration::from_secs(3600), now), "never done: due");
        assert!(!due(Some(now), Duration::from_secs(3600), now));
        assert!(due(Some(now), Duration::ZERO, now));
        let long_ago = now - Duration::from_secs(10);
        assert!(due(Some(long_ago), Duration::from_secs(5), now));
    }

    /// Rounds of uneven lengths (as reads and publishes make them) for two minutes: every journal
    /// is re-claimed within its period and a round's length, the cold ones included.
    #[test]
    fn every_journal_hot_or_cold_is_reclaimed_within_its_period_whatever_the_rounds_lengths() {
        let mut journals = Journals {
            hot: vec!["hot".into()],
            cold: vec!["cold".into(), "legacy".into()],
            ..Journals::default()
        };
        let start = Instant::now();
        let mut last: std::collections::HashMap<String, Duration> = Default::default();
        let mut longest: std::collections::HashMap<String, Duration> = Default::default();
        let mut at = Duration::ZERO;
        // Uneven round lengths from a fixed sequence: 3 to 96 ms.
        let mut x: u64 = 7;
        while at < Duration::from_secs(120) {
            for (journal, reclaim) in journals.plan(start + at) {
                if reclaim {
                    let gap = at - last.get(&journal).copied().unwrap_or(Duration::ZERO);
                    let worst = longest.entry(journal.clone()).or_default();
                    *worst = (*worst).max(gap);
                    last.insert(journal, at);
                }
            }
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            at += Duration::from_millis(3 + (x >> 33) % 94);
        }
        let round = Duration::from_millis(100);
        assert!(longest["hot"] <= RECLAIM_EVERY + round, "{longest:?}");
        for cold in ["cold", "legacy"] {
            assert!(longest[cold] <= COLD_EVERY + round, "{longest:?}");
            assert!(
                at - last[cold] <= COLD_EVERY + round,
                "{cold} re-claimed last at {:?} of {at:?}",
                last[cold]
            );
        }
    }
}
