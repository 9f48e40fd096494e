//! Integration tests: the real application against the real services.

// A test tells one story from its set-up to its last assertion; the 80-line bound on functions
// (clippy.toml) is for the product's code.
#![allow(clippy::too_many_lines)]

mod accounts;
mod admin;
mod aof;
mod batch;
mod bot_check;
mod cord;
mod crowd;
mod deployed;
mod doors;
mod farms;
mod forms;
mod fuzz;
mod health;
mod heat;
mod helpers;
mod hostile;
mod input;
mod keepalive;
mod lifecycle;
mod limits;
mod line;
mod metrics;
mod queue;
mod reconcile;
mod reminders;
mod replication;
mod report;
mod seckill;
mod sessions;
mod shards;
mod site;
mod traces;
mod transactions;
mod workers;
