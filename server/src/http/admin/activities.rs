//! docs/api.md "Admin console", the activities: create, add stock, pause and resume, live figures,
//! and the console's own reads (the list with sale figures, one sale, the stock-addition audit).
//! A merchant sees and changes only the sales of its shop: another shop's sale is `404`, as if it
//! did not exist. Every change is written to the audit log with it.

use crate::http::state::AppState;
use crate::{
    buy::{
        attempts::Attempts,
        heat::{Heat, READ_DEADLINE},
        queue::WaitingRoom,
        soldout::SoldOut,
    },
    domain::{
        activity::{
            self, admin_item, insert, load_in_shop,
            rules::ActivitySpec,
            stock::{add_to_stock, in_redis, warm},
            ActivityRow,
        },
        audit, forecast, reminder, ApiError, ApiResult,
    },
    http::{
        admin::replay,
        buy::IdempotencyKey,
        input::{AppJson, InPath},
        session::Merchant,
    },
    infra::{config::Config, redis::Redis},
};
use app::api::{
    Activity, ActivityStats, AddStock, AdminActivityList, Forecast, NewActivity, OrderStatus,
    SaleId, StockAdditions, StockLevel,
};
use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use chrono::Utc;
use sqlx::PgPool;
use std::sync::Arc;

/// How many activities the console lists (newest start first).
const LIST_LIMIT: i64 = 500;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/activities", post(create_activity).get(list))
        .route("/admin/activities/{id}", get(one))
        .route("/admin/activities/{id}/stock", post(add_stock))
        .route("/admin/activities/{id}/pause", post(pause))
        .route("/admin/activities/{id}/resume", post(resume))
        .route("/admin/activities/{id}/stats", get(stats))
        .route("/admin/activities/{id}/forecast", get(forecast_of))
        .route(
            "/admin/activities/{id}/stock-additions",
            get(stock_additions),
        )
}

/// Creates a sale. With an `Idempotency-Key`, a retry gets the first answer and creates nothing.
/// Once the database has committed, the answer is `201` even if Redis could not be warmed: the
/// reconciler puts the stock on the shelf (a `503` always means nothing was written).
async fn create_activity(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(config): State<Arc<Config>>,
    merchant: Merchant,
    IdempotencyKey(key): IdempotencyKey,
    AppJson(body): AppJson<NewActivity>,
) -> ApiResult<Response> {
    let spec = ActivitySpec::parse(body, config.min_payment_window_secs, redis.masters)?;
    let mut tx = crate::infra::db::begin(&db).await?;
    if let Some(key) = &key {
        if let Some(first) = replay::claim(&mut tx, merchant.user_id, key, "create").await? {
            return Ok(first);
        }
    }
    let row = insert(&mut *tx, merchant.user_id, &spec).await?;
    let detail = format!("{} units", row.total_stock);
    audit::record(
        &mut *tx,
        Some(merchant.user_id),
        Some(row.shop_id),
        "activity.create",
        &target(&row),
        &detail,
    )
    .await?;
    let (stock, activity) = (row.total_stock, row.clone().into_activity());
    if let Some(key) = &key {
        replay::record(
            &mut tx,
            merchant.user_id,
            key,
            StatusCode::CREATED,
            &activity,
        )
        .await?;
    }
    tx.commit().await?;
    if let Err(e) = warm(&redis, &row, stock).await {
        tracing::warn!(activity.id = row.id, error = %e, "created; its stock goes to Redis with the next reconciliation");
    }
    tracing::info!(
        activity.id = row.id,
        merchant.id = merchant.user_id,
        stock,
        "activity created"
    );
    Ok((StatusCode::CREATED, Json(activity)).into_response())
}

/// Adds stock. With an `Idempotency-Key`, a retry gets the first answer and adds nothing. Once
/// the database has committed, the answer is `200` even if Redis could not take the units at
/// once: the reconciler raises the shelf to the database's figure (a `503` means nothing was
/// written).
async fn add_stock(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(sold_out): State<SoldOut>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
    IdempotencyKey(key): IdempotencyKey,
    AppJson(body): AppJson<AddStock>,
) -> ApiResult<Response> {
    if !(1..=10_000_000).contains(&body.add) {
        return Err(ApiError::invalid("add", "must be between 1 and 10000000"));
    }
    let mut tx = crate::infra::db::begin(&db).await?;
    if let Some(key) = &key {
        let route = format!("stock {id}");
        if let Some(first) = replay::claim(&mut tx, merchant.user_id, key, &route).await? {
            return Ok(first);
        }
    }
    let activity::Added {
        addition,
        total_stock,
        sold,
        stock_shards,
        title,
    } = activity::add_units(&mut tx, id, merchant.shop_id, merchant.user_id, body.add)
        .await?
        .ok_or(ApiError::NotFound)?;
    let detail = format!("+{} units, {total_stock} in all", body.add);
    audit::record(
        &mut *tx,
        Some(merchant.user_id),
        Some(merchant.shop_id),
        "stock.add",
        &format!("#{id} {title}"),
        &detail,
    )
    .await?;
    if let Some(key) = &key {
        let level = StockLevel {
            total_stock,
            remaining: total_stock - sold,
        };
        replay::record(&mut tx, merchant.user_id, key, StatusCode::OK, &level).await?;
    }
    tx.commit().await?;

    // The addition is owed to Redis until it is there: the reconciler carries it over otherwise.
    let owed = activity::OwedAddition {
        addition,
        activity_id: id,
        added: body.add,
        stock_shards,
        remaining: total_stock - sold,
    };
    let carried = async {
        let on_sale = add_to_stock(&redis, &owed).await?;
        activity::carried(&db, addition).await?;
        ApiResult::Ok(on_sale)
    };
    let remaining = match carried.await {
        Ok(remaining) => remaining,
        Err(e) => {
            tracing::warn!(activity.id = id, error = ?e, "stock added; Redis takes it with the next reconciliation");
            total_stock - sold
        }
    };
    if let Err(e) = sold_out.announce(&mut redis.conn(), id).await {
        tracing::warn!(activity.id = id, error = %e, "restock not announced; sold-out flags lapse by themselves");
    }
    tracing::info!(
        activity.id = id,
        merchant.id = merchant.user_id,
        added = body.add,
        total_stock,
        "stock added"
    );
    Ok(Json(StockLevel {
        total_stock,
        remaining,
    })
    .into_response())
}

