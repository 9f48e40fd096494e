//! The operator's API (additions to docs/api.md): shops and their merchants, resetting a password,
//! blocking and unblocking a user, and the whole platform's audit log. Every change is audited in
//! the same transaction. Anyone but the operator gets `403 forbidden`.

use super::{
    input::{AppJson, InPath},
    session::{Operator, SessionKeys},
};
use crate::http::state::AppState;
use crate::{
    domain::{
        account::{self, insert_user, Password, Username},
        audit,
        password::Passwords,
        rfc3339,
        sessions::next_epoch,
        shop, ApiError, ApiResult,
    },
    infra::redis::Redis,
};
use app::api::{
    AccountList, AccountSummary, AuditLog, Credentials, NewShop, PasswordReset, Role, SaleId, Shop,
    ShopList, ShopRef, User, UserId,
};
use axum::{
    extract::{Query, State},
    http::{header, StatusCode},
    response::IntoResponse,
    routing::{get, post},
    Json, Router,
};
use sqlx::PgPool;
use std::sync::Arc;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/operator/shops", get(shops).post(create_shop))
        .route("/operator/shops/{id}/merchants", post(create_merchant))
        .route("/operator/users", get(users))
        .route("/operator/users/{id}/password", post(reset_password))
        .route("/operator/users/{id}/block", post(block))
        .route("/operator/users/{id}/unblock", post(unblock))
        .route("/operator/audit", get(audit_log))
}

fn no_store<T: serde::Serialize>(body: T) -> impl IntoResponse {
    ([(header::CACHE_CONTROL, "no-store")], Json(body))
}

async fn shops(State(db): State<PgPool>, _: Operator) -> ApiResult<impl IntoResponse> {
    Ok(no_store(ShopList {
        shops: shop::list(&db).await?,
    }))
}

async fn create_shop(
    State(db): State<PgPool>,
    op: Operator,
    AppJson(body): AppJson<NewShop>,
) -> ApiResult<(StatusCode, Json<Shop>)> {
    let name = shop::parse_name(&body.name)?;
    let mut tx = crate::infra::db::begin(&db).await?;
    let (id, created_at) = shop::create(&mut *tx, &name).await?;
    audit::record(
        &mut *tx,
        Some(op.user_id),
        Some(id),
        "shop.create",
        &name,
        "",
    )
    .await?;
    tx.commit().await?;
    tracing::info!(shop.id = id, operator.id = op.user_id, "shop created");
    Ok((
        StatusCode::CREATED,
        Json(Shop {
            id,
            name,
            created_at: rfc3339(created_at),
            merchants: Vec::new(),
            activities: 0,
        }),
    ))
}

