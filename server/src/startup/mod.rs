//! Builds the application from its configuration: its connections and shared state
//! (`connect.rs`), the workers every instance runs (`workers.rs`) and the router (`routes.rs`),
//! then serves on its listener (`listener.rs`) until the signal to stop (`shutdown.rs`).
//! Tests call `Application::build` with port 0; `main` runs it until SIGTERM or Ctrl-C.

mod connect;
mod listener;
mod routes;
mod shutdown;
mod workers;

pub use connect::connect_pipeline;
pub use shutdown::shutdown_signal;

use crate::{
    domain::payment::{PaymentProvider, SimulatedProvider},
    http::state::AppState,
    infra::config::Config,
};
use anyhow::Context;
use std::{net::SocketAddr, sync::Arc};
use tokio::net::TcpListener;

pub struct Application {
    listener: TcpListener,
    server: routes::Server,
    pub state: AppState,
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Application> {
        Application::build_with(config, Arc::new(SimulatedProvider)).await
    }

    /// As [`Application::build`], charging through `payments`.
    pub async fn build_with(
        config: Config,
        payments: Arc<dyn PaymentProvider>,
    ) -> anyhow::Result<Application> {
        let state = AppState::connect_with(config, payments).await?;
        state.reconciler.warm().await?;
        workers::spawn_instance_workers(&state);
        if state.config.run_workers {
            state.spawn_workers();
        } else {
            // The journal's lag, the relay's and the persisters' figures are the workers' to say.
            state.metrics.without_pipeline();
        }
        let listener = TcpListener::bind(state.config.addr)
            .await
            .with_context(|| format!("binding {}", state.config.addr))?;
        Ok(Application {
            server: routes::server(state.clone()),
            listener,
            state,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }
}
