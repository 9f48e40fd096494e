//! The state every handler shares, and the parts (`FromRef` sub-states) each handler takes from
//! it. Built once by `AppState::connect` (`startup/connect.rs`); cheap to clone.

use crate::{
    buy::{
        activities::ActivityCache, attempts::Attempts, blocks::Blocks, doors::Doors, gate::Gate,
        heat::Heat, queue::WaitingRoom, soldout::SoldOut,
    },
    domain::{account::throttle::LoginThrottle, password::Passwords, payment::PaymentProvider},
    http::session::SessionKeys,
    infra::{
        broker::{Broker, Topology},
        config::Config,
        metrics::Metrics,
        redis::Redis,
        supervisor::Supervisor,
    },
    pipeline::{deadline::Deadlines, reconcile::Reconciler, Pipeline},
};
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use sqlx::PgPool;
use std::sync::Arc;

/// Cloned for every request (axum hands each handler and stateful middleware its own copy), so
/// it is one `Arc`: a clone is one atomic increment, not a copy of every pool, string and handle
/// below (which the profile showed as the top cost of a cheap request).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub struct Shared {
    pub config: Arc<Config>,
    pub db: PgPool,
    /// The Redis connection (single or cluster) and the key layout.
    pub redis: Redis,
    pub broker: Broker,
    pub topology: Topology,
    pub sessions: Arc<SessionKeys>,
    pub passwords: Passwords,
    pub login_throttle: LoginThrottle,
    pub doors: Doors,
    pub exports: crate::http::exports::Exports,
    pub leptos: LeptosOptions,
    pub assets: app::Assets,
    pub hashed_assets: bool,
    pub gate: Arc<Gate>,
    pub waiting_room: WaitingRoom,
    pub activities: ActivityCache,
    /// Which sales are hot, and their state in memory (`buy/heat.rs`).
    pub heat: Heat,
    pub sold_out: SoldOut,
    pub blocks: Blocks,
    pub attempts: Attempts,
    pub metrics: Arc<Metrics>,
    pub payments: Arc<dyn PaymentProvider>,
    pub deadlines: Deadlines,
    pub reconciler: Reconciler,
    /// The parts `server worker` runs alone, for this instance's workers.
    pub pipeline: Pipeline,
    /// Every background task of this instance.
    pub supervisor: Arc<Supervisor>,
}

/// `FromRef<AppState>` for each part a handler may ask for, cloned out of the state.
macro_rules! parts {
    ($($field:ident: $part:ty),* $(,)?) => {
        $(impl FromRef<AppState> for $part {
            fn from_ref(state: &AppState) -> $part {
                state.$field.clone()
            }
        })*
    };
}

parts! {
    config: Arc<Config>,
    db: PgPool,
    redis: Redis,
    broker: Broker,
    sessions: Arc<SessionKeys>,
    passwords: Passwords,
    login_throttle: LoginThrottle,
    doors: Doors,
    exports: crate::http::exports::Exports,
    leptos: LeptosOptions,
    gate: Arc<Gate>,
    waiting_room: WaitingRoom,
    activities: ActivityCache,
    heat: Heat,
    sold_out: SoldOut,
    attempts: Attempts,
    metrics: Arc<Metrics>,
    payments: Arc<dyn PaymentProvider>,
}
