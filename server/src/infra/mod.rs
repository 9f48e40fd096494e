//! The plumbing every other room stands on: configuration, the PostgreSQL pool and migrations,
//! the RabbitMQ connection and topology, the Redis connection, key layout and replication wait, the metrics
//! registry. Nothing here knows HTTP, the buy path or the pipeline: `infra` imports no other
//! folder of the crate (checked by `src/layers.rs`).

pub mod broker;
pub mod config;
pub mod db;
pub mod keys;
pub mod masters;
pub(crate) mod metrics;
pub(crate) mod outage;
pub mod redis;
pub mod replication;
pub(crate) mod retry;
pub mod scripts;
pub mod supervisor;
pub mod telemetry;
