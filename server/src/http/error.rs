//! The API's error answers (docs/api.md): each code of `domain::ApiError` with its status, in one JSON
//! shape. Infrastructure failures become an opaque 500 that is logged here, once, and never
//! described to the client.

use crate::domain::ApiError;
use app::api::ErrorBody;
use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};

pub fn status(e: &ApiError) -> StatusCode {
    match e {
        ApiError::InvalidInput(_) => StatusCode::BAD_REQUEST,
        ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ApiError::Unauthenticated | ApiError::InvalidCredentials => StatusCode::UNAUTHORIZED,
        ApiError::Forbidden
        | ApiError::AccountBlocked
        | ApiError::AccountTooNew { .. }
        | ApiError::ReauthenticationRequired
        | ApiError::CrossOrigin
        | ApiError::NotStarted { .. }
        | ApiError::Paused
        | ApiError::LimitReached
        | ApiError::NotAdmitted
        | ApiError::Blocked { .. } => StatusCode::FORBIDDEN,
        ApiError::NotFound => StatusCode::NOT_FOUND,
        ApiError::UsernameTaken
        | ApiError::ShopTaken
        | ApiError::SoldOut
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(e) = &self {
            tracing::error!(error = ?e, "request failed");
        }
        let mut body = serde_json::to_value(ErrorBody {
            error: self.code().to_string(),
            message: self.to_string(),
        })
        .expect("an error body serializes");
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
