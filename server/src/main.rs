use anyhow::Context;
use app::api::Role;
use clap::{Parser, Subcommand};
use server::{domain::account, infra::db, startup, Application, Config};
use std::io::Read;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "server", about = "The seckill flash-sale server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP: the site, the JSON API and static assets (the default). Refuses to start when
    /// the site folder lacks the scripts and styles the pages name.
    Serve,
    /// Check that the site folder holds the scripts and styles this server's pages name, and exit.
    CheckAssets,
    /// What checking one waiting-room admission ticket costs on the buy path (for `make bench`).
    #[command(hide = true)]
    TicketCost,
    /// What checking a session cookie costs on the buy path: the signature alone (before sessions
    /// could end) and with the ended-session lookups (for `make bench`).
    #[command(hide = true)]
    SessionCost,
    /// What the proof-of-work check costs the server: issuing a challenge and verifying a
    /// solution, at the default difficulty (for `make bench`).
    #[command(hide = true)]
    PowCost,
    /// The bare ceilings for `make bench`: a minimal axum "hello" (`GET /hello`) and a minimal
    /// handler of one EVALSHA check-and-decrement (`POST /decrement`), no middleware.
    #[command(hide = true)]
    Ceiling {
        #[arg(long, default_value = "127.0.0.1:3299")]
        addr: String,
    },
    /// Send one request over and over on keep-alive connections, at a constant arrival rate
    /// (latency from each request's due instant) or as fast as the connections allow; for
    /// `make bench`.
    #[command(hide = true)]
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
    /// Run the relay and the persister only (no HTTP).
    Worker,
    /// Simulate a flash crowd against a running server and check the invariants afterwards.
    Crowd {
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
        /// The new sale's waiting room: on, off, or default (not named: the server decides from
        /// the stock; for servers that predate waiting rooms).
        #[arg(long, default_value = "off")]
        waiting_room: String,
        /// Give the new sale the proof-of-work check at this difficulty (hashes on average);
        /// every shopper then solves a challenge before the start, as a browser does.
        #[arg(long)]
        proof_of_work: Option<i32>,
    },
    /// Compare Redis and the database for every live activity, repair what is safe, and report.
    Reconcile,
    /// Apply the database migrations and exit.
    Migrate,
    /// Create a merchant account of a shop (created when missing). The password comes from
    /// SECKILL_MERCHANT_PASSWORD or stdin.
    CreateMerchant {
        #[arg(long)]
        username: String,
        /// The shop's name.
        #[arg(long, default_value = server::domain::shop::DEFAULT_SHOP)]
        shop: String,
    },
    /// Create a platform operator account (shops, merchants, blocks). The password comes from
    /// SECKILL_OPERATOR_PASSWORD or stdin.
    CreateOperator {
        #[arg(long)]
        username: String,
    },
}

/// A password from the environment variable, else from stdin (one line).
fn password_from(variable: &str) -> anyhow::Result<String> {
    if let Ok(p) = std::env::var(variable) {
        return Ok(p);
    }
    let mut p = String::new();
    std::io::stdin()
        .read_to_string(&mut p)
        .context("reading the password from stdin")?;
    Ok(p.trim_end_matches(['\r', '\n']).to_string())
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tower_http=warn,sqlx=warn".into()),
        )
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(run(cli.command.unwrap_or(Command::Serve)))
}

