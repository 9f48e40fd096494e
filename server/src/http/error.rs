//! The API's error answers (docs/api.md): each code of `domain::ApiError` with its status, and the
//! refusals only HTTP gives (`HttpRefusal`), in one JSON shape. Infrastructure failures become an opaque 500 that is logged here, once, and never
//! described to the client.

use crate::domain::ApiError;
use app::api::{ErrorBody, ErrorCode};
use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};

pub fn status(e: &ApiError) -> StatusCode {
    match e {
        ApiError::InvalidInput(_) => StatusCode::BAD_REQUEST,
        ApiError::Unauthenticated | ApiError::InvalidCredentials => StatusCode::UNAUTHORIZED,
        ApiError::Forbidden
        | ApiError::AccountBlocked
        | ApiError::AccountTooNew { .. }
        | ApiError::ReauthenticationRequired
        | ApiError::NotStarted { .. }
        | ApiError::Paused
        | ApiError::LimitReached
        | ApiError::NotAdmitted
        | ApiError::Blocked { .. } => StatusCode::FORBIDDEN,
        ApiError::NotFound => StatusCode::NOT_FOUND,
        ApiError::UsernameTaken
        | ApiError::ShopTaken
        | ApiError::SoldOut
        | ApiError::AlreadyStarted
        | ApiError::NotConfirmed
        | ApiError::PaymentWindowClosed => StatusCode::CONFLICT,
        ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        ApiError::Ended => StatusCode::GONE,
        ApiError::CaptchaInvalid | ApiError::BadPath => StatusCode::BAD_REQUEST,
        ApiError::Overloaded { .. } | ApiError::Unavailable { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The refusals about the request's form alone (where it comes from, its media type, its
/// size), given by the middleware and the JSON extractor before any handler runs.
#[derive(Debug, thiserror::Error)]
pub enum HttpRefusal {
    #[error("requests that change state must send Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("the request body is larger than 16 KiB")]
    PayloadTooLarge,
    #[error("requests that change state must come from this site")]
    CrossOrigin,
}

impl IntoResponse for HttpRefusal {
    fn into_response(self) -> Response {
        let (status, code) = match self {
            HttpRefusal::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
            ),
            HttpRefusal::PayloadTooLarge => {
                (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge)
            }
            HttpRefusal::CrossOrigin => (StatusCode::FORBIDDEN, ErrorCode::CrossOrigin),
        };
        (status, Json(body(code, &self))).into_response()
    }
}

/// The one JSON shape of every error answer.
fn body(code: ErrorCode, message: &impl std::fmt::Display) -> serde_json::Value {
    serde_json::to_value(ErrorBody {
        error: code.as_str().to_string(),
        message: message.to_string(),
    })
    .expect("an error body serializes")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(e) = &self {
            tracing::error!(error = ?e, "request failed");
        }
        let mut body = body(self.code(), &self);
        match &self {
            ApiError::NotStarted { starts_at } => body["starts_at"] = starts_at.clone().into(),
            ApiError::AccountTooNew { created_before } => {
                body["accounts_created_before"] = created_before.clone().into()
            }
            _ => {}
        }
        let mut resp = (status(&self), Json(body)).into_response();
        if let Some(retry_after) = self.retry_after() {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_to_retry_say_when() {
        let resp = ApiError::Overloaded { retry_after: 0 }.into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        let resp = ApiError::SoldOut.into_response();
        assert_eq!(resp.status(), StatusCode::CONFLICT);
        assert!(resp.headers().get(header::RETRY_AFTER).is_none());
    }
}
