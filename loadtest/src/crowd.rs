//! The flash crowd (`seckill-load crowd`): N distinct signed-in shoppers, each fetching the
//! buy path at the start instant and buying, the way browsers do. Sessions are minted with the
//! server's secret (an operator tool; registering a crowd through argon2 is not the point), and each
//! shopper comes from an address of its own (`X-Forwarded-For`, for a server that trusts it).
//! The report: requests by outcome, throughput, latency percentiles from an HDR histogram, time to
//! sell out, time until every order is persisted, and the platform's invariants checked in the database.

use crate::deployment::Deployment;
use anyhow::Context;
use app::api::{Activity, BuyPath, BuyRequest, LineBoard, QueueStatus, Role, ServerTime};
use futures_util::{stream, StreamExt};
use hdrhistogram::Histogram;
use signing::{new_session_id, Claims, SessionSigner};
use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

#[derive(Clone, Debug)]
pub struct CrowdOptions {
    /// The instances (or one load balancer); shopper i starts on instance i mod n.
    pub base_urls: Vec<String>,
    pub users: usize,
    pub stock: i64,
    pub per_user_limit: i32,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Seconds between creating the sale and its start.
    pub lead_secs: i64,
    pub show_progress: bool,
    /// Wait until every accepted unit is an order (off when no persister runs).
    pub settle: bool,
    /// Buy on this existing activity (its stock, limit and start) instead of creating one; it
    /// must not need a captcha.
    pub activity_id: Option<i64>,
    /// Shoppers started per second (0: as fast as `concurrency` allows). At a rate the run is an
    /// open loop: shopper i is due at i / rate from the start whatever the server's pace, and
    /// the report adds each purchase's latency from the instant it was due (no coordinated
    /// omission: a server that falls behind is charged the time its shoppers waited to start).
    pub rate: u32,
    /// How long a shopper keeps trying after a transport error, a `503`, or a load balancer's
    /// `502`/`504` (the request may not have reached an instance), each time on the next
    /// instance and with the same `Idempotency-Key`, as a client behind a load balancer does
    /// (zero: no second try).
    pub retry_for: Duration,
    /// Stock shards of the sale it creates (`None`: the server's default).
    pub stock_shards: Option<i16>,
    /// Whether the sale it creates has a waiting room (`None`: not named, the server's default).
    /// On a sale with one, every shopper joins the line before the start, polls it as the page
    /// does, and buys with the ticket once admitted.
    pub waiting_room: Option<bool>,
    /// The proof-of-work difficulty of the sale it creates (`None`: no bot check). On a sale
    /// that takes a proof of work, every shopper fetches a challenge and solves it before the
    /// start, as the page does during the countdown, and buys with it.
    pub proof_of_work: Option<i32>,
    /// Every n-th shopper (0: none) sends two buys at once, each of the whole limit: with the
    /// per-user limit held, one of them is refused; without it the shopper ends over the limit,
    /// which the report's invariants catch.
    pub greedy_every: usize,
    /// On a sale with a waiting room: a window in which everyone waits and polls (the sale
    /// paused, some seconds after the start), measured for `make bench-waiting-room`.
    pub poll_window: Option<PollWindowOptions>,
}

/// The polling window's settings.
#[derive(Clone, Debug)]
pub struct PollWindowOptions {
    /// Seconds after the start at which the sale is paused (the places numbered by then).
    pub after_secs: u64,
    /// Seconds measured while it is paused.
    pub secs: u64,
    /// Processes whose CPU time is measured over the window (the instances, nginx).
    pub pids: Vec<u32>,
}

/// What the polling window measured.
#[derive(Debug)]
pub struct PollWindow {
    pub secs: f64,
    pub polls: u64,
    pub board_polls: u64,
    /// Board reads nginx (or a CDN) answered from its cache (`X-Cache-Status` HIT, STALE or
    /// UPDATING).
    pub cached: u64,
    /// Redis commands over the window (`INFO commandstats`, every command), by command.
    pub redis_calls: BTreeMap<String, u64>,
    /// CPU time of each measured process over the window, ms.
    pub cpu_ms: Vec<(u32, f64)>,
}

#[derive(Debug)]
pub struct Report {
    pub activity_id: i64,
    pub outcomes: BTreeMap<String, u64>,
    /// Answers that were tried again (by `retry_for`), by outcome.
    pub retried: BTreeMap<String, u64>,
    pub accepted: u64,
    /// The token of every `202`.
    pub tokens: Vec<String>,
    pub requests: u64,
    pub elapsed: Duration,
    /// Buy latency in microseconds: p50, p90, p99, p99.9, max.
    pub latency_us: [u64; 5],
    /// At a rate (an open loop): each purchase (path + buy) from the instant it was due to its
    /// answer, in microseconds: p50, p90, p99, p99.9, max; and the rate asked.
    pub paced: Option<(u32, [u64; 5])>,
    pub sold_out_after: Option<Duration>,
    pub persisted_after_last_buy: Option<Duration>,
    pub total_stock: i64,
    pub sold: i64,
    pub users_over_limit: i64,
    pub tokens_not_persisted: i64,
    /// Units the crowd asked for: shoppers × the activity's per-user limit.
    pub demand_units: i64,
    /// On a sale with a waiting room: the line's figures.
    pub queue: Option<QueueReport>,
    /// Every buy attempt, in the order answered.
    pub history: Vec<Answer>,
}

/// One buy attempt as the crowd saw it: the history a checker reads (`server/tests/partitions`).
#[derive(Debug, Clone)]
pub struct Answer {
    /// When it was sent, from the crowd's start (its path request first, then the buy).
    pub at: Duration,
    /// From sending to the answer (or to the error).
    pub took: Duration,
    pub shopper: usize,
    /// The `Idempotency-Key` every attempt of this shopper sends.
    pub key: String,
    /// `accepted`, an error code, or a transport outcome (as `outcomes` counts them).
    pub outcome: String,
    /// The order token of a `202`.
    pub token: Option<String>,
}

