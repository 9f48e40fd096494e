//! The supervisor (`infra/supervisor.rs`) on a real pipeline: workers killed mid-sale are
//! started again, counted, and carry every buy to its order.

use crate::helpers::*;
use serde_json::json;

#[tokio::test]
async fn a_killed_relay_and_persisters_are_started_again_and_every_buy_becomes_an_order() {
    let app = spawn_app().await;
    let merchant = merchant(&app).await;
    let id = live_activity(&app, &merchant, 10, json!({})).await["id"]
        .as_i64()
        .unwrap();
    let supervisor = &app.state.supervisor;
    assert!(
        supervisor.abort_run("relay"),
        "the relay runs under the supervisor"
    );
    let mut killed = vec!["relay".to_string()];
    while supervisor.abort_run(&format!("persister-{}", killed.len() - 1)) {
        killed.push(format!("persister-{}", killed.len() - 1));
    }
    assert!(
        killed.len() >= 3,
        "the persisters run under the supervisor: {killed:?}"
    );
    assert!(!supervisor.abort_run("no-such-worker"));
    for name in &killed {
        eventually(30, &format!("{name} started again"), || async {
            (app.state.metrics.worker_restarts(name) == 1).then_some(())
        })
        .await;
    }
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("seckill_worker_restarts_total{worker=\"relay\"} 1"),
        "{metrics}"
    );

    // The pipeline works again: each buy becomes an order.
    let buyers = shoppers(&app, 4).await;
    let mut accepted = Vec::new();
    for shopper in &buyers {
        let path = app.path(&shopper.client, id).await;
        let (status, body) = json(app.buy(&shopper.client, id, json!({"path": path})).await).await;
        assert_eq!(status, 202, "{body}");
        accepted.push(body["token"].as_str().unwrap().to_string());
    }
    assert_settled(&app, id, &accepted).await;
}
