//! Every call the app makes to the JSON API, one typed function each, and the API's addresses the
//! pages link to: the paths of docs/api.md are written here and nowhere else in the app. The
//! transport (JSON, the error body, `Retry-After`, the browser-only stubs) is `client.rs`'s.

use crate::api::{
    AccountList, AccountSummary, Activity, ActivityList, ActivityStats, AddStock, AdminActivity,
    AdminActivityList, AdminOrderPage, AuditLog, BuyPath, BuyRequest, Captcha, Confirmation,
    CordPull, CordRequest, CordState, Credentials, Drawing, FailOpenRequest, Forecast, JoinQueue,
    LineBoard, MyReminder, NewActivity, NewShop, OperatorCordRequest, OrderList, OrderView,
    PasswordChange, PasswordReset, PaymentResult, QueueStatus, Remaining, Reminder, Reservation,
    SaleId, SaleReport, ServerTime, Shop, ShopList, ShopSettings, ShopSettingsChange,
    StockAdditions, StockLevel, Token, User, UserId,
};
use crate::client::{delete, get, post, post_with_key, Failure};

type Answer<T> = Result<T, Failure>;

/// The addresses a page links to or hands to a component that makes its own requests.
pub mod paths {
    use crate::api::SaleId;

    /// A sale's page.
    pub fn sale_page(id: SaleId) -> String {
        format!("/activities/{id}")
    }

    /// The forms the server takes from a browser without the app (docs/api.md "Forms without
    /// scripts"): sign-in, sign-up (with its captcha's picture), sign-out, a sale's reminder.
    pub const SIGN_IN_FORM: &str = "/login";
    pub const SIGN_UP_FORM: &str = "/register";
    pub const SIGN_UP_CAPTCHA: &str = "/register/captcha";
    pub const SIGN_OUT_FORM: &str = "/logout";

    /// A sale's reminder form, as the server's router writes its path.
    pub const REMINDER_FORM_ROUTE: &str = "/activities/{id}/reminder";

    /// A sale's reminder form.
    pub fn reminder_form(id: SaleId) -> String {
        REMINDER_FORM_ROUTE.replace("{id}", &id.to_string())
    }

    /// The storefront's home, where a form sends a shopper back by default.
    pub const HOME: &str = "/";

    /// A sale's public report as JSON.
    pub fn report(id: SaleId) -> String {
        format!("/api/activities/{id}/report")
    }

    /// A sale's published drawing.
    pub fn drawing(id: SaleId) -> String {
        format!("/api/activities/{id}/drawing")
    }

    /// A sale's calendar entry (`.ics`).
    pub fn calendar(id: SaleId) -> String {
        format!("/api/activities/{id}/calendar.ics")
    }

    /// The proof-of-work challenges of a sale's buy.
    pub fn buy_challenge(id: SaleId) -> String {
        format!("/api/activities/{id}/challenge")
    }

    /// The proof-of-work challenges of a sign-up.
    pub const SIGN_UP_CHALLENGE: &str = "/api/auth/challenge";

    /// A shop's orders of a sale as CSV.
    pub fn orders_csv(id: SaleId) -> String {
        format!("/api/admin/orders.csv?activity_id={id}")
    }

    /// The audit log of the merchant's shop.
    pub const SHOP_AUDIT: &str = "/api/admin/audit";

    /// The operator's audit log.
    pub const OPERATOR_AUDIT: &str = "/api/operator/audit";
}

// Sessions and accounts.

pub async fn me() -> Answer<User> {
    get("/api/me").await
}

pub async fn sign_in(creds: &Credentials) -> Answer<User> {
    post("/api/auth/login", creds).await
}

pub async fn sign_up(creds: &Credentials) -> Answer<User> {
    post("/api/auth/register", creds).await
}

pub async fn sign_out() -> Answer<()> {
    post("/api/auth/logout", &()).await
}

pub async fn sign_out_everywhere() -> Answer<()> {
    post("/api/auth/logout-everywhere", &()).await
}

pub async fn change_password(change: &PasswordChange) -> Answer<User> {
    post("/api/auth/password", change).await
}

/// The password checked again, before an operator's blocks and resets.
pub async fn confirm(confirmation: &Confirmation) -> Answer<User> {
    post("/api/auth/confirm", confirmation).await
}

pub async fn server_time() -> Answer<ServerTime> {
    get("/api/time").await
}

// The storefront.

pub async fn sales() -> Answer<ActivityList> {
    get("/api/activities").await
}

pub async fn sale(id: SaleId) -> Answer<Activity> {
    get(&format!("/api/activities/{id}")).await
}

pub async fn stock(id: SaleId) -> Answer<Remaining> {
    get(&format!("/api/activities/{id}/stock")).await
}

pub async fn report(id: SaleId) -> Answer<SaleReport> {
    get(&paths::report(id)).await
}

pub async fn drawing(id: SaleId) -> Answer<Drawing> {
    get(&paths::drawing(id)).await
}

pub async fn captcha() -> Answer<Captcha> {
    get("/api/captcha").await
}

pub async fn buy_path(id: SaleId) -> Answer<BuyPath> {
    get(&format!("/api/activities/{id}/path")).await
}

/// The buy, keyed: a retry with the same key gets the first answer.
pub async fn buy(id: SaleId, body: &BuyRequest, key: &str) -> Answer<Reservation> {
    post_with_key(&format!("/api/activities/{id}/buy"), body, key).await
}

pub async fn join_line(id: SaleId, join: &JoinQueue) -> Answer<QueueStatus> {
    post(&format!("/api/activities/{id}/queue"), join).await
}

