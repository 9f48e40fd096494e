//! Every request measured (docs/operations.md "Metrics"): its duration by route template, method
//! and status, and those in flight. The route is the template the router matched
//! (`/api/activities/{id}`), never the path a client sent: random ids and a scanner's paths all
//! land on the few routes there are, or on `unmatched`, and the series stay bounded.
//! The measuring runs outside the router (startup/routes.rs says why); the route marks its
//! template on the answer ([`MarkRouteLayer`]) for it. Each request also gets its id here.

use crate::infra::{
    metrics::{HttpLabels, Metrics, UNMATCHED},
    telemetry,
};
use axum::{
    extract::{MatchedPath, Request},
    http::{HeaderName, HeaderValue, Method},
    response::Response,
};
use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Instant,
};

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

/// Each request's id, span and measure, outermost around the router: the id (the one a request
/// came with, if acceptable, else a new one) in the request and on the answer in `x-request-id`;
/// the span every line the request logs is in ([`request_span`]), entered whenever the request
/// is worked on, with a line for its answer (at debug; an error for a 5xx); the duration by
/// route, method and status, and the requests in flight. A service of its own rather than
/// `from_fn` and tower-http's trace layer: it calls the stack inside without cloning it, boxing
/// a future or wrapping the body (every request passes here).
#[derive(Clone)]
pub struct ObserveLayer {
    /// Whether to give requests their ids, and their spans (a measurement may leave either out,
    /// as it may the metrics).
    pub ids: bool,
    pub spans: bool,
    pub metrics: Option<Arc<Metrics>>,
}

impl<S> tower::Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            inner,
            ids: self.ids,
            spans: self.spans,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    ids: bool,
    spans: bool,
    metrics: Option<Arc<Metrics>>,
}

impl<S> tower::Service<Request> for Observe<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Observed<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let id = self.ids.then(|| {
            let id = match request.headers().get(&REQUEST_ID) {
                Some(id) if acceptable(id) => id.clone(),
                _ => fresh_id(),
            };
            request.headers_mut().insert(REQUEST_ID, id.clone());
            id
        });
        let measured = self.metrics.clone().map(|metrics| {
            metrics.http_in_flight.inc();
            Measured {
                method: method_label(request.method()),
                started: Instant::now(),
                metrics,
            }
        });
        let span = if self.spans {
            request_span(&request)
        } else {
            tracing::Span::none()
        };
        let answer = span.in_scope(|| self.inner.call(request));
        Observed {
            id,
            measured,
            span,
            answer,
        }
    }
}

/// A request being measured: counted in flight until it is answered or dropped (its client went
/// away).
struct Measured {
    method: &'static str,
    started: Instant,
    metrics: Arc<Metrics>,
}

impl Drop for Measured {
    fn drop(&mut self) {
        self.metrics.http_in_flight.dec();
    }
}

pin_project_lite::pin_project! {
    pub struct Observed<F> {
        id: Option<HeaderValue>,
        measured: Option<Measured>,
        span: tracing::Span,
        #[pin]
        answer: F,
    }
}

impl<F, E> Future for Observed<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let mut response = ready!(this.answer.poll(cx))?;
        let route = response.extensions_mut().remove::<RouteTemplate>();
        let status = response.status().as_u16();
        if response.status().is_server_error() {
            tracing::error!(status, "answered with a server error");
        } else {
            tracing::debug!(status, "answered");
        }
        if let Some(measured) = this.measured.take() {
            let labels = HttpLabels {
                method: measured.method,
                route: route.map_or_else(|| UNMATCHED.to_owned(), |template| template.0),
                status,
            };
            measured
                .metrics
                .http_requests
                .get_or_create(&labels)
                .observe(measured.started.elapsed().as_secs_f64());
        }
        if let Some(id) = this.id.take() {
            response.headers_mut().insert(REQUEST_ID, id);
        }
        Poll::Ready(Ok(response))
    }
}

/// The route template a request matched, which its route marks on the answer.
#[derive(Clone)]
struct RouteTemplate(String);

/// Marks each answer with the route template its request matched (the router's [`MatchedPath`]),
/// for [`Observe`] outside the router. On every route: a service of its own rather than
/// `from_fn`, so a request pays nothing for it but the mark.
#[derive(Clone, Copy)]
pub struct MarkRouteLayer;

impl<S> tower::Layer<S> for MarkRouteLayer {
    type Service = MarkRoute<S>;

    fn layer(&self, inner: S) -> MarkRoute<S> {
        MarkRoute(inner)
    }
}

#[derive(Clone)]
pub struct MarkRoute<S>(S);

impl<S> tower::Service<Request> for MarkRoute<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Marked<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Marked {
            route: request
                .extensions()
                .get::<MatchedPath>()
                .map(|path| path.as_str().to_owned()),
            answer: self.0.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    pub struct Marked<F> {
        route: Option<String>,
        #[pin]
        answer: F,
    }
}

impl<F, E> Future for Marked<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = ready!(this.answer.poll(cx))?;
        if let Some(route) = this.route.take() {
            response.extensions_mut().insert(RouteTemplate(route));
        }
        Poll::Ready(Ok(response))
    }
}

/// The header a request's id travels in, both ways.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

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

/// The span every line a request logs is in: the request's id; traced, its trace id, and the
/// caller's span (`traceparent`) as parent.
fn request_span(request: &Request) -> tracing::Span {
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