#[derive(Debug)]
pub struct QueueReport {
    /// Seconds the joins before the start took.
    pub joined_in: Duration,
    /// Status polls over the whole sale (the board's and the line's).
    pub polls: u64,
    /// Of them, reads of the line's board (`GET …/line`, cacheable), as the page makes once its
    /// place is numbered.
    pub board_polls: u64,
    /// From the start (or a later join) to the admission, in ms: p50, p90, p99, max.
    pub wait_ms: [u64; 4],
    pub admitted: u64,
    /// Shoppers the line told "sold out" while they waited.
    pub told_sold_out: u64,
    /// Board reads answered by a cache in front (`X-Cache-Status`).
    pub board_cached: u64,
    /// Spearman's rank correlation of the places (admission order promised) and the instants
    /// the shoppers saw their admission, over those whose place was numbered; and how many.
    pub order_kept: Option<(f64, usize)>,
    pub window: Option<PollWindow>,
}

impl Report {
    /// the platform's invariants: sold exactly what was accepted, at most the stock and exactly the
    /// stock when demand exceeded it, nobody over the limit, nothing left queued.
    pub fn invariants_hold(&self) -> bool {
        let expected = self.demand_units.min(self.total_stock);
        self.sold == self.accepted as i64
            && self.sold == expected
            && self.users_over_limit == 0
            && self.tokens_not_persisted == 0
    }

    pub fn print(&self) {
        let secs = self.elapsed.as_secs_f64();
        println!(
            "activity {}: {} shoppers (each: GET path + POST buy) in {:.2} s = {:.0} shoppers/s",
            self.activity_id,
            self.requests,
            secs,
            self.requests as f64 / secs
        );
        for (outcome, n) in &self.outcomes {
            println!("  {outcome:<16} {n:>9}");
        }
        for (outcome, n) in &self.retried {
            println!("  retried after {outcome:<16} {n:>9}");
        }
        let [p50, p90, p99, p999, max] = self.latency_us.map(|us| us as f64 / 1000.0);
        println!("buy latency ms: p50 {p50:.2}  p90 {p90:.2}  p99 {p99:.2}  p99.9 {p999:.2}  max {max:.2}");
        if let Some((rate, paced)) = self.paced {
            let [p50, p90, p99, p999, max] = paced.map(|us| us as f64 / 1000.0);
            println!("open loop at {rate} shoppers/s, purchase (path + buy) from its due instant ms: p50 {p50:.2}  p90 {p90:.2}  p99 {p99:.2}  p99.9 {p999:.2}  max {max:.2}");
        }
        let ms = |d: Option<Duration>| {
            d.map_or("n/a".to_string(), |d| {
                format!("{:.0} ms", d.as_secs_f64() * 1000.0)
            })
        };
        println!(
            "sold out after {} from the start; every order persisted {} after the last buy",
            ms(self.sold_out_after),
            ms(self.persisted_after_last_buy)
        );
        if let Some(q) = &self.queue {
            let [p50, p90, p99, max] = q.wait_ms.map(|ms| ms as f64 / 1000.0);
            println!(
                "waiting room: joined in {:.1} s before the start; {} admitted, {} told sold out while waiting; {} status polls ({} of the board)",
                q.joined_in.as_secs_f64(), q.admitted, q.told_sold_out, q.polls, q.board_polls
            );
            println!(
                "wait for admission s: p50 {p50:.1}  p90 {p90:.1}  p99 {p99:.1}  max {max:.1}"
            );
            println!(
                "board reads answered by the cache in front: {} of {}",
                q.board_cached, q.board_polls
            );
            if let Some((rho, n)) = q.order_kept {
                println!("order kept: rank correlation of place and admission (Spearman) {rho:.4} over {n} admitted");
            }
            if let Some(w) = &q.window {
                w.print();
            }
        }
        println!(
            "invariants: sold {} of {} (accepted {}), users over the limit {}, tokens not persisted {} → {}",
            self.sold,
            self.total_stock,
            self.accepted,
            self.users_over_limit,
            self.tokens_not_persisted,
            if self.invariants_hold() { "OK" } else { "BROKEN" }
        );
    }
}

impl PollWindow {
    pub fn print(&self) {
        let total: u64 = self.redis_calls.values().sum();
        let per_poll = |n: f64| n / (self.polls.max(1) as f64);
        println!(
            "polling window: {} polls in {:.1} s ({:.0}/s), {} of the board, {} answered by the cache ({:.1} %)",
            self.polls,
            self.secs,
            self.polls as f64 / self.secs,
            self.board_polls,
            self.cached,
            100.0 * self.cached as f64 / self.board_polls.max(1) as f64
        );
        println!(
            "polling window: {total} Redis commands = {:.4} per poll",
            per_poll(total as f64)
        );
        let mut top: Vec<_> = self.redis_calls.iter().filter(|(_, n)| **n > 0).collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        for (cmd, n) in top.iter().take(8) {
            println!(
                "  redis {cmd:<16} {n:>9}  ({:.4} per poll)",
                per_poll(**n as f64)
            );
        }
        for (pid, ms) in &self.cpu_ms {
            println!(
                "polling window: process {pid} CPU {ms:.0} ms = {:.1} µs per poll",
                1000.0 * per_poll(*ms)
            );
        }
    }
}

/// A process's CPU time so far (user + system), ms, from `/proc` (Linux).
fn cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // The kernel's clock ticks are 100 a second on Linux.
    Some(ticks * 10.0)
}

