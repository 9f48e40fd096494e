//! What the fault suites watch while a fault holds, besides the crowd's buys (the chaos suite's
//! and the partition suite's): each instance's readiness as an orchestrator's probe asks it, and
//! the pages and polls shoppers and merchants read, each answer timed.

use std::time::{Duration, Instant};
use tokio::sync::watch::Receiver;

/// The probe's promise (docs/api.md "Operations"): an answer within this, whatever hangs.
pub const READY_WITHIN: Duration = Duration::from_millis(800);
/// The pages' and polls' promise through any Redis fault (docs/reliability.md).
pub const PAGE_P99: Duration = Duration::from_millis(200);
/// The longest a sale may go without a `202` through one shard's fault, while others have stock.
pub const SALE_GAP: Duration = Duration::from_secs(2);

/// Asks each of `probes` (an instance's `/readyz`) every 250 ms, as the orchestrator's probe
/// does, until `going` turns false; how many answers were not 200 within [`READY_WITHIN`].
pub async fn readiness_while(probes: Vec<String>, mut going: Receiver<bool>) -> usize {
    let http = reqwest::Client::builder()
        .timeout(READY_WITHIN)
        .build()
        .unwrap();
    let mut failed = 0;
    let mut every = tokio::time::interval(Duration::from_millis(250));
    while *going.borrow() {
        tokio::select! {
            _ = every.tick() => {}
            _ = going.changed() => continue,
        }
        let asked = futures_util::future::join_all(probes.iter().map(|url| {
            let http = &http;
            async move { http.get(url).send().await.is_ok_and(|r| r.status() == 200) }
        }))
        .await;
        for (url, ok) in probes.iter().zip(asked) {
            if !ok {
                eprintln!("during the fault: {url} not ready");
                failed += 1;
            }
        }
    }
    failed
}

/// The pages and polls read, each answer with when it was asked, how long it took and whether it
/// was a 200.
pub struct Pages {
    pub reads: Vec<(Instant, Duration, bool)>,
}

impl Pages {
    /// Those asked from `from` on (while the fault held).
    pub fn since(self, from: Instant) -> Pages {
        Pages {
            reads: self.reads.into_iter().filter(|r| r.0 >= from).collect(),
        }
    }

    pub fn p99(&self) -> Duration {
        percentile(self.reads.iter().map(|r| r.1).collect(), 0.99)
    }

    /// What breaks the pages' promise, if anything.
    pub fn broken(&self) -> Vec<String> {
        let mut broken = Vec::new();
        let failed = self.reads.iter().filter(|r| !r.2).count();
        if failed > 0 {
            broken.push(format!(
                "{failed} page or poll answers not 200 while the fault held"
            ));
        }
        if self.p99() > PAGE_P99 {
            broken.push(format!(
                "pages and polls p99 {:.0} ms over {} reads while the fault held, past {} ms",
                self.p99().as_secs_f64() * 1000.0,
                self.reads.len(),
                PAGE_P99.as_millis()
            ));
        }
        broken
    }
}

/// Until `going` turns false, every 100 ms through `base`: the storefront, the sale's page, its
/// stock poll (as a shopper) and its live figures (as `merchant`), each answer timed. Started with
/// the sale, as its shoppers and merchant read it: the instances have read it before a fault.
pub async fn pages_while(
    base: String,
    merchant: reqwest::Client,
    id: i64,
    mut going: Receiver<bool>,
) -> Pages {
    let shopper = reqwest::Client::new();
    let reads = [
        (&shopper, "/".to_string()),
        (&shopper, format!("/activities/{id}")),
        (&shopper, format!("/api/activities/{id}/stock")),
        (&merchant, format!("/api/admin/activities/{id}/stats")),
    ];
    let mut pages = Pages { reads: Vec::new() };
    let mut every = tokio::time::interval(Duration::from_millis(100));
    while *going.borrow() {
        tokio::select! {
            _ = every.tick() => {}
            _ = going.changed() => continue,
        }
        for (client, path) in &reads {
            let asked = Instant::now();
            let answer = client
                .get(format!("{base}{path}"))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            let ok = match answer {
                Ok(resp) => resp.status() == 200 && resp.bytes().await.is_ok(),
                Err(_) => false,
            };
            let took = asked.elapsed();
            pages.reads.push((asked, took, ok));
            if !ok {
                eprintln!("pages: {path} did not answer 200");
            } else if took > PAGE_P99 {
                eprintln!("pages: {path} took {} ms", took.as_millis());
            }
        }
    }
    pages
}

/// The `q` quantile of `took` (zero when empty).
pub fn percentile(mut took: Vec<Duration>, q: f64) -> Duration {
    took.sort();
    took.get(((took.len() as f64 * q) as usize).min(took.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// The longest stretch without an accepted buy between the sending of the first buy accepted
/// and the last accepted answer.
pub fn longest_gap(history: &[loadtest::crowd::Answer]) -> Duration {
    let from = history
        .iter()
        .filter(|a| a.token.is_some())
        .map(|a| a.at)
        .min()
        .unwrap_or_default();
    let mut accepted: Vec<Duration> = history
        .iter()
        .filter(|a| a.token.is_some())
        .map(|a| a.at + a.took)
        .collect();
    accepted.sort();
    let mut gap = Duration::ZERO;
    let mut last = from;
    for at in accepted {
        gap = gap.max(at.saturating_sub(last));
        last = at;
    }
    gap
}
