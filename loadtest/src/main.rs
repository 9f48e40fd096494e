//! `seckill-load`: the tools `make bench`, `make chaos` and the tests measure the server with,
//! kept out of the server that shops deploy. A flash crowd of signed-in shoppers with the
//! invariants checked afterwards (`crowd`), one request at a constant rate or as fast as it goes
//! (`pace`), the bare ceilings beside the product (`ceiling`), and what the buy path's in-process
//! checks cost (`ticket-cost`, `pow-cost`). It reads the deployment from the same environment
//! variables (database, Redis, secret) as the server does (`deployment.rs`).

use anyhow::Context;
use clap::{Parser, Subcommand};
use loadtest::Deployment;

#[derive(Parser)]
#[command(
    name = "seckill-load",
    about = "Load and cost measurements of the seckill server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a flash crowd against a running server and check the invariants afterwards.
    Crowd(CrowdArgs),
    /// Send one request over and over on keep-alive connections, at a constant arrival rate
    /// (latency from each request's due instant) or as fast as the connections allow; for
    /// `make bench`.
    Pace {
        #[arg(long)]
        url: String,
        /// POST this JSON body (else GET).
        #[arg(long)]
        body: Option<String>,
        /// `name: value`, repeatable.
        #[arg(long = "header")]
        headers: Vec<String>,
        /// Requests per second (0: a closed loop, as fast as the connections allow).
        #[arg(long, default_value_t = 0)]
        rate: u32,
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        #[arg(long, default_value_t = 1_000)]
        connections: usize,
    },
    /// The bare ceilings for `make bench`: a minimal axum "hello" (`GET /hello`) and a minimal
    /// handler of one EVALSHA check-and-decrement (`POST /decrement`), no middleware.
    Ceiling {
        #[arg(long, default_value = "127.0.0.1:3299")]
        addr: String,
    },
    /// What checking one waiting-room admission ticket costs on the buy path.
    TicketCost,
    /// What the proof-of-work check costs the server: issuing a challenge and verifying a
    /// solution, at the default difficulty.
    PowCost,
    /// Session cookies signed with the server's secret (SECKILL_SECRET), one per line, each
    /// valid for an hour: `COOKIE`, or `COOKIE PATH` with the user's buy path of --activity.
    Sign(SignArgs),
    /// A sale of `users` × `per-user-limit` units and its shoppers, signed ahead, with a wrk
    /// script that buys as the next shopper on every request (`make bench`'s in-stock figure
    /// driven like the ceilings). Prints `ACTIVITY STARTS_AT_MS`.
    WrkSale(loadtest::wrk::WrkSaleOptions),
}

#[derive(clap::Args)]
struct CrowdArgs {
    /// Base URL of the server (or load balancer); several, comma-separated, are taken in turn.
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:3000")]
    base_url: Vec<String>,
    /// Distinct shoppers.
    #[arg(long, default_value_t = 2_000)]
    users: usize,
    /// Units on sale.
    #[arg(long, default_value_t = 100)]
    stock: i64,
    #[arg(long, default_value_t = 1)]
    per_user_limit: i32,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Seconds from creating the sale to its start.
    #[arg(long, default_value_t = 2)]
    lead_secs: i64,
    /// Do not wait for the orders to be persisted (nor check the invariants).
    #[arg(long)]
    no_settle: bool,
    /// Buy on this existing activity (solving its proof of work if it takes one) instead of creating one; --stock and
    /// --per-user-limit are then the activity's own.
    #[arg(long)]
    activity_id: Option<i64>,
    /// Shoppers started per second (0: as fast as --concurrency allows).
    #[arg(long, default_value_t = 0)]
    rate: u32,
    /// Seconds a shopper keeps retrying after a transport error or a 503 (same Idempotency-Key,
    /// next instance).
    #[arg(long, default_value_t = 0)]
    retry_secs: u64,
    /// Split the new sale's stock over this many shards (default: the server chooses).
    #[arg(long)]
    stock_shards: Option<i16>,
    /// Every shopper's home is the sale's first shard (needs --stock-shards): the other shards'
    /// units are sold by borrowing, a buy at a time.
    #[arg(long)]
    homes_on_one_shard: bool,
    /// The new sale's waiting room: on, off, or default (not named: the server decides from
    /// the stock; for servers that predate waiting rooms).
    #[arg(long, default_value = "off")]
    waiting_room: String,
    /// Give the new sale the proof-of-work check at this difficulty (hashes on average);
    /// every shopper then solves a challenge before the start, as a browser does.
    #[arg(long)]
    proof_of_work: Option<i32>,
    /// Every n-th shopper sends two buys of the whole limit at once (0: none); the invariants
    /// then show whether the per-user limit held.
    #[arg(long, default_value_t = 0)]
    greedy_every: usize,
    /// On a waiting room: pause the sale this many seconds after the start and measure the
    /// polling (Redis commands, polls, the cache in front, CPU) for --poll-window-secs.
    #[arg(long)]
    poll_window_after: Option<u64>,
    #[arg(long, default_value_t = 30)]
    poll_window_secs: u64,
    /// Processes whose CPU time the polling window reports (comma-separated pids).
    #[arg(long, value_delimiter = ',')]
    pids: Vec<u32>,
}

