//! Liveness and readiness. `/readyz` asks each of PostgreSQL, Redis and RabbitMQ, all at once,
//! each within a deadline, and names the ones that did not answer.

use crate::state::AppState;
use app::api::ErrorBody;
use axum::{extract::State, http::StatusCode, response::IntoResponse, routing::get, Json, Router};
use std::time::Duration;

const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn within<F: std::future::Future<Output = anyhow::Result<()>>>(check: F) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err("no answer within 2 s".into()),
    }
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let postgres = within(async {
        sqlx::query("SELECT 1").execute(&state.db).await?;
        Ok(())
    });
    let redis = within(async {
        let mut conn = state.redis.clone();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        Ok(())
    });
    let rabbitmq = within(state.broker.check());
    let (postgres, redis, rabbitmq) = tokio::join!(postgres, redis, rabbitmq);

    let failed: Vec<String> = [("postgres", postgres), ("redis", redis), ("rabbitmq", rabbitmq)]
        .into_iter()
        .filter_map(|(name, r)| r.err().map(|e| {
            tracing::warn!(dependency = name, error = %e, "not ready");
            name.to_string()
        }))
        .collect();
    if failed.is_empty() {
        (StatusCode::OK, Json(serde_json::json!({"status": "ready"}))).into_response()
    } else {
        let body = ErrorBody { error: "not_ready".into(), message: format!("not answering: {}", failed.join(", ")) };
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}
