//! Sale activities: the merchant's side (create, add stock, pause, stats) and the storefront's
//! reads (list, detail, remaining stock). Creating an activity warms Redis before answering;
//! stock only ever grows.

use crate::{
    error::{ApiError, ApiResult},
    input::AppJson,
    session::Merchant,
    state::AppState,
};
use app::api::{Activity, ActivityList, ActivityStats, AddStock, NewActivity, Remaining, ServerTime, StockLevel};
use axum::{
    extract::{Path, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use chrono::{DateTime, SecondsFormat, Utc};
use redis::aio::ConnectionManager;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::{collections::HashMap, sync::Arc, time::{Duration, Instant}};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/time", get(server_time))
        .route("/activities", get(list_activities))
        .route("/activities/{id}", get(get_activity))
        .route("/activities/{id}/stock", get(get_stock))
        .route("/admin/activities", post(create_activity))
        .route("/admin/activities/{id}/stock", post(add_stock))
        .route("/admin/activities/{id}/pause", post(pause))
        .route("/admin/activities/{id}/resume", post(resume))
        .route("/admin/activities/{id}/stats", get(stats))
}

pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[derive(sqlx::FromRow, Clone, Debug)]
pub struct ActivityRow {
    pub id: i64,
    pub title: String,
    pub description: String,
    pub image_url: Option<String>,
    pub price_cents: i64,
    pub seckill_price_cents: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub total_stock: i64,
    pub sold: i64,
    pub per_user_limit: i32,
    pub captcha_required: bool,
    pub payment_window_secs: i32,
    pub paused: bool,
}

pub(crate) const COLUMNS: &str = "id, title, description, image_url, price_cents, seckill_price_cents, starts_at, ends_at, \
                       total_stock, sold, per_user_limit, captcha_required, payment_window_secs, paused";

impl ActivityRow {
    pub fn into_activity(self) -> Activity {
        Activity {
            id: self.id,
            title: self.title,
            description: self.description,
            image_url: self.image_url,
            price_cents: self.price_cents,
            seckill_price_cents: self.seckill_price_cents,
            starts_at: rfc3339(self.starts_at),
            ends_at: rfc3339(self.ends_at),
            total_stock: self.total_stock,
            per_user_limit: self.per_user_limit,
            captcha_required: self.captcha_required,
            payment_window_secs: self.payment_window_secs,
            paused: self.paused,
        }
    }
}

pub async fn load(db: &PgPool, id: i64) -> ApiResult<Option<ActivityRow>> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM activities WHERE id = $1")).bind(id).fetch_optional(db).await?)
}

/// Activities that have not ended.
pub async fn live(db: &PgPool) -> ApiResult<Vec<ActivityRow>> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM activities WHERE ends_at > now()")).fetch_all(db).await?)
}

/// Activities as the buy path sees them, cached in-process for a few seconds: the fields it needs
/// (window, limit, captcha switch, price) never change after creation, and `paused` is decided in
/// Redis, so a stale copy is harmless.
#[derive(Clone, Default)]
pub struct ActivityCache {
    entries: Arc<std::sync::RwLock<HashMap<i64, (Instant, Option<Arc<ActivityRow>>)>>>,
}

const CACHE_TTL: Duration = Duration::from_secs(5);

impl ActivityCache {
    pub async fn get(&self, db: &PgPool, id: i64) -> ApiResult<Arc<ActivityRow>> {
        if let Some((at, row)) = self.entries.read().expect("cache lock").get(&id) {
            if at.elapsed() < CACHE_TTL {
                return row.clone().ok_or(ApiError::NotFound);
            }
        }
        let row = match load(db, id).await {
            Ok(row) => row.map(Arc::new),
            // PostgreSQL is down or restarting: the sale goes on with what this instance last
            // read (Redis decides the buy; the row only gives its window, limit and captcha rule).
            Err(e @ ApiError::Unavailable { .. }) => return self.stale(id).ok_or(e)?.ok_or(ApiError::NotFound),
            Err(e) => return Err(e),
        };
        let mut entries = self.entries.write().expect("cache lock");
        if entries.len() > 10_000 {
            entries.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        }
        entries.insert(id, (Instant::now(), row.clone()));
        row.ok_or(ApiError::NotFound)
    }

