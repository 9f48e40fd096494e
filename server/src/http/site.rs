//! The site around the API: server-rendered pages and their static assets. The site build
//! (scripts/site.mjs, or cargo-leptos) names the wasm, JS and CSS after their content
//! (`hash-files`) and writes the hashes next to the server binary; such files never change under
//! their name, so they are served `immutable` for a year, precompressed (brotli, gzip) when the
//! client accepts it, from `SECKILL_ASSET_BASE_URL` (a CDN) when set. HTML is never immutable:
//! storefront pages may be cached for a few seconds (they hold no per-user data), the rest must
//! be revalidated.

use crate::{
    buy::{
        activities::ActivityCache,
        heat::{Heat, READ_DEADLINE},
    },
    domain::{
        activity::{self, ActivityRow},
        forecast, report, ApiError,
    },
    infra::{config::Config, redis::Redis},
};
use app::{
    api::{SaleId, SaleReport},
    data::{BoxFuture, Loaded, SaleState, Storefront, StorefrontSource},
    Assets,
};
use axum::{
    extract::Request,
    http::{header, HeaderMap, HeaderValue},
    response::Response,
};
use chrono::{DateTime, Utc};
use leptos::config::LeptosOptions;
use sqlx::PgPool;
use std::{collections::HashMap, sync::Arc};

const HASH_FILE: &str = "hash.txt";
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// The site's folder of the release before's assets, served under `/pkg/` for the names this
/// release lacks (scripts/image.sh puts them there).
pub const PREVIOUS_PKG: &str = "pkg-previous";

pub struct Site {
    pub options: LeptosOptions,
    pub assets: Assets,
    /// Whether the asset names carry content hashes (and may be cached forever).
    pub hashed: bool,
}

fn read_hashes() -> HashMap<String, String> {
    let Some(path) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(HASH_FILE)))
    else {
        return HashMap::new();
    };
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

impl Site {
    pub fn load(config: &Config) -> Site {
        let hashes = read_hashes();
        let hashed = hashes.contains_key("js") && hashes.contains_key("wasm");
        let options = LeptosOptions::builder()
            .output_name("seckill")
            .site_root(config.site_root.as_str())
            .site_pkg_dir("pkg")
            .site_addr(config.addr)
            .hash_files(hashed)
            .hash_file(Arc::<str>::from(HASH_FILE))
            .build();
        let [js, wasm, css] = asset_names(&hashes).map(|name| format!("/pkg/{name}"));
        Site {
            options,
            assets: Assets {
                root: config.asset_base_url.clone(),
                css,
                js,
                wasm,
            },
            hashed,
        }
    }
}

/// The files in `pkg/` the pages name: the JS, the wasm and the stylesheet, under their content
/// hashes when the build wrote them (Leptos' own naming).
fn asset_names(hashes: &HashMap<String, String>) -> [String; 3] {
    let (js, wasm) = match (hashes.get("js"), hashes.get("wasm")) {
        (Some(js), Some(wasm)) => (format!("seckill.{js}.js"), format!("seckill.{wasm}.wasm")),
        _ => ("seckill.js".to_string(), "seckill_bg.wasm".to_string()),
    };
    let css = match hashes.get("css") {
        Some(h) => format!("seckill.{h}.css"),
        None => "seckill.css".to_string(),
    };
    [js, wasm, css]
}

/// Refuses to serve pages whose scripts and styles the site folder lacks (a server built apart
/// from its site: no style, no hydration, buttons disabled forever). Said at start-up, with the
/// way out.
pub fn check_assets(site_root: &str) -> anyhow::Result<()> {
    let pkg = std::path::Path::new(site_root).join("pkg");
    let missing: Vec<String> = asset_names(&read_hashes())
        .into_iter()
        .filter(|name| !pkg.join(name).is_file())
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "the site folder {} lacks {} that this server's pages name; build the server and its site \
         together (`make build`, or `make build-release` for target/release/server) \
         and point LEPTOS_SITE_ROOT at that site folder",
        pkg.display(),
        missing.join(", "),
    );
    Ok(())
}

/// Pages read activities from the database (a sale's page, when PostgreSQL does not answer at
/// once, from the instance's copy: `ActivityCache::current`), and their stock from Redis: the
/// server renders each sale's phase from what it sees as it renders the page.
pub struct CatalogStorefront {
    db: PgPool,
    redis: Redis,
    activities: ActivityCache,
    heat: Heat,
}

impl CatalogStorefront {
    /// A sale as the server renders it now. Its units left are Redis's (the database's count for
    /// a sale Redis no longer holds, and for an ended one in a list); with Redis unreachable they
    /// are unknown, and the page says "…" rather than fail.
    async fn state(&self, row: ActivityRow, now: DateTime<Utc>, ask_redis: bool) -> SaleState {
        let in_db = (row.total_stock - row.sold).max(0);
        let remaining = match ask_redis {
            false => Some(in_db),
            true => match self.heat.units_left(row.id, row.stock_shards).await {
                Ok(n) => Some(n.unwrap_or(in_db)),
                Err(e) => {
                    tracing::warn!(error = %e, activity.id = row.id, "rendering a sale without its stock");
                    None
                }
            },
        };
        SaleState {
            activity: row.into_activity(),
            remaining,
            seen_at_ms: Some(now.timestamp_millis() as f64),
        }
    }
}