/// Spearman's rank correlation of the pairs (ties share their mean rank).
pub fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    fn ranks(values: Vec<f64>) -> Vec<f64> {
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
        let mut ranks = vec![0.0; values.len()];
        let mut i = 0;
        while i < order.len() {
            let mut j = i;
            while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
                j += 1;
            }
            let mean = (i + j) as f64 / 2.0;
            for k in i..=j {
                ranks[order[k]] = mean;
            }
            i = j + 1;
        }
        ranks
    }
    if pairs.len() < 2 {
        return None;
    }
    let x = ranks(pairs.iter().map(|p| p.0).collect());
    let y = ranks(pairs.iter().map(|p| p.1).collect());
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(&y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sx = x.iter().map(|a| (a - mx).powi(2)).sum::<f64>().sqrt();
    let sy = y.iter().map(|b| (b - my).powi(2)).sum::<f64>().sqrt();
    (sx > 0.0 && sy > 0.0).then(|| cov / (sx * sy))
}

/// Counters the polling window reads while the crowd runs.
#[derive(Default)]
struct Seen {
    polls: AtomicU64,
    board: AtomicU64,
    cached: AtomicU64,
}

struct Tally {
    started: Instant,
    history: Vec<Answer>,
    outcomes: BTreeMap<String, u64>,
    retried: BTreeMap<String, u64>,
    latency: Histogram<u64>,
    paced: Histogram<u64>,
    accepted_units: i64,
    tokens: Vec<String>,
    sold_out_at: Option<Instant>,
    last_accept: Option<Instant>,
    waits: Histogram<u64>,
    polls: u64,
    board_polls: u64,
    told_sold_out: u64,
    board_cached: u64,
    /// (place, ms from the start to the admission seen) of each admitted shopper with a place.
    admissions: Vec<(i64, u64)>,
}

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
    let accounts = Accounts::create(&db, &run, opts.users).await?;
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

/// The crowd's accounts in the database: a merchant of the first shop (the first found, else a
/// new one), and `users` new shoppers, inserted ten thousand at a time.
pub(crate) struct Accounts {
    pub(crate) merchant: i64,
    pub(crate) shop: i64,
    pub(crate) shoppers: Vec<i64>,
}

impl Accounts {
    pub(crate) async fn create(
        db: &sqlx::PgPool,
        run: &str,
        users: usize,
    ) -> anyhow::Result<Accounts> {
        let (merchant, shop): (i64, i64) = match sqlx::query_as(
            "SELECT id, shop_id FROM users WHERE role = 'merchant' ORDER BY id LIMIT 1",
        )
        .fetch_optional(db)
        .await?
        {
            Some(found) => found,
            None => {
                sqlx::query_as(
                    "INSERT INTO users (username, password_hash, role, shop_id)
                 SELECT $1, '!', 'merchant', id FROM shops ORDER BY id LIMIT 1 RETURNING id, shop_id",
                )
                .bind(format!("crowd_m_{run}"))
                .fetch_one(db)
                .await?
            }
        };
        let mut shoppers = Vec::with_capacity(users);
        for chunk in (0..users).collect::<Vec<_>>().chunks(10_000) {
            let names: Vec<String> = chunk.iter().map(|i| format!("crowd_{run}_{i}")).collect();
            let ids: Vec<i64> = sqlx::query_scalar(
                "INSERT INTO users (username, password_hash, role) SELECT u, '!', 'shopper' FROM UNNEST($1::text[]) AS u RETURNING id",
            )
            .bind(&names)
            .fetch_all(db)
            .await?;
            shoppers.extend(ids);
        }
        Ok(Accounts {
            merchant,
            shop,
            shoppers,
        })
    }
}

/// Session cookies minted with the server's secret, valid for an hour.
pub(crate) struct Signer {
    keys: SessionSigner,
    shop: i64,
    expires_at: i64,
}

impl Signer {
    pub(crate) fn new(deployment: &Deployment, shop: i64) -> anyhow::Result<Signer> {
        Ok(Signer {
            keys: SessionSigner::new(deployment.secret()?),
            shop,
            expires_at: chrono::Utc::now().timestamp() + 3600,
        })
    }

    pub(crate) fn cookie(&self, user_id: i64, role: Role) -> String {
        let claims = Claims {
            sid: new_session_id(),
            user_id,
            role,
            shop_id: if role == Role::Merchant { self.shop } else { 0 },
            epoch: 0,
            expires_at: self.expires_at,
            joined: 0,
            auth_at: 0,
        };
        format!("sid={}", self.keys.sign(&claims))
    }
}

async fn existing_sale(http: &reqwest::Client, base: &str, id: i64) -> anyhow::Result<Activity> {
    let resp = http
        .get(format!("{base}/api/activities/{id}"))
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "activity {id}: {}",
        resp.status()
    );
    Ok(resp.json().await?)
}

/// A new sale of the options' stock and limit, starting `lead_secs` from the server's now.
pub(crate) async fn create_sale(
    http: &reqwest::Client,
    base: &str,
    opts: &CrowdOptions,
    run: &str,
    server_now: &ServerTime,
    merchant_cookie: &str,
) -> anyhow::Result<Activity> {
    let starts = chrono::DateTime::from_timestamp_millis(server_now.now_ms)
        .context("server time")?
        + chrono::Duration::seconds(opts.lead_secs);
    let mut sale = serde_json::json!({
        "title": format!("Crowd {run}"),
        "price_cents": 10_000,
        "seckill_price_cents": 1_000,
        "starts_at": starts.to_rfc3339(),
        "ends_at": (starts + chrono::Duration::hours(1)).to_rfc3339(),
        "stock": opts.stock,
        "per_user_limit": opts.per_user_limit,
        "bot_check": if opts.proof_of_work.is_some() { "proof_of_work" } else { "none" },
    });
    if let Some(difficulty) = opts.proof_of_work {
        sale["pow_difficulty"] = difficulty.into();
    }
    // Named only when asked, so that the tool also drives servers that predate shards.
    if let Some(shards) = opts.stock_shards {
        sale["stock_shards"] = shards.into();
    }
    if let Some(on) = opts.waiting_room {
        sale["waiting_room"] = on.into();
    }
    let resp = http
        .post(format!("{base}/api/admin/activities"))
        .header("cookie", merchant_cookie)
        .json(&sale)
        .send()
        .await?;
    anyhow::ensure!(
        resp.status().as_u16() == 201,
        "creating the sale: {} {}",
        resp.status(),
        resp.text().await.unwrap_or_default()
    );
    Ok(resp.json().await?)
}

