//! docs/api.md "Storefront", the buy: a shopper's place in a sale's waiting room, the buy path, a
//! captcha, and the buy itself. The session, the client address, the id and the
//! `Idempotency-Key` are read here; `buy/queue` and `buy/gate.rs` decide.

use super::{
    client_ip::ClientIp,
    error::HttpRefusal,
    input::{AppJson, InPath, MAX_BODY_BYTES},
    session::{SessionKeys, SignedIn},
};
use crate::http::state::AppState;
use crate::{
    buy::{
        captcha,
        doors::{Door, Doors},
        gate::Gate,
        queue::{Standing, WaitingRoom, COOKIE as PLACE_COOKIE},
    },
    domain::{ApiError, ApiResult},
    infra::{keys::address_bucket, redis::Redis},
};
use app::api::{BuyPath, BuyRequest, JoinQueue, Reservation, SaleId};
use axum::{
    extract::{FromRef, FromRequestParts, Request, State},
    http::{header, request::Parts, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, RequestExt, Router,
};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use std::sync::Arc;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/activities/{id}/queue", get(queue_status).post(join_queue))
        .route("/activities/{id}/line", get(line_board))
        .route("/activities/{id}/drawing", get(drawing))
        .route("/activities/{id}/path", get(buy_path))
        .route("/activities/{id}/challenge", get(challenge))
        .route("/activities/{id}/buy", post(buy))
        .route("/captcha", get(new_captcha))
}

async fn buy_path(
    State(gate): State<Arc<Gate>>,
    SignedIn(user): SignedIn,
    InPath(sale): InPath<SaleId>,
) -> ApiResult<Json<BuyPath>> {
    Ok(Json(BuyPath {
        path: gate.path(user.user(), user.joined, sale).await?,
    }))
}

/// A proof-of-work challenge for this shopper and sale (ALTCHA v2 JSON, what ALTCHA's widget
/// fetches too).
async fn challenge(
    State(gate): State<Arc<Gate>>,
    State(doors): State<Doors>,
    SignedIn(user): SignedIn,
    InPath(sale): InPath<SaleId>,
) -> ApiResult<impl IntoResponse> {
    doors.pass(Door::Challenge, &user.user_id.to_string())?;
    let challenge = gate.challenge(user.user(), sale).await?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(challenge)))
}

/// Where the shopper stands in the sale's waiting room: from the place they hold (the `place`
/// cookie) and the line's board, in-process; from the line itself when the place is not
/// numbered yet or the turn has come.
async fn queue_status(
    State(room): State<WaitingRoom>,
    State(doors): State<Doors>,
    State(keys): State<Arc<SessionKeys>>,
    SignedIn(user): SignedIn,
    ClientIp(ip): ClientIp,
    InPath(sale): InPath<SaleId>,
    jar: CookieJar,
) -> Response {
    let answer = async {
        doors.pass(Door::Queue, &user.user_id.to_string())?;
        let held = jar.get(PLACE_COOKIE).map(|c| c.value().to_string());
        Ok::<_, ApiError>((
            sale,
            room.status(user.user(), ip, sale, held.as_deref()).await,
        ))
    };
    match answer.await {
        Ok((id, Ok(standing))) => standing_answer(&keys, id, standing),
        // A place value the server did not sign is refused once, and forgotten: the next poll
        // asks the line itself.
        Ok((id, Err(e @ ApiError::InvalidInput(_)))) => {
            let gone = place_cookie(&keys, id, String::new()).max_age(cookie::time::Duration::ZERO);
            (jar.add(gone), e).into_response()
        }
        Ok((_, Err(e))) | Err(e) => e.into_response(),
    }
}

/// Joins the sale's waiting room (a place already held is kept) and says where the shopper stands.
async fn join_queue(
    State(room): State<WaitingRoom>,
    State(doors): State<Doors>,
    State(keys): State<Arc<SessionKeys>>,
    SignedIn(user): SignedIn,
    ClientIp(ip): ClientIp,
    InPath(sale): InPath<SaleId>,
    AppJson(join): AppJson<JoinQueue>,
) -> ApiResult<Response> {
    doors.pass(Door::Queue, &user.user_id.to_string())?;
    let again = join.again.unwrap_or(false);
    let standing = room.join(user.user(), user.joined, ip, sale, again).await?;
    Ok(standing_answer(&keys, sale, standing))
}

/// The line's board, the same for everyone: no sign-in, cached a second by a CDN or nginx.
async fn line_board(
    State(room): State<WaitingRoom>,
    InPath(sale): InPath<SaleId>,
) -> ApiResult<Response> {
    let board = room.board(sale).await?;
    Ok((
        [(header::CACHE_CONTROL, "public, max-age=1, s-maxage=1")],
        Json(&*board),
    )
        .into_response())
}