pub async fn place_in_line(id: SaleId) -> Answer<QueueStatus> {
    get(&format!("/api/activities/{id}/queue")).await
}

pub async fn line_board(id: SaleId) -> Answer<LineBoard> {
    get(&format!("/api/activities/{id}/line")).await
}

pub async fn my_reminder(id: SaleId) -> Answer<MyReminder> {
    get(&format!("/api/activities/{id}/reminder")).await
}

pub async fn remind_me(id: SaleId) -> Answer<Reminder> {
    let empty = std::collections::HashMap::<&str, i64>::new();
    post(&format!("/api/activities/{id}/reminder"), &empty).await
}

pub async fn withdraw_reminder(reminder: i64) -> Answer<()> {
    delete(&format!("/api/reminders/{reminder}")).await
}

pub async fn orders() -> Answer<OrderList> {
    get("/api/orders").await
}

pub async fn order(token: Token) -> Answer<OrderView> {
    get(&format!("/api/orders/{token}")).await
}

pub async fn pay(token: Token) -> Answer<PaymentResult> {
    post(&format!("/api/orders/{token}/pay"), &()).await
}

// The console.

pub async fn shop_settings() -> Answer<ShopSettings> {
    get("/api/admin/shop").await
}

pub async fn change_shop_settings(change: &ShopSettingsChange) -> Answer<ShopSettings> {
    post("/api/admin/shop", change).await
}

pub async fn shop_sales() -> Answer<AdminActivityList> {
    get("/api/admin/activities").await
}

pub async fn shop_sale(id: SaleId) -> Answer<AdminActivity> {
    get(&format!("/api/admin/activities/{id}")).await
}

/// A new sale, keyed: a retry with the same key gets the first answer.
pub async fn create_sale(sale: &NewActivity, key: &str) -> Answer<Activity> {
    post_with_key("/api/admin/activities", sale, key).await
}

pub async fn sale_stats(id: SaleId) -> Answer<ActivityStats> {
    get(&format!("/api/admin/activities/{id}/stats")).await
}

pub async fn forecast(id: SaleId) -> Answer<Forecast> {
    get(&format!("/api/admin/activities/{id}/forecast")).await
}

/// Units added, keyed: a retry with the same key adds nothing more.
pub async fn add_stock(id: SaleId, add: &AddStock, key: &str) -> Answer<StockLevel> {
    post_with_key(&format!("/api/admin/activities/{id}/stock"), add, key).await
}

pub async fn stock_additions(id: SaleId) -> Answer<StockAdditions> {
    get(&format!("/api/admin/activities/{id}/stock-additions")).await
}

/// Pauses the sale (`paused`) or resumes it.
pub async fn pause(id: SaleId, paused: bool) -> Answer<Activity> {
    let action = if paused { "pause" } else { "resume" };
    post(&format!("/api/admin/activities/{id}/{action}"), &()).await
}

/// The emergency cord as the signed-in merchant (`operator` false: their shop's) or the
/// operator (the platform's) sees it.
pub async fn cord(operator: bool) -> Answer<CordState> {
    get(if operator {
        "/api/operator/cord"
    } else {
        "/api/admin/cord"
    })
    .await
}

/// Pulls the cord: `stop` or its release, of the merchant's shop or (`operator`) the platform.
pub async fn pull_cord(operator: bool, stop: bool, reason: String) -> Answer<CordPull> {
    let action = if stop { "stop" } else { "release" };
    if operator {
        let body = OperatorCordRequest {
            reason,
            shop_id: None,
        };
        post(&format!("/api/operator/cord/{action}"), &body).await
    } else {
        post(
            &format!("/api/admin/cord/{action}"),
            &CordRequest { reason },
        )
        .await
    }
}

/// Turns a sale's fail-open on or off.
pub async fn fail_open(id: SaleId, on: bool, reason: String) -> Answer<Activity> {
    post(
        &format!("/api/admin/activities/{id}/fail-open"),
        &FailOpenRequest { on, reason },
    )
    .await
}

/// One page of a sale's orders, of one status or all (`status` empty).
pub async fn shop_orders(
    id: SaleId,
    status: &str,
    limit: i64,
    offset: i64,
) -> Answer<AdminOrderPage> {
    let mut url = format!("/api/admin/orders?activity_id={id}&limit={limit}&offset={offset}");
    if !status.is_empty() {
        url.push_str(&format!("&status={status}"));
    }
    get(&url).await
}

pub async fn audit(path: &str) -> Answer<AuditLog> {
    get(path).await
}

// The operator.

pub async fn shops() -> Answer<ShopList> {
    get("/api/operator/shops").await
}

pub async fn create_shop(shop: &NewShop) -> Answer<Shop> {
    post("/api/operator/shops", shop).await
}

pub async fn create_merchant(shop: i64, creds: &Credentials) -> Answer<User> {
    post(&format!("/api/operator/shops/{shop}/merchants"), creds).await
}

/// Accounts whose username starts with `q` (letters, digits, `_`, `.` and `-` only).
pub async fn find_accounts(q: &str) -> Answer<AccountList> {
    get(&format!("/api/operator/users?q={q}")).await
}

/// Blocks the account (`blocked`) or unblocks it.
pub async fn block(id: UserId, blocked: bool) -> Answer<AccountSummary> {
    let action = if blocked { "block" } else { "unblock" };
    post(&format!("/api/operator/users/{id}/{action}"), &()).await
}

pub async fn reset_password(id: UserId, reset: &PasswordReset) -> Answer<()> {
    post(&format!("/api/operator/users/{id}/password"), reset).await
}
