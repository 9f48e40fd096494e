//! The merchant's console: the list of sales, the form that creates one, and the live dashboard
//! of one sale (figures refreshed every second, a chart, add stock, pause / resume, the orders,
//! the CSV export and the stock-addition audit). Pages are private: the server renders the shell
//! and who is asking; the figures are fetched by the browser.

use crate::{
    api::{
        Activity, ActivityStats, AdminActivity, AdminOrderPage, NewActivity, Role,
        StockAdditions, StockLevel,
    },
    client,
    clock::local_time,
    storefront::{money, page_title},
};
use leptos::{ev::SubmitEvent, prelude::*};
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use std::collections::BTreeMap;

/// Who is asking for an admin page: on the server, what the admin guard established from the
/// cookie; in the browser (navigating between pages), `GET /api/me`. `None`: a visitor.
fn viewer() -> Resource<Option<Role>> {
    Resource::new(
        || (),
        |_| {
            #[cfg(feature = "ssr")]
            {
                let role = use_context::<http::request::Parts>()
                    .and_then(|p| p.extensions.get::<crate::PageViewer>().copied())
                    .map(|v| v.0);
                async move { role }
            }
            #[cfg(not(feature = "ssr"))]
            crate::data::browser(async move { client::get::<crate::api::User>("/api/me").await.ok().map(|u| u.role) })
        },
    )
}