/// How the audit log names a sale.
fn target(row: &ActivityRow) -> String {
    format!("#{} {}", row.id, row.title)
}

async fn set_paused(
    db: &PgPool,
    redis: &Redis,
    merchant: Merchant,
    id: i64,
    paused: bool,
) -> ApiResult<Json<Activity>> {
    let mut tx = crate::infra::db::begin(db).await?;
    let row = activity::set_paused(&mut *tx, id, merchant.shop_id, paused)
        .await?
        .ok_or(ApiError::NotFound)?;
    let action = if paused {
        "activity.pause"
    } else {
        "activity.resume"
    };
    audit::record(
        &mut *tx,
        Some(merchant.user_id),
        Some(row.shop_id),
        action,
        &target(&row),
        "",
    )
    .await?;
    tx.commit().await?;
    for shard in redis.keys.shards(id, row.stock_shards) {
        let _: () = redis::cmd("HSET")
            .arg(shard.meta())
            .arg("paused")
            // A sale the cord stopped stays stopped when its merchant resumes it.
            .arg(if row.stopped() { "1" } else { "0" })
            .query_async(&mut redis.conn())
            .await?;
    }
    tracing::info!(activity.id = id, paused, "activity switched");
    Ok(Json(row.into_activity()))
}

async fn pause(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<Activity>> {
    set_paused(&db, &redis, merchant, id, true).await
}

async fn resume(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<Activity>> {
    set_paused(&db, &redis, merchant, id, false).await
}

async fn stats(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(room): State<WaitingRoom>,
    State(heat): State<Heat>,
    State(attempts): State<Attempts>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<ActivityStats>> {
    let row = load_in_shop(&db, id, merchant.shop_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let counts = activity::orders_by_status(&db, id).await?;
    let count = |s: OrderStatus| {
        counts
            .iter()
            .find(|(status, _)| *status == s)
            .map(|(_, n)| *n)
            .unwrap_or(0)
    };
    // Each read within the pages' deadline, else as this instance last read it: the console
    // stays live while one shard's master is slow or failing over.
    // At once: the figures wait for the slowest read's deadline, not for their sum.
    let figures = async {
        match row.waiting_room {
            true => room.figures(&row).await.map(Some),
            false => Ok(None),
        }
    };
    let (remaining, attempts_per_sec, queue) = tokio::join!(
        heat.units_left(id, row.stock_shards),
        attempts.last_second(&redis, id, READ_DEADLINE),
        figures,
    );
    let (remaining, attempts_per_sec, queue) = (remaining?.unwrap_or(0), attempts_per_sec?, queue?);
    let (views_per_sec, hot) = heat.of(id);
    Ok(Json(ActivityStats {
        queue,
        total_stock: row.total_stock,
        remaining,
        // Units taken at the gate whose orders are not in the database yet.
        queued: (row.total_stock - remaining - row.sold).max(0),
        confirmed: count(OrderStatus::Confirmed),
        paid: count(OrderStatus::Paid),
        cancelled: count(OrderStatus::Cancelled),
        failed: count(OrderStatus::Failed),
        attempts_per_sec,
        reminders: reminder::count(&db, id).await?,
        views_per_sec,
        hot,
    }))
}

async fn forecast_of(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<Forecast>> {
    let row = load_in_shop(&db, id, merchant.shop_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(forecast::of_sale(&db, &redis, &row).await?))
}

async fn list(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    merchant: Merchant,
) -> ApiResult<Response> {
    let rows = activity::list_of_shop(&db, merchant.shop_id, LIST_LIMIT).await?;
    // Every activity's shards at once (on a cluster they live on different masters).
    let reads = rows.iter().map(|r| in_redis(&redis, r.id, r.stock_shards));
    let in_redis: Vec<Option<i64>> = futures_util::future::join_all(reads)
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let now = Utc::now();
    let activities = rows
        .into_iter()
        .zip(in_redis)
        .map(|(row, in_redis)| admin_item(row, in_redis, now))
        .collect();
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Json(AdminActivityList { activities }),
    )
        .into_response())
}

async fn one(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Response> {
    let row = load_in_shop(&db, id, merchant.shop_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let on_sale = in_redis(&redis, id, row.stock_shards).await?;
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        Json(admin_item(row, on_sale, Utc::now())),
    )
        .into_response())
}

async fn stock_additions(
    State(db): State<PgPool>,
    merchant: Merchant,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<StockAdditions>> {
    let additions = activity::stock_additions(&db, id, merchant.shop_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(StockAdditions { additions }))
}
