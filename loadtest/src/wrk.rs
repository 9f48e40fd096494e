//! `seckill-load wrk-sale`: the in-stock buy driven the way the ceilings are, by wrk, so that the
//! ratio between them says what the server costs and not what the driver does. It makes a sale
//! and its shoppers, signs every shopper's session and buy path ahead (as `sign` does), and writes
//! a wrk script that sends each request as the next shopper of its thread (each shopper with an
//! address of its own), counts the `202`s and prints them with their rate when wrk is done.

use crate::crowd::{addr_of, create_sale, Accounts, CrowdOptions, Signer};
use crate::deployment::Deployment;
use anyhow::Context;
use app::api::{Role, SaleId, ServerTime};
use signing::BuyPaths;
use std::{fmt::Write as _, path::PathBuf, time::Duration};

#[derive(clap::Args)]
pub struct WrkSaleOptions {
    #[arg(long, default_value = "http://127.0.0.1:3000")]
    pub base_url: String,
    #[arg(long, default_value_t = 60_000)]
    pub users: usize,
    #[arg(long, default_value_t = 10)]
    pub per_user_limit: i32,
    /// Units on sale (default: every shopper's whole limit).
    #[arg(long)]
    pub stock: Option<i64>,
    /// Seconds from creating the sale to its start.
    #[arg(long, default_value_t = 3)]
    pub lead_secs: i64,
    #[arg(long)]
    pub stock_shards: Option<i16>,
    /// Where the wrk script goes.
    #[arg(long)]
    pub script: PathBuf,
}

/// Makes the sale, writes the script, and prints `ACTIVITY STARTS_AT_MS`.
pub async fn run(deployment: &Deployment, opts: &WrkSaleOptions) -> anyhow::Result<()> {
    let script = opts.script.as_path();
    let db = deployment.database().await?;
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let accounts = Accounts::create(&db, &run, opts.users, None).await?;
    let signer = Signer::new(deployment, accounts.shop)?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let base = opts.base_url.trim_end_matches('/');
    let server_now: ServerTime = http
        .get(format!("{base}/api/time"))
        .send()
        .await?
        .json()
        .await?;
    let crowd = CrowdOptions {
        base_urls: vec![base.to_string()],
        users: opts.users,
        stock: opts
            .stock
            .unwrap_or(opts.users as i64 * i64::from(opts.per_user_limit)),
        per_user_limit: opts.per_user_limit,
        concurrency: 1,
        lead_secs: opts.lead_secs,
        show_progress: false,
        settle: false,
        activity_id: None,
        rate: 0,
        retry_for: Duration::ZERO,
        stock_shards: opts.stock_shards,
        homes_on_one_shard: false,
        waiting_room: Some(false),
        proof_of_work: None,
        greedy_every: 0,
        poll_window: None,
    };
    let merchant = signer.cookie(accounts.merchant, Role::Merchant);
    let sale = create_sale(&http, base, &crowd, &run, &server_now, &merchant).await?;
    let paths = BuyPaths::new(deployment.secret()?);
    let shoppers: Vec<(String, String, String)> = accounts
        .shoppers
        .iter()
        .enumerate()
        .map(|(i, &user)| {
            (
                signer.cookie(user, Role::Shopper),
                paths.path(user, sale.id.0),
                addr_of(i),
            )
        })
        .collect();
    std::fs::write(script, wrk_script(sale.id, &shoppers)?)
        .with_context(|| format!("writing {}", script.display()))?;
    let starts = chrono::DateTime::parse_from_rfc3339(&sale.starts_at).context("starts_at")?;
    println!("{} {}", sale.id, starts.timestamp_millis());
    Ok(())
}

/// A wrk script: thread k of n sends shoppers k, k + n, k + 2n… in turn (wrk passes n as the
/// script's first argument), round and round; `done` prints the `202`s of every thread.
fn wrk_script(activity: SaleId, shoppers: &[(String, String, String)]) -> anyhow::Result<String> {
    let mut lua = String::from("local shoppers = {\n");
    for (cookie, path, addr) in shoppers {
        writeln!(lua, "{{\"{cookie}\",\"{path}\",\"{addr}\"}},")?;
    }
    write!(
        lua,
        r#"}}
local threads, next_id = {{}}, 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end
function init(args)
  step = tonumber(args[1]) or 1
  at = id
  accepted, refused = 0, 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end
function request()
  local s = shoppers[at % #shoppers + 1]
  at = at + step
  wrk.headers["Cookie"] = s[1]
  wrk.headers["X-Forwarded-For"] = s[3]
  return wrk.format(nil, "/api/activities/{activity}/buy", nil, '{{"path":"' .. s[2] .. '"}}')
end
function response(status, headers, body)
  if status == 202 then accepted = accepted + 1 else refused = refused + 1 end
end
function done(summary, latency, requests)
  local a, r = 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("accepted")
    r = r + t:get("refused")
  end
  io.write(string.format("accepted %d refused %d in %.3f s = %d accepted/s\n", a, r,
    summary.duration / 1e6, a / (summary.duration / 1e6)))
end
"#
    )?;
    Ok(lua)
}
