//! Prometheus metrics: every request by route (rate, errors, duration) and those in flight; buy
//! outcomes, gate latency, journal lag, persisted and dead-lettered orders; the engines' calls
//! (Redis commands, RabbitMQ confirms) and the PostgreSQL pool; each live sale's units left, line,
//! journal age and persister lag; the process and its runtime. Names follow Prometheus's guide:
//! base units (seconds, bytes), `_total` on counters, labels of a bounded set of values only.
//! docs/operations.md "Metrics" lists them, and the alert rules and the dashboard read them.

mod atomic;
mod collect;

pub use atomic::Histogram;

use prometheus_client::{
    encoding::{
        text::{encode_eof, encode_registry},
        EncodeLabelSet,
    },
    metrics::{
        counter::Counter, family::Family, gauge::Gauge, histogram::exponential_buckets, info::Info,
    },
    registry::{Registry, Unit},
};
use std::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Arc, LazyLock,
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
pub struct ReasonLabel {
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

/// A request by the route it matched (its template, never the path: `/api/activities/{id}`), its
/// method (the usual ones, else `other`) and its status.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub method: &'static str,
    pub route: String,
    pub status: u16,
}

/// The buy answers every process counts from its start (`accepted`, or docs/api.md's error codes).
const BUY_RESULTS: [&str; 14] = [
    "accepted",
    "sold_out",
    "limit_reached",
    "rate_limited",
    "paused",
    "not_started",
    "ended",
    "bad_path",
    "not_admitted",
    "captcha_invalid",
    "blocked",
    "overloaded",
    "unavailable",
    "invalid_input",
];

/// The route label of a request that matched no route: a scanner's random paths all count here.
pub const UNMATCHED: &str = "unmatched";

/// Seconds a float gauge holds (journal age, persister lag).
pub type Seconds = Gauge<f64, AtomicU64>;

/// Redis's commands, counted where every one passes (`infra/redis.rs`'s connection): one per
/// process, as that connection is made before any [`Metrics`] (each registry shows the same).
pub struct RedisMeter {
    pub seconds: Histogram,
    pub errors: Counter,
    pub reconnects: Counter,
}

pub static REDIS: LazyLock<RedisMeter> = LazyLock::new(|| RedisMeter {
    seconds: Histogram::new(exponential_buckets(0.000_1, 2.0, 16)),
    errors: Counter::default(),
    reconnects: Counter::default(),
});

/// What an operator watches of each sale not ended yet (`pipeline/gauges.rs` sets them every
/// second), removed when the sale ends so that series do not pile up sale after sale.
#[derive(Default)]
pub struct SaleGauges {
    pub units_left: Family<ActivityLabel, Gauge>,
    pub line_length: Family<ActivityLabel, Gauge>,
    pub journal_age: Family<ActivityLabel, Seconds>,
    pub persister_lag: Family<ActivityLabel, Seconds>,
}

impl SaleGauges {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "sale_units_left",
            "Units of the sale left in Redis, all stock shards together",
            self.units_left.clone(),
        );
        registry.register(
            "sale_line_length",
            "Shoppers in the sale's waiting room not admitted yet (0 without a waiting room)",
            self.line_length.clone(),
        );
        registry.register_with_unit(
            "sale_journal_age",
            "Age of the oldest reservation of the sale in its journals not yet carried to RabbitMQ (0 when none)",
            Unit::Seconds,
            self.journal_age.clone(),
        );
        registry.register_with_unit(
            "sale_persister_lag",
            "Age of the sale's oldest acknowledged buy that is neither an order in PostgreSQL nor returned yet (0 when none)",
            Unit::Seconds,
            self.persister_lag.clone(),
        );
    }

    /// Sets one sale's figures; `None` leaves one unset this round (its read failed).
    pub fn set(
        &self,
        activity: i64,
        units: Option<i64>,
        line: Option<i64>,
        journal: Option<f64>,
        persister: Option<f64>,
    ) {
        let label = ActivityLabel { activity };
        if let Some(units) = units {
            self.units_left.get_or_create(&label).set(units);
        }
        if let Some(line) = line {
            self.line_length.get_or_create(&label).set(line);
        }
        if let Some(age) = journal {
            self.journal_age.get_or_create(&label).set(age);
        }
        if let Some(lag) = persister {
            self.persister_lag.get_or_create(&label).set(lag);
        }
    }

    /// Drops an ended sale's series.
    pub fn remove(&self, activity: i64) {
        let label = ActivityLabel { activity };
        self.units_left.remove(&label);
        self.line_length.remove(&label);
        self.journal_age.remove(&label);
        self.persister_lag.remove(&label);
    }
}