/// Shopper i's own client address (`X-Forwarded-For`).
pub(crate) fn addr_of(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

/// What the shoppers do during the countdown, as the page does: join the line of a sale with a
/// waiting room, solve the proofs of work of a sale that takes them.
struct BeforeStart {
    joined_in: Duration,
    /// Each shopper's place value (the `place` cookie the join set), by shopper.
    places: Vec<Option<String>>,
    proofs: Vec<String>,
    took: Duration,
}

impl BeforeStart {
    async fn prepare(
        http: &reqwest::Client,
        bases: &[&str],
        activity: &Activity,
        users: &[i64],
        cookie: &impl Fn(i64, Role) -> String,
        opts: &CrowdOptions,
    ) -> anyhow::Result<BeforeStart> {
        let joining = Instant::now();
        let mut places = vec![None; users.len()];
        if activity.waiting_room {
            let aid = activity.id;
            let joins: Vec<(usize, anyhow::Result<Joined>)> =
                stream::iter(users.iter().copied().enumerate())
                    .map(|(i, user)| {
                        let (cookie, addr) = (cookie(user, Role::Shopper), addr_of(i));
                        let base = bases[i % bases.len()];
                        async move { (i, join_line(http, base, aid, &cookie, &addr, false).await) }
                    })
                    .buffer_unordered(opts.concurrency)
                    .collect()
                    .await;
            let mut failed = 0;
            for (i, joined) in joins {
                match joined {
                    Ok(j) => places[i] = j.place,
                    Err(_) => failed += 1,
                }
            }
            anyhow::ensure!(
                failed == 0,
                "{failed} shoppers could not join the waiting room"
            );
        }
        let joined_in = joining.elapsed();
        let proofs = if activity.bot_check.takes_proof_of_work() {
            solve_all(http, bases, activity.id, users, cookie, opts.concurrency).await?
        } else {
            Vec::new()
        };
        Ok(BeforeStart {
            joined_in,
            places,
            proofs,
            took: joining.elapsed(),
        })
    }
}

/// Until every accepted unit is an order (or two minutes; not at all without `settle`): the
/// database's figures, and how long after the last accepted buy the last order was written.
async fn settle(
    db: &sqlx::PgPool,
    id: i64,
    quantity: i32,
    t: &Tally,
    settle: bool,
) -> anyhow::Result<(Figures, Option<Duration>)> {
    let last_buy = t.last_accept.unwrap_or_else(Instant::now);
    let deadline = Instant::now() + Duration::from_secs(if settle { 120 } else { 0 });
    let tokens: Vec<uuid::Uuid> = t.tokens.iter().filter_map(|t| t.parse().ok()).collect();
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        poll.tick().await;
        let figures = Figures::read(db, id, quantity, &tokens).await?;
        if figures.tokens_missing == 0 {
            return Ok((figures, Some(last_buy.elapsed())));
        }
        if Instant::now() > deadline {
            return Ok((figures, None));
        }
    }
}

struct Timings {
    joined_in: Duration,
    elapsed: Duration,
    started: Instant,
    persisted_after_last_buy: Option<Duration>,
    window: Option<PollWindow>,
}

impl Report {
    fn new(
        opts: &CrowdOptions,
        activity: &Activity,
        t: Tally,
        figures: Figures,
        timings: Timings,
    ) -> Report {
        let q = |p: f64| t.latency.value_at_quantile(p);
        let w = |p: f64| t.waits.value_at_quantile(p);
        let queue = activity.waiting_room.then(|| QueueReport {
            joined_in: timings.joined_in,
            polls: t.polls,
            board_polls: t.board_polls,
            wait_ms: [w(0.5), w(0.9), w(0.99), t.waits.max()],
            admitted: t.waits.len(),
            told_sold_out: t.told_sold_out,
            board_cached: t.board_cached,
            order_kept: spearman(
                &t.admissions
                    .iter()
                    .map(|&(p, w)| (p as f64, w as f64))
                    .collect::<Vec<_>>(),
            )
            .map(|rho| (rho, t.admissions.len())),
            window: timings.window,
        });
        Report {
            activity_id: activity.id,
            requests: t.outcomes.values().sum::<u64>(),
            accepted: t.accepted_units as u64,
            latency_us: [q(0.5), q(0.9), q(0.99), q(0.999), t.latency.max()],
            paced: (opts.rate > 0).then(|| {
                let p = |q: f64| t.paced.value_at_quantile(q);
                (
                    opts.rate,
                    [p(0.5), p(0.9), p(0.99), p(0.999), t.paced.max()],
                )
            }),
            sold_out_after: t.sold_out_at.map(|at| at - timings.started),
            tokens_not_persisted: figures.tokens_missing,
            tokens: t.tokens,
            outcomes: t.outcomes,
            retried: t.retried,
            elapsed: timings.elapsed,
            persisted_after_last_buy: timings.persisted_after_last_buy,
            total_stock: figures.total_stock,
            sold: figures.sold,
            users_over_limit: figures.users_over_limit,
            demand_units: opts.users as i64 * i64::from(activity.per_user_limit),
            queue,
            history: t.history,
        }
    }
}

