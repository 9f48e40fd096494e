//! Every request measured (docs/operations.md "Metrics"): its duration by route template, method
//! and status, and those in flight. The route is the template the router matched
//! (`/api/activities/{id}`), never the path a client sent: random ids and a scanner's paths all
//! land on the few routes there are, or on `unmatched`, and the series stay bounded.

use crate::infra::{
    metrics::{HttpLabels, Metrics, UNMATCHED},
    telemetry,
};
use axum::{
    extract::{MatchedPath, Request, State},
    http::{HeaderValue, Method},
    middleware::Next,
    response::Response,
};
use std::{sync::Arc, time::Instant};

/// A method as a label: the usual ones by name, any other (a client may send any token) as `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Counts a request out of the in-flight gauge however it ends (answered, or dropped when its
/// client went away).
struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.http_in_flight.dec();
    }
}

pub async fn measure(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, MatchedPath::as_str)
        .to_string();
    metrics.http_in_flight.inc();
    let _in_flight = InFlight(&metrics);
    let response = next.run(request).await;
    let labels = HttpLabels {
        method,
        route,
        status: response.status().as_u16(),
    };
    metrics
        .http_requests
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    response
}

/// The header a request's id travels in, both ways.
pub const REQUEST_ID: &str = "x-request-id";

/// An id a client (or the edge, nginx's `$request_id`) sent is kept when it is a plain token of
/// at most 64 characters; anything else is replaced, so no client writes what it likes into the
/// logs.
fn acceptable(id: &HeaderValue) -> bool {
    let id = id.as_bytes();
    !id.is_empty()
        && id.len() <= 64
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A new request id: 32 hex digits, a random prefix of this process and a counter (unique
/// without asking the system for randomness on every request).
fn fresh_id() -> HeaderValue {
    static PREFIX: std::sync::LazyLock<u64> = std::sync::LazyLock::new(rand::random);
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    HeaderValue::try_from(format!("{:016x}{n:016x}", *PREFIX))
        .expect("hex digits are a valid header value")
}

/// Gives every request an id (the one it came with, if acceptable, else a new one), which the
/// request's log lines carry (the trace layer's span, `startup/routes.rs`) and the response
/// returns in `x-request-id`.
pub async fn request_id(mut request: Request, next: Next) -> Response {
    let id = match request.headers().get(REQUEST_ID) {
        Some(id) if acceptable(id) => id.clone(),
        _ => fresh_id(),
    };
    request.headers_mut().insert(REQUEST_ID, id.clone());
    let mut response = next.run(request).await;
    response.headers_mut().insert(REQUEST_ID, id);
    response
}

/// The span every line a request logs is in: the request's id; traced, its trace id, and the
/// caller's span (`traceparent`) as parent.
pub fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|id| id.to_str().ok())
        .unwrap_or("");
    // Its id only: a span's fields are formatted for the log lines as it is made, on every
    // request (the edge's access log, joined on the id, has the method and path).
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        trace_id = tracing::field::Empty,
    );
    if telemetry::enabled() {
        let parent = request
            .headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok());
        telemetry::follow(&span, parent);
        span.record("trace_id", telemetry::trace_id(&span));
    }
    span
}