/// Shows `children` to merchants only: a shopper sees "forbidden", a visitor is sent to sign in.
#[component]
fn MerchantOnly(children: ChildrenFn) -> impl IntoView {
    let role = viewer();
    let children = StoredValue::new(children);
    view! {
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {move || role.get().map(|role| match role {
                Some(Role::Merchant) => children.with_value(|c| c()).into_any(),
                Some(Role::Shopper) => view! { <Forbidden/> }.into_any(),
                None => view! { <SignInFirst/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Forbidden() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::FORBIDDEN);
    }
    view! {
        <Title text="Forbidden — Seckill"/>
        <section class="card narrow" data-testid="forbidden">
            <h1>"Forbidden"</h1>
            <p>"The admin console is for merchant accounts. You are signed in as a shopper."</p>
            <p><a href="/">"Back to the sales"</a></p>
        </section>
    }
}

#[component]
fn SignInFirst() -> impl IntoView {
    #[cfg(feature = "hydrate")]
    {
        let navigate = leptos_router::hooks::use_navigate();
        Effect::new(move |_| {
            let here = window().location().pathname().unwrap_or_else(|_| "/admin".into());
            let next = String::from(js_sys::encode_uri_component(&here));
            navigate(&format!("/login?next={next}"), Default::default());
        });
    }
    view! {
        <section class="card narrow">
            <h1>"Sign in"</h1>
            <p>"The admin console needs a merchant account. " <a href="/login?next=%2Fadmin">"Sign in"</a></p>
        </section>
    }
}

fn status_badge(a: &AdminActivity) -> String {
    if a.activity.paused && a.status == crate::api::SaleStatus::Live {
        "live · paused".to_string()
    } else {
        a.status.label().to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// /admin

#[component]
pub fn AdminHome() -> impl IntoView {
    view! {
        <Title text="Admin — Seckill"/>
        <MerchantOnly>
            <ActivityTable/>
        </MerchantOnly>
    }
}

#[component]
fn ActivityTable() -> impl IntoView {
    let list = RwSignal::new(None::<Result<Vec<AdminActivity>, String>>);
    #[cfg(feature = "hydrate")]
    {
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move {
                while alive.load(std::sync::atomic::Ordering::Relaxed) {
                    let got = client::get::<crate::api::AdminActivityList>("/api/admin/activities").await;
                    if !alive.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    list.set(Some(got.map(|l| l.activities).map_err(|f| f.message())));
                    crate::clock::gloo_timers_sleep(5_000).await;
                }
            });
        });
    }
    view! {
        <section class="admin">
            <div class="admin-head">
                <h1>"Sales"</h1>
                <a class="button" href="/admin/activities/new" data-testid="admin-new-activity">"New sale"</a>
            </div>
            {move || match list.get() {
                None => view! { <p>"Loading sales…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">"Could not load the sales: " {e}</p> }.into_any(),
                Some(Ok(items)) if items.is_empty() => view! { <p>"No sales yet. Create the first one."</p> }.into_any(),
                Some(Ok(items)) => view! {
                    <div class="table-wrap">
                        <table class="data" data-testid="admin-activity-table">
                            <thead><tr>
                                <th scope="col">"Sale"</th><th scope="col">"Status"</th><th scope="col">"Starts"</th>
                                <th scope="col" class="num">"Remaining"</th><th scope="col" class="num">"Sold"</th>
                                <th scope="col" class="num">"Stock"</th>
                            </tr></thead>
                            <tbody>
                                {items.into_iter().map(|a| {
                                    let href = format!("/admin/activities/{}", a.activity.id);
                                    let badge = status_badge(&a);
                                    let class = format!("badge {}", a.status.label().replace(' ', "-"));
                                    view! {
                                        <tr data-testid="admin-activity-row" data-id=a.activity.id.to_string()>
                                            <td><a href=href>{a.activity.title.clone()}</a></td>
                                            <td><span class=class data-testid="admin-activity-status">{badge}</span></td>
                                            <td>{local_time(&a.activity.starts_at)}</td>
                                            <td class="num">{a.remaining}</td>
                                            <td class="num">{a.sold}</td>
                                            <td class="num">{a.activity.total_stock}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any(),
            }}
        </section>
    }
}

// ---------------------------------------------------------------------------------------------
// /admin/activities/new

/// The form's fields as typed, before they become a `NewActivity`.
#[derive(Clone, Debug, Default)]
pub struct Draft {
    pub title: String,
    pub description: String,
    pub image_url: String,
    pub price: String,
    pub seckill_price: String,
    /// `datetime-local` values ("2030-01-01T12:00"), in the browser's time zone.
    pub starts_at: String,
    pub ends_at: String,
    pub stock: String,
    pub per_user_limit: String,
    pub captcha_required: bool,
    pub payment_window_mins: String,
}

/// Field errors, keyed by the API's field names.
pub type FieldErrors = BTreeMap<&'static str, String>;

/// "12", "12.3" or "12.34" (currency units) as cents.
pub fn parse_money(s: &str) -> Option<i64> {
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 2 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let cents = format!("{frac:0<2}").parse::<i64>().ok()?;
    whole.parse::<i64>().ok()?.checked_mul(100)?.checked_add(cents)
}

fn parse_int(s: &str) -> Option<i64> {
    s.trim().parse::<i64>().ok()
}

impl Draft {
    fn fresh() -> Draft {
        Draft { per_user_limit: "1".into(), captcha_required: true, payment_window_mins: "10".into(), ..Draft::default() }
    }

    /// The browser's check, the same rules as the server's (API.md), so that most mistakes are
    /// shown before a request; `to_utc` turns a `datetime-local` value into RFC 3339 UTC.
    pub fn validate(&self, to_utc: impl Fn(&str) -> Option<String>) -> Result<NewActivity, FieldErrors> {
        let mut errors = FieldErrors::new();
        let title = self.title.trim().to_string();
        if title.is_empty() || title.chars().count() > 120 {
            errors.insert("title", "Give the sale a title of 1 to 120 characters.".into());
        }
        if self.description.chars().count() > 5000 {
            errors.insert("description", "The description can be at most 5000 characters.".into());
        }
        let image = self.image_url.trim();
        if !image.is_empty() && !(image.starts_with("https://") || image.starts_with("http://") || image.starts_with('/')) {
            errors.insert("image_url", "Use an http(s) URL or a path on this site.".into());
        }
        let price = parse_money(&self.price);
        if price.is_none() {
            errors.insert("price_cents", "Enter the regular price, e.g. 499.00.".into());
        }
        let seckill = parse_money(&self.seckill_price);
        match (seckill, price) {
            (None, _) => {
                errors.insert("seckill_price_cents", "Enter the sale price, e.g. 99.00.".into());
            }
            (Some(s), Some(p)) if s > p => {
                errors.insert("seckill_price_cents", "The sale price cannot be above the regular price.".into());
            }
            _ => {}
        }
        let starts = to_utc(&self.starts_at);
        if starts.is_none() {
            errors.insert("starts_at", "Pick when the sale starts.".into());
        }
        let ends = to_utc(&self.ends_at);
        match (&starts, &ends) {
            (_, None) => {
                errors.insert("ends_at", "Pick when the sale ends.".into());
            }
            (Some(s), Some(e)) if e <= s => {
                errors.insert("ends_at", "The sale must end after it starts.".into());
            }
            _ => {}
        }
        let stock = parse_int(&self.stock).filter(|n| (1..=10_000_000).contains(n));
        if stock.is_none() {
            errors.insert("stock", "Stock is a whole number from 1 to 10,000,000.".into());
        }
        let limit = parse_int(&self.per_user_limit).filter(|n| (1..=100).contains(n));
        if limit.is_none() {
            errors.insert("per_user_limit", "Each shopper may buy 1 to 100 units.".into());
        }
        let window = parse_int(&self.payment_window_mins).filter(|n| (1..=1440).contains(n));
        if window.is_none() {
            errors.insert("payment_window_secs", "The payment window is 1 to 1440 minutes.".into());
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(NewActivity {
            title,
            description: self.description.clone(),
            image_url: (!image.is_empty()).then(|| image.to_string()),
            price_cents: price.unwrap_or_default(),
            seckill_price_cents: seckill.unwrap_or_default(),
            starts_at: starts.unwrap_or_default(),
            ends_at: ends.unwrap_or_default(),
            stock: stock.unwrap_or_default(),
            per_user_limit: limit.map(|n| n as i32),
            captcha_required: Some(self.captcha_required),
            payment_window_secs: window.map(|m| (m * 60) as i32),
        })
    }
}

/// The form field a server `invalid_input` message is about: API.md's messages start with the
/// field's name ("stock: must be between …"). Unknown fields land on the form as a whole.
pub fn field_of_message(message: &str) -> Option<&'static str> {
    const FIELDS: [&str; 11] = [
        "title",
        "description",
        "image_url",
        "price_cents",
        "seckill_price_cents",
        "starts_at",
        "ends_at",
        "stock",
        "per_user_limit",
        "captcha_required",
        "payment_window_secs",
    ];
    let head = message.split([':', ' ']).next().unwrap_or_default();
    FIELDS.into_iter().find(|f| *f == head)
}

/// A `datetime-local` value in the browser's zone as RFC 3339 UTC.
fn local_to_utc(value: &str) -> Option<String> {
    if value.trim().is_empty() {
        return None;
    }
    #[cfg(feature = "hydrate")]
    {
        // ECMAScript reads a date-time without an offset as local time.
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(value));
        if date.get_time().is_nan() {
            return None;
        }
        Some(String::from(date.to_iso_string()))
    }
    #[cfg(not(feature = "hydrate"))]
    None
}

fn time_zone() -> String {
    #[cfg(feature = "hydrate")]
    {
        let options = js_sys::Intl::DateTimeFormat::new(&js_sys::Array::new(), &js_sys::Object::new()).resolved_options();
        if let Ok(zone) = js_sys::Reflect::get(&options, &"timeZone".into()) {
            if let Some(zone) = zone.as_string() {
                return zone;
            }
        }
    }
    "your time zone".to_string()
}

#[component]
pub fn NewActivityPage() -> impl IntoView {
    view! {
        <Title text="New sale — Seckill"/>
        <MerchantOnly>
            <ActivityForm/>
        </MerchantOnly>
    }
}

#[component]
fn Field(
    id: &'static str,
    label: &'static str,
    errors: RwSignal<FieldErrors>,
    #[prop(optional)] hint: Option<Signal<String>>,
    children: Children,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    view! {
        <div class="field" class:invalid=move || errors.with(|e| e.contains_key(id))>
            <label for=format!("field-{id}")>{label}</label>
            {children()}
            {hint.map(|h| view! { <small class="muted">{h}</small> })}
            <small class="field-error" id=error_id role="alert" data-testid=format!("admin-error-{id}")>
                {move || errors.with(|e| e.get(id).cloned())}
            </small>
        </div>
    }
}

#[component]
fn ActivityForm() -> impl IntoView {
    let session = crate::Session::get();
    let navigate = leptos_router::hooks::use_navigate();
    let draft = RwSignal::new(Draft::fresh());
    let errors = RwSignal::new(FieldErrors::new());
    let form_error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let zone = RwSignal::new(String::from("your time zone"));
    Effect::new(move |_| zone.set(time_zone()));

    let utc_hint = move |pick: fn(&Draft) -> String| {
        Signal::derive(move || {
            let value = draft.with(pick);
            match local_to_utc(&value) {
                Some(utc) => format!("In {} · {} UTC", zone.get(), utc.get(..16).unwrap_or(&utc).replace('T', " ")),
                None => format!("In {}", zone.get()),
            }
        })
    };

    let submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        if busy.get_untracked() {
            return;
        }
        form_error.set(None);
        let body = match draft.with_untracked(|d| d.validate(local_to_utc)) {
            Ok(body) => body,
            Err(found) => {
                errors.set(found);
                return;
            }
        };
        errors.set(FieldErrors::new());
        busy.set(true);
        let navigate = navigate.clone();
        leptos::task::spawn_local(async move {
            match client::post::<_, Activity>("/api/admin/activities", &body).await {
                Ok(created) => navigate(&format!("/admin/activities/{}", created.id), Default::default()),
                Err(f) if f.body.error == "invalid_input" => match field_of_message(&f.body.message) {
                    Some(field) => errors.set(FieldErrors::from([(field, f.body.message.clone())])),
                    None => form_error.set(Some(f.message())),
                },
                Err(f) => form_error.set(Some(f.message())),
            }
            busy.set(false);
        });
    };

    // Two-way binding of one text field of the draft.
    macro_rules! bind {
        ($field:ident) => {
            (
                move || draft.with(|d| d.$field.clone()),
                move |ev: leptos::ev::Event| draft.update(|d| d.$field = event_target_value(&ev)),
            )
        };
    }
    let (title, set_title) = bind!(title);
    let (description, set_description) = bind!(description);
    let (image_url, set_image_url) = bind!(image_url);
    let (price, set_price) = bind!(price);
    let (seckill_price, set_seckill_price) = bind!(seckill_price);
    let (starts_at, set_starts_at) = bind!(starts_at);
    let (ends_at, set_ends_at) = bind!(ends_at);
    let (stock, set_stock) = bind!(stock);
    let (limit, set_limit) = bind!(per_user_limit);
    let (window_mins, set_window_mins) = bind!(payment_window_mins);
    let described = |id: &str| format!("{id}-error");

    view! {
        <section class="card admin-form">
            <h1>"New sale"</h1>
            <form class="stack" novalidate on:submit=submit data-testid="admin-activity-form">
                <Field id="title" label="Title" errors>
                    <input id="field-title" name="title" data-testid="admin-field-title" maxlength="120" required
                        aria-describedby=described("title") prop:value=title on:input=set_title/>
                </Field>
                <Field id="description" label="Description" errors>
                    <textarea id="field-description" name="description" data-testid="admin-field-description" rows="4" maxlength="5000"
                        aria-describedby=described("description") prop:value=description on:input=set_description></textarea>
                </Field>
                <Field id="image_url" label="Image URL (optional)" errors>
                    <input id="field-image_url" name="image_url" data-testid="admin-field-image_url" inputmode="url"
                        aria-describedby=described("image_url") prop:value=image_url on:input=set_image_url/>
                </Field>
                <div class="row">
                    <Field id="price_cents" label="Regular price" errors>
                        <input id="field-price_cents" name="price" data-testid="admin-field-price" inputmode="decimal" placeholder="499.00" required
                            aria-describedby=described("price_cents") prop:value=price on:input=set_price/>
                    </Field>
                    <Field id="seckill_price_cents" label="Sale price" errors>
                        <input id="field-seckill_price_cents" name="seckill_price" data-testid="admin-field-seckill_price" inputmode="decimal" placeholder="99.00" required
                            aria-describedby=described("seckill_price_cents") prop:value=seckill_price on:input=set_seckill_price/>
                    </Field>
                </div>
                <div class="row">
                    <Field id="starts_at" label="Starts" errors hint=utc_hint(|d| d.starts_at.clone())>
                        <input id="field-starts_at" name="starts_at" type="datetime-local" step="1" data-testid="admin-field-starts_at" required
                            aria-describedby=described("starts_at") prop:value=starts_at on:input=set_starts_at/>
                    </Field>
                    <Field id="ends_at" label="Ends" errors hint=utc_hint(|d| d.ends_at.clone())>
                        <input id="field-ends_at" name="ends_at" type="datetime-local" step="1" data-testid="admin-field-ends_at" required
                            aria-describedby=described("ends_at") prop:value=ends_at on:input=set_ends_at/>
                    </Field>
                </div>
                <div class="row">
                    <Field id="stock" label="Stock (units)" errors>
                        <input id="field-stock" name="stock" type="number" min="1" max="10000000" data-testid="admin-field-stock" required
                            aria-describedby=described("stock") prop:value=stock on:input=set_stock/>
                    </Field>
                    <Field id="per_user_limit" label="Units per shopper" errors>
                        <input id="field-per_user_limit" name="per_user_limit" type="number" min="1" max="100" data-testid="admin-field-per_user_limit"
                            aria-describedby=described("per_user_limit") prop:value=limit on:input=set_limit/>
                    </Field>
                    <Field id="payment_window_secs" label="Payment window (minutes)" errors>
                        <input id="field-payment_window_secs" name="payment_window" type="number" min="1" max="1440" data-testid="admin-field-payment_window"
                            aria-describedby=described("payment_window_secs") prop:value=window_mins on:input=set_window_mins/>
                    </Field>
                </div>
                <label class="check">
                    <input type="checkbox" name="captcha_required" data-testid="admin-field-captcha"
                        prop:checked=move || draft.with(|d| d.captcha_required)
                        on:change=move |ev| draft.update(|d| d.captcha_required = event_target_checked(&ev))/>
                    " Shoppers must answer a captcha"
                </label>
                <p class="error" role="alert" data-testid="form-error">{move || form_error.get()}</p>
                <div class="actions">
                    <a href="/admin">"Cancel"</a>
                    <button type="submit" data-testid="admin-activity-submit" disabled=move || busy.get() || !session.hydrated.get()>
                        "Create sale"
                    </button>
                </div>
            </form>
        </section>
    }
}

// ---------------------------------------------------------------------------------------------
// /admin/activities/{id}

#[component]
pub fn DashboardPage() -> impl IntoView {
    let params = use_params_map();
    let id = params.read_untracked().get("id").and_then(|id| id.parse::<i64>().ok()).filter(|id| *id > 0);
    view! {
        <Title text="Sale dashboard — Seckill"/>
        <MerchantOnly>
            {match id {
                Some(id) => view! { <Dashboard id/> }.into_any(),
                None => view! { <crate::pages::NotFound/> }.into_any(),
            }}
        </MerchantOnly>
    }
}

/// The dashboard's sale: `None` while loading, then the sale or why it could not be loaded.
type SaleSignal = RwSignal<Option<Result<AdminActivity, String>>>;

/// Reads the loaded sale, if there is one.
fn with_sale<T>(sale: SaleSignal, f: impl FnOnce(&AdminActivity) -> T) -> Option<T> {
    sale.with(|s| s.as_ref().and_then(|r| r.as_ref().ok()).map(f))
}

/// Changes the loaded sale, if there is one.
fn update_sale(sale: SaleSignal, f: impl FnOnce(&mut AdminActivity)) {
    sale.update(|s| {
        if let Some(Ok(a)) = s {
            f(a)
        }
    });
}

/// One sample of the sale, for the chart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Milliseconds since the epoch (browser clock).
    pub at_ms: f64,
    pub remaining: i64,
    /// Units taken: reservations not persisted yet, confirmed and paid orders.
    pub sold: i64,
}

/// Samples kept for the chart: ten minutes at one a second.
#[cfg(feature = "hydrate")]
const KEEP_SAMPLES: usize = 600;

#[component]
fn Dashboard(id: i64) -> impl IntoView {
    let activity: SaleSignal = RwSignal::new(None);
    let stats = RwSignal::new(None::<ActivityStats>);
    let stale = RwSignal::new(None::<String>);
    let updated = RwSignal::new(None::<String>);
    let samples = RwSignal::new(Vec::<Sample>::new());
    // Bumped after every merchant action, so the audit and the orders reload.
    let changes = RwSignal::new(0u32);

    #[cfg(feature = "hydrate")]
    {
        use std::sync::atomic::Ordering::Relaxed;
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move {
                let mut tick = 0u64;
                while alive.load(Relaxed) {
                    if tick % 5 == 0 {
                        let got = client::get::<AdminActivity>(&format!("/api/admin/activities/{id}")).await;
                        if !alive.load(Relaxed) {
                            break;
                        }
                        match got {
                            Ok(a) => activity.set(Some(Ok(a))),
                            Err(f) if activity.get_untracked().is_none() || f.status == 404 => {
                                activity.set(Some(Err(if f.status == 404 { "There is no such sale.".into() } else { f.message() })))
                            }
                            Err(_) => {}
                        }
                    }
                    let got = client::get::<ActivityStats>(&format!("/api/admin/activities/{id}/stats")).await;
                    if !alive.load(Relaxed) {
                        break;
                    }
                    match got {
                        Ok(s) => {
                            let now = js_sys::Date::now();
                            samples.update(|v| {
                                v.push(Sample { at_ms: now, remaining: s.remaining, sold: s.units_taken() });
                                if v.len() > KEEP_SAMPLES {
                                    v.remove(0);
                                }
                            });
                            stats.set(Some(s));
                            stale.set(None);
                            updated.set(Some(String::from(
                                js_sys::Date::new_0().to_locale_time_string("default"),
                            )));
                        }
                        Err(f) => stale.set(Some(f.message())),
                    }
                    tick += 1;
                    crate::clock::gloo_timers_sleep(1_000).await;
                }
            });
        });
    }

    let loaded = Memo::new(move |_| with_sale(activity, |_| ()).is_some());
    view! {
        <section class="admin dashboard">
            {move || match activity.get() {
                None => view! { <p>"Loading the sale…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(a)) => view! { <DashboardHead a activity/> }.into_any(),
            }}
            <StatsPanel stats stale updated/>
            <Chart samples/>
            // Mounted once the sale is known, and not again on every refresh (that would wipe
            // what the merchant is typing).
            {move || loaded.get().then(|| view! {
                <div class="admin-actions">
                    <AddStock id activity changes/>
                    <PauseSwitch id activity/>
                </div>
            })}
            <StockAudit id changes/>
            <OrdersTable id changes/>
        </section>
    }
}

impl ActivityStats {
    /// Units the sale has taken (reserved, confirmed or paid) and not given back.
    pub fn units_taken(&self) -> i64 {
        self.total_stock - self.remaining
    }
}

#[component]
fn DashboardHead(a: AdminActivity, activity: SaleSignal) -> impl IntoView {
    let shop = format!("/activities/{}", a.activity.id);
    let badge = move || with_sale(activity, status_badge).unwrap_or_default();
    view! {
        <Title text=page_title(&format!("{} (admin)", a.activity.title))/>
        <p><a href="/admin">"← All sales"</a></p>
        <div class="admin-head">
            <h1 data-testid="admin-activity-title">{a.activity.title.clone()}</h1>
            <span class="badge" data-testid="admin-activity-status">{badge}</span>
        </div>
        <p class="muted">
            {local_time(&a.activity.starts_at)} " → " {local_time(&a.activity.ends_at)}
            " · " {money(a.activity.seckill_price_cents)} " (was " {money(a.activity.price_cents)} ")"
            " · " {a.activity.per_user_limit} " per shopper · "
            <a href=shop>"Storefront page"</a>
        </p>
    }
}

#[component]
fn StatsPanel(stats: RwSignal<Option<ActivityStats>>, stale: RwSignal<Option<String>>, updated: RwSignal<Option<String>>) -> impl IntoView {
    let figure = move |pick: fn(&ActivityStats) -> i64| move || stats.with(|s| s.as_ref().map_or("…".to_string(), |s| pick(s).to_string()));
    view! {
        <dl class="stats" data-testid="admin-stats" aria-live="off">
            <div><dt>"Stock"</dt><dd data-testid="stat-total_stock">{figure(|s| s.total_stock)}</dd></div>
            <div><dt>"Remaining"</dt><dd data-testid="stat-remaining">{figure(|s| s.remaining)}</dd></div>
            <div><dt>"Queued"</dt><dd data-testid="stat-queued">{figure(|s| s.queued)}</dd></div>
            <div><dt>"Confirmed"</dt><dd data-testid="stat-confirmed">{figure(|s| s.confirmed)}</dd></div>
            <div><dt>"Paid"</dt><dd data-testid="stat-paid">{figure(|s| s.paid)}</dd></div>
            <div><dt>"Cancelled"</dt><dd data-testid="stat-cancelled">{figure(|s| s.cancelled)}</dd></div>
            <div><dt>"Failed"</dt><dd data-testid="stat-failed">{figure(|s| s.failed)}</dd></div>
            <div><dt>"Buy attempts / s"</dt><dd data-testid="stat-attempts_per_sec">{figure(|s| s.attempts_per_sec)}</dd></div>
        </dl>
        <p class="muted small">
            <span data-testid="admin-updated">{move || updated.get().map(|t| format!("Updated {t}"))}</span>
            {move || stale.get().map(|e| view! { <span class="error" role="status">" · figures are stale: " {e}</span> })}
        </p>
    }
}

/// Remaining stock and units sold over the last minutes, drawn with plotters on a canvas.
#[component]
fn Chart(samples: RwSignal<Vec<Sample>>) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let data = samples.get();
        if let Some(canvas) = canvas.get() {
            if let Err(e) = draw_chart(canvas, &data) {
                leptos::logging::warn!("chart: {e}");
            }
        }
    });
    view! {
        <figure class="chart">
            <canvas node_ref=canvas width="720" height="260" data-testid="admin-chart" data-samples=move || samples.with(Vec::len)
                role="img" aria-label="Remaining stock and units sold over time"></canvas>
            <figcaption class="muted small">
                <span class="key remaining">"■ remaining"</span> " " <span class="key sold">"■ sold"</span>
                " — one sample a second while this page is open"
            </figcaption>
        </figure>
    }
}