#[derive(clap::Args)]
struct SignArgs {
    #[arg(long)]
    user: i64,
    /// shopper, merchant or operator.
    #[arg(long, default_value = "shopper")]
    role: String,
    /// The merchant's shop.
    #[arg(long, default_value_t = 0)]
    shop: i64,
    /// How long ago the password was last checked, in seconds.
    #[arg(long, default_value_t = 0)]
    auth_age_secs: i64,
    #[arg(long, default_value_t = 1)]
    count: usize,
    #[arg(long)]
    activity: Option<i64>,
    /// Also write a wrk script there that POSTs the buy with the first cookie (needs --activity).
    #[arg(long)]
    wrk_script: Option<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    // The deployment's settings, read from the environment before any thread starts.
    let deployment = Deployment::from_env()?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(run(cli.command, &deployment))
}

async fn run(command: Command, deployment: &Deployment) -> anyhow::Result<()> {
    match command {
        Command::Pace {
            url,
            body,
            headers,
            rate,
            secs,
            connections,
        } => pace(url, body, &headers, rate, secs, connections).await,
        Command::Crowd(args) => crowd(args, deployment).await,
        Command::Ceiling { addr } => {
            let url = deployment.single_redis()?;
            let key = format!("{}ceiling:stock", deployment.redis_prefix);
            loadtest::ceiling::serve(&addr, url, key, 1_000_000_000).await
        }
        Command::WrkSale(opts) => loadtest::wrk::run(deployment, &opts).await,
        Command::TicketCost => loadtest::costs::ticket(),
        Command::PowCost => loadtest::costs::proof_of_work(),
        Command::Sign(args) => {
            // The server's own secret, never one made up here (no cookie it makes would pass).
            let secret = deployment.secret()?;
            let opts = loadtest::sign::SignOptions {
                role: loadtest::sign::role(&args.role)?,
                user: args.user,
                shop: args.shop,
                auth_age_secs: args.auth_age_secs,
                count: args.count,
                activity: args.activity,
                wrk_script: args.wrk_script,
            };
            loadtest::sign::run(secret, &opts)
        }
    }
}

/// `crowd`: a flash crowd's report, and a failure when the invariants did not hold.
async fn crowd(args: CrowdArgs, deployment: &Deployment) -> anyhow::Result<()> {
    let settle = !args.no_settle;
    let opts = loadtest::crowd::CrowdOptions {
        base_urls: args.base_url,
        users: args.users,
        stock: args.stock,
        per_user_limit: args.per_user_limit,
        concurrency: args.concurrency,
        lead_secs: args.lead_secs,
        show_progress: true,
        settle,
        activity_id: args.activity_id,
        rate: args.rate,
        retry_for: std::time::Duration::from_secs(args.retry_secs),
        stock_shards: args.stock_shards,
        homes_on_one_shard: args.homes_on_one_shard,
        waiting_room: match args.waiting_room.as_str() {
            "on" => Some(true),
            "off" => Some(false),
            "default" => None,
            other => anyhow::bail!("--waiting-room {other}: on, off or default"),
        },
        proof_of_work: args.proof_of_work,
        greedy_every: args.greedy_every,
        poll_window: args
            .poll_window_after
            .map(|after_secs| loadtest::crowd::PollWindowOptions {
                after_secs,
                secs: args.poll_window_secs,
                pids: args.pids,
            }),
    };
    let report = loadtest::crowd::run(deployment, &opts).await?;
    report.print();
    anyhow::ensure!(
        !settle || report.invariants_hold(),
        "the invariants did not hold"
    );
    Ok(())
}

/// `pace`: the report of one request sent over and over.
async fn pace(
    url: String,
    body: Option<String>,
    headers: &[String],
    rate: u32,
    secs: f64,
    connections: usize,
) -> anyhow::Result<()> {
    let headers = headers
        .iter()
        .map(|h| {
            h.split_once(':')
                .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                .with_context(|| format!("--header {h}: name: value"))
        })
        .collect::<anyhow::Result<_>>()?;
    let report = loadtest::pace::run(&loadtest::pace::PaceOptions {
        url,
        body,
        headers,
        rate,
        duration: std::time::Duration::from_secs_f64(secs),
        connections,
    })
    .await?;
    report.print();
    Ok(())
}
