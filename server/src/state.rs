//! The state every handler shares: cheap to clone (pools and `Arc`s).

use crate::{
    broker::{Broker, Topology},
    catalog::ActivityCache,
    config::Config,
    gate::Gate,
    keys::Keys,
    metrics::Metrics,
    password::Passwords,
    session::SessionKeys,
    soldout::SoldOut,
    throttle::LoginThrottle,
};
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use redis::aio::ConnectionManager;
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
    pub redis: ConnectionManager,
    pub broker: Broker,
    pub sessions: Arc<SessionKeys>,
    pub passwords: Passwords,
    pub login_throttle: LoginThrottle,
    pub leptos: LeptosOptions,
    pub assets: app::Assets,
    pub hashed_assets: bool,
    pub keys: Keys,
    pub gate: Gate,
    pub activities: ActivityCache,
    pub sold_out: SoldOut,
    pub metrics: Arc<Metrics>,
    pub topology: Topology,
    pub redis_client: redis::Client,
    pub payments: Arc<dyn crate::payment::PaymentProvider>,
    pub deadlines: crate::deadline::Deadlines,
    pub attempts: crate::attempts::Attempts,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}