impl Tally {
    fn new() -> anyhow::Result<Tally> {
        Ok(Tally {
            started: Instant::now(),
            history: Vec::new(),
            outcomes: BTreeMap::new(),
            retried: BTreeMap::new(),
            latency: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            paced: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            accepted_units: 0,
            tokens: Vec::new(),
            sold_out_at: None,
            last_accept: None,
            waits: Histogram::new_with_bounds(1, 3_600_000, 3)?,
            polls: 0,
            board_polls: 0,
            told_sold_out: 0,
            board_cached: 0,
            admissions: Vec::new(),
        })
    }
}

impl Target<'_> {
    /// Every shopper at once (paced at `rate` when set), each buying once, or waiting in the
    /// line and then buying; the tally of what they were told.
    async fn crowd(
        &self,
        users: &[i64],
        cookie: &impl Fn(i64, Role) -> String,
        waiting_room: bool,
        opts: &CrowdOptions,
    ) -> anyhow::Result<Tally> {
        let progress = if opts.show_progress {
            indicatif::ProgressBar::new(opts.users as u64)
        } else {
            indicatif::ProgressBar::hidden()
        };
        let tally = Arc::new(Mutex::new(Tally::new()?));
        // In a waiting room every shopper is there at once (polling); `concurrency` bounds the
        // requests in flight instead.
        let present = if waiting_room {
            users.len().max(1)
        } else {
            opts.concurrency
        };
        stream::iter(users.iter().enumerate())
            .for_each_concurrent(present, |(i, &user)| {
                let (tally, progress) = (tally.clone(), &progress);
                let cookie = cookie(user, Role::Shopper);
                let addr = addr_of(i);
                let start_at = (opts.rate > 0).then(|| {
                    self.started + Duration::from_secs_f64(i as f64 / f64::from(opts.rate))
                });
                async move {
                    if let Some(at) = start_at {
                        tokio::time::sleep_until(at.into()).await;
                    }
                    let greedy = opts.greedy_every > 0 && i % opts.greedy_every == 0;
                    let outcome = if waiting_room {
                        self.wait_and_shop(i, &cookie, &addr, &tally).await
                    } else if greedy {
                        let (first, second) = tokio::join!(
                            self.shop(i, &cookie, &addr, None, &tally),
                            self.shop(i, &cookie, &addr, None, &tally)
                        );
                        *tally
                            .lock()
                            .expect("tally")
                            .outcomes
                            .entry(second)
                            .or_default() += 1;
                        first
                    } else {
                        self.shop(i, &cookie, &addr, None, &tally).await
                    };
                    let mut t = tally.lock().expect("tally");
                    if let Some(due) = start_at {
                        let _ = t.paced.record((due.elapsed().as_micros() as u64).max(1));
                    }
                    *t.outcomes.entry(outcome).or_default() += 1;
                    progress.inc(1);
                }
            })
            .await;
        progress.finish_and_clear();
        Ok(Arc::try_unwrap(tally)
            .ok()
            .context("tally still shared")?
            .into_inner()
            .expect("tally"))
    }
}

/// The database's side of the report.
#[derive(sqlx::FromRow)]
struct Figures {
    total_stock: i64,
    sold: i64,
    users_over_limit: i64,
    /// Tokens a `202` named that are no order.
    tokens_missing: i64,
}

impl Figures {
    /// Asked again for up to a minute while PostgreSQL does not answer (a fault test may have
    /// just restarted it).
    /// `tokens`: every token a `202` named; those that are no order (of any status) are counted
    /// one by one, not as a sum of units that other orders could make up for.
    async fn read(
        db: &sqlx::PgPool,
        id: i64,
        per_user_limit: i32,
        tokens: &[uuid::Uuid],
    ) -> anyhow::Result<Figures> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let read = sqlx::query_as(
                "SELECT total_stock, sold,
                        (SELECT count(*) FROM (SELECT user_id FROM orders WHERE activity_id = $1 AND status IN ('confirmed', 'paid')
                         GROUP BY user_id HAVING sum(quantity) > $2) o) AS users_over_limit,
                        (SELECT count(*) FROM unnest($3::uuid[]) AS t(token)
                         WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.token = t.token)) AS tokens_missing
                 FROM activities WHERE id = $1",
            )
            .bind(id)
            .bind(i64::from(per_user_limit))
            .bind(tokens)
            .fetch_one(db)
            .await;
            match read {
                // Retried until the deadline: the database may be down for a while (the fault suites).
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                read => return Ok(read?),
            }
        }
    }
}

/// Where and what the crowd buys.
struct Target<'a> {
    http: &'a reqwest::Client,
    bases: &'a [&'a str],
    id: i64,
    quantity: i32,
    retry_for: Duration,
    /// Requests in flight at once (a waiting room's crowd is all there, polling).
    requests: tokio::sync::Semaphore,
    started: Instant,
    /// Each shopper's solved proof of work (empty when the sale takes none).
    proofs: Vec<String>,
    /// Each shopper's place value in the waiting room, as the join left it.
    places: Vec<Option<String>>,
    seen: Seen,
}

