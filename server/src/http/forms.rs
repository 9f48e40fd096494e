//! docs/api.md "Forms without scripts": sign-in, sign-up, sign-out and the reminder as HTML forms
//! the browser posts itself, before the app has started or with scripts off. Each does what its
//! JSON twin does (the same checks, budgets and refusals), then answers `303 See Other`: to where
//! the shopper was going, or back to the form's page with the refusal's code in its query, which
//! the page renders in its language (`?error=…`). The app, once it runs, posts the JSON API
//! instead and never reaches these.

use super::{
    accounts::{self, PasswordCheck, SignUpCheck},
    client_ip::ClientIp,
    error::HttpRefusal,
    input::{cross_origin, InPath},
    session::{SessionKeys, SignedIn},
};
use crate::http::state::AppState;
use crate::{
    buy::{
        activities::ActivityCache,
        captcha,
        doors::{Door, Doors},
    },
    domain::{reminder, ApiError},
    infra::{keys::address_bucket, redis::Redis},
};
use app::api::{Credentials, SaleId};
use app::endpoints::paths::{
    HOME, REMINDER_FORM_ROUTE, SIGN_IN_FORM, SIGN_OUT_FORM, SIGN_UP_CAPTCHA, SIGN_UP_FORM,
};
use axum::{
    extract::{rejection::FormRejection, FromRequestParts, State},
    http::{header, request::Parts, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Form, Router,
};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use sqlx::PgPool;
use std::sync::Arc;

/// The cookie that carries the id of the captcha the sign-up page showed (the form's answer is
/// checked against it).
pub const SIGN_UP_CAPTCHA_COOKIE: &str = "signup_captcha";

pub fn router() -> Router<AppState> {
    Router::new()
        .route(SIGN_IN_FORM, post(sign_in))
        .route(SIGN_UP_FORM, post(sign_up))
        .route(SIGN_UP_CAPTCHA, get(sign_up_captcha))
        .route(SIGN_OUT_FORM, post(sign_out))
        .route(REMINDER_FORM_ROUTE, post(remind_me))
}

/// A form posted from this site: a browser's post for another site is refused `403
/// cross_origin` (as the API refuses it), before anything of it is read.
struct FromThisSite;

impl<S: Send + Sync> FromRequestParts<S> for FromThisSite {
    type Rejection = HttpRefusal;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match cross_origin(&parts.headers) {
            true => Err(HttpRefusal::CrossOrigin),
            false => Ok(FromThisSite),
        }
    }
}

/// The sign-in and sign-up forms' fields.
#[derive(serde::Deserialize)]
struct AccountForm {
    username: String,
    password: String,
    /// Where to go once signed in (a path of this site; home otherwise).
    next: Option<String>,
    /// The image captcha's answer (sign-up only).
    captcha_answer: Option<String>,
}

impl AccountForm {
    fn credentials(&self) -> Credentials {
        Credentials {
            username: self.username.clone(),
            password: self.password.clone(),
            pow: None,
        }
    }

    /// Where a success goes.
    fn next(&self) -> &str {
        self.next
            .as_deref()
            .filter(|n| app::is_local_path(n))
            .unwrap_or(HOME)
    }

    /// What the page keeps when it is shown again: the username and where to go (never the
    /// password).
    fn kept(&self) -> Vec<(&'static str, &str)> {
        let mut kept = vec![("username", self.username.as_str())];
        if let Some(next) = self.next.as_deref().filter(|n| app::is_local_path(n)) {
            kept.push(("next", next));
        }
        kept
    }
}

/// `POST /login` (`username`, `password`, `next`).
async fn sign_in(
    _: FromThisSite,
    check: PasswordCheck,
    State(sessions): State<Arc<SessionKeys>>,
    jar: CookieJar,
    form: Result<Form<AccountForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return back(
            SIGN_IN_FORM,
            &ApiError::invalid("form", "expected username and password"),
            &[],
        );
    };
    match accounts::sign_in(&check, &sessions, jar, &form.credentials()).await {
        Ok((jar, _)) => (jar, see_other(form.next())).into_response(),
        Err(e) => back(SIGN_IN_FORM, &e, &form.kept()),
    }
}

