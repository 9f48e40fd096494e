//! `/admin/activities/new`: the form that creates a sale, with per-field errors (checked here,
//! then by the server) and the conversion of the browser's local times to UTC (`draft.rs`).

mod draft;

pub use draft::parse_int;
use draft::{field_of_message, local_to_utc, time_zone, Draft, FieldErrors};

use crate::{
    api::{BotCheck, ErrorCode, LineMethod, NewActivity},
    client,
    components::merchant_only::MerchantOnly,
    format::page_title,
    i18n::{tr, tr_with},
};
use leptos::{ev::SubmitEvent, prelude::*};
use leptos_meta::Title;

#[component]
pub fn NewActivityPage() -> impl IntoView {
    view! {
        <Title text=page_title(&tr("console.new_sale"))/>
        <MerchantOnly>
            <ActivityForm/>
        </MerchantOnly>
    }
}

#[component]
pub fn Field(
    id: &'static str,
    #[prop(into)] label: String,
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

/// Two-way binding of one text field of the draft: its value, and the handler of its input.
macro_rules! bind {
    ($draft:ident . $field:ident) => {
        (
            move || $draft.with(|d| d.$field.clone()),
            move |ev: leptos::ev::Event| $draft.update(|d| d.$field = event_target_value(&ev)),
        )
    };
}

fn described(id: &str) -> String {
    format!("{id}-error")
}

/// "In Europe/Paris · 2030-01-01 11:00 UTC": a local time field's instant in UTC, as typed.
fn utc_hint(
    draft: RwSignal<Draft>,
    zone: RwSignal<String>,
    pick: fn(&Draft) -> &str,
) -> Signal<String> {
    Signal::derive(move || {
        let utc = draft.with(|d| local_to_utc(pick(d)));
        match utc {
            Some(utc) => tr_with(
                "new_sale.in_zone_utc",
                &[
                    ("zone", &zone.get()),
                    ("utc", &utc.get(..16).unwrap_or(&utc).replace('T', " ")),
                ],
            ),
            None => tr_with("new_sale.in_zone", &[("zone", &zone.get())]),
        }
    })
}

#[component]
pub fn ActivityForm() -> impl IntoView {
    let session = crate::Session::get();
    let draft = RwSignal::new(Draft::fresh());
    let errors = RwSignal::new(FieldErrors::new());
    let form_error = RwSignal::new(None::<String>);
    let zone = RwSignal::new(tr("new_sale.your_zone"));
    Effect::new(move |_| zone.set(time_zone()));
    let create = creation(errors, form_error);
    let busy = create.pending();
    let submit = submitter(draft, errors, form_error, create);
    view! {
        <section class="card admin-form">
            <h1>{tr("console.new_sale")}</h1>
            <form class="stack" novalidate on:submit=submit data-testid="admin-activity-form">
                <Describe draft errors/>
                <Prices draft errors/>
                <Schedule draft errors zone/>
                <Units draft errors/>
                <BotCheckFields draft errors/>
                <Admission draft errors zone/>
                <p class="error" role="alert" data-testid="form-error">{move || form_error.get()}</p>
                <div class="actions">
                    <a href="/admin">{tr("stock.cancel")}</a>
                    <button type="submit" data-testid="admin-activity-submit" disabled=move || busy.get() || !session.hydrated.get()>
                        {tr("new_sale.create")}
                    </button>
                </div>
            </form>
        </section>
    }
}

/// The form's submission: the draft checked here, then sent (see [`creation`]) under one
/// `Idempotency-Key` for this form, so a retry after a lost answer creates nothing more.
fn submitter(
    draft: RwSignal<Draft>,
    errors: RwSignal<FieldErrors>,
    form_error: RwSignal<Option<String>>,
    create: Action<(NewActivity, String), ()>,
) -> impl Fn(SubmitEvent) + Clone + 'static {
    let key = StoredValue::new(String::new());
    move |ev: SubmitEvent| {
        ev.prevent_default();
        if create.pending().get_untracked() {
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
        if key.with_value(String::is_empty) {
            key.set_value(client::new_key());
        }
        create.dispatch((body, key.get_value()));
    }
}

/// Creates the sale: on success the new sale's page, else the server's field error shown on
/// its field (or the form's error).
fn creation(
    errors: RwSignal<FieldErrors>,
    form_error: RwSignal<Option<String>>,
) -> Action<(NewActivity, String), ()> {
    let navigate = leptos_router::hooks::use_navigate();
    crate::client::action(move |(body, key): &(NewActivity, String)| {
        let (body, key) = (body.clone(), key.clone());
        let navigate = navigate.clone();
        async move {
            match crate::endpoints::create_sale(&body, &key).await {
                Ok(created) => navigate(
                    &format!("/admin/activities/{}", created.id),
                    Default::default(),
                ),
                Err(f) if f.body.code() == Some(ErrorCode::InvalidInput) => {
                    match field_of_message(&f.body.message) {
                        Some(field) => {
                            errors.set(FieldErrors::from([(field, f.body.message.clone())]))
                        }
                        None => form_error.set(Some(f.message())),
                    }
                }
                Err(f) => form_error.set(Some(f.message())),
            }
        }
    })
}

#[component]
fn Describe(draft: RwSignal<Draft>, errors: RwSignal<FieldErrors>) -> impl IntoView {
    let (title, set_title) = bind!(draft.title);
    let (description, set_description) = bind!(draft.description);
    let (image_url, set_image_url) = bind!(draft.image_url);
    view! {
        <Field id="title" label=tr("new_sale.title") errors>
            <input id="field-title" name="title" data-testid="admin-field-title" maxlength="120" required
                aria-describedby=described("title") prop:value=title on:input=set_title/>
        </Field>
        <Field id="description" label=tr("new_sale.description") errors>
            <textarea id="field-description" name="description" data-testid="admin-field-description" rows="4" maxlength="5000"
                aria-describedby=described("description") prop:value=description on:input=set_description></textarea>
        </Field>
        <Field id="image_url" label=tr("new_sale.image_url") errors>
            <input id="field-image_url" name="image_url" data-testid="admin-field-image_url" inputmode="url"
                aria-describedby=described("image_url") prop:value=image_url on:input=set_image_url/>
        </Field>
    }
}

#[component]
fn Prices(draft: RwSignal<Draft>, errors: RwSignal<FieldErrors>) -> impl IntoView {
    let (price, set_price) = bind!(draft.price);
    let (seckill_price, set_seckill_price) = bind!(draft.seckill_price);
    view! {
        <div class="row">
            <Field id="price_cents" label=tr("new_sale.price") errors>
                <input id="field-price_cents" name="price" data-testid="admin-field-price" inputmode="decimal" placeholder="499.00" required
                    aria-describedby=described("price_cents") prop:value=price on:input=set_price/>
            </Field>
            <Field id="seckill_price_cents" label=tr("new_sale.seckill_price") errors>
                <input id="field-seckill_price_cents" name="seckill_price" data-testid="admin-field-seckill_price" inputmode="decimal" placeholder="99.00" required
                    aria-describedby=described("seckill_price_cents") prop:value=seckill_price on:input=set_seckill_price/>
            </Field>
        </div>
    }
}

#[component]
fn Schedule(
    draft: RwSignal<Draft>,
    errors: RwSignal<FieldErrors>,
    zone: RwSignal<String>,
) -> impl IntoView {
    let (starts_at, set_starts_at) = bind!(draft.starts_at);
    let (ends_at, set_ends_at) = bind!(draft.ends_at);
    view! {
        <div class="row">
            <Field id="starts_at" label=tr("console.starts") errors hint=utc_hint(draft, zone, |d| &d.starts_at)>
                <input id="field-starts_at" name="starts_at" type="datetime-local" step="1" data-testid="admin-field-starts_at" required
                    aria-describedby=described("starts_at") prop:value=starts_at on:input=set_starts_at/>
            </Field>
            <Field id="ends_at" label=tr("new_sale.ends") errors hint=utc_hint(draft, zone, |d| &d.ends_at)>
                <input id="field-ends_at" name="ends_at" type="datetime-local" step="1" data-testid="admin-field-ends_at" required
                    aria-describedby=described("ends_at") prop:value=ends_at on:input=set_ends_at/>
            </Field>
        </div>
    }
}

#[component]
fn Units(draft: RwSignal<Draft>, errors: RwSignal<FieldErrors>) -> impl IntoView {
    let (stock, set_stock) = bind!(draft.stock);
    let (limit, set_limit) = bind!(draft.per_user_limit);
    let (window_mins, set_window_mins) = bind!(draft.payment_window_mins);
    let (shards, set_shards) = bind!(draft.stock_shards);
    view! {
        <div class="row">
            <Field id="stock" label=tr("new_sale.stock") errors>
                <input id="field-stock" name="stock" type="number" min="1" max="10000000" data-testid="admin-field-stock" required
                    aria-describedby=described("stock") prop:value=stock on:input=set_stock/>
            </Field>
            <Field id="per_user_limit" label=tr("new_sale.per_user_limit") errors>
                <input id="field-per_user_limit" name="per_user_limit" type="number" min="1" max="100" data-testid="admin-field-per_user_limit"
                    aria-describedby=described("per_user_limit") prop:value=limit on:input=set_limit/>
            </Field>
            <Field id="payment_window_secs" label=tr("new_sale.payment_window") errors>
                <input id="field-payment_window_secs" name="payment_window" type="number" min="1" max="1440" data-testid="admin-field-payment_window"
                    aria-describedby=described("payment_window_secs") prop:value=window_mins on:input=set_window_mins/>
            </Field>
            <Field id="stock_shards" label=tr("new_sale.stock_shards") errors
                hint=Signal::derive(|| tr("new_sale.stock_shards_hint"))>
                <input id="field-stock_shards" name="stock_shards" type="number" min="1" max="64" data-testid="admin-field-stock_shards"
                    aria-describedby=described("stock_shards") prop:value=shards on:input=set_shards/>
            </Field>
        </div>
    }
}

#[component]
fn BotCheckFields(draft: RwSignal<Draft>, errors: RwSignal<FieldErrors>) -> impl IntoView {
    let (difficulty, set_difficulty) = bind!(draft.pow_difficulty);
    let checks = [
        (BotCheck::ProofOfWork, tr("new_sale.check.pow")),
        (BotCheck::Image, tr("new_sale.check.image")),
        (BotCheck::None, tr("new_sale.check.none")),
    ];
    view! {
        <div class="row">
            <Field id="bot_check" label=tr("new_sale.bot_check") errors
                hint=Signal::derive(|| tr("new_sale.bot_check_hint"))>
                <select id="field-bot_check" name="bot_check" data-testid="admin-field-bot_check"
                    aria-describedby=described("bot_check")
                    on:change=move |ev| draft.update(|d| d.bot_check = event_target_value(&ev).parse().unwrap_or_default())>
                    {checks
                        .into_iter()
                        .map(|(check, label)| view! {
                            <option value=check.as_str() selected=move || draft.with(|d| d.bot_check == check)>{label}</option>
                        })
                        .collect_view()}
                </select>
            </Field>
            <Field id="pow_difficulty" label=tr("new_sale.pow_difficulty") errors
                hint=Signal::derive(|| tr("new_sale.pow_difficulty_hint"))>
                <input id="field-pow_difficulty" name="pow_difficulty" type="number" min="1000" max="10000000" data-testid="admin-field-pow_difficulty"
                    disabled=move || draft.with(|d| !d.bot_check.takes_proof_of_work())
                    aria-describedby=described("pow_difficulty") prop:value=difficulty on:input=set_difficulty/>
            </Field>
        </div>
    }
}

/// Who gets in, and how fast: the waiting room, its admission rate, the accounts' cut-off.
#[component]
fn Admission(
    draft: RwSignal<Draft>,
    errors: RwSignal<FieldErrors>,
    zone: RwSignal<String>,
) -> impl IntoView {
    let (admit_rate, set_admit_rate) = bind!(draft.admit_per_sec);
    let (accounts_before, set_accounts_before) = bind!(draft.accounts_created_before);
    let before_hint = utc_hint(draft, zone, |d| &d.accounts_created_before);
    view! {
        <label class="check">
            <input type="checkbox" name="waiting_room" data-testid="admin-field-waiting_room"
                prop:checked=move || draft.with(|d| d.waiting_room_on())
                on:change=move |ev| draft.update(|d| d.waiting_room = Some(event_target_checked(&ev)))/>
            " " {tr("new_sale.waiting_room")}
        </label>
        <Field id="admit_per_sec" label=tr("new_sale.admit_per_sec") errors
            hint=Signal::derive(|| tr("new_sale.admit_per_sec_hint"))>
            <input id="field-admit_per_sec" name="admit_per_sec" type="number" min="1" max="1000000" data-testid="admin-field-admit_per_sec"
                aria-describedby=described("admit_per_sec") prop:value=admit_rate on:input=set_admit_rate/>
        </Field>
        <Field id="line_method" label=tr("new_sale.line_method") errors
            hint=Signal::derive(|| tr("new_sale.line_method_hint"))>
            <select id="field-line_method" name="line_method" data-testid="admin-field-line_method"
                disabled=move || draft.with(|d| !d.waiting_room_on())
                aria-describedby=described("line_method")
                on:change=move |ev| draft.update(|d| d.line_method = event_target_value(&ev).parse().unwrap_or_default())>
                {[
                    (LineMethod::DrawThenOrder, tr("new_sale.line.draw")),
                    (LineMethod::ArrivalOrder, tr("new_sale.line.arrival")),
                    (LineMethod::PassThrough, tr("new_sale.line.pass_through")),
                ]
                    .into_iter()
                    .map(|(method, label)| view! {
                        <option value=method.as_str() selected=move || draft.with(|d| d.line_method == method)>{label}</option>
                    })
                    .collect_view()}
            </select>
        </Field>
        <Field id="accounts_created_before" label=tr("new_sale.accounts_before") errors
            hint=Signal::derive(move || format!("{} {}", tr("new_sale.accounts_before_hint"), before_hint.get()))>
            <input id="field-accounts_created_before" name="accounts_created_before" type="datetime-local" step="1" data-testid="admin-field-accounts_created_before"
                aria-describedby=described("accounts_created_before") prop:value=accounts_before on:input=set_accounts_before/>
        </Field>
    }
}