/// The sale's drawing: the commitment before the start; the seed and every drawn place with
/// its receipt after, the same for ever (cached for a day).
async fn drawing(
    State(room): State<WaitingRoom>,
    InPath(sale): InPath<SaleId>,
) -> ApiResult<Response> {
    let drawing = room.drawing(sale).await?;
    let cache = if drawing.seed.is_some() {
        "public, max-age=86400, immutable"
    } else {
        "public, max-age=1, s-maxage=1"
    };
    Ok(([(header::CACHE_CONTROL, cache)], Json(&*drawing)).into_response())
}

fn place_cookie(keys: &SessionKeys, sale: SaleId, value: String) -> cookie::CookieBuilder<'static> {
    Cookie::build((PLACE_COOKIE, value))
        .path(format!("/api/activities/{sale}/queue"))
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(keys.secure())
}

fn standing_answer(keys: &SessionKeys, sale: SaleId, standing: Standing) -> Response {
    let store = [(header::CACHE_CONTROL, "no-store")];
    match standing.place {
        Some(place) => {
            let jar = CookieJar::new().add(place_cookie(keys, sale, place));
            (store, jar, Json(standing.status)).into_response()
        }
        None => (store, Json(standing.status)).into_response(),
    }
}

/// A new image captcha: no sign-in is needed, so it is bounded per client address.
async fn new_captcha(
    State(redis): State<Redis>,
    State(doors): State<Doors>,
    ClientIp(ip): ClientIp,
) -> ApiResult<impl IntoResponse> {
    doors.pass(Door::Captcha, &address_bucket(ip))?;
    let captcha = captcha::issue(&redis).await?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(captcha)))
}

/// The optional `Idempotency-Key` header, read without copying the request's headers.
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get("idempotency-key") else {
            return Ok(IdempotencyKey(None));
        };
        let key = value.to_str().unwrap_or_default();
        let valid = (1..=64).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(ApiError::invalid(
                "Idempotency-Key",
                "must be 1 to 64 characters of [A-Za-z0-9_-]",
            ));
        }
        Ok(IdempotencyKey(Some(key.to_string())))
    }
}

/// The buy. On a sold-out sale (the crowd's usual answer) a request without an
/// `Idempotency-Key` is answered `409 sold_out` before anything else of it is worked on — its
/// session, its path, its body's JSON (the body is still read to its end, so that the connection
/// stays open); keyed requests go the whole way, as a retry may be owed its first answer. The
/// rest is read in the order of the extractors it would take.
async fn buy(
    State(app): State<AppState>,
    mut request: Request,
) -> Result<(StatusCode, Json<Reservation>), Response> {
    let gate = Arc::<Gate>::from_ref(&app);
    if let Some(id) = sold_out_early(&gate, &request) {
        return Err(
            match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
                Ok(_) => {
                    gate.count_sold_out(id);
                    ApiError::SoldOut.into_response()
                }
                Err(_) => HttpRefusal::PayloadTooLarge.into_response(),
            },
        );
    }
    let SignedIn(user) = request
        .extract_parts_with_state(&app)
        .await
        .map_err(IntoResponse::into_response)?;
    let ClientIp(ip) = request
        .extract_parts_with_state(&app)
        .await
        .unwrap_or_else(|never| match never {});
    // A bad id is answered after the body is read, with a bad key, as the buy's other refusals.
    let sale = request
        .extract_parts_with_state::<InPath<SaleId>, _>(&app)
        .await
        .map(|InPath(sale)| sale);
    let idempotency = request
        .extract_parts_with_state::<IdempotencyKey, _>(&app)
        .await;
    let AppJson(req) = request
        .extract_with_state::<AppJson<BuyRequest>, _, _>(&app)
        .await?;
    let outcome = match (idempotency, sale) {
        (Ok(IdempotencyKey(key)), Ok(sale)) => {
            gate.decide(user.user(), user.joined, ip, sale, key, req)
                .await
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    gate.count(&outcome);
    let token = outcome.map_err(IntoResponse::into_response)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Reservation {
            token,
            status: app::api::OrderStatus::Queued,
        }),
    ))
}

/// The sale of `request` if it is a buy the instance answers `409 sold_out` at once: no
/// `Idempotency-Key`, and a sale [`Gate::sold_out_early`] says may be.
fn sold_out_early(gate: &Gate, request: &Request) -> Option<SaleId> {
    if request.headers().contains_key("idempotency-key") {
        return None;
    }
    // This route's path ends in `/{id}/buy`; an id not plainly written goes the whole way.
    let id = request
        .uri()
        .path()
        .strip_suffix("/buy")
        .and_then(|rest| rest.rsplit('/').next())
        .and_then(|id| id.parse::<SaleId>().ok());
    id.filter(|id| gate.sold_out_early(*id))
}