/// Every shopper's proof of work for sale `id`: the challenges fetched as each shopper, solved
/// on every core (the solving is the browser's cost; it is paid here before the start).
async fn solve_all(
    http: &reqwest::Client,
    bases: &[&str],
    id: i64,
    users: &[i64],
    cookie: &impl Fn(i64, Role) -> String,
    concurrency: usize,
) -> anyhow::Result<Vec<String>> {
    let challenges: Vec<anyhow::Result<altcha::Challenge>> =
        stream::iter(users.iter().copied().enumerate())
            .map(|(i, user)| {
                let (cookie, base) = (cookie(user, Role::Shopper), bases[i % bases.len()]);
                async move {
                    let resp = http
                        .get(format!("{base}/api/activities/{id}/challenge"))
                        .header("cookie", cookie)
                        .send()
                        .await?;
                    anyhow::ensure!(resp.status().is_success(), "challenge: {}", resp.status());
                    Ok(resp.json().await?)
                }
            })
            .buffered(concurrency)
            .collect()
            .await;
    let challenges = challenges.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_task = challenges.len().div_ceil(cores).max(1);
    let mut tasks = Vec::new();
    for part in challenges.chunks(per_task) {
        let part = part.to_vec();
        tasks.push(tokio::task::spawn_blocking(move || {
            part.into_iter()
                .map(|challenge| {
                    signing::pow::solve(challenge)
                        .context("no solution within the solver's time limit")
                })
                .collect::<anyhow::Result<Vec<String>>>()
        }));
    }
    let mut proofs = Vec::with_capacity(users.len());
    for task in tasks {
        proofs.extend(task.await??);
    }
    Ok(proofs)
}

/// What a join handed the shopper: the place value it set.
struct Joined {
    place: Option<String>,
}

/// The `place` value a response set, if any.
fn place_set(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("place="))
        .map(|c| c.split(';').next().unwrap_or_default().to_string())
        .filter(|v| !v.is_empty())
}

/// Joins (or `again`: re-joins) a sale's waiting room; the place value it hands back.
async fn join_line(
    http: &reqwest::Client,
    base: &str,
    id: i64,
    cookie: &str,
    addr: &str,
    again: bool,
) -> anyhow::Result<Joined> {
    let resp = http
        .post(format!("{base}/api/activities/{id}/queue"))
        .header("cookie", cookie)
        .header("x-forwarded-for", addr)
        .json(&serde_json::json!({ "again": again }))
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "join: {}", resp.status());
    let place = place_set(&resp);
    let _: QueueStatus = resp.json().await?;
    Ok(Joined { place })
}

/// What one attempt came to, and whether a client would try it again.
struct Attempt {
    outcome: String,
    retry: bool,
}

impl Attempt {
    fn done(outcome: impl Into<String>) -> Attempt {
        Attempt {
            outcome: outcome.into(),
            retry: false,
        }
    }

    fn transport(e: &reqwest::Error, step: &str) -> Attempt {
        let what = if e.is_timeout() {
            "timeout"
        } else {
            "transport_error"
        };
        Attempt {
            outcome: format!("{step}{what}"),
            retry: true,
        }
    }
}