    /// The last row read, however old (`Some(None)`: it was known not to exist).
    fn stale(&self, id: i64) -> Option<Option<Arc<ActivityRow>>> {
        self.entries.read().expect("cache lock").get(&id).map(|(_, row)| row.clone())
    }
}

/// Path ids: a non-number is bad input, not a missing page.
pub fn parse_id(raw: &str) -> ApiResult<i64> {
    raw.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| ApiError::invalid("id", "must be a positive integer"))
}

async fn server_time() -> Response {
    let now = Utc::now();
    let body = ServerTime { now: rfc3339(now), now_ms: now.timestamp_millis() };
    ([(header::CACHE_CONTROL, "no-store")], Json(body)).into_response()
}

/// Newest start first.
pub async fn list(db: &PgPool) -> ApiResult<Vec<Activity>> {
    let rows: Vec<ActivityRow> =
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM activities ORDER BY starts_at DESC, id DESC LIMIT 500"))
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().map(ActivityRow::into_activity).collect())
}

async fn list_activities(State(state): State<AppState>) -> ApiResult<Json<ActivityList>> {
    Ok(Json(ActivityList { activities: list(&state.db).await? }))
}

async fn get_activity(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> ApiResult<Response> {
    let row = load(&state.db, parse_id(&id)?).await?.ok_or(ApiError::NotFound)?;
    let body = serde_json::to_vec(&row.into_activity()).map_err(anyhow::Error::from)?;
    let etag = format!("\"{}\"", &hex(&Sha256::digest(&body))[..32]);
    let cache = [(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=5"))];
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let etag = HeaderValue::from_str(&etag).map_err(anyhow::Error::from)?;
    if matches {
        return Ok((StatusCode::NOT_MODIFIED, cache, [(header::ETAG, etag)]).into_response());
    }
    Ok((cache, [(header::ETAG, etag), (header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body)
        .into_response())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn remaining(redis: &mut ConnectionManager, keys: &crate::keys::Keys, id: i64) -> ApiResult<i64> {
    let n: Option<i64> = redis::cmd("GET").arg(keys.stock(id)).query_async(redis).await?;
    Ok(n.unwrap_or(0).max(0))
}

async fn get_stock(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    state.activities.get(&state.db, id).await?;
    let remaining = remaining(&mut state.redis.clone(), &state.keys, id).await?;
    Ok(([(header::CACHE_CONTROL, "public, max-age=1")], Json(Remaining { remaining })).into_response())
}

/// A validated `NewActivity`.
struct ActivitySpec {
    title: String,
    description: String,
    image_url: Option<String>,
    price_cents: i64,
    seckill_price_cents: i64,
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    stock: i64,
    per_user_limit: i32,
    captcha_required: bool,
    payment_window_secs: i32,
}

fn parse_time(field: &str, s: &str) -> ApiResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| ApiError::invalid(field, "must be an RFC 3339 time, e.g. 2030-01-01T12:00:00Z"))
}

impl ActivitySpec {
    fn parse(n: NewActivity, min_window: i32) -> ApiResult<ActivitySpec> {
        let title = n.title.trim().to_string();
        if title.is_empty() || title.chars().count() > 120 {
            return Err(ApiError::invalid("title", "must be 1 to 120 characters"));
        }
        if n.description.chars().count() > 5000 {
            return Err(ApiError::invalid("description", "must be at most 5000 characters"));
        }
        let image_url = match n.image_url.map(|u| u.trim().to_string()).filter(|u| !u.is_empty()) {
            Some(u) if u.len() > 2048 || !(u.starts_with("https://") || u.starts_with("http://") || u.starts_with('/')) => {
                return Err(ApiError::invalid("image_url", "must be an http(s) URL or a path"));
            }
            other => other,
        };
        if n.price_cents < 0 {
            return Err(ApiError::invalid("price_cents", "must be at least 0"));
        }
        if !(0..=n.price_cents).contains(&n.seckill_price_cents) {
            return Err(ApiError::invalid("seckill_price_cents", "must be between 0 and price_cents"));
        }
        let starts_at = parse_time("starts_at", &n.starts_at)?;
        let ends_at = parse_time("ends_at", &n.ends_at)?;
        if ends_at <= starts_at {
            return Err(ApiError::invalid("ends_at", "must be after starts_at"));
        }
        if !(1..=10_000_000).contains(&n.stock) {
            return Err(ApiError::invalid("stock", "must be between 1 and 10000000"));
        }
        let per_user_limit = n.per_user_limit.unwrap_or(1);
        if !(1..=100).contains(&per_user_limit) {
            return Err(ApiError::invalid("per_user_limit", "must be between 1 and 100"));
        }
        let payment_window_secs = n.payment_window_secs.unwrap_or(600);
        if !(min_window..=86_400).contains(&payment_window_secs) {
            return Err(ApiError::invalid("payment_window_secs", format!("must be between {min_window} and 86400")));
        }
        Ok(ActivitySpec {
            title,
            description: n.description,
            image_url,
            price_cents: n.price_cents,
            seckill_price_cents: n.seckill_price_cents,
            starts_at,
            ends_at,
            stock: n.stock,
            per_user_limit,
            captcha_required: n.captcha_required.unwrap_or(true),
            payment_window_secs,
        })
    }
}

/// Puts an activity's stock and switches into Redis unless they are there already.
pub async fn warm(redis: &mut ConnectionManager, keys: &crate::keys::Keys, row: &ActivityRow, remaining: i64) -> ApiResult<()> {
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET").arg(keys.stock(row.id)).arg(remaining.max(0)).arg("NX").ignore()
        .cmd("HSETNX").arg(keys.meta(row.id)).arg("paused").arg(if row.paused { "1" } else { "0" }).ignore()
        .query_async(redis)
        .await?;
    Ok(())
}

async fn insert(db: &PgPool, merchant_id: i64, spec: &ActivitySpec) -> ApiResult<ActivityRow> {
    Ok(sqlx::query_as(&format!(
        "INSERT INTO activities (merchant_id, title, description, image_url, price_cents, seckill_price_cents,
             starts_at, ends_at, total_stock, per_user_limit, captcha_required, payment_window_secs)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         RETURNING {COLUMNS}"
    ))
    .bind(merchant_id)
    .bind(&spec.title)
    .bind(&spec.description)
    .bind(&spec.image_url)
    .bind(spec.price_cents)
    .bind(spec.seckill_price_cents)
    .bind(spec.starts_at)
    .bind(spec.ends_at)
    .bind(spec.stock)
    .bind(spec.per_user_limit)
    .bind(spec.captcha_required)
    .bind(spec.payment_window_secs)
    .fetch_one(db)
    .await?)
}

async fn create_activity(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    AppJson(body): AppJson<NewActivity>,
) -> ApiResult<(StatusCode, Json<Activity>)> {
    let spec = ActivitySpec::parse(body, state.config.min_payment_window_secs)?;
    let row = insert(&state.db, merchant.user_id, &spec).await?;
    warm(&mut state.redis.clone(), &state.keys, &row, row.total_stock).await?;
    tracing::info!(activity.id = row.id, merchant.id = merchant.user_id, stock = row.total_stock, "activity created");
    Ok((StatusCode::CREATED, Json(row.into_activity())))
}

/// For `make run`: unless a sale is live or upcoming, one that starts a few minutes from now.
pub async fn create_demo(db: &PgPool, merchant_username: &str) -> anyhow::Result<Option<i64>> {
    let pending: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM activities WHERE ends_at > now())")
        .fetch_one(db)
        .await?;
    let merchant: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE lower(username) = lower($1) AND role = 'merchant'")
        .bind(merchant_username)
        .fetch_optional(db)
        .await?;
    let (false, Some(merchant)) = (pending, merchant) else { return Ok(None) };
    let now = Utc::now();
    let spec = ActivitySpec::parse(NewActivity {
        title: "Demo: the 100-unit phone drop".into(),
        description: "A demo sale: 100 phones at a flash price. One per shopper.".into(),
        image_url: None,
        price_cents: 49_900,
        seckill_price_cents: 9_900,
        starts_at: rfc3339(now + chrono::Duration::minutes(3)),
        ends_at: rfc3339(now + chrono::Duration::hours(2)),
        stock: 100,
        per_user_limit: Some(1),
        captcha_required: Some(true),
        payment_window_secs: Some(600),
    }, 60)
    .map_err(|e| anyhow::anyhow!("demo activity: {e}"))?;
    let row = insert(db, merchant, &spec).await.map_err(|e| anyhow::anyhow!("demo activity: {e:?}"))?;
    Ok(Some(row.id))
}

/// Adds to Redis only if the stock is there; otherwise warms it from the database's figures.
const ADD_STOCK: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end
redis.call('SET', KEYS[1], ARGV[2])
return tonumber(ARGV[2])
";

async fn add_stock(
    State(state): State<AppState>,
    Merchant(merchant): Merchant,
    Path(id): Path<String>,
    AppJson(body): AppJson<AddStock>,
) -> ApiResult<Json<StockLevel>> {
    let id = parse_id(&id)?;
    if !(1..=10_000_000).contains(&body.add) {
        return Err(ApiError::invalid("add", "must be between 1 and 10000000"));
    }
    let mut tx = state.db.begin().await?;
    let updated: Option<(i64, i64)> = sqlx::query_as(
        "UPDATE activities SET total_stock = total_stock + $2 WHERE id = $1 RETURNING total_stock, sold",
    )
    .bind(id)
    .bind(body.add)
    .fetch_optional(&mut *tx)
    .await?;
    let (total_stock, sold) = updated.ok_or(ApiError::NotFound)?;
    sqlx::query("INSERT INTO stock_additions (activity_id, merchant_id, added) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(merchant.user_id)
        .bind(body.add)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;

    let mut redis = state.redis.clone();
    let remaining: i64 = redis::Script::new(ADD_STOCK)
        .key(state.keys.stock(id))
        .arg(body.add)
        .arg(total_stock - sold)
        .invoke_async(&mut redis)
        .await?;
    state.sold_out.announce(&mut redis, id).await?;
    tracing::info!(activity.id = id, merchant.id = merchant.user_id, added = body.add, total_stock, "stock added");
    Ok(Json(StockLevel { total_stock, remaining }))
}

async fn set_paused(state: &AppState, id: &str, paused: bool) -> ApiResult<Json<Activity>> {
    let id = parse_id(id)?;
    let row: ActivityRow =
        sqlx::query_as(&format!("UPDATE activities SET paused = $2 WHERE id = $1 RETURNING {COLUMNS}"))
            .bind(id)
            .bind(paused)
            .fetch_optional(&state.db)
            .await?
            .ok_or(ApiError::NotFound)?;
    let _: () = redis::cmd("HSET")
        .arg(state.keys.meta(id))
        .arg("paused")
        .arg(if paused { "1" } else { "0" })
        .query_async(&mut state.redis.clone())
        .await?;
    tracing::info!(activity.id = id, paused, "activity switched");
    Ok(Json(row.into_activity()))
}

async fn pause(State(state): State<AppState>, _: Merchant, Path(id): Path<String>) -> ApiResult<Json<Activity>> {
    set_paused(&state, &id, true).await
}

async fn resume(State(state): State<AppState>, _: Merchant, Path(id): Path<String>) -> ApiResult<Json<Activity>> {
    set_paused(&state, &id, false).await
}

async fn stats(State(state): State<AppState>, _: Merchant, Path(id): Path<String>) -> ApiResult<Json<ActivityStats>> {
    let id = parse_id(&id)?;
    let row = load(&state.db, id).await?.ok_or(ApiError::NotFound)?;
    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM orders WHERE activity_id = $1 GROUP BY status")
            .bind(id)
            .fetch_all(&state.db)
            .await?;
    let count = |s: &str| counts.iter().find(|(status, _)| status == s).map(|(_, n)| *n).unwrap_or(0);
    let mut redis = state.redis.clone();
    let remaining = remaining(&mut redis, &state.keys, id).await?;
    let attempts_per_sec = crate::attempts::last_second(&mut redis, &state.keys, id).await?;
    Ok(Json(ActivityStats {
        total_stock: row.total_stock,
        remaining,
        // Units taken at the gate whose orders are not in the database yet.
        queued: (row.total_stock - remaining - row.sold).max(0),
        confirmed: count("confirmed"),
        paid: count("paid"),
        cancelled: count("cancelled"),
        failed: count("failed"),
        attempts_per_sec,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> NewActivity {
        NewActivity {
            title: "Phone".into(),
            description: String::new(),
            image_url: None,
            price_cents: 100_00,
            seckill_price_cents: 1_00,
            starts_at: "2030-01-01T00:00:00Z".into(),
            ends_at: "2030-01-01T01:00:00Z".into(),
            stock: 100,
            per_user_limit: None,
            captcha_required: None,
            payment_window_secs: None,
        }
    }

    fn field_of(n: NewActivity) -> String {
        match ActivitySpec::parse(n, 60) {
            Err(ApiError::InvalidInput(m)) => m.split(':').next().unwrap().to_string(),
            Err(e) => panic!("{e:?}"),
            Ok(_) => "ok".into(),
        }
    }

    #[test]
    fn defaults_follow_the_api() {
        let spec = ActivitySpec::parse(valid(), 60).unwrap();
        assert_eq!((spec.per_user_limit, spec.captcha_required, spec.payment_window_secs), (1, true, 600));
    }

    #[test]
    fn each_rule_names_its_field() {
        assert_eq!(field_of(NewActivity { title: " ".into(), ..valid() }), "title");
        assert_eq!(field_of(NewActivity { title: "x".repeat(121), ..valid() }), "title");
        assert_eq!(field_of(NewActivity { description: "x".repeat(5001), ..valid() }), "description");
        assert_eq!(field_of(NewActivity { image_url: Some("javascript:alert(1)".into()), ..valid() }), "image_url");
        assert_eq!(field_of(NewActivity { price_cents: -1, ..valid() }), "price_cents");
        assert_eq!(field_of(NewActivity { seckill_price_cents: 100_01, ..valid() }), "seckill_price_cents");
        assert_eq!(field_of(NewActivity { starts_at: "tomorrow".into(), ..valid() }), "starts_at");
        assert_eq!(field_of(NewActivity { ends_at: "2029-12-31T23:00:00Z".into(), ..valid() }), "ends_at");
        assert_eq!(field_of(NewActivity { stock: 0, ..valid() }), "stock");
        assert_eq!(field_of(NewActivity { stock: 10_000_001, ..valid() }), "stock");
        assert_eq!(field_of(NewActivity { per_user_limit: Some(101), ..valid() }), "per_user_limit");
        assert_eq!(field_of(NewActivity { payment_window_secs: Some(59), ..valid() }), "payment_window_secs");
        assert_eq!(field_of(valid()), "ok");
    }
}
