//! What the load tool reads of a deployment: where its PostgreSQL and Redis are, its Redis key
//! prefix and its secret, from the very variables (and defaults) the server reads
//! (docs/configuration.md), so that one environment serves both.

use anyhow::Context;
use clap::{CommandFactory, Parser};

#[derive(Clone, Debug, Parser)]
#[command(name = "seckill-load")]
pub struct Deployment {
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://seckill@127.0.0.1:55432/seckill"
    )]
    pub database_url: String,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:56379/0")]
    pub redis_url: String,
    /// A Redis Cluster's seed nodes; when given, `redis_url` is not used.
    #[arg(long, env = "REDIS_CLUSTER_URLS", value_delimiter = ',')]
    pub redis_cluster_urls: Vec<String>,
    #[arg(long, env = "SECKILL_REDIS_PREFIX", default_value = "sk:")]
    pub redis_prefix: String,
    #[arg(long, env = "SECKILL_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
}

impl Deployment {
    /// The deployment of the environment. A variable set to an empty string counts as unset, as
    /// it does to the server and to a shell. Call it before any thread starts (it edits the
    /// process's environment).
    pub fn from_env() -> anyhow::Result<Deployment> {
        for arg in Deployment::command().get_arguments() {
            if let Some(name) = arg.get_env() {
                if std::env::var_os(name).is_some_and(|v| v.is_empty()) {
                    std::env::remove_var(name);
                }
            }
        }
        Deployment::try_parse_from(["seckill-load"]).map_err(|e| anyhow::anyhow!("{}", e.render()))
    }

    /// The server's secret: sessions, paths and tickets signed with any other would not pass.
    pub fn secret(&self) -> anyhow::Result<&[u8]> {
        self.secret
            .as_deref()
            .map(str::as_bytes)
            .context("SECKILL_SECRET: the server's secret")
    }

    /// A pool of a few connections to the deployment's PostgreSQL.
    pub async fn database(&self) -> anyhow::Result<sqlx::PgPool> {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect(&self.database_url)
            .await
            .context("connecting to PostgreSQL")
    }

    /// The one Redis of a deployment that is not a cluster (what the measurements that read
    /// Redis's own counters need).
    pub fn single_redis(&self) -> anyhow::Result<&str> {
        anyhow::ensure!(
            self.redis_cluster_urls.is_empty(),
            "this measurement reads one Redis (REDIS_URL), not a cluster"
        );
        Ok(&self.redis_url)
    }
}
