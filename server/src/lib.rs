//! The seckill server. Its rooms, from the bottom up (a room imports only the rooms below it;
//! `src/layers.rs`, run by `cargo test`, fails otherwise):
//! - `infra`: configuration, PostgreSQL, RabbitMQ, Redis connection and keys, metrics registry;
//! - `domain`: activities, accounts, passwords, payments, the error codes;
//! - `buy`: the gate and its Lua script, sold-out flags, attempts, captcha, login throttle;
//! - `pipeline`: journal relay, persister, payment deadlines, give-back, reconciliation;
//! - `http`: one module per section of docs/api.md, the extractors, the site around the API.
//!
//! At the root, `startup/` wires them into one application around the state of
//! `http/state.rs`. The load tool that measures it lives apart, in the `loadtest` crate.
//! docs/architecture.md walks one buy through them.

pub mod buy;
pub mod domain;
pub mod http;
pub mod infra;
pub mod pipeline;
pub mod startup;

pub use infra::config::Config;
pub use startup::Application;

#[cfg(test)]
mod layers;
