use anyhow::Context;
use app::api::Role;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use server::{
    domain::account,
    infra::{
        config::{Needs, Settings},
        db,
    },
    startup, Application, Config,
};
use std::{future::IntoFuture, io::Read};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "server", about = "The seckill flash-sale server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Every setting, as a flag or its environment variable (docs/configuration.md).
    #[command(flatten)]
    settings: Settings,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP: the site, the JSON API and static assets (the default). Refuses to start when
    /// the site folder lacks the scripts and styles the pages name.
    Serve,
    /// Check that the site folder holds the scripts and styles this server's pages name, and exit.
    CheckAssets,
    /// Run the relay and the persister only (no HTTP).
    Worker,
    /// Compare Redis and the database for every live activity, repair what is safe, and report.
    Reconcile,
    /// Apply the database migrations and exit.
    Migrate {
        /// Apply nothing: wait until the database has every migration of this release (another
        /// process applies them: the release's migrations Job), then exit 0; exit 1 after
        /// `--timeout-secs`. The init step of the deployed pods.
        #[arg(long)]
        wait: bool,
        #[arg(long, default_value_t = 600)]
        timeout_secs: u64,
    },
    /// Put the next key of the waiting room's admission tickets in use on every instance (within
    /// two seconds, no restart); tickets signed with the previous key stay good until they expire.
    RotateTicketKey,
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

/// `reconcile`'s table.
fn print_reconciliation(report: &[server::pipeline::reconcile::Drift]) {
    println!(
        "{:>10} {:>10} {:>10} {:>8} {:>9}",
        "activity", "redis", "expected", "drift", "repaired"
    );
    for d in report {
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
}

/// What is logged when `RUST_LOG` says nothing (or nothing a filter can be made of).
const DEFAULT_LOG_FILTER: &str = "info,tower_http=warn,sqlx=warn";

/// Log lines as the settings say (`SECKILL_LOG_FORMAT`): JSON objects with the spans they are
/// in (a request's carries its `request_id`, and its `trace_id` when traced), or text; filtered
/// by `RUST_LOG`. With an OTLP endpoint configured, spans are exported too (infra/telemetry.rs):
/// the provider is returned, to be flushed at exit.
fn start_logging(
    settings: &server::infra::config::Settings,
) -> anyhow::Result<Option<opentelemetry_sdk::trace::SdkTracerProvider>> {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, Layer};
    // A filter by target and level (`Targets`) when RUST_LOG asks no more: it decides once per
    // call site, where an `EnvFilter` also looks up every span it is told of on each entry and
    // exit (a lock read per poll of every request). An `EnvFilter` when RUST_LOG names spans or
    // fields, which only it can match.
    let wanted = std::env::var("RUST_LOG")
        .ok()
        .filter(|w| !w.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_LOG_FILTER.to_string());
    let (targets, fields) = match wanted.parse::<tracing_subscriber::filter::Targets>() {
        Ok(targets) => (Some(targets), None),
        Err(_) => match tracing_subscriber::EnvFilter::try_new(&wanted) {
            Ok(fields) => (None, Some(fields)),
            Err(e) => {
                eprintln!("RUST_LOG={wanted} is no filter ({e}); logging at info");
                (Some(DEFAULT_LOG_FILTER.parse()?), None)
            }
        },
    };
    let json = settings
        .log_format
        .as_deref()
        .map_or(settings.deployed, |format| format == "json");
    let lines = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer().boxed()
    };
    let provider = server::infra::telemetry::otlp_from_env().context("OTEL_EXPORTER_OTLP_*")?;
    let spans = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("seckill")));
    tracing_subscriber::registry()
        .with(targets)
        .with(fields)
        .with(lines)
        .with(spans)
        .init();
    if provider.is_some() {
        server::infra::telemetry::enable();
    }
    Ok(provider)
}

fn main() -> anyhow::Result<()> {
    server::infra::config::forget_empty_settings();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let traces = start_logging(&cli.settings)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let ran = runtime.block_on(run(
        cli.command.unwrap_or(Command::Serve),
        cli.settings,
        &matches,
    ));
    // The spans still in the batch go out before the process ends.
    if let Some(provider) = traces {
        let _ = provider.shutdown();
    }
    ran
}

/// `server worker`: the pipeline, and its probes and metrics on `SECKILL_WORKER_ADDR`, until
/// SIGTERM; then the workers finish what they hold within the drain.
async fn worker(config: Config) -> anyhow::Result<()> {
    let pipeline = startup::connect_pipeline(&config).await?;
    let listener = tokio::net::TcpListener::bind(config.worker_addr)
        .await
        .with_context(|| format!("binding {} (SECKILL_WORKER_ADDR)", config.worker_addr))?;
    let probes = server::http::ops::WorkerProbes {
        db: pipeline.db.clone(),
        redis: pipeline.redis.clone(),
        broker: pipeline.broker.clone(),
        metrics: pipeline.metrics.clone(),
        config: std::sync::Arc::new(config.clone()),
    };
    let supervisor = server::infra::supervisor::Supervisor::new(pipeline.metrics.clone());
    pipeline.start(&supervisor);
    tracing::info!(metrics = %config.worker_addr, "relay and persister running");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let probes = tokio::spawn(
        axum::serve(listener, server::http::ops::worker_router(probes))
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .into_future(),
    );
    startup::shutdown_signal().await;
    supervisor.shutdown(config.drain).await;
    let _ = stop.send(());
    let _ = probes.await;
    Ok(())
}

/// `server migrate`: applies this release's migrations; with `--wait`, applies none and waits
/// until another process has.
async fn migrate(config: &Config, wait: bool, timeout_secs: u64) -> anyhow::Result<()> {
    if wait {
        let deadline = std::time::Duration::from_secs(timeout_secs);
        let version = db::await_migrated(&config.database_url, deadline).await?;
        println!("the database has every migration of this release (up to {version})");
    } else {
        let pool = db::connect(&config.database_url, 2).await?;
        db::migrate(&pool).await?;
        println!("migrations applied");
    }
    Ok(())
}

async fn run(command: Command, settings: Settings, matches: &ArgMatches) -> anyhow::Result<()> {
    if let Command::CheckAssets = command {
        server::http::site::check_assets(&settings.site_root)?;
        println!("the site folder holds every asset the pages name");
        return Ok(());
    }
    settings.check_given(
        matches,
        match command {
            Command::Migrate { .. }
            | Command::CreateMerchant { .. }
            | Command::CreateOperator { .. } => Needs::Database,
            _ => Needs::Everything,
        },
    )?;
    let config = Config::from_settings(settings)?;
    match command {
        Command::Serve => {
            server::http::site::check_assets(&config.site_root)?;
            let app = Application::build(config).await?;
            tracing::info!(addr = %app.local_addr(), "serving");
            app.run_until(startup::shutdown_signal()).await
        }
        Command::CheckAssets => unreachable!("answered before the configuration is read"),
        Command::Worker => worker(config).await,
        Command::Reconcile => {
            let state = server::http::state::AppState::connect(config).await?;
            print_reconciliation(&state.reconciler.reconcile().await?);
            Ok(())
        }
        Command::RotateTicketKey => {
            let state = server::http::state::AppState::connect(config).await?;
            let generation = server::buy::queue::ticket_keys::rotate(&state.redis).await?;
            println!("admission tickets are signed with key admission-{generation} from now on");
            Ok(())
        }
        Command::Migrate { wait, timeout_secs } => migrate(&config, wait, timeout_secs).await,
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