/// Requests by route, method and status (the rate, the errors, the duration: RED) and those in
/// flight now.
fn register_http(registry: &mut Registry) -> (Family<HttpLabels, Histogram>, Gauge) {
    let requests = Family::<HttpLabels, Histogram>::new_with_constructor(
        (|| Histogram::new(exponential_buckets(0.000_5, 2.0, 14))) as fn() -> Histogram,
    );
    registry.register_with_unit(
        "http_request_duration",
        "HTTP requests answered, by route template, method and status: from the request's head to the response's head",
        Unit::Seconds,
        requests.clone(),
    );
    let in_flight = Gauge::default();
    registry.register(
        "http_requests_in_flight",
        "HTTP requests being answered now",
        in_flight.clone(),
    );
    (requests, in_flight)
}

/// The engines' calls from this process: Redis's commands (shared, [`REDIS`]), and the relay's
/// RabbitMQ publish confirms (with the pipeline's metrics).
fn register_engines(registry: &mut Registry, pipeline: &mut Registry) -> Histogram {
    let redis = &*REDIS;
    registry.register_with_unit(
        "redis_command_duration",
        "Redis commands and pipelines sent by this process, until their answer",
        Unit::Seconds,
        redis.seconds.clone(),
    );
    registry.register(
        "redis_command_errors",
        "Redis commands and pipelines that failed (an error answer, a timeout, a lost connection)",
        redis.errors.clone(),
    );
    registry.register(
        "redis_reconnects",
        "Redis Cluster connections replaced by a fresh one after they stopped answering",
        redis.reconnects.clone(),
    );
    let confirm = Histogram::new(exponential_buckets(0.000_5, 2.0, 14));
    pipeline.register_with_unit(
        "rabbitmq_publish_confirm",
        "From a relay round's publish to RabbitMQ's confirm of its last message",
        Unit::Seconds,
        confirm.clone(),
    );
    confirm
}

/// `seckill_build_info{version, revision} 1`: which release a process runs.
fn register_build(registry: &mut Registry) {
    let revision = option_env!("SECKILL_REVISION").unwrap_or("unknown");
    registry.register(
        "build",
        "The release this process runs: its version and source revision",
        Info::new(vec![
            ("version", env!("CARGO_PKG_VERSION")),
            ("revision", revision),
        ]),
    );
}

