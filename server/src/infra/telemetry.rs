//! Traces (docs/operations.md "Traces"): a buy's spans from its request through the gate, the
//! journal and RabbitMQ to the persister's commit, one trace. Off unless an OTLP endpoint is
//! configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, and the
//! other `OTEL_*` settings of the OpenTelemetry specification), then exported over OTLP/HTTP in
//! batches. The W3C `traceparent` carries the trace across each hop that is not a function call:
//! the request's header, the journal entry (a field), the RabbitMQ message (a header, and each
//! reservation of a batched message in its body).

use opentelemetry::{
    propagation::{Extractor, Injector, TextMapPropagator},
    trace::TraceContextExt,
};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider};
use std::{
    collections::HashMap,
    sync::atomic::{AtomicBool, Ordering},
};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ON: AtomicBool = AtomicBool::new(false);
const TRACEPARENT: &str = "traceparent";

/// Whether spans are exported: without it nothing is propagated either (no field in the journal,
/// no header), and the hot path pays nothing.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns propagation on: the process exports spans (its subscriber has the OpenTelemetry layer).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// The exporter the environment configures, if it configures one.
pub fn otlp_from_env() -> anyhow::Result<Option<SdkTracerProvider>> {
    let configured = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var(name).is_ok_and(|v| !v.is_empty()));
    if !configured {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("seckill")
        .build();
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build(),
    ))
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Injector for Fields<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
}

struct One<'a>(Option<&'a str>);

impl Extractor for One<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == TRACEPARENT).then_some(self.0?)
    }
    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT]
    }
}

/// The `traceparent` of `span` (empty when tracing is off or the span is not sampled).
pub fn traceparent(span: &tracing::Span) -> String {
    if !enabled() {
        return String::new();
    }
    let mut fields = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut Fields(&mut fields));
    fields.remove(TRACEPARENT).unwrap_or_default()
}

/// Makes `span` a child of the span a `traceparent` names (one from another hop); nothing when
/// tracing is off or there is none.
pub fn follow(span: &tracing::Span, traceparent: Option<&str>) {
    if !enabled() || traceparent.is_none_or(str::is_empty) {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&One(traceparent));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// The trace id of `span` (hex), for the log lines; empty when tracing is off.
pub fn trace_id(span: &tracing::Span) -> String {
    if !enabled() {
        return String::new();
    }
    let context = span.context();
    let id = context.span().span_context().trace_id();
    format!("{id}")
}

/// Makes `span`, work done for reservations that arrived traced (`traceparents`, one per buy),
/// a child of the first and linked to the others (a batch serves many buys, a span has one
/// parent).
pub fn follow_batch(span: &tracing::Span, traceparents: &[&str]) {
    if !enabled() {
        return;
    }
    follow(span, traceparents.first().copied());
    for other in traceparents.iter().skip(1) {
        let context = TraceContextPropagator::new().extract(&One(Some(other)));
        let linked = context.span().span_context().clone();
        if linked.is_valid() {
            span.add_link(linked);
        }
    }
}