impl Target<'_> {
    /// One shopper in a waiting room, as the page follows it: once the place is numbered, reads
    /// the line's board and works out where it stands; asks the line itself (`GET …/queue`,
    /// with the place value) before that and when its turn has come; once admitted, buys with
    /// the ticket.
    async fn wait_and_shop(
        &self,
        shopper: usize,
        cookie: &str,
        addr: &str,
        tally: &Mutex<Tally>,
    ) -> String {
        let base = self.bases[shopper % self.bases.len()];
        let id = self.id;
        let mut held = self.places.get(shopper).cloned().flatten();
        let mut place: Option<i64> = None;
        loop {
            let on_board = match place {
                Some(p) => self.board(base, tally).await.map(|b| b.status_of(p, 0)),
                None => Some(None),
            };
            let status = match on_board {
                Some(Some(status)) => Some(status),
                Some(None) => self
                    .line(base, cookie, held.as_deref(), addr, tally)
                    .await
                    .map(|(status, renewed)| {
                        held = renewed.or(held.take());
                        status
                    }),
                None => None,
            };
            let Some(status) = status else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            if status.place.is_some() {
                place = status.place;
            }
            match status.state.as_str() {
                "admitted" => {
                    let waited = self.started.elapsed().as_millis() as u64;
                    {
                        let mut t = tally.lock().expect("tally");
                        let _ = t.waits.record(waited.max(1));
                        if let Some(p) = place {
                            t.admissions.push((p, waited));
                        }
                    }
                    let ticket = status.ticket.unwrap_or_default();
                    return self.shop(shopper, cookie, addr, Some(&ticket), tally).await;
                }
                "sold_out" => {
                    tally.lock().expect("tally").told_sold_out += 1;
                    return "sold_out_waiting".into();
                }
                "ended" => return "ended".into(),
                "passed" | "not_joined" => {
                    let _permit = self.requests.acquire().await.expect("never closed");
                    place = None;
                    if let Ok(joined) = join_line(self.http, base, id, cookie, addr, true).await {
                        held = joined.place;
                    }
                }
                _ => {
                    let after = status.poll_after_ms.clamp(100, 60_000) as u64;
                    tokio::time::sleep(Duration::from_millis(after)).await;
                }
            }
        }
    }

    /// The crowd, and beside it the polling window when asked (a sale with a waiting room).
    async fn crowd_and_window(
        &self,
        deployment: &Deployment,
        shoppers: &[i64],
        cookie: &impl Fn(i64, Role) -> String,
        merchant: &str,
        activity: &Activity,
        opts: &CrowdOptions,
    ) -> anyhow::Result<(Tally, Option<PollWindow>)> {
        let (tally, window) = tokio::join!(
            self.crowd(shoppers, cookie, activity.waiting_room, opts),
            async {
                match (&opts.poll_window, activity.waiting_room) {
                    (Some(w), true) => Some(self.poll_window(deployment, w, merchant).await),
                    _ => None,
                }
            }
        );
        Ok((tally?, window.transpose()?))
    }

    /// The polling window: some seconds after the start the sale is paused (admission stops,
    /// everyone still in line waits and polls as told), then measured for `w.secs`, then resumed.
    async fn poll_window(
        &self,
        deployment: &Deployment,
        w: &PollWindowOptions,
        merchant: &str,
    ) -> anyhow::Result<PollWindow> {
        let client = redis::Client::open(deployment.single_redis()?)?;
        let mut redis = redis::aio::ConnectionManager::new(client).await?;
        tokio::time::sleep_until((self.started + Duration::from_secs(w.after_secs)).into()).await;
        let base = self.bases[0];
        let pause = |action: &'static str| {
            self.http
                .post(format!("{base}/api/admin/activities/{}/{action}", self.id))
                .header("cookie", merchant)
                .json(&serde_json::json!({}))
                .send()
        };
        anyhow::ensure!(
            pause("pause").await?.status().is_success(),
            "pausing the sale"
        );
        // Every instance's activity cache and board, and the cache in front, see the pause.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let before = self.snapshot(&mut redis, &w.pids).await?;
        let at = Instant::now();
        tokio::time::sleep(Duration::from_secs(w.secs)).await;
        let after = self.snapshot(&mut redis, &w.pids).await?;
        let secs = at.elapsed().as_secs_f64();
        anyhow::ensure!(
            pause("resume").await?.status().is_success(),
            "resuming the sale"
        );
        let (calls_before, cpu_before, seen_before) = before;
        let (calls_after, cpu_after, seen_after) = after;
        Ok(PollWindow {
            secs,
            polls: seen_after[0] - seen_before[0],
            board_polls: seen_after[1] - seen_before[1],
            cached: seen_after[2] - seen_before[2],
            redis_calls: calls_after
                .iter()
                .map(|(k, n)| (k.clone(), n - calls_before.get(k).copied().unwrap_or(0)))
                .collect(),
            cpu_ms: cpu_after
                .iter()
                .zip(&cpu_before)
                .map(|((pid, a), (_, b))| (*pid, a - b))
                .collect(),
        })
    }

    /// Redis's commands so far by command (`INFO commandstats`), the processes' CPU time, and
    /// the polls, board reads and cache hits seen so far.
    async fn snapshot(
        &self,
        redis: &mut redis::aio::ConnectionManager,
        pids: &[u32],
    ) -> anyhow::Result<(BTreeMap<String, u64>, Vec<(u32, f64)>, [u64; 3])> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(redis)
            .await?;
        let calls = info
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
                Some((name.to_string(), rest.split(',').next()?.parse().ok()?))
            })
            .collect();
        let cpu = pids
            .iter()
            .map(|&pid| (pid, cpu_ms(pid).unwrap_or(0.0)))
            .collect();
        let seen = [
            self.seen.polls.load(Relaxed),
            self.seen.board.load(Relaxed),
            self.seen.cached.load(Relaxed),
        ];
        Ok((calls, cpu, seen))
    }

    /// The line's board of the sale (`None`: not read).
    async fn board(&self, base: &str, tally: &Mutex<Tally>) -> Option<LineBoard> {
        let resp = {
            let _permit = self.requests.acquire().await.expect("never closed");
            self.http
                .get(format!("{base}/api/activities/{}/line", self.id))
                .send()
                .await
        };
        let cached = resp.as_ref().is_ok_and(|r| {
            r.headers()
                .get("x-cache-status")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| matches!(v, "HIT" | "STALE" | "UPDATING"))
        });
        {
            let mut t = tally.lock().expect("tally");
            t.polls += 1;
            t.board_polls += 1;
            t.board_cached += u64::from(cached);
        }
        self.seen.polls.fetch_add(1, Relaxed);
        self.seen.board.fetch_add(1, Relaxed);
        self.seen.cached.fetch_add(u64::from(cached), Relaxed);
        match resp {
            Ok(r) if r.status().is_success() => r.json::<LineBoard>().await.ok(),
            _ => None,
        }
    }

    /// Where the shopper stands, from the line itself; and the place value it handed back.
    async fn line(
        &self,
        base: &str,
        cookie: &str,
        held: Option<&str>,
        addr: &str,
        tally: &Mutex<Tally>,
    ) -> Option<(QueueStatus, Option<String>)> {
        let cookies = match held {
            Some(place) => format!("{cookie}; place={place}"),
            None => cookie.to_string(),
        };
        let resp = {
            let _permit = self.requests.acquire().await.expect("never closed");
            self.http
                .get(format!("{base}/api/activities/{}/queue", self.id))
                .header("cookie", cookies)
                .header("x-forwarded-for", addr)
                .send()
                .await
        };
        tally.lock().expect("tally").polls += 1;
        self.seen.polls.fetch_add(1, Relaxed);
        match resp {
            Ok(r) if r.status().is_success() => {
                let renewed = place_set(&r);
                r.json::<QueueStatus>().await.ok().map(|s| (s, renewed))
            }
            _ => None,
        }
    }

    /// One shopper: the path, then the buy (the whole quantity the limit allows), tried again
    /// within `retry_for` on the next instance after a transport error or a `503`. Returns the outcome.
    async fn shop(
        &self,
        shopper: usize,
        cookie: &str,
        addr: &str,
        admission: Option<&str>,
        tally: &Mutex<Tally>,
    ) -> String {
        let give_up = Instant::now() + self.retry_for;
        let key = uuid::Uuid::new_v4().to_string();
        let mut backoff = Duration::from_millis(50);
        for attempt in shopper.. {
            let base = self.bases[attempt % self.bases.len()];
            let Attempt { outcome, retry } = {
                let _permit = self.requests.acquire().await.expect("never closed");
                let proof = self.proofs.get(shopper).map(String::as_str);
                self.attempt(shopper, base, cookie, addr, &key, admission, proof, tally)
                    .await
            };
            if !retry || Instant::now() + backoff >= give_up {
                return outcome;
            }
            *tally
                .lock()
                .expect("tally")
                .retried
                .entry(outcome)
                .or_default() += 1;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
        unreachable!("the attempts never run out")
    }

    // One buy request's whole context; a struct for it would be used once.
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        shopper: usize,
        base: &str,
        cookie: &str,
        addr: &str,
        key: &str,
        admission: Option<&str>,
        proof: Option<&str>,
        tally: &Mutex<Tally>,
    ) -> Attempt {
        let id = self.id;
        let asked = Instant::now();
        let answered = |outcome: &str, token: Option<String>| {
            let mut t = tally.lock().expect("tally");
            let at = asked.saturating_duration_since(t.started);
            t.history.push(Answer {
                at,
                took: asked.elapsed(),
                shopper,
                key: key.to_string(),
                outcome: outcome.to_string(),
                token,
            });
        };
        let path = match self.path(base, cookie, addr).await {
            Ok(path) => path,
            Err(refused) => {
                answered(&refused.outcome, None);
                return refused;
            }
        };
        let sent = Instant::now();
        let resp = self
            .http
            .post(format!("{base}/api/activities/{id}/buy"))
            .header("cookie", cookie)
            .header("x-forwarded-for", addr)
            .header("idempotency-key", key)
            .json(&BuyRequest {
                path,
                captcha_id: None,
                captcha_answer: None,
                quantity: Some(i64::from(self.quantity)),
                admission: admission.map(str::to_string),
                pow: proof.map(str::to_string),
            })
            .send()
            .await;
        let took = sent.elapsed().as_micros() as u64;
        let (attempt, token) = answer_of(resp).await;
        answered(&attempt.outcome, token.clone());
        let units = i64::from(self.quantity);
        tally
            .lock()
            .expect("tally")
            .record_buy(took, token, &attempt.outcome, units);
        attempt
    }

    /// The buy path, as the page fetches it at the start; else the attempt's outcome.
    async fn path(&self, base: &str, cookie: &str, addr: &str) -> Result<String, Attempt> {
        let resp = self
            .http
            .get(format!("{base}/api/activities/{}/path", self.id))
            .header("cookie", cookie)
            .header("x-forwarded-for", addr)
            .send()
            .await;
        match resp {
            Ok(r) if r.status().is_success() => match r.json::<BuyPath>().await {
                Ok(p) => Ok(p.path),
                Err(_) => Err(Attempt::done("path_unreadable")),
            },
            Ok(r) => Err(Attempt {
                outcome: format!("path_{}", r.status().as_u16()),
                retry: gateway_or_unavailable(r.status().as_u16()),
            }),
            Err(e) => Err(Attempt::transport(&e, "path_")),
        }
    }
}