async fn create_merchant(
    State(db): State<PgPool>,
    State(passwords): State<Passwords>,
    op: Operator,
    InPath(SaleId(id)): InPath<SaleId>,
    AppJson(creds): AppJson<Credentials>,
) -> ApiResult<(StatusCode, Json<User>)> {
    let shop_id = id;
    let username = Username::parse(&creds.username)?;
    let password = Password::parse(&creds.password)?;
    let shop_name = shop::name_of(&db, shop_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let hash = passwords
        .hash_new(password.into_inner(), username.as_str().to_string())
        .await?;
    let mut tx = crate::infra::db::begin(&db).await?;
    let mut user = insert_user(
        &mut *tx,
        &username,
        &hash,
        Role::Merchant,
        Some(shop_id),
        None,
    )
    .await?;
    audit::record(
        &mut *tx,
        Some(op.user_id),
        Some(shop_id),
        "merchant.create",
        &user.username,
        "",
    )
    .await?;
    tx.commit().await?;
    tracing::info!(user.id = %user.id, shop.id = shop_id, "merchant created");
    user.shop = Some(ShopRef {
        id: shop_id,
        name: shop_name,
    });
    Ok((StatusCode::CREATED, Json(user)))
}

#[derive(serde::Deserialize)]
struct UserQuery {
    q: Option<String>,
}

/// Accounts whose name starts with `q` (every account when empty), 100 at most, by name.
async fn users(
    State(db): State<PgPool>,
    _: Operator,
    Query(query): Query<UserQuery>,
) -> ApiResult<impl IntoResponse> {
    let q = query.q.unwrap_or_default();
    crate::domain::activity::rules::plain_text("q", &q, false)?;
    if q.chars().count() > 32 {
        return Err(ApiError::invalid("q", "must be at most 32 characters"));
    }
    let users = account::search(&db, &q).await?;
    Ok(no_store(AccountList { users }))
}

/// The account an operator acts on: it exists, and it is not an operator (operators are managed
/// from the command line).
async fn target(db: &PgPool, id: i64) -> ApiResult<account::UserRow> {
    let row = account::load(db, id).await?.ok_or(ApiError::NotFound)?;
    if row.role()? == Role::Operator {
        return Err(ApiError::invalid(
            "id",
            "operators are managed from the command line",
        ));
    }
    Ok(row)
}

/// Sets a merchant's or shopper's password; every session of theirs ends. Asks for the operator's
/// password checked within the last minutes (`403 reauthentication_required`).
async fn reset_password(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(passwords): State<Passwords>,
    State(sessions): State<Arc<SessionKeys>>,
    op: Operator,
    InPath(SaleId(id)): InPath<SaleId>,
    AppJson(body): AppJson<PasswordReset>,
) -> ApiResult<StatusCode> {
    op.recently_authenticated()?;
    let user = target(&db, id).await?;
    let new = Password::parse(&body.new_password)
        .map_err(|_| ApiError::invalid("new_password", "must be 8 to 128 characters"))?;
    let hash = passwords
        .hash_new(new.into_inner(), user.username.clone())
        .await
        .map_err(|e| match e {
            ApiError::InvalidInput(why) => {
                ApiError::InvalidInput(why.replacen("password", "new_password", 1))
            }
            other => other,
        })?;
    let mut tx = crate::infra::db::begin(&db).await?;
    let epoch = account::set_password(&mut *tx, user.id, &hash, true)
        .await?
        .ok_or(ApiError::NotFound)?;
    audit::record(
        &mut *tx,
        Some(op.user_id),
        user.shop_id,
        "password.reset",
        &user.username,
        "every session ended",
    )
    .await?;
    tx.commit().await?;
    sessions
        .revocations
        .announce_epoch(&redis, user.id, epoch)
        .await;
    tracing::info!(
        user.id = user.id,
        operator.id = op.user_id,
        "password reset"
    );
    Ok(StatusCode::NO_CONTENT)
}

/// Blocks or unblocks an account; asks for the operator's password checked within the last
/// minutes, as a reset does.
async fn set_blocked(
    db: &PgPool,
    redis: &Redis,
    sessions: &SessionKeys,
    op: Operator,
    id: i64,
    blocked: bool,
) -> ApiResult<Json<AccountSummary>> {
    op.recently_authenticated()?;
    let user = target(db, id).await?;
    let mut tx = crate::infra::db::begin(db).await?;
    account::set_blocked(&mut *tx, user.id, blocked).await?;
    // A block ends every session at once; the user cannot sign in again until unblocked.
    let epoch = match blocked {
        true => next_epoch(&mut *tx, user.id).await?,
        false => None,
    };
    let action = if blocked {
        "user.block"
    } else {
        "user.unblock"
    };
    audit::record(
        &mut *tx,
        Some(op.user_id),
        user.shop_id,
        action,
        &user.username,
        "",
    )
    .await?;
    tx.commit().await?;
    if let Some(epoch) = epoch {
        sessions
            .revocations
            .announce_epoch(redis, user.id, epoch)
            .await;
    }
    tracing::info!(
        user.id = user.id,
        operator.id = op.user_id,
        blocked,
        "user switched"
    );
    Ok(Json(AccountSummary {
        id: UserId(user.id),
        role: user.role()?,
        username: user.username,
        shop_id: user.shop_id,
        blocked,
    }))
}

async fn block(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(sessions): State<Arc<SessionKeys>>,
    op: Operator,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<AccountSummary>> {
    set_blocked(&db, &redis, &sessions, op, id, true).await
}

async fn unblock(
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(sessions): State<Arc<SessionKeys>>,
    op: Operator,
    InPath(SaleId(id)): InPath<SaleId>,
) -> ApiResult<Json<AccountSummary>> {
    set_blocked(&db, &redis, &sessions, op, id, false).await
}

async fn audit_log(State(db): State<PgPool>, _: Operator) -> ApiResult<impl IntoResponse> {
    Ok(no_store(AuditLog {
        entries: audit::read(&db, None).await?,
    }))
}
