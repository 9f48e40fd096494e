//! docs/api.md "Operations": liveness, readiness and the metrics. `/readyz` asks each of PostgreSQL,
//! Redis and RabbitMQ, all at once, each within a deadline, and names the ones that did not answer.

use crate::http::state::AppState;
use crate::infra::{broker::Broker, config::Config, db, metrics::Metrics, redis::Redis};
use app::api::ErrorBody;
use axum::{
    extract::State,
    http::{header, HeaderMap, StatusCode},
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use sqlx::PgPool;
use std::{sync::Arc, time::Duration};

const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(exposition))
        .route("/.well-known/jwks.json", get(jwks))
}

/// The public keys of the waiting room's admission tickets (RFC 7517): the keys that verify
/// tickets now and the next one, so that an edge or another service checks a ticket itself.
/// Cached a minute: the next key is published ahead of its use.
async fn jwks(State(room): State<crate::buy::queue::WaitingRoom>) -> impl IntoResponse {
    let keys = room.tickets().jwks(chrono::Utc::now().timestamp_millis());
    (
        [
            (header::CACHE_CONTROL, "public, max-age=60"),
            (header::CONTENT_TYPE, "application/jwk-set+json"),
        ],
        Json(keys),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn within<F: std::future::Future<Output = anyhow::Result<()>>>(
    check: F,
) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err("no answer within 2 s".into()),
    }
}

async fn readyz(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(broker): State<Broker>,
) -> impl IntoResponse {
    let postgres = within(async {
        db::ping(&db).await?;
        Ok(())
    });
    let redis = within(async {
        let mut conn = redis.conn();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        Ok(())
    });
    let rabbitmq = within(broker.check());
    let (postgres, redis, rabbitmq) = tokio::join!(postgres, redis, rabbitmq);

    let failed: Vec<String> = [
        ("postgres", postgres),
        ("redis", redis),
        ("rabbitmq", rabbitmq),
    ]
    .into_iter()
    .filter_map(|(name, r)| {
        r.err().map(|e| {
            tracing::warn!(dependency = name, error = %e, "not ready");
            name.to_string()
        })
    })
    .collect();
    if failed.is_empty() {
        (StatusCode::OK, Json(serde_json::json!({"status": "ready"}))).into_response()
    } else {
        let body = ErrorBody {
            error: "not_ready".into(),
            message: format!("not answering: {}", failed.join(", ")),
        };
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}

/// The metrics, for the operator's Prometheus only: `Authorization: Bearer <SECKILL_METRICS_TOKEN>`
/// (compared in constant time), else `401`; with no token configured, `404` (off).
async fn exposition(
    State(metrics): State<Arc<Metrics>>,
    State(config): State<Arc<Config>>,
    headers: HeaderMap,
) -> axum::response::Response {
    let Some(token) = &config.metrics_token else {
        return crate::domain::ApiError::NotFound.into_response();
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !constant_time_eq(given.as_bytes(), &token.0) {
        let mut resp = crate::domain::ApiError::Unauthenticated.into_response();
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"metrics\""),
        );
        return resp;
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.exposition(),
    )
        .into_response()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    // Hashed first: equal lengths, and the comparison's time says nothing of the token's length.
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}
