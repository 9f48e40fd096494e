//! The state every handler shares: cheap to clone (pools and `Arc`s).

use crate::{broker::Broker, config::Config, password::Passwords, session::SessionKeys, throttle::LoginThrottle};
use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use redis::aio::ConnectionManager;
use sqlx::PgPool;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub db: PgPool,
    pub redis: ConnectionManager,
    pub broker: Broker,
    pub sessions: Arc<SessionKeys>,
    pub passwords: Passwords,
    pub login_throttle: LoginThrottle,
    pub leptos: LeptosOptions,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}