async fn run(command: Command) -> anyhow::Result<()> {
    if let Command::CheckAssets = command {
        let site_root = std::env::var("LEPTOS_SITE_ROOT")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "target/site".into());
        server::http::site::check_assets(&site_root)?;
        println!("the site folder holds every asset the pages name");
        return Ok(());
    }
    if let Command::Pace {
        url,
        body,
        headers,
        rate,
        secs,
        connections,
    } = command
    {
        let headers = headers
            .iter()
            .map(|h| {
                h.split_once(':')
                    .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                    .with_context(|| format!("--header {h}: name: value"))
            })
            .collect::<anyhow::Result<_>>()?;
        let report = server::crowd::pace::run(&server::crowd::pace::PaceOptions {
            url,
            body,
            headers,
            rate,
            duration: std::time::Duration::from_secs_f64(secs),
            connections,
        })
        .await?;
        report.print();
        return Ok(());
    }
    let config = Config::from_env()?;
    match command {
        Command::Serve => {
            server::http::site::check_assets(&config.site_root)?;
            let app = Application::build(config).await?;
            tracing::info!(addr = %app.local_addr(), "serving");
            app.run_until(startup::shutdown_signal()).await
        }
        Command::TicketCost => {
            let tickets = server::buy::queue::Tickets::new(&config.secret.0);
            let now = chrono::Utc::now().timestamp_millis();
            let ticket = tickets.issue(42, 7, now + 60_000);
            let rounds = 1_000_000u32;
            let started = std::time::Instant::now();
            let admitted = (0..rounds)
                .filter(|i| {
                    tickets.admits(
                        std::hint::black_box(&ticket),
                        42,
                        7,
                        now + i64::from(*i % 1000),
                    )
                })
                .count();
            let ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
            anyhow::ensure!(admitted == rounds as usize, "a valid ticket was refused");
            println!("admission ticket: {ns:.0} ns per check ({rounds} checks, HMAC-SHA256)");
            Ok(())
        }
        Command::PowCost => {
            use server::buy::pow::{solve, ProofOfWork};
            let pow = ProofOfWork::new(&config.secret.0);
            let difficulty = app::api::DEFAULT_POW_DIFFICULTY;
            let now = chrono::Utc::now().timestamp();
            let rounds = 20_000u32;
            let started = std::time::Instant::now();
            let challenges: Vec<_> = (0..rounds)
                .map(|i| pow.challenge(42, i64::from(i % 7), difficulty, now))
                .collect();
            let issue_ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
            // Solving is the browser's work; a few solutions are enough to verify many times.
            let solving = std::time::Instant::now();
            let payloads: Vec<_> = challenges
                .into_iter()
                .take(20)
                .map(|challenge| {
                    let sale = challenge
                        .parameters
                        .data
                        .as_ref()
                        .and_then(|d| d["sale"].as_i64());
                    anyhow::Ok((solve(challenge).context("unsolved")?, sale.unwrap_or(0)))
                })
                .collect::<anyhow::Result<_>>()?;
            let solve_ms = solving.elapsed().as_secs_f64() * 1000.0 / payloads.len() as f64;
            let verifying = std::time::Instant::now();
            let mut ok = 0;
            for i in 0..rounds as usize {
                let (payload, sale) = &payloads[i % payloads.len()];
                ok += usize::from(
                    pow.verify(std::hint::black_box(payload), 42, *sale)
                        .is_some(),
                );
            }
            let verify_ns = verifying.elapsed().as_nanos() as f64 / f64::from(rounds);
            anyhow::ensure!(ok == rounds as usize, "a valid solution was refused");
            println!("proof of work at difficulty {difficulty}: {issue_ns:.0} ns to issue a challenge, {verify_ns:.0} ns to verify a solution ({rounds} each), {solve_ms:.1} ms to solve one natively on this machine");
            Ok(())
        }
        Command::SessionCost => {
            use server::http::session::{Claims, SessionKeys};
            let keys = SessionKeys::new(
                &config.secret.0,
                std::time::Duration::from_secs(3600),
                false,
            );
            // A deployment with 100,000 sessions signed out and 100,000 users signed out everywhere.
            let later = chrono::Utc::now().timestamp() + 3600;
            for i in 0..100_000u128 {
                keys.revocations
                    .on_message(&format!("session {:032x} {later}", i * 7_919 + 1));
                keys.revocations
                    .on_message(&format!("epoch {} 1", i + 1_000));
            }
            let claims = Claims {
                sid: server::domain::sessions::new_session_id(),
                user_id: 42,
                role: Role::Shopper,
                shop_id: 0,
                epoch: 0,
                expires_at: later,
                joined: 0,
                auth_at: 0,
            };
            let cookie = keys.sign(&claims);
            let now = chrono::Utc::now().timestamp();
            let rounds = 1_000_000u32;
            let time = |f: &dyn Fn() -> bool| {
                let started = std::time::Instant::now();
                let ok = (0..rounds).filter(|_| f()).count();
                (started.elapsed().as_nanos() as f64 / f64::from(rounds), ok)
            };
            let (signed_ns, a) =
                time(&|| keys.verify(std::hint::black_box(&cookie), now).is_some());
            let (checked_ns, b) =
                time(&|| keys.check(std::hint::black_box(&cookie), now).is_some());
            anyhow::ensure!(
                a == rounds as usize && b == rounds as usize,
                "a valid session was refused"
            );
            println!("session check: {signed_ns:.0} ns signature only (before), {checked_ns:.0} ns with ended-session lookups ({rounds} checks, 100,000 ended sessions and 100,000 epochs known)");
            Ok(())
        }
        Command::CheckAssets | Command::Pace { .. } => {
            unreachable!("answered before the configuration is read")
        }
        Command::Ceiling { addr } => {
            let server::infra::redis::Target::Single(url) = &config.redis else {
                anyhow::bail!("the ceiling runs on one Redis (REDIS_URL), not a cluster");
            };
            let key = format!("{}ceiling:stock", config.redis_prefix);
            server::ceiling::serve(&addr, url, key, 1_000_000_000).await
        }
        Command::Worker => {
            let state = server::state::AppState::connect(config).await?;
            state.spawn_workers().await?;
            tracing::info!("relay and persister running");
            startup::shutdown_signal().await;
            Ok(())
        }
        Command::Crowd {
            base_url,
            users,
            stock,
            per_user_limit,
            concurrency,
            lead_secs,
            no_settle,
            activity_id,
            rate,
            retry_secs,
            stock_shards,
            waiting_room,
            proof_of_work,
        } => {
            let settle = !no_settle;
            let opts = server::crowd::CrowdOptions {
                base_urls: base_url,
                users,
                stock,
                per_user_limit,
                concurrency,
                lead_secs,
                show_progress: true,
                settle,
                activity_id,
                rate,
                retry_for: std::time::Duration::from_secs(retry_secs),
                stock_shards,
                waiting_room: match waiting_room.as_str() {
                    "on" => Some(true),
                    "off" => Some(false),
                    "default" => None,
                    other => anyhow::bail!("--waiting-room {other}: on, off or default"),
                },
                proof_of_work,
            };
            let report = server::crowd::run(&config, &opts).await?;
            report.print();
            anyhow::ensure!(
                !settle || report.invariants_hold(),
                "the invariants did not hold"
            );
            Ok(())
        }
        Command::Reconcile => {
            let state = server::state::AppState::connect(config).await?;
            let report = state.reconciler.reconcile().await?;
            println!(
                "{:>10} {:>10} {:>10} {:>8} {:>9}",
                "activity", "redis", "expected", "drift", "repaired"
            );
            for d in &report {
                let redis = d
                    .redis_remaining
                    .map_or("missing".to_string(), |r| r.to_string());
                println!(
                    "{:>10} {:>10} {:>10} {:>8} {:>9}",
                    d.activity_id, redis, d.expected, d.drift, d.repaired
                );
            }
            let drifting = report.iter().filter(|d| d.drift != 0).count();
            println!("{} live activities, {drifting} drifting", report.len());
            Ok(())
        }
        Command::Migrate => {
            let pool = db::connect(&config.database_url, 2).await?;
            db::migrate(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::CreateMerchant { username, shop } => {
            let password = password_from("SECKILL_MERCHANT_PASSWORD")?;
            let pool = db::connect(&config.database_url, 2).await?;
            db::migrate(&pool).await?;
            match account::create_account(&pool, Role::Merchant, Some(&shop), &username, &password)
                .await?
            {
                Some(user) => println!(
                    "merchant {} of {shop} created (id {})",
                    user.username, user.id
                ),
                None => anyhow::bail!("the username {username} is taken"),
            }
            Ok(())
        }
        Command::CreateOperator { username } => {
            let password = password_from("SECKILL_OPERATOR_PASSWORD")?;
            let pool = db::connect(&config.database_url, 2).await?;
            db::migrate(&pool).await?;
            match account::create_account(&pool, Role::Operator, None, &username, &password).await?
            {
                Some(user) => println!("operator {} created (id {})", user.username, user.id),
                None => anyhow::bail!("the username {username} is taken"),
            }
            Ok(())
        }
    }
}
