//! The flash crowd (`seckill-load crowd`): N distinct signed-in shoppers, each fetching the
//! buy path at the start instant and buying, the way browsers do. Sessions are minted with the
//! server's secret (an operator tool; registering a crowd through argon2 is not the point), and each
//! shopper comes from an address of its own (`X-Forwarded-For`, for a server that trusts it).
//! The report: requests by outcome, throughput, latency percentiles from an HDR histogram, time to
//! sell out, time until every order is persisted, and the platform's invariants checked in the database.
//! The parts: `options.rs`, `accounts.rs`, `driver.rs`, `report.rs`.

mod accounts;
mod driver;
mod options;
mod report;

use crate::deployment::Deployment;
pub(crate) use accounts::*;
use anyhow::Context;
use app::api::{Role, ServerTime};
use driver::*;
pub use options::*;
pub use report::*;
use std::time::{Duration, Instant};

async fn server_time(http: &reqwest::Client, base: &str) -> anyhow::Result<ServerTime> {
    Ok(http
        .get(format!("{base}/api/time"))
        .send()
        .await?
        .json()
        .await?)
}

pub async fn run(deployment: &Deployment, opts: &CrowdOptions) -> anyhow::Result<Report> {
    let db = deployment.database().await?;
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let accounts = Accounts::create(&db, &run, opts.users, opts.home()?).await?;
    let signer = Signer::new(deployment, accounts.shop)?;
    let cookie = |user: i64, role: Role| signer.cookie(user, role);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(opts.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    let bases: Vec<&str> = opts
        .base_urls
        .iter()
        .map(|b| b.trim_end_matches('/'))
        .collect();
    anyhow::ensure!(!bases.is_empty(), "no base URL");
    let server_now = server_time(&http, bases[0]).await?;
    let activity = match opts.activity_id {
        Some(id) => existing_sale(&http, bases[0], id).await?,
        None => {
            let merchant = cookie(accounts.merchant, Role::Merchant);
            create_sale(&http, bases[0], opts, &run, &server_now, &merchant).await?
        }
    };
    let before =
        BeforeStart::prepare(&http, &bases, &activity, &accounts.shoppers, &cookie, opts).await?;
    // Wait for the start instant by the server's clock, as the browser's countdown does.
    let starts = chrono::DateTime::parse_from_rfc3339(&activity.starts_at).context("starts_at")?;
    let wait = (starts.timestamp_millis() - server_now.now_ms).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait).saturating_sub(before.took)).await;

    let started = Instant::now();
    let target = Target {
        http: &http,
        bases: &bases,
        id: activity.id,
        quantity: activity.per_user_limit,
        retry_for: opts.retry_for,
        requests: tokio::sync::Semaphore::new(opts.concurrency),
        started,
        proofs: before.proofs,
        places: before.places,
        seen: Seen::default(),
    };
    let merchant = cookie(accounts.merchant, Role::Merchant);
    let (tally, window) = target
        .crowd_and_window(
            deployment,
            &accounts.shoppers,
            &cookie,
            &merchant,
            &activity,
            opts,
        )
        .await?;
    let elapsed = started.elapsed();
    let (figures, persisted_after_last_buy) = settle(
        &db,
        activity.id,
        activity.per_user_limit,
        &tally,
        opts.settle,
    )
    .await?;
    Ok(Report::new(
        opts,
        &activity,
        tally,
        figures,
        Timings {
            joined_in: before.joined_in,
            elapsed,
            started,
            persisted_after_last_buy,
            window,
        },
    ))
}
