//! From a reservation in Redis to an order in PostgreSQL, and back when it fails or goes unpaid:
//! the journal relay (Redis stream → RabbitMQ), the persister (RabbitMQ → PostgreSQL, then the
//! token marked in Redis), payment deadlines, the give-back of units, and the reconciliation of
//! Redis with the database. Each worker is handed the parts it needs (pool, Redis, broker,
//! topology, metrics), never the whole application state.

pub mod compaction;
pub mod deadline;
pub mod gauges;
pub mod giveback;
pub mod journal;
pub mod persister;
pub mod reconcile;

use crate::{
    buy::soldout::SoldOut,
    infra::{
        broker::{Broker, Topology},
        config::Config,
        metrics::Metrics,
        redis::Redis,
        replication::Replication,
        supervisor::{Stage, Supervisor},
    },
};
use deadline::Deadlines;
use journal::Relay;
use persister::Persister;
use reconcile::Reconciler;
use std::{sync::Arc, time::Duration};

/// The pipeline's workers and the parts they share: built on the connections alone, so a
/// `server worker` process runs it without any of the HTTP server's state.
#[derive(Clone)]
pub struct Pipeline {
    pub db: sqlx::PgPool,
    pub redis: Redis,
    pub broker: Broker,
    pub topology: Topology,
    pub metrics: Arc<Metrics>,
    pub sold_out: SoldOut,
    pub deadlines: Deadlines,
    pub reconciler: Reconciler,
    pub replication: Replication,
    persisters: usize,
    sweep_every: Duration,
    reconcile_every: Duration,
    aof_check_every: Option<Duration>,
    aof_policy: compaction::Policy,
}

impl Pipeline {
    pub fn new(
        config: &Config,
        db: sqlx::PgPool,
        redis: Redis,
        broker: Broker,
        replication: Replication,
    ) -> Pipeline {
        let sold_out = SoldOut::new(redis.keys.restock_channel());
        let topology = Topology::new(&config.amqp_prefix, config.queue_expires_ms)
            .with_reservation_queues(config.reservation_queues);
        let metrics = Metrics::new();
        metrics.watch_pool(&db);
        let deadlines = Deadlines::new(
            db.clone(),
            redis.clone(),
            sold_out.clone(),
            broker.clone(),
            topology.clone(),
        );
        let reconciler = Reconciler {
            db: db.clone(),
            redis: redis.clone(),
            broker: broker.clone(),
            topology: topology.clone(),
            metrics: metrics.clone(),
            between_reads: None,
        };
        Pipeline {
            db,
            redis,
            broker,
            topology,
            metrics,
            sold_out,
            deadlines,
            reconciler,
            replication,
            persisters: config.persisters,
            sweep_every: config.sweep_every,
            reconcile_every: config.reconcile_every,
            aof_check_every: config.aof_check_every,
            aof_policy: config.aof_policy,
        }
    }

    /// Starts the relay, the persisters (every reservations queue consumed), the dead-letter
    /// consumer, the payment deadlines, the reconciler, the AOF compaction and the sales' gauges under
    /// `supervisor`.
    pub fn start(&self, supervisor: &Supervisor) {
        let instance = uuid::Uuid::new_v4().simple().to_string();
        let relay = Relay {
            db: self.db.clone(),
            ack: crate::infra::scripts::ack(),
            redis: self.redis.clone(),
            broker: self.broker.clone(),
            topology: self.topology.clone(),
            metrics: self.metrics.clone(),
            consumer: instance.clone(),
            replication: self.replication.clone(),
        };
        supervisor.spawn_graceful("relay", Stage::Relay, move |stop| relay.clone().run(stop));
        let persister = Persister {
            db: self.db.clone(),
            redis: self.redis.clone(),
            broker: self.broker.clone(),
            topology: self.topology.clone(),
            metrics: self.metrics.clone(),
            sold_out: self.sold_out.clone(),
            deadlines: self.deadlines.clone(),
            consumer: instance.clone(),
        };
        // Every reservations queue has a consumer, the first ones as many as there are left.
        let queues = &self.topology.reservation_queues;
        for i in 0..self.persisters.max(queues.len()) {
            let (persister, queue) = (persister.clone(), queues[i % queues.len()].clone());
            supervisor.spawn_graceful(format!("persister-{i}"), Stage::Consumers, move |stop| {
                persister.clone().run(queue.clone(), stop)
            });
        }
        supervisor.spawn("dead-letters", Stage::Consumers, move || {
            persister.clone().run_dead_letters()
        });
        let (deadlines, every) = (self.deadlines.clone(), self.sweep_every);
        supervisor.spawn("deadlines", Stage::Rest, {
            let deadlines = deadlines.clone();
            move || deadlines.clone().run_timeouts(instance.clone())
        });
        supervisor.spawn("deadline-sweeper", Stage::Rest, move || {
            deadlines.clone().run_sweeper(every)
        });
        let (reconciler, every) = (self.reconciler.clone(), self.reconcile_every);
        supervisor.spawn("reconciler", Stage::Rest, move || {
            reconciler.clone().run_periodically(every)
        });
        if let Some(every) = self.aof_check_every {
            let compactor = compaction::Compactor {
                db: self.db.clone(),
                redis: self.redis.clone(),
                metrics: self.metrics.clone(),
                policy: self.aof_policy,
            };
            supervisor.spawn("aof-compaction", Stage::Rest, move || {
                compactor.clone().run_periodically(every)
            });
        }
        let gauges = gauges::SaleGauges {
            db: self.db.clone(),
            redis: self.redis.clone(),
            metrics: self.metrics.clone(),
        };
        supervisor.spawn("sale-gauges", Stage::Rest, move || {
            gauges.clone().run_periodically(Duration::from_secs(1))
        });
    }
}