/// A buy's answer: its outcome (the error code, with the status past 499 but for `overloaded`)
/// and, when accepted, the order token.
async fn answer_of(resp: reqwest::Result<reqwest::Response>) -> (Attempt, Option<String>) {
    match resp {
        Ok(r) if r.status().as_u16() == 202 => match r.json::<app::api::Reservation>().await {
            Ok(reservation) => (Attempt::done("accepted"), Some(reservation.token)),
            // Taken, but the answer was lost on the way: the same key gets it again.
            Err(e) => (Attempt::transport(&e, ""), None),
        },
        Ok(r) => {
            let status = r.status().as_u16();
            let code = r
                .json::<app::api::ErrorBody>()
                .await
                .map(|b| b.error)
                .unwrap_or_else(|_| format!("http_{status}"));
            let outcome = if status >= 500 && code != "overloaded" {
                format!("{code}_{status}")
            } else {
                code
            };
            let retry = gateway_or_unavailable(status);
            (Attempt { outcome, retry }, None)
        }
        Err(e) => (Attempt::transport(&e, ""), None),
    }
}

impl Tally {
    /// One buy's latency, and what it took or told.
    fn record_buy(&mut self, took_us: u64, token: Option<String>, outcome: &str, units: i64) {
        let _ = self.latency.record(took_us.max(1));
        if let Some(token) = token {
            self.accepted_units += units;
            self.tokens.push(token);
            self.last_accept = Some(Instant::now());
        } else if outcome == "sold_out" && self.sold_out_at.is_none() {
            self.sold_out_at = Some(Instant::now());
        }
    }
}

/// Answers after which a shopper tries again with the same key: the instance is overloaded or
/// unavailable (`503`), or the load balancer in front could not get an answer from one (`502`,
/// `504`: the buy may or may not have run, which the key makes safe to ask again).
fn gateway_or_unavailable(status: u16) -> bool {
    matches!(status, 502..=504)
}

#[cfg(test)]
mod tests {
    use super::spearman;

    #[test]
    fn rank_correlation_of_order_kept_reversed_and_shuffled() {
        let kept: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, (i * 7) as f64)).collect();
        assert!((spearman(&kept).unwrap() - 1.0).abs() < 1e-12);
        let reversed: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, -(i as f64))).collect();
        assert!((spearman(&reversed).unwrap() + 1.0).abs() < 1e-12);
        // Admissions seen at the same poll share a rank: a close but not perfect correlation.
        let polled: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, (i / 10) as f64)).collect();
        let rho = spearman(&polled).unwrap();
        assert!(rho > 0.98 && rho < 1.0, "{rho}");
        assert_eq!(spearman(&[(1.0, 1.0)]), None);
        assert_eq!(spearman(&[(1.0, 1.0), (2.0, 1.0)]), None, "no spread");
    }
}
