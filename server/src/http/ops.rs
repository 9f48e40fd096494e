//! docs/api.md "Operations": liveness, readiness and the metrics. `/readyz` asks each of PostgreSQL,
//! Redis and RabbitMQ, all at once, each within a deadline, and says how each answered; an
//! instance is ready while it can sell, that is while Redis answers — any one master of a Redis
//! Cluster: one shard's slow, dead or failing-over master leaves the others selling, and taking
//! every instance out of its Service for it would darken the whole shop. The buys go on through the
//! journal without RabbitMQ or PostgreSQL, so their trouble shows in the body and in
//! `seckill_dependency_up`, never by taking the instance out of its Service. `server worker`
//! serves the same probes and metrics on a listener of its own ([`worker_router`]); a worker is
//! ready only when all three answer (Redis: a master of it, whose shards' journals it relays),
//! since it moves reservations between them.

use crate::http::state::AppState;
use crate::infra::{
    broker::Broker,
    config::Config,
    db,
    metrics::Metrics,
    redis::{Answering, Redis},
};
use app::api::ErrorBody;
use axum::{
    extract::{FromRef, State},
    http::{header, HeaderMap, StatusCode},
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use sqlx::PgPool;
use std::{sync::Arc, time::Duration};

/// Each engine's check gives up after this: the probe is answered within 0.8 s whatever hangs
/// (an engine cut off answers nothing, it does not refuse), before an orchestrator's probe gives
/// up (Kubernetes: 1 s by default), with room for the request itself on a busy instance.
const CHECK_TIMEOUT: Duration = Duration::from_millis(500);

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(exposition))
        .route("/.well-known/jwks.json", get(jwks))
}

/// What `server worker` serves on `SECKILL_WORKER_ADDR`: its liveness, its readiness and its
/// metrics (the relay's, the persisters', the reconciler's), for the scraper and the probes.
#[derive(Clone)]
pub struct WorkerProbes {
    pub db: PgPool,
    pub redis: Redis,
    pub broker: Broker,
    pub metrics: Arc<Metrics>,
    pub config: Arc<Config>,
}

macro_rules! probe_parts {
    ($($field:ident: $part:ty),* $(,)?) => {
        $(impl FromRef<WorkerProbes> for $part {
            fn from_ref(probes: &WorkerProbes) -> $part {
                probes.$field.clone()
            }
        })*
    };
}
probe_parts!(db: PgPool, redis: Redis, broker: Broker, metrics: Arc<Metrics>, config: Arc<Config>);

pub fn worker_router(probes: WorkerProbes) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(worker_readyz))
        .route("/metrics", get(exposition))
        .fallback(|| async { crate::domain::ApiError::NotFound })
        .with_state(probes)
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

/// How one engine answered a round of checks.
enum Said {
    Ok,
    /// It answers, not in full: some Redis masters do not (their shards wait for a failover).
    Partly(String),
    Down(String),
}

async fn within<F: std::future::Future<Output = anyhow::Result<()>>>(check: F) -> Said {
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(Ok(())) => Said::Ok,
        Ok(Err(e)) => Said::Down(format!("{e:#}")),
        Err(_) => Said::Down(format!("no answer within {} ms", CHECK_TIMEOUT.as_millis())),
    }
}

/// Each engine's answer to one round of checks, in the order postgres, redis, rabbitmq; each
/// also sets `seckill_dependency_up` (1 only for an engine answering in full).
async fn check_engines(
    db: &PgPool,
    redis: &Redis,
    broker: &Broker,
    metrics: &Metrics,
) -> [(&'static str, Said); 3] {
    let postgres = within(async {
        db::ping(db).await?;
        Ok(())
    });
    // Redis is up while any master answers: the shards of the others wait, the rest sell.
    let redis = async {
        match redis.answering(CHECK_TIMEOUT).await {
            Ok(Answering::All) => Said::Ok,
            Ok(Answering::Some(missing)) => Said::Partly(missing),
            Err(e) => Said::Down(format!("{e:#}")),
        }
    };
    let rabbitmq = within(broker.check());
    let (postgres, redis, rabbitmq) = tokio::join!(postgres, redis, rabbitmq);
    let answers = [
        ("postgres", postgres),
        ("redis", redis),
        ("rabbitmq", rabbitmq),
    ];
    for (name, answer) in &answers {
        metrics.dependency(name, matches!(answer, Said::Ok));
        match answer {
            Said::Ok => {}
            Said::Partly(e) => tracing::warn!(dependency = name, error = %e, "answering in part"),
            Said::Down(e) => tracing::warn!(dependency = name, error = %e, "not answering"),
        }
    }
    answers
}

/// `200` while the engines in `needed` answer, in full or in part (`ready`, or `degraded` when
/// any engine does not answer in full, each engine's answer in the body), else `503 not_ready`
/// naming every engine that did not answer at all.
fn readiness(answers: [(&'static str, Said); 3], needed: &[&str]) -> axum::response::Response {
    let down: Vec<&str> = answers
        .iter()
        .filter(|(_, a)| matches!(a, Said::Down(_)))
        .map(|(name, _)| *name)
        .collect();
    if down.iter().any(|name| needed.contains(name)) {
        let body = ErrorBody {
            error: "not_ready".into(),
            message: format!("not answering: {}", down.join(", ")),
        };
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    let mut body = serde_json::Map::new();
    let status = if answers.iter().all(|(_, a)| matches!(a, Said::Ok)) {
        "ready"
    } else {
        "degraded"
    };
    body.insert("status".into(), status.into());
    for (name, answer) in answers {
        let said = match answer {
            Said::Ok => "ok".to_string(),
            Said::Partly(e) => format!("answering in part: {e}"),
            Said::Down(e) => format!("not answering: {e}"),
        };
        body.insert(name.into(), said.into());
    }
    (StatusCode::OK, Json(serde_json::Value::Object(body))).into_response()
}

async fn readyz(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(broker): State<Broker>,
    State(metrics): State<Arc<Metrics>>,
) -> impl IntoResponse {
    readiness(
        check_engines(&db, &redis, &broker, &metrics).await,
        &["redis"],
    )
}

async fn worker_readyz(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(broker): State<Broker>,
    State(metrics): State<Arc<Metrics>>,
) -> impl IntoResponse {
    readiness(
        check_engines(&db, &redis, &broker, &metrics).await,
        &["postgres", "redis", "rabbitmq"],
    )
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