pub struct Metrics {
    registry: Registry,
    /// The `process_*` figures, under their own names (no prefix), as every client library has them.
    process: Registry,
    /// The PostgreSQL pool the scrape reports, given once connected.
    pool: Arc<collect::Pool>,
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
    pub borrow_seconds: Histogram,
    pub unreplicated: Counter,
    pub persisted: Counter,
    pub dead_lettered: Counter,
    pub stock_drift: Family<ActivityLabel, Gauge>,
    /// The AOF rewrites this process's workers started (`pipeline/compaction.rs`), by reason.
    pub aof_rewrites: Family<ReasonLabel, Counter>,
    /// The most any Redis node's AOF has grown since its last rewrite, at the last round.
    pub aof_growth: Gauge,
    /// The workers' rounds over the AOFs that failed (rounds that keep failing leave them to grow).
    pub aof_rounds_failed: Counter,
    pub queue_polls: Family<Answered, Counter>,
    pub queue_held: Family<Held, Gauge>,
    /// A sale's state (its units left) for its page, card and stock poll, by where it was read.
    pub sale_state_reads: Family<Answered, Counter>,
    pub worker_restarts: Family<WorkerLabel, Counter>,
    pub http_requests: Family<HttpLabels, Histogram>,
    pub http_in_flight: Gauge,
    pub publish_confirm: Histogram,
    pub sales: SaleGauges,
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

/// The sales' state reads by where they were answered from (`buy/heat.rs`).
fn register_sale_state(registry: &mut Registry) -> Family<Answered, Counter> {
    let reads = Family::<Answered, Counter>::default();
    registry.register(
        "sale_state_reads",
        "A sale's units left read for its page, its card or its stock poll, by where: memory (a hot sale's copy, refreshed once a second) or redis",
        reads.clone(),
    );
    reads
}

/// The workers' upkeep of Redis: the reconciler's drift, and the rewrites of its append-only files
/// (`pipeline/compaction.rs`).
struct Upkeep {
    stock_drift: Family<ActivityLabel, Gauge>,
    aof_rewrites: Family<ReasonLabel, Counter>,
    aof_growth: Gauge,
    aof_rounds_failed: Counter,
}

fn register_upkeep(pipeline: &mut Registry) -> Upkeep {
    let stock_drift = Family::<ActivityLabel, Gauge>::default();
    pipeline.register(
        "stock_drift",
        "Redis remaining minus (total_stock - sold) at the last reconciliation",
        stock_drift.clone(),
    );
    let aof_rewrites = Family::<ReasonLabel, Counter>::default();
    pipeline.register(
        "redis_aof_rewrites",
        "AOF rewrites the workers started, by reason (between_sales: grown and no sale on; ceiling: grown past the ceiling during a sale)",
        aof_rewrites.clone(),
    );
    let aof_growth = Gauge::default();
    pipeline.register_with_unit(
        "redis_aof_growth",
        "The most a Redis node's append-only file has grown since its last rewrite, at the workers' last look",
        Unit::Bytes,
        aof_growth.clone(),
    );
    let aof_rounds_failed = counter(
        pipeline,
        "redis_aof_rounds_failed",
        "The workers' looks at the Redis AOFs that failed (PostgreSQL or a Redis node did not answer): while they fail, no AOF is rewritten",
    );
    Upkeep {
        stock_drift,
        aof_rewrites,
        aof_growth,
        aof_rounds_failed,
    }
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

/// The buy path's: answers by result, the gate script's latency and batch size.
fn register_buys(registry: &mut Registry) -> (Family<Outcome, Counter>, Histogram, Histogram) {
    let buys = Family::<Outcome, Counter>::default();
    registry.register("buy_requests", "Buy requests by result", buys.clone());
    // The buy path's usual answers exist from the start: a rate over them is 0, not absent,
    // and the hot path finds its counter without taking the family's write lock.
    for result in BUY_RESULTS {
        let _ = buys.get_or_create(&Outcome { result });
    }
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
    (buys, gate_seconds, gate_batch_size)
}

/// The buys whose home stock shard was empty: those another shard lent the units, and what each
/// borrowing took (the lending shards asked in turn, the home shard settled, both replicated).
fn register_borrowing(registry: &mut Registry) -> (Counter, Histogram) {
    let borrowed = counter(
        registry,
        "borrowed_reservations",
        "Buys whose home stock shard was empty and another shard lent the units",
    );
    let borrow_seconds = Histogram::new(exponential_buckets(0.000_25, 2.0, 14));
    registry.register(
        "gate_borrow_seconds",
        "Time a buy whose home stock shard was empty spent borrowing: the other shards asked in turn, the home shard settled, the writes replicated",
        borrow_seconds.clone(),
    );
    (borrowed, borrow_seconds)
}

/// The figures read at each scrape: the pool's and the runtime's (prefixed), and the process's
/// (`process_*`, in a registry of their own without the prefix).
fn register_collectors(registry: &mut Registry) -> (Arc<collect::Pool>, Registry) {
    let pool = Arc::new(collect::Pool::default());
    registry.register_collector(Box::new(pool.clone()));
    registry.register_collector(Box::new(collect::Runtime));
    let mut process = Registry::default();
    process.register_collector(Box::new(collect::Process));
    (pool, process)
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("seckill");
        let (buys, gate_seconds, gate_batch_size) = register_buys(&mut registry);
        let mut pipeline = Registry::with_prefix("seckill");
        let journal_lag = Gauge::default();
        pipeline.register(
            "journal_lag",
            "Journal entries (one per gate call) not yet confirmed by RabbitMQ",
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
        let (borrowed, borrow_seconds) = register_borrowing(&mut registry);
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
        let upkeep = register_upkeep(&mut pipeline);
        let (queue_polls, queue_held) = register_queue(&mut registry);
        let sale_state_reads = register_sale_state(&mut registry);
        let (worker_restarts, dependency_up) = register_process(&mut registry);
        let (http_requests, http_in_flight) = register_http(&mut registry);
        let publish_confirm = register_engines(&mut registry, &mut pipeline);
        register_build(&mut registry);
        let (pool, process) = register_collectors(&mut registry);
        let sales = SaleGauges::default();
        sales.register(&mut pipeline);
        Arc::new(Metrics {
            registry,
            process,
            pool,
            http_requests,
            http_in_flight,
            publish_confirm,
            sales,
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
            borrow_seconds,
            unreplicated,
            persisted,
            dead_lettered,
            stock_drift: upkeep.stock_drift,
            aof_rewrites: upkeep.aof_rewrites,
            aof_growth: upkeep.aof_growth,
            aof_rounds_failed: upkeep.aof_rounds_failed,
            queue_polls,
            sale_state_reads,
            queue_held,
            worker_restarts,
        })
    }

    pub fn drift(&self, activity: i64, drift: i64) {
        self.stock_drift
            .get_or_create(&ActivityLabel { activity })
            .set(drift);
    }

    pub fn aof_rewrite(&self, reason: &'static str) {
        self.aof_rewrites
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    pub fn queue_poll(&self, answered: &'static str) {
        self.queue_polls.get_or_create(&Answered { answered }).inc();
    }

    pub fn sale_state_read(&self, answered: &'static str) {
        self.sale_state_reads
            .get_or_create(&Answered { answered })
            .inc();
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

    /// The PostgreSQL pool whose use the scrape reports (the first one given).
    pub fn watch_pool(&self, pool: &sqlx::PgPool) {
        let _ = self.pool.0.set(pool.clone());
    }

    /// The OpenMetrics text of every metric this process measures.
    pub fn exposition(&self) -> String {
        let mut out = String::new();
        let encoded = encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &self.process))
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
