//! docs/api.md "Admin console": the merchant's API (`activities.rs`, `orders.rs`) and the rule for the
//! console's pages: a visitor is sent to sign in; `/admin` is the merchants', `/operator` the
//! operator's, anyone else gets a 403 page.

pub mod activities;
pub(crate) mod audit;
pub(crate) mod crowd;
pub(crate) mod orders;
pub(crate) mod replay;
pub mod shop;

use super::session::{SessionKeys, SignedIn};
use app::api::Role;
use axum::{
    extract::{FromRequestParts, Request},
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Redirect, Response},
};
use std::sync::Arc;

/// Which role a console page is for: the merchants' `/admin…`, the operator's `/operator…`.
pub(crate) fn console_role(path: &str) -> Option<Role> {
    // Asked of every request (`page_edge.rs`): no allocation.
    let under = |root: &str| {
        path.strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    if under("/admin") {
        Some(Role::Merchant)
    } else if under("/operator") {
        Some(Role::Operator)
    } else {
        None
    }
}

/// In front of the console pages: a visitor is sent to sign in (and back here after), anyone not
/// of the page's role gets it with status 403 (the page itself says "forbidden"). Console pages
/// are never cached.
/// `needed`: the page's role (`console_role`); `next` answers the request when it may be seen.
pub(crate) async fn guard_console<F, Fut>(
    sessions: Arc<SessionKeys>,
    needed: Role,
    req: Request,
    next: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let (mut parts, body) = req.into_parts();
    let role = SignedIn::from_request_parts(&mut parts, &sessions)
        .await
        .ok()
        .map(|SignedIn(c)| c.role);
    let Some(role) = role else {
        let target = parts.uri.path_and_query().map_or("/admin", |p| p.as_str());
        let next_param: String = form_urlencoded::byte_serialize(target.as_bytes()).collect();
        return Redirect::to(&format!("/login?next={next_param}")).into_response();
    };
    parts.extensions.insert(app::PageViewer(role));
    let mut resp = next(Request::from_parts(parts, body)).await;
    if role != needed && resp.status().is_success() {
        *resp.status_mut() = StatusCode::FORBIDDEN;
    }
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    resp
}
