//! API.md "Admin console", the orders: a filtered, paged list and a CSV export streamed from a
//! database cursor, of the merchant's shop only (another shop's sale is `404`). Exports are
//! audited.

use crate::{
    domain::{audit, rfc3339, ApiError, ApiResult},
    http::session::{Merchant, SessionKeys},
};
use axum::{
    extract::{FromRef, State},
    http::header,
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use sqlx::PgPool;
use std::sync::Arc;

/// One order as the admin console lists and exports it.
#[derive(serde::Serialize, sqlx::FromRow)]
pub struct AdminOrder {
    pub order_id: i64,
    pub token: uuid::Uuid,
    pub activity_id: i64,
    pub user_id: i64,
    pub username: String,
    pub quantity: i32,
    pub unit_price_cents: i64,
    pub status: String,
    pub reason: Option<String>,
    #[serde(serialize_with = "as_rfc3339")]
    pub reserved_at: chrono::DateTime<chrono::Utc>,
    #[serde(serialize_with = "as_rfc3339_opt")]
    pub pay_by: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(serialize_with = "as_rfc3339_opt")]
    pub paid_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(serialize_with = "as_rfc3339_opt")]
    pub cancelled_at: Option<chrono::DateTime<chrono::Utc>>,
}

fn as_rfc3339<S: serde::Serializer>(
    t: &chrono::DateTime<chrono::Utc>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*t))
}

fn as_rfc3339_opt<S: serde::Serializer>(
    t: &Option<chrono::DateTime<chrono::Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&rfc3339(*t)),
        None => s.serialize_none(),
    }
}

const ADMIN_COLUMNS: &str = "o.id AS order_id, o.token, o.activity_id, o.user_id, u.username, o.quantity, o.unit_price_cents, \
                             o.status, o.reason, o.reserved_at, o.pay_by, o.paid_at, o.cancelled_at";

#[derive(serde::Deserialize)]
pub struct OrderFilter {
    activity_id: Option<String>,
    status: Option<String>,
    limit: Option<String>,
    offset: Option<String>,
}

fn optional_number(
    field: &str,
    raw: &Option<String>,
    range: std::ops::RangeInclusive<i64>,
) -> ApiResult<Option<i64>> {
    match raw.as_deref().filter(|r| !r.is_empty()) {
        None => Ok(None),
        Some(r) => r
            .parse::<i64>()
            .ok()
            .filter(|n| range.contains(n))
            .map(Some)
            .ok_or_else(|| {
                ApiError::invalid(
                    field,
                    format!("must be a number in {}..={}", range.start(), range.end()),
                )
            }),
    }
}

fn status_filter(raw: &Option<String>) -> ApiResult<Option<String>> {
    match raw.as_deref().filter(|r| !r.is_empty()) {
        None => Ok(None),
        Some(s @ ("confirmed" | "paid" | "cancelled" | "failed")) => Ok(Some(s.to_string())),
        Some(_) => Err(ApiError::invalid(
            "status",
            "must be confirmed, paid, cancelled or failed",
        )),
    }
}

#[derive(serde::Serialize)]
pub struct AdminOrderPage {
    orders: Vec<AdminOrder>,
    total: i64,
}

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    PgPool: FromRef<S>,
    Arc<SessionKeys>: FromRef<S>,
{
    Router::new()
        .route("/admin/orders", get(admin_orders))
        .route("/admin/orders.csv", get(admin_orders_csv))
}

/// The sale filter, when given, names a sale of this shop; else `404`, as if it did not exist.
async fn own_activity(db: &PgPool, merchant: Merchant, activity: Option<i64>) -> ApiResult<()> {
    let Some(id) = activity else { return Ok(()) };
    let ours: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM activities WHERE id = $1 AND shop_id = $2)",
    )
    .bind(id)
    .bind(merchant.shop_id)
    .fetch_one(db)
    .await?;
    ours.then_some(()).ok_or(ApiError::NotFound)
}