/// `POST /register` (`username`, `password`, `captcha_answer`, `next`): the captcha is the one
/// `GET /register/captcha` showed, named by its cookie.
async fn sign_up(
    _: FromThisSite,
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
    form: Result<Form<AccountForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return back(
            SIGN_UP_FORM,
            &ApiError::invalid("form", "expected username and password"),
            &[],
        );
    };
    let id = jar
        .get(SIGN_UP_CAPTCHA_COOKIE)
        .map(|c| c.value().to_string())
        .unwrap_or_default();
    let check = SignUpCheck::Captcha {
        id: &id,
        answer: form.captcha_answer.as_deref().unwrap_or_default(),
    };
    let jar = jar.remove(Cookie::build(SIGN_UP_CAPTCHA_COOKIE).path(SIGN_UP_FORM));
    match accounts::sign_up(&state, ip, jar, &form.credentials(), check).await {
        Ok((jar, _)) => (jar, see_other(form.next())).into_response(),
        Err(e) => back(SIGN_UP_FORM, &e, &form.kept()),
    }
}

/// `GET /register/captcha`: a new captcha's picture (`image/png`, `no-store`), its id in a
/// cookie for the form's post; bounded per address as `GET /api/captcha` is.
async fn sign_up_captcha(
    State(redis): State<Redis>,
    State(doors): State<Doors>,
    ClientIp(ip): ClientIp,
    jar: CookieJar,
) -> Response {
    if let Err(e) = doors.pass(Door::Captcha, &address_bucket(ip)) {
        return e.into_response();
    }
    match captcha::issue_png(&redis).await {
        Ok((id, png)) => {
            let cookie = Cookie::build((SIGN_UP_CAPTCHA_COOKIE, id))
                .path(SIGN_UP_FORM)
                .http_only(true)
                .same_site(SameSite::Lax)
                .max_age(cookie::time::Duration::seconds(
                    i64::try_from(captcha::ANSWER_TTL_SECS).unwrap_or(120),
                ));
            (
                jar.add(cookie),
                [
                    (header::CONTENT_TYPE, "image/png"),
                    (header::CACHE_CONTROL, "no-store"),
                ],
                png,
            )
                .into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /logout`: ends this session (if any) and goes to the sign-in page.
async fn sign_out(
    _: FromThisSite,
    State(db): State<PgPool>,
    State(redis): State<Redis>,
    State(sessions): State<Arc<SessionKeys>>,
    jar: CookieJar,
) -> Response {
    match accounts::sign_out(&db, &redis, &sessions, jar).await {
        Ok(jar) => (jar, see_other(SIGN_IN_FORM)).into_response(),
        Err(e) => back(HOME, &e, &[]),
    }
}

/// `POST /activities/{id}/reminder`: a signed-in shopper's reminder, then back to the sale
/// (`?reminder=set`); a visitor goes to the sign-in page first, and back to the sale after.
async fn remind_me(
    _: FromThisSite,
    State(db): State<PgPool>,
    State(activities): State<ActivityCache>,
    user: Result<SignedIn, ApiError>,
    InPath(SaleId(id)): InPath<SaleId>,
) -> Response {
    let page = app::endpoints::paths::sale_page(SaleId(id));
    let Ok(SignedIn(user)) = user else {
        return see_other(&with_query(SIGN_IN_FORM, &[("next", &page)]));
    };
    let asked = async {
        let sale = activities.get(&db, id).await?;
        reminder::ask(&db, user.user_id, &sale).await
    };
    match asked.await {
        Ok(_) => see_other(&with_query(&page, &[("reminder", "set")])),
        Err(e) => back(&page, &e, &[]),
    }
}

/// `303 See Other` to `location` (a path of this site), never cached.
fn see_other(location: &str) -> Response {
    let location =
        HeaderValue::from_str(location).unwrap_or_else(|_| HeaderValue::from_static(HOME));
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
    )
        .into_response()
}

/// Back to `page` with the refusal: its code (`error`), the field bad input names (`field`), the
/// seconds to wait (`retry`), and what the page keeps. A failure of the server itself is logged
/// here, as the API logs it.
fn back(page: &str, e: &ApiError, kept: &[(&str, &str)]) -> Response {
    if let ApiError::Internal(cause) = e {
        tracing::error!(error = ?cause, "form post failed");
    }
    let code = e.code();
    let mut query = vec![("error", code.as_str())];
    let field;
    if let ApiError::InvalidInput(why) = e {
        field = why.split(':').next().unwrap_or_default().to_string();
        query.push(("field", &field));
    }
    let retry;
    if let Some(secs) = e.retry_after() {
        retry = secs.to_string();
        query.push(("retry", &retry));
    }
    query.extend_from_slice(kept);
    see_other(&with_query(page, &query))
}

/// `page` with `pairs` as its query, encoded.
fn with_query(page: &str, pairs: &[(&str, &str)]) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    format!("{page}?{query}")
}
