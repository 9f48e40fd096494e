//! docs/operations.md "Traces": one buy is one trace, from the request through the gate, the
//! journal and RabbitMQ to the persister's commit, each step the child of the one before.

use crate::helpers::*;
use serde_json::json;

#[tokio::test]
async fn one_buy_is_one_trace_from_the_request_to_the_orders_commit() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 10, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let shopper = shoppers(&app, 1).await.remove(0);
    let path = app.path(&shopper.client, id).await;
    // The caller's span (a browser's, an edge's): sampled, so the whole buy is kept.
    let trace_id = format!("{:032x}", uuid::Uuid::new_v4().as_u128());
    let caller = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace_id}-{caller}-01");
    let (status, body) = app
        .buy_with_header(
            &shopper.client,
            id,
            ("traceparent", &traceparent),
            json!({"path": path}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    assert_settled(&app, id, &[token]).await;
    let names = ["request", "gate", "relay", "persist", "commit"];
    let spans = eventually(20, "the buy's five spans exported", || async {
        let spans: Vec<_> = finished_spans()
            .into_iter()
            .filter(|s| format!("{}", s.span_context.trace_id()) == trace_id)
            .collect();
        names
            .iter()
            .all(|name| spans.iter().any(|s| s.name == *name))
            .then_some(spans)
    })
    .await;
    let of = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    assert_eq!(format!("{}", of("request").parent_span_id), caller);
    for pair in names.windows(2) {
        assert_eq!(
            of(pair[1]).parent_span_id,
            of(pair[0]).span_context.span_id(),
            "{} is not the child of {}: {spans:#?}",
            pair[1],
            pair[0]
        );
    }
}
