//! `seckill-load sign`: session cookies (and buy paths) signed with the server's secret by the
//! code the server checks them with (`signing`), for the benchmark scripts and the browser tests that need a signed-in user
//! without a sign-in (or one whose password was checked long ago). The cookie's format lives in
//! `signing/src/session.rs` alone.

use app::api::Role;
use signing::{new_session_id, BuyPaths, Claims, SessionSigner};
use std::{io::Write, path::PathBuf};

pub struct SignOptions {
    pub user: i64,
    pub role: Role,
    pub shop: i64,
    /// How long ago the password was checked (for the actions that ask a recent check).
    pub auth_age_secs: i64,
    /// Cookies to print, each of its own session.
    pub count: usize,
    /// Print the user's buy path of this sale after each cookie.
    pub activity: Option<i64>,
    /// Write there a wrk script that POSTs that buy with the first cookie.
    pub wrk_script: Option<PathBuf>,
}

pub fn role(name: &str) -> anyhow::Result<Role> {
    Ok(match name {
        "shopper" => Role::Shopper,
        "merchant" => Role::Merchant,
        "operator" => Role::Operator,
        other => anyhow::bail!("--role {other}: shopper, merchant or operator"),
    })
}

/// Prints `COOKIE` (the `sid` value) or `COOKIE PATH`, one line per session, valid for an hour.
pub fn run(secret: &[u8], opts: &SignOptions) -> anyhow::Result<()> {
    let keys = SessionSigner::new(secret);
    let paths = BuyPaths::new(secret);
    let now = chrono::Utc::now().timestamp();
    let path = opts.activity.map(|a| paths.path(opts.user, a));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for i in 0..opts.count.max(1) {
        let cookie = keys.sign(&Claims {
            sid: new_session_id(),
            user_id: opts.user,
            role: opts.role,
            shop_id: opts.shop,
            epoch: 0,
            expires_at: now + 3600,
            // An account from long ago, whatever sale it buys.
            joined: 0,
            auth_at: now - opts.auth_age_secs,
        });
        if i == 0 {
            if let (Some(script), Some(path)) = (&opts.wrk_script, &path) {
                std::fs::write(script, wrk_script(&cookie, path))?;
            }
        }
        match &path {
            Some(path) => writeln!(out, "{cookie} {path}")?,
            None => writeln!(out, "{cookie}")?,
        }
    }
    Ok(())
}

fn wrk_script(cookie: &str, path: &str) -> String {
    format!(
        "wrk.method = \"POST\"\n\
         wrk.body = '{{\"path\":\"{path}\"}}'\n\
         wrk.headers[\"Content-Type\"] = \"application/json\"\n\
         wrk.headers[\"Cookie\"] = \"sid={cookie}\"\n\
         wrk.headers[\"X-Forwarded-For\"] = \"10.200.0.1\"\n"
    )
}