async fn admin_orders(
    State(db): State<PgPool>,
    merchant: Merchant,
    axum::extract::Query(filter): axum::extract::Query<OrderFilter>,
) -> ApiResult<Json<AdminOrderPage>> {
    let activity = optional_number("activity_id", &filter.activity_id, 1..=i64::MAX)?;
    let status = status_filter(&filter.status)?;
    let limit = optional_number("limit", &filter.limit, 1..=1000)?.unwrap_or(50);
    let offset = optional_number("offset", &filter.offset, 0..=i64::MAX)?.unwrap_or(0);
    own_activity(&db, merchant, activity).await?;
    let total: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orders o JOIN activities a ON a.id = o.activity_id
         WHERE a.shop_id = $3 AND ($1::bigint IS NULL OR o.activity_id = $1) AND ($2::text IS NULL OR o.status = $2)",
    )
    .bind(activity)
    .bind(&status)
    .bind(merchant.shop_id)
    .fetch_one(&db)
    .await?;
    let orders: Vec<AdminOrder> = sqlx::query_as(&format!(
        "SELECT {ADMIN_COLUMNS} FROM orders o JOIN users u ON u.id = o.user_id JOIN activities a ON a.id = o.activity_id
         WHERE a.shop_id = $5 AND ($1::bigint IS NULL OR o.activity_id = $1) AND ($2::text IS NULL OR o.status = $2)
         ORDER BY o.id DESC LIMIT $3 OFFSET $4"
    ))
    .bind(activity)
    .bind(&status)
    .bind(limit)
    .bind(offset)
    .bind(merchant.shop_id)
    .fetch_all(&db)
    .await?;
    Ok(Json(AdminOrderPage { orders, total }))
}

/// A CSV field, quoted when it must be, and defused against spreadsheet formula injection.
fn csv_field(out: &mut String, value: &str) {
    let risky = value.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quote = risky || value.contains([',', '"', '\n', '\r']);
    if quote {
        out.push('"');
        if risky {
            out.push('\'');
        }
        out.push_str(&value.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(value);
    }
}

fn csv_line(o: &AdminOrder) -> String {
    let fields = [
        o.order_id.to_string(),
        o.token.to_string(),
        o.activity_id.to_string(),
        o.user_id.to_string(),
        o.username.clone(),
        o.quantity.to_string(),
        o.unit_price_cents.to_string(),
        o.status.clone(),
        o.reason.clone().unwrap_or_default(),
        rfc3339(o.reserved_at),
        o.pay_by.map(rfc3339).unwrap_or_default(),
        o.paid_at.map(rfc3339).unwrap_or_default(),
        o.cancelled_at.map(rfc3339).unwrap_or_default(),
    ];
    let mut line = String::with_capacity(160);
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        csv_field(&mut line, f);
    }
    line.push('\n');
    line
}

const CSV_HEADER: &str = "order_id,token,activity_id,user_id,username,quantity,unit_price_cents,status,reason,reserved_at,pay_by,paid_at,cancelled_at\n";

/// Streams the orders row by row from a database cursor, through a small bounded channel: memory
/// stays flat however many there are, and a client that goes away stops the query.
async fn admin_orders_csv(
    State(db): State<PgPool>,
    merchant: Merchant,
    axum::extract::Query(filter): axum::extract::Query<OrderFilter>,
) -> ApiResult<axum::response::Response> {
    use futures_util::StreamExt;
    let activity = optional_number("activity_id", &filter.activity_id, 1..=i64::MAX)?;
    own_activity(&db, merchant, activity).await?;
    let what = activity.map_or("all sales".to_string(), |a| format!("#{a}"));
    audit::record(
        &db,
        Some(merchant.user_id),
        Some(merchant.shop_id),
        "orders.export",
        &what,
        "CSV",
    )
    .await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(16);
    tokio::spawn(async move {
        let sql = format!(
            "SELECT {ADMIN_COLUMNS} FROM orders o JOIN users u ON u.id = o.user_id JOIN activities a ON a.id = o.activity_id
             WHERE a.shop_id = $2 AND ($1::bigint IS NULL OR o.activity_id = $1) ORDER BY o.id"
        );
        let mut rows = sqlx::query_as::<_, AdminOrder>(&sql)
            .bind(activity)
            .bind(merchant.shop_id)
            .fetch(&db);
        let mut chunk = String::from(CSV_HEADER);
        while let Some(row) = rows.next().await {
            match row {
                Ok(order) => chunk.push_str(&csv_line(&order)),
                Err(e) => {
                    tracing::error!(error = %e, "CSV export failed mid-stream");
                    let _ = tx.send(Err(std::io::Error::other("database error"))).await;
                    return;
                }
            }
            if chunk.len() >= 64 * 1024 && tx.send(Ok(std::mem::take(&mut chunk))).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Ok(chunk)).await;
    });
    // Fused: a compressing layer may poll again after the end, which a bare `unfold` panics on.
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    })
    .fuse();
    let name = activity.map_or("orders.csv".to_string(), |a| {
        format!("orders-activity-{a}.csv")
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        let mut out = String::new();
        for v in ["plain", "a,b", "say \"hi\"", "=1+1", "-2", "line\nbreak"] {
            csv_field(&mut out, v);
            out.push('|');
        }
        assert_eq!(
            out,
            "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"'=1+1\"|\"'-2\"|\"line\nbreak\"|"
        );
    }
}
