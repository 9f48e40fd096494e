//! docs/api.md "Admin console", the orders: a filtered, paged list and a CSV export read in pages of
//! the merchant's shop only (another shop's sale is `404`). Exports are audited, at most
//! [`EXPORTS_PER_MERCHANT`](crate::http::exports::EXPORTS_PER_MERCHANT) at once per merchant and
//! [`EXPORTS_PER_INSTANCE`](crate::http::exports::EXPORTS_PER_INSTANCE) per instance, and
//! a client that stops reading for [`WRITE_TIMEOUT`] is cut off: no export holds a database
//! connection while it waits for its client.

use crate::http::{exports::Exports, state::AppState};
use crate::{
    domain::{
        activity, audit,
        order::{self, OrderLine},
        rfc3339, ApiError, ApiResult,
    },
    http::session::Merchant,
};
use app::api::{AdminOrderPage, OrderStatus};
use axum::{extract::State, http::header, response::IntoResponse, routing::get, Json, Router};
use sqlx::PgPool;
use std::time::Duration;

/// Rows per database read of an export (the connection goes back to the pool between reads).
const EXPORT_PAGE: i64 = 2000;
/// A client that has not taken the next chunk within this long is cut off.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

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
    let Some(raw) = raw.as_deref().filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    match raw.parse::<OrderStatus>() {
        Ok(s) if OrderStatus::STORED.contains(&s) => Ok(Some(s.as_str().to_string())),
        _ => {
            let names: Vec<&str> = OrderStatus::STORED.iter().map(|s| s.as_str()).collect();
            let (last, rest) = names.split_last().expect("four statuses");
            Err(ApiError::invalid(
                "status",
                format!("must be {} or {last}", rest.join(", ")),
            ))
        }
    }
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/orders", get(admin_orders))
        .route("/admin/orders.csv", get(admin_orders_csv))
}

/// The sale filter, when given, names a sale of this shop; else `404`, as if it did not exist.
async fn own_activity(db: &PgPool, merchant: Merchant, activity: Option<i64>) -> ApiResult<()> {
    let Some(id) = activity else { return Ok(()) };
    let ours = activity::in_shop(db, id, merchant.shop_id).await?;
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
    let (orders, total) = order::admin_page(
        &db,
        merchant.shop_id,
        activity,
        status.as_deref(),
        (limit, offset),
    )
    .await?;
    Ok(Json(AdminOrderPage {
        orders: orders
            .into_iter()
            .map(OrderLine::into_wire)
            .collect::<ApiResult<_>>()?,
        total,
    }))
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

fn csv_line(o: &OrderLine) -> String {
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

/// Streams the orders in pages of [`EXPORT_PAGE`] (by order id, each read a short query of its
/// own), through a small bounded channel: memory stays flat however many there are, a client that
/// goes away stops the export, and one that stops reading is cut off after [`WRITE_TIMEOUT`].
async fn admin_orders_csv(
    State(db): State<PgPool>,
    State(exports): State<Exports>,
    merchant: Merchant,
    axum::extract::Query(filter): axum::extract::Query<OrderFilter>,
) -> ApiResult<axum::response::Response> {
    let activity = optional_number("activity_id", &filter.activity_id, 1..=i64::MAX)?;
    own_activity(&db, merchant, activity).await?;
    let slot = exports.start(merchant.user_id)?;
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
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(4);
    tokio::spawn(async move {
        let _slot = slot;
        write_export(&db, merchant, activity, tx).await;
    });
    let name = activity.map_or("orders.csv".to_string(), |a| {
        format!("orders-activity-{a}.csv")
    });
    Ok(csv_response(&name, rx))
}

/// The export's pages, 64 KiB at a time, into the channel the response reads; it stops when
/// the client has left or has not read for [`WRITE_TIMEOUT`].
async fn write_export(
    db: &PgPool,
    merchant: Merchant,
    activity: Option<i64>,
    tx: tokio::sync::mpsc::Sender<Result<String, std::io::Error>>,
) {
    let send = |chunk: Result<String, std::io::Error>| {
        let tx = tx.clone();
        async move {
            matches!(
                tokio::time::timeout(WRITE_TIMEOUT, tx.send(chunk)).await,
                Ok(Ok(()))
            )
        }
    };
    let mut chunk = String::from(CSV_HEADER);
    let mut after = 0i64;
    loop {
        let page = order::export_page(db, merchant.shop_id, activity, after, EXPORT_PAGE).await;
        let page = match page {
            Ok(page) => page,
            Err(e) => {
                tracing::error!(error = %e, "CSV export failed mid-stream");
                send(Err(std::io::Error::other("database error"))).await;
                return;
            }
        };
        let last_page = (page.len() as i64) < EXPORT_PAGE;
        for order in &page {
            chunk.push_str(&csv_line(order));
            after = order.order_id;
        }
        if (last_page || chunk.len() >= 64 * 1024) && !send(Ok(std::mem::take(&mut chunk))).await {
            tracing::info!(
                merchant.id = merchant.user_id,
                "CSV export ended: the client left or stopped reading"
            );
            return;
        }
        if last_page {
            return;
        }
    }
}

/// A CSV attachment streamed from the channel, never stored.
fn csv_response(
    name: &str,
    rx: tokio::sync::mpsc::Receiver<Result<String, std::io::Error>>,
) -> axum::response::Response {
    use futures_util::StreamExt as _;
    // Fused: a compressing layer may poll again after the end, which a bare `unfold` panics on.
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    })
    .fuse();
    (
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
        .into_response()
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
