//! Every refusal the product can give, one variant per error code of docs/api.md, with its human
//! message (the refusals about a request's form alone, such as its media type, are HTTP's:
//! `http/error.rs`). The rooms below HTTP (the domain, the buy path, the pipeline) answer with it; `http`
//! gives each code its status and JSON body (`http/error.rs`). Infrastructure failures are either
//! `Unavailable` (a dependency is down: retry) or `Internal` (an opaque 500, logged once).

use crate::infra::outage::{redis_unavailable, sqlx_unavailable};
use app::api::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidInput(String),
    #[error("sign in first")]
    Unauthenticated,
    #[error("wrong username or password")]
    InvalidCredentials,
    #[error("your account may not do this")]
    Forbidden,
    #[error("this account is blocked; ask the shop's support")]
    AccountBlocked,
    #[error("this sale is for accounts created before {created_before}")]
    AccountTooNew { created_before: String },
    #[error("confirm your password to do this")]
    ReauthenticationRequired,
    #[error("not found")]
    NotFound,
    #[error("that username is taken")]
    UsernameTaken,
    #[error("a shop of that name exists")]
    ShopTaken,
    #[error("the sale has not started yet")]
    NotStarted { starts_at: String },
    #[error("the sale has ended")]
    Ended,
    #[error("the sale has already started")]
    AlreadyStarted,
    #[error("the sale is paused")]
    Paused,
    #[error("you already hold as many units as one shopper may buy")]
    LimitReached,
    #[error("too many requests from you; you are blocked for {retry_after} s")]
    Blocked { retry_after: u64 },
    #[error("sold out")]
    SoldOut,
    #[error("this sale admits shoppers from its waiting room in turn; wait for yours")]
    NotAdmitted,
    #[error("the captcha answer is wrong or was already used; get a new captcha")]
    CaptchaInvalid,
    #[error("this buy link is not valid for you and this sale")]
    BadPath,
    #[error("the order is not confirmed yet (or failed); it cannot be paid")]
    NotConfirmed,
    #[error("the payment window has closed")]
    PaymentWindowClosed,
    #[error("too many attempts; try again in {retry_after} s")]
    RateLimited { retry_after: u64 },
    #[error("the server is busy; try again in {retry_after} s")]
    Overloaded { retry_after: u64 },
    #[error("a service the server depends on is not answering; try again in {retry_after} s")]
    Unavailable { retry_after: u64 },
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn invalid(field: &str, why: impl std::fmt::Display) -> ApiError {
        ApiError::InvalidInput(format!("{field}: {why}"))
    }

    /// The error code of docs/api.md.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::InvalidInput(_) => ErrorCode::InvalidInput,
            ApiError::Unauthenticated => ErrorCode::Unauthenticated,
            ApiError::InvalidCredentials => ErrorCode::InvalidCredentials,
            ApiError::Forbidden => ErrorCode::Forbidden,
            ApiError::AccountBlocked => ErrorCode::AccountBlocked,
            ApiError::AccountTooNew { .. } => ErrorCode::AccountTooNew,
            ApiError::ReauthenticationRequired => ErrorCode::ReauthenticationRequired,
            ApiError::NotFound => ErrorCode::NotFound,
            ApiError::UsernameTaken => ErrorCode::UsernameTaken,
            ApiError::ShopTaken => ErrorCode::ShopTaken,
            ApiError::RateLimited { .. } => ErrorCode::RateLimited,
            ApiError::NotStarted { .. } => ErrorCode::NotStarted,
            ApiError::Ended => ErrorCode::Ended,
            ApiError::AlreadyStarted => ErrorCode::AlreadyStarted,
            ApiError::Paused => ErrorCode::Paused,
            ApiError::LimitReached => ErrorCode::LimitReached,
            ApiError::Blocked { .. } => ErrorCode::Blocked,
            ApiError::SoldOut => ErrorCode::SoldOut,
            ApiError::NotAdmitted => ErrorCode::NotAdmitted,
            ApiError::CaptchaInvalid => ErrorCode::CaptchaInvalid,
            ApiError::BadPath => ErrorCode::BadPath,
            ApiError::NotConfirmed => ErrorCode::NotConfirmed,
            ApiError::PaymentWindowClosed => ErrorCode::PaymentWindowClosed,
            ApiError::Overloaded { .. } => ErrorCode::Overloaded,
            ApiError::Unavailable { .. } => ErrorCode::Unavailable,
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// Seconds a client should wait before trying again, for the refusals that say so.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::RateLimited { retry_after }
            | ApiError::Overloaded { retry_after }
            | ApiError::Unavailable { retry_after }
            | ApiError::Blocked { retry_after } => Some((*retry_after).max(1)),
            _ => None,
        }
    }
}

/// A dependency that is down or restarting is a `503 unavailable` the client may retry, not a
/// bug: logged as a warning, once per request.
fn unavailable(what: &str, e: &dyn std::fmt::Display) -> ApiError {
    tracing::warn!(dependency = what, error = %e, "dependency unavailable");
    ApiError::Unavailable { retry_after: 1 }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        if sqlx_unavailable(&e) {
            return unavailable("postgres", &e);
        }
        // SQLSTATE class 22, "data exception": a value the database cannot store or compute
        // (a NUL character, a number out of range). The input's fault: every field is checked
        // before it gets here, so this is the net under the checks, logged to be tightened.
        if let sqlx::Error::Database(db) = &e {
            if db.code().is_some_and(|c| c.starts_with("22")) {
                tracing::warn!(error = %db, "input the database refused");
                return ApiError::invalid(
                    "input",
                    "holds a value the database cannot store (a NUL character or a number out of range)",
                );
            }
        }
        ApiError::Internal(anyhow::Error::new(e).context("database"))
    }
}

impl From<redis::RedisError> for ApiError {
    fn from(e: redis::RedisError) -> Self {
        if redis_unavailable(&e) {
            return unavailable("redis", &e);
        }
        ApiError::Internal(anyhow::Error::new(e).context("redis"))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

impl From<app::api::BadId> for ApiError {
    fn from(bad: app::api::BadId) -> ApiError {
        ApiError::invalid(bad.field, bad.why)
    }
}
