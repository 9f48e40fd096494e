//! Prometheus metrics: buy outcomes, gate latency, journal lag, persisted and dead-lettered orders.

use prometheus_client::{
    encoding::{
        text::{encode_eof, encode_registry},
        EncodeLabelSet,
    },
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{exponential_buckets, Histogram},
    },
    registry::Registry,
};
use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Answered {
    pub answered: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Held {
    pub activity: i64,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkerLabel {
    pub worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DependencyLabel {
    pub dependency: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActivityLabel {
    pub activity: i64,
}

pub struct Metrics {
    registry: Registry,
    /// The relay's, the persisters', the reconciler's and the supervisor's: exported only by a
    /// process that runs them (an instance with `SECKILL_NO_WORKERS` would report a journal lag
    /// of 0 that nothing measures, which looks healthy).
    pipeline: Registry,
    runs_pipeline: AtomicBool,
    /// 1 while the engine answered this process's last check (`/readyz`, every probe), else 0.
    pub dependency_up: Family<DependencyLabel, Gauge>,
    pub buys: Family<Outcome, Counter>,
    pub gate_seconds: Histogram,
    pub gate_batch_size: Histogram,
    pub journal_lag: Gauge,
    pub relayed: Counter,
    pub relay_held: Counter,
    pub borrowed: Counter,
    pub unreplicated: Counter,
    pub persisted: Counter,
    pub dead_lettered: Counter,
    pub stock_drift: Family<ActivityLabel, Gauge>,
    pub queue_polls: Family<Answered, Counter>,
    pub queue_held: Family<Held, Gauge>,
    pub worker_restarts: Family<WorkerLabel, Counter>,
}

/// The waiting room's: polls by where they were answered from, admission held back by reason.
fn register_queue(registry: &mut Registry) -> (Family<Answered, Counter>, Family<Held, Gauge>) {
    let queue_polls = Family::<Answered, Counter>::default();
    registry.register(
            "queue_polls",
            "Waiting-room polls by where they were answered from: memory (the line's board and the shopper's signed place) or redis",
            queue_polls.clone(),
        );
    let queue_held = Family::<Held, Gauge>::default();
    registry.register(
            "queue_admission_held",
            "1 while a waiting room's admission is slowed or stopped, by the reason (backlog: units taken and not persisted yet; redis_slow), at this instance's last step",
            queue_held.clone(),
        );
    (queue_polls, queue_held)
}

fn counter(registry: &mut Registry, name: &str, help: &str) -> Counter {
    let counter = Counter::default();
    registry.register(name, help, counter.clone());
    counter
}

/// The process's own: its workers' restarts (the supervisor's), by worker, and its engines'
/// answers to its last readiness check.
fn register_process(
    registry: &mut Registry,
) -> (Family<WorkerLabel, Counter>, Family<DependencyLabel, Gauge>) {
    let worker_restarts = Family::<WorkerLabel, Counter>::default();
    registry.register(
        "worker_restarts",
        "Background workers that ended (a panic, an error, an abort) and were started again, by worker",
        worker_restarts.clone(),
    );
    let dependency_up = Family::<DependencyLabel, Gauge>::default();
    registry.register(
        "dependency_up",
        "1 while the engine (postgres, redis, rabbitmq) answered this process's last readiness check, else 0",
        dependency_up.clone(),
    );
    (worker_restarts, dependency_up)
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("seckill");
        let buys = Family::<Outcome, Counter>::default();
        registry.register("buy_requests", "Buy requests by result", buys.clone());
        let gate_seconds = Histogram::new(exponential_buckets(0.000_25, 2.0, 14));
        registry.register(
            "gate_seconds",
            "Time of the gate script call",
            gate_seconds.clone(),
        );
        let gate_batch_size = Histogram::new(exponential_buckets(1.0, 2.0, 8));
        registry.register(
            "gate_batch_size",
            "Buys decided by one gate script call",
            gate_batch_size.clone(),
        );
        let mut pipeline = Registry::with_prefix("seckill");
        let journal_lag = Gauge::default();
        pipeline.register(
            "journal_lag",
            "Reservations in the journal not yet confirmed by RabbitMQ",
            journal_lag.clone(),
        );
        let relayed = counter(
            &mut pipeline,
            "relayed_reservations",
            "Reservations published to RabbitMQ and confirmed",
        );
        let relay_held = counter(
            &mut pipeline,
            "relay_held_journal_reads",
            "Journal reads the relay held back because their master's replica had not acknowledged them",
        );
        let borrowed = counter(
            &mut registry,
            "borrowed_reservations",
            "Buys whose home stock shard was empty and another shard lent the units",
        );
        let unreplicated = counter(
            &mut registry,
            "unreplicated_reservations",
            "Buys answered while their master had no replica connected (durable by its AOF only)",
        );
        let persisted = counter(
            &mut pipeline,
            "persisted_orders",
            "Orders written to PostgreSQL",
        );
        let dead_lettered = counter(
            &mut pipeline,
            "dead_lettered_reservations",
            "Reservations that ended failed via the dead-letter queue",
        );
        let stock_drift = Family::<ActivityLabel, Gauge>::default();
        pipeline.register(
            "stock_drift",
            "Redis remaining minus (total_stock - sold) at the last reconciliation",
            stock_drift.clone(),
        );
        let (queue_polls, queue_held) = register_queue(&mut registry);
        let (worker_restarts, dependency_up) = register_process(&mut registry);
        Arc::new(Metrics {
            registry,
            pipeline,
            runs_pipeline: AtomicBool::new(true),
            dependency_up,
            buys,
            gate_seconds,
            gate_batch_size,
            journal_lag,
            relayed,
            relay_held,
            borrowed,
            unreplicated,
            persisted,
            dead_lettered,
            stock_drift,
            queue_polls,
            queue_held,
            worker_restarts,
        })
    }

    pub fn drift(&self, activity: i64, drift: i64) {
        self.stock_drift
            .get_or_create(&ActivityLabel { activity })
            .set(drift);
    }

    pub fn queue_poll(&self, answered: &'static str) {
        self.queue_polls.get_or_create(&Answered { answered }).inc();
    }

    pub fn queue_held(&self, activity: i64, reason: &'static str, held: bool) {
        self.queue_held
            .get_or_create(&Held { activity, reason })
            .set(i64::from(held));
    }

    pub fn worker_restarted(&self, worker: &str) {
        self.worker_restarts
            .get_or_create(&WorkerLabel {
                worker: worker.to_string(),
            })
            .inc();
    }

    /// Restarts of one worker so far.
    pub fn worker_restarts(&self, worker: &str) -> u64 {
        self.worker_restarts
            .get_or_create(&WorkerLabel {
                worker: worker.to_string(),
            })
            .get()
    }

    pub fn buy(&self, result: &'static str) {
        self.buys.get_or_create(&Outcome { result }).inc();
    }

    /// This process runs no relay, persister or reconciler: their metrics are left out.
    pub fn without_pipeline(&self) {
        self.runs_pipeline.store(false, Ordering::Relaxed);
    }

    pub fn dependency(&self, dependency: &'static str, up: bool) {
        self.dependency_up
            .get_or_create(&DependencyLabel { dependency })
            .set(i64::from(up));
    }

    /// The OpenMetrics text of every metric this process measures.
    pub fn exposition(&self) -> String {
        let mut out = String::new();
        let encoded = encode_registry(&mut out, &self.registry)
            .and_then(|()| {
                if self.runs_pipeline.load(Ordering::Relaxed) {
                    encode_registry(&mut out, &self.pipeline)
                } else {
                    Ok(())
                }
            })
            .and_then(|()| encode_eof(&mut out));
        if encoded.is_err() {
            out.clear();
        }
        out
    }
}