impl StorefrontSource for CatalogStorefront {
    fn activities(&self) -> BoxFuture<'_, Loaded<Vec<SaleState>>> {
        Box::pin(async move {
            let rows = activity::list_rows(&self.db).await.map_err(|e| {
                tracing::error!(error = ?e, "rendering the activity list");
                "The sales could not be loaded.".to_string()
            })?;
            let now = Utc::now();
            Ok(futures_util::future::join_all(
                rows.into_iter()
                    .map(|row| self.state(row.clone(), now, row.ends_at > now)),
            )
            .await)
        })
    }

    fn activity(&self, SaleId(id): SaleId) -> BoxFuture<'_, Loaded<Option<SaleState>>> {
        Box::pin(async move {
            let row = match self.activities.current(&self.db, id).await {
                Ok(row) => Some(ActivityRow::clone(&row)),
                Err(ApiError::NotFound) => None,
                Err(e) => {
                    tracing::error!(error = ?e, activity.id = id, "rendering an activity");
                    return Err("The sale could not be loaded.".to_string());
                }
            };
            Ok(match row {
                Some(row) => {
                    self.heat.count(id);
                    // A hot sale's view is added to its forecast's with the next second's.
                    let later = Utc::now() < row.starts_at && self.heat.count_view_later(id);
                    // Within the page's deadline: a view is not worth a page that waits on a
                    // slow shard (a view not counted in time may still be counted).
                    let count = async {
                        match later {
                            true => Ok(()),
                            false => tokio::time::timeout(
                                READ_DEADLINE,
                                forecast::count_view(&self.redis, &row),
                            )
                            .await
                            .unwrap_or_else(|_| {
                                Err(redis::RedisError::from((
                                    redis::ErrorKind::Io,
                                    "Redis did not answer in time",
                                )))
                            }),
                        }
                    };
                    // The view counted and the stock read at once: one round trip's wait.
                    let (counted, state) = futures_util::future::join(
                        count,
                        self.state(row.clone(), Utc::now(), true),
                    )
                    .await;
                    if let Err(e) = counted {
                        tracing::warn!(error = %e, activity.id = id, "a page view not counted");
                    }
                    Some(state)
                }
                None => None,
            })
        })
    }

    fn report(&self, SaleId(id): SaleId) -> BoxFuture<'_, Loaded<Option<SaleReport>>> {
        Box::pin(async move {
            match report::of_sale(&self.db, id).await {
                Ok(report) => Ok(Some(report)),
                Err(ApiError::NotFound) => Ok(None),
                Err(e) => {
                    tracing::error!(error = ?e, activity.id = id, "rendering a sale's report");
                    Err("The report could not be made.".to_string())
                }
            }
        })
    }
}

pub fn storefront(db: PgPool, redis: Redis, activities: ActivityCache, heat: Heat) -> Storefront {
    Storefront(Arc::new(CatalogStorefront {
        db,
        redis,
        activities,
        heat,
    }))
}

/// Headers every answer carries: no MIME sniffing, no referrer beyond the origin to other
/// sites, and no framing by anyone (clickjacking). HTML pages set their own, fuller policy
/// (`app::page_policy`, with the response's script nonce); this one is for everything else.
/// Served over HTTPS (the cookie is `Secure`, `hsts`), browsers are told to keep to HTTPS.
pub(crate) fn security_headers(headers: &mut HeaderMap, hsts: bool) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("strict-origin-when-cross-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("frame-ancestors 'none'; base-uri 'self'; object-src 'none'"),
        );
    }
    if hsts {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000; includeSubDomains"),
        );
    }
}

/// Cache policy for HTML answers that did not set their own (`storefront`: the answer is to `/`
/// or a sale's page, which hold no per-user data).
pub(crate) fn html_cache_policy(storefront: bool, resp: &mut Response) {
    let is_html = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/html"));
    if !is_html {
        return;
    }
    // Pages are written in the shopper's language: the `lang` cookie, else Accept-Language.
    resp.headers_mut().insert(
        header::VARY,
        HeaderValue::from_static("Accept-Language, Cookie"),
    );
    if !resp.headers().contains_key(header::CACHE_CONTROL) {
        let policy = if storefront && resp.status().is_success() {
            "public, max-age=5"
        } else {
            "no-cache"
        };
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(policy));
    }
}

/// The language switch's form: the language chosen, and the page to send again in it.
#[derive(serde::Deserialize)]
struct LanguageChoice {
    to: String,
    back: Option<String>,
}

/// `POST /language` (the switch in every page's header, a plain form): remembers the language
/// for a year in the `lang` cookie and sends the browser back to the page it was on (a path of
/// this site only), which the server then renders in that language. From this site only; a
/// language the storefront does not have is `400 invalid_input`.
pub async fn choose_language(req: Request) -> Response {
    use axum::{extract::FromRequest, http::StatusCode, response::IntoResponse, Form};
    if super::input::cross_origin(req.headers()) {
        return super::error::HttpRefusal::CrossOrigin.into_response();
    }
    let Ok(Form(choice)) = Form::<LanguageChoice>::from_request(req, &()).await else {
        return ApiError::invalid("form", "expected to=<language>&back=<path>").into_response();
    };
    if !app::i18n::LOCALES.iter().any(|(tag, _)| *tag == choice.to) {
        return ApiError::invalid("to", "not a language of the storefront").into_response();
    }
    let back = choice
        .back
        .filter(|b| app::is_local_path(b))
        .unwrap_or_else(|| "/".to_string());
    let cookie = cookie::Cookie::build((app::i18n::COOKIE, choice.to))
        .path("/")
        .max_age(cookie::time::Duration::days(365))
        .same_site(cookie::SameSite::Lax)
        .http_only(true)
        .build();
    let (Ok(location), Ok(cookie)) = (
        HeaderValue::from_str(&back),
        HeaderValue::from_str(&cookie.to_string()),
    ) else {
        return ApiError::invalid("back", "not a path of this site").into_response();
    };
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location),
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
    )
        .into_response()
}