#[cfg(feature = "hydrate")]
fn draw_chart(canvas: web_sys::HtmlCanvasElement, data: &[Sample]) -> Result<(), String> {
    use plotters::prelude::*;
    use plotters_canvas::CanvasBackend;
    let backend = CanvasBackend::with_canvas_object(canvas).ok_or("no 2d context")?;
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let last = data.last().map_or(0.0, |s| s.at_ms);
    let first = data.first().map_or(0.0, |s| s.at_ms);
    let span = ((last - first) / 1000.0).max(10.0);
    let top = data.iter().map(|s| s.remaining.max(s.sold)).max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-span..0.0, 0.0..top)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("seconds ago")
        .y_desc("units")
        .x_label_formatter(&|x| format!("{:.0}", x.abs()))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| e.to_string())?;
    let at = |s: &Sample| (s.at_ms - last) / 1000.0;
    let remaining_color = RGBColor(37, 99, 235);
    let sold_color = RGBColor(22, 163, 74);
    chart
        .draw_series(LineSeries::new(data.iter().map(|s| (at(s), s.remaining as f64)), remaining_color.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(LineSeries::new(data.iter().map(|s| (at(s), s.sold as f64)), sold_color.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[component]
fn AddStock(id: i64, activity: SaleSignal, changes: RwSignal<u32>) -> impl IntoView {
    let amount = RwSignal::new(String::new());
    let asking = RwSignal::new(None::<i64>);
    let busy = RwSignal::new(false);
    let message = RwSignal::new(None::<(bool, String)>);
    let total = move || with_sale(activity, |a| a.activity.total_stock).unwrap_or(0);

    let request = move |ev: SubmitEvent| {
        ev.prevent_default();
        match parse_int(&amount.get_untracked()).filter(|n| (1..=10_000_000).contains(n)) {
            Some(n) => {
                message.set(None);
                asking.set(Some(n));
            }
            None => message.set(Some((false, "Enter a whole number of units from 1 to 10,000,000 (stock is only ever added).".into()))),
        }
    };
    let confirm = move |_| {
        let Some(n) = asking.get_untracked() else { return };
        busy.set(true);
        leptos::task::spawn_local(async move {
            match client::post::<_, StockLevel>(&format!("/api/admin/activities/{id}/stock"), &crate::api::AddStock { add: n }).await {
                Ok(level) => {
                    update_sale(activity, |cur| {
                        cur.activity.total_stock = level.total_stock;
                        cur.remaining = level.remaining;
                    });
                    amount.set(String::new());
                    message.set(Some((true, format!("Added {n} units: stock is now {}, {} remaining.", level.total_stock, level.remaining))));
                    changes.update(|c| *c += 1);
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
            asking.set(None);
            busy.set(false);
        });
    };

    view! {
        <form class="card add-stock" on:submit=request data-testid="admin-add-stock-form">
            <h2>"Add stock"</h2>
            <p class="muted small">"Stock is only ever added: every addition is recorded with who and when."</p>
            <label for="add-stock">"Units to add"</label>
            <div class="inline">
                <input id="add-stock" type="number" min="1" max="10000000" required data-testid="admin-add-stock-input"
                    prop:value=move || amount.get() on:input=move |ev| { asking.set(None); amount.set(event_target_value(&ev)) }/>
                <button type="submit" data-testid="admin-add-stock-submit" disabled=move || busy.get() || asking.get().is_some()>"Add…"</button>
            </div>
            {move || asking.get().map(|n| view! {
                <div class="confirm" role="alertdialog" aria-label="Confirm adding stock" data-testid="admin-add-stock-confirmation">
                    <p>"Add " <strong>{n}</strong> " units? The stock goes from " {total()} " to " {total() + n} ". This cannot be undone."</p>
                    <button type="button" data-testid="admin-add-stock-confirm" disabled=move || busy.get() on:click=confirm>"Yes, add " {n}</button>
                    " "
                    <button type="button" class="secondary" data-testid="admin-add-stock-cancel" on:click=move |_| asking.set(None)>"Cancel"</button>
                </div>
            })}
            {move || message.get().map(|(ok, m)| view! {
                <p class=if ok { "ok" } else { "error" } role="status" data-testid="admin-add-stock-message">{m}</p>
            })}
        </form>
    }
}

#[component]
fn PauseSwitch(id: i64, activity: SaleSignal) -> impl IntoView {
    let paused = Memo::new(move |_| with_sale(activity, |a| a.activity.paused).unwrap_or(false));
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let toggle = move |_| {
        let action = if paused.get_untracked() { "resume" } else { "pause" };
        busy.set(true);
        error.set(None);
        leptos::task::spawn_local(async move {
            match client::post::<_, Activity>(&format!("/api/admin/activities/{id}/{action}"), &()).await {
                Ok(a) => update_sale(activity, |cur| cur.activity = a),
                Err(f) => error.set(Some(f.message())),
            }
            busy.set(false);
        });
    };
    view! {
        <div class="card pause">
            <h2>"Sale switch"</h2>
            <p data-testid="admin-pause-state" role="status">
                {move || if paused.get() { "Paused: every buy is refused with “paused”." } else { "Running: buys are accepted." }}
            </p>
            <button type="button" data-testid="admin-pause-toggle" aria-pressed=move || paused.get().to_string()
                class:secondary=move || paused.get() disabled=move || busy.get() on:click=toggle>
                {move || if paused.get() { "Resume sale" } else { "Pause sale" }}
            </button>
            <p class="error" role="alert">{move || error.get()}</p>
        </div>
    }
}

#[component]
fn StockAudit(id: i64, changes: RwSignal<u32>) -> impl IntoView {
    let additions = RwSignal::new(None::<Result<StockAdditions, String>>);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        changes.track();
        leptos::task::spawn_local(async move {
            let got = client::get::<StockAdditions>(&format!("/api/admin/activities/{id}/stock-additions")).await;
            additions.try_set(Some(got.map_err(|f| f.message())));
        });
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (id, changes);
    view! {
        <section class="card">
            <h2>"Stock additions"</h2>
            {move || match additions.get() {
                None => view! { <p>"Loading…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
                Some(Ok(list)) if list.additions.is_empty() => view! { <p class="muted" data-testid="admin-stock-additions">"None since the sale was created."</p> }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="audit" data-testid="admin-stock-additions">
                        {list.additions.into_iter().map(|a| view! {
                            <li data-testid="admin-stock-addition">"+" {a.added} " units by " <strong>{a.merchant}</strong> " at " {local_time(&a.at)}</li>
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </section>
    }
}

const ORDER_STATUSES: [&str; 5] = ["confirmed", "paid", "cancelled", "failed", "queued"];
const PAGE_SIZE: i64 = 20;

#[component]
fn OrdersTable(id: i64, changes: RwSignal<u32>) -> impl IntoView {
    let status = RwSignal::new(String::new());
    let offset = RwSignal::new(0i64);
    let reload = RwSignal::new(0u32);
    let page = RwSignal::new(None::<Result<AdminOrderPage, String>>);

    #[cfg(feature = "hydrate")]
    {
        Effect::new(move |_| {
            changes.track();
            reload.track();
            let (status, offset) = (status.get(), offset.get());
            let mut url = format!("/api/admin/orders?activity_id={id}&limit={PAGE_SIZE}&offset={offset}");
            if !status.is_empty() {
                url.push_str(&format!("&status={status}"));
            }
            leptos::task::spawn_local(async move {
                let got = client::get::<AdminOrderPage>(&url).await;
                page.try_set(Some(got.map_err(|f| f.message())));
            });
        });
        // The first page follows the sale by itself.
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move {
                loop {
                    crate::clock::gloo_timers_sleep(5_000).await;
                    if !alive.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    if offset.get_untracked() == 0 {
                        reload.update(|r| *r += 1);
                    }
                }
            });
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (changes, reload);

    let csv = format!("/api/admin/orders.csv?activity_id={id}");
    let total = move || page.with(|p| p.as_ref().and_then(|r| r.as_ref().ok()).map_or(0, |p| p.total));
    view! {
        <section class="card admin-orders">
            <div class="admin-head">
                <h2>"Orders"</h2>
                <a class="button secondary" href=csv download=format!("orders-{id}.csv") data-testid="admin-csv-download">"Download CSV"</a>
            </div>
            <label for="orders-status">"Status"</label>
            <select id="orders-status" data-testid="admin-orders-status"
                on:change=move |ev| { offset.set(0); status.set(event_target_value(&ev)) }>
                <option value="">"All"</option>
                {ORDER_STATUSES.into_iter().map(|s| view! { <option value=s>{s}</option> }).collect_view()}
            </select>
            {move || match page.get() {
                None => view! { <p>"Loading orders…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
                Some(Ok(p)) => view! {
                    <p class="muted small" data-testid="admin-orders-total">{p.total} " orders"</p>
                    <div class="table-wrap">
                        <table class="data" data-testid="admin-orders-table">
                            <thead><tr>
                                <th scope="col" class="num">"Order"</th><th scope="col">"Shopper"</th><th scope="col" class="num">"Qty"</th>
                                <th scope="col">"Status"</th><th scope="col">"Reserved"</th><th scope="col">"Pay by"</th>
                            </tr></thead>
                            <tbody>
                                {p.orders.into_iter().map(|o| view! {
                                    <tr data-testid="admin-order-row">
                                        <td class="num">{o.order_id}</td>
                                        <td>{o.username}</td>
                                        <td class="num">{o.quantity}</td>
                                        <td>{o.status}{o.reason.map(|r| format!(" ({r})"))}</td>
                                        <td>{local_time(&o.reserved_at)}</td>
                                        <td>{o.pay_by.as_deref().map(local_time)}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any(),
            }}
            <nav class="pager" aria-label="Orders pages">
                <button type="button" class="secondary" data-testid="admin-orders-prev" disabled=move || offset.get() == 0
                    on:click=move |_| offset.update(|o| *o = (*o - PAGE_SIZE).max(0))>"← Newer"</button>
                <span data-testid="admin-orders-range">{move || format!("{}–{} of {}", (offset.get() + 1).min(total()), (offset.get() + PAGE_SIZE).min(total()), total())}</span>
                <button type="button" class="secondary" data-testid="admin-orders-next" disabled=move || { offset.get() + PAGE_SIZE >= total() }
                    on:click=move |_| offset.update(|o| *o += PAGE_SIZE)>"Older →"</button>
            </nav>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(v: &str) -> Option<String> {
        (!v.is_empty()).then(|| format!("{v}:00.000Z"))
    }

    fn valid() -> Draft {
        Draft {
            title: "Phone".into(),
            price: "499".into(),
            seckill_price: "99.5".into(),
            starts_at: "2030-01-01T10:00".into(),
            ends_at: "2030-01-01T11:00".into(),
            stock: "100".into(),
            ..Draft::fresh()
        }
    }

    #[test]
    fn money_is_read_in_cents() {
        assert_eq!(parse_money("499"), Some(49_900));
        assert_eq!(parse_money("99.5"), Some(9_950));
        assert_eq!(parse_money(" 0.07 "), Some(7));
        for bad in ["", ".5", "1.234", "-1", "1e3", "12,50", "99999999999999999999"] {
            assert_eq!(parse_money(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_valid_draft_becomes_the_api_body() {
        let body = valid().validate(utc).unwrap();
        assert_eq!((body.price_cents, body.seckill_price_cents, body.stock), (49_900, 9_950, 100));
        assert_eq!(body.starts_at, "2030-01-01T10:00:00.000Z");
        assert_eq!((body.per_user_limit, body.captcha_required, body.payment_window_secs), (Some(1), Some(true), Some(600)));
        assert_eq!(body.image_url, None);
    }

    #[test]
    fn each_mistake_lands_on_its_field() {
        let cases: [(fn(&mut Draft), &str); 9] = [
            (|d| d.title = "  ".into(), "title"),
            (|d| d.image_url = "javascript:alert(1)".into(), "image_url"),
            (|d| d.price = "abc".into(), "price_cents"),
            (|d| d.seckill_price = "500".into(), "seckill_price_cents"),
            (|d| d.starts_at = String::new(), "starts_at"),
            (|d| d.ends_at = "2030-01-01T09:00".into(), "ends_at"),
            (|d| d.stock = "0".into(), "stock"),
            (|d| d.per_user_limit = "101".into(), "per_user_limit"),
            (|d| d.payment_window_mins = "0".into(), "payment_window_secs"),
        ];
        for (spoil, field) in cases {
            let mut d = valid();
            spoil(&mut d);
            let errors = d.validate(utc).unwrap_err();
            assert_eq!(errors.keys().copied().collect::<Vec<_>>(), vec![field]);
        }
    }

    #[test]
    fn server_messages_name_their_field() {
        assert_eq!(field_of_message("stock: must be between 1 and 10000000"), Some("stock"));
        assert_eq!(field_of_message("seckill_price_cents: must be between 0 and price_cents"), Some("seckill_price_cents"));
        assert_eq!(field_of_message("body: expected value at line 1"), None);
        assert_eq!(field_of_message(""), None);
    }
}
