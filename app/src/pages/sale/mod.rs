//! `/activities/{id}`: one sale with its countdown, remaining stock and, while it is on, the buy
//! panel (buy path, bot check, quantity, the buy with its `Idempotency-Key`, then the order
//! tracker). A sale with the proof-of-work check has it solved by the browser from the moment
//! the page loads (`components/proof_of_work.rs`); an image-captcha sale offers it instead.
//! A sale with a waiting room puts the shopper in its line first (`waiting_room.rs`)
//! and opens the buy panel at their turn. "Sold out" while no unit remains, reopening by itself
//! when units come back. The server renders the sale's phase from its own clock and stock (so the
//! HTML says "sold out", "paused" or when it starts); the HTML carries no per-user data (it is
//! cacheable), and everything live comes after hydration.

use crate::{
    api::{BotCheck, SaleId},
    clock::When,
    components::{
        countdown::{phase, server_now, Countdown, Phase},
        proof_of_work::{Work, WorkStatus},
        stock::{poll_stock, StockLeft},
    },
    data::{self, SaleState},
    format::page_title,
    i18n::{money, tr, tr_split, tr_with},
    Session,
};
use buy_panel::BuyPanel;
use leptos::prelude::*;
use reminder::ReminderPanel;
use waiting_room::{DrawingProof, WaitingRoom};

mod buy_panel;
mod reminder;
mod waiting_room;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn ActivityPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || {
        params
            .read()
            .get("id")
            .and_then(|id| id.parse::<SaleId>().ok())
    };
    let activity = data::activity(id);
    view! {
        <Suspense fallback=|| view! { <p>{tr("loading")}</p> }>
            {move || activity.get().map(|r| match r {
                Ok(Some(sale)) => view! { <ActivityView sale/> }.into_any(),
                Ok(None) => view! { <Title text=page_title(&tr("sale.not_found.title"))/><section class="card narrow"><h1>{tr("sale.not_found")}</h1><p><a href="/">{tr("back_to_sales")}</a></p></section> }.into_any(),
                Err(e) => view! { <p class="error" role="alert">{tr_with("sale.load_failed", &[("error", &e)])}</p> }.into_any(),
            })}
        </Suspense>
    }
}

/// What a sale's page shows below its countdown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Panel {
    /// The waiting room (before the start, and while the sale is on).
    Room,
    Buy,
    Ended,
    /// The disabled buy button, until the start.
    Before,
}

#[component]
fn ActivityView(sale: SaleState) -> impl IntoView {
    // Under the cord's fail-open the page leaves out the waiting room and the bot check, as
    // the server does.
    let activity = sale.activity.clone().checks_in_force();
    let stock = poll_stock(&sale);
    let remaining = stock.remaining;
    let now = server_now(sale.seen_at_ms);
    let a = activity.clone();
    let live_phase = Memo::new(move |_| phase(&a, now.get()).0);
    let starts_at = activity.starts_at.clone();
    // "Starts {time}": the text around the start's `<time>`.
    let (starts_ahead, starts_behind) = tr_split("sale.starts_at");
    let waiting_room = activity.waiting_room;
    // What the page shows below the countdown. A memo: the waiting room stays mounted (its place,
    // its polling) as the sale starts, rather than being rebuilt and joining again.
    let panel = Memo::new(move |_| match live_phase.get() {
        Phase::Upcoming | Phase::Live if waiting_room => Panel::Room,
        Phase::Live => Panel::Buy,
        Phase::Ended => Panel::Ended,
        Phase::Upcoming | Phase::Unknown => Panel::Before,
    });
    let work = activity
        .bot_check
        .takes_proof_of_work()
        .then(|| Work::provide(activity.id));
    let session = Session::get();
    let signed_in = move || matches!(session.user.get(), Some(Some(_)));
    let receipt = RwSignal::new(None);
    let drawing = activity.drawing_commitment.clone().map(|commitment| {
        let seed = activity.drawing_seed.clone();
        view! { <DrawingProof id=activity.id commitment seed receipt live=live_phase/> }
    });
    view! {
        <Title text=page_title(&activity.title)/>
        <article class="card activity">
            <h1>{activity.title.clone()}</h1>
            {activity.image_url.clone().map(|src| view! { <img class="hero-image" src=src alt=""/> })}
            <p class="price">
                <span class="now">{money(activity.seckill_price_cents)}</span>
                " " <s class="was">{money(activity.price_cents)}</s>
            </p>
            <p class="description">{activity.description.clone()}</p>
            {activity.halted.then(|| view! { <p class="notice" role="status" data-testid="cord-stopped">{tr("sale.cord_stopped")}</p> })}
            {activity.fail_open.then(|| view! { <p class="notice" role="status" data-testid="cord-fail-open">{tr("sale.cord_fail_open")}</p> })}
            {activity.accounts_created_before.as_deref().map(|before| {
                let when = format!("{} UTC", before.get(..16).unwrap_or(before).replace('T', " "));
                let (ahead, behind) = tr_split("sale.accounts_rule");
                view! {
                    <p class="notice" data-testid="accounts-rule">
                        {ahead} <time datetime=before.to_string()>{when}</time> {behind}
                    </p>
                }
            })}
            <StockLeft remaining total=activity.total_stock per_user_limit=activity.per_user_limit/>
            <Countdown activity=activity.clone() stock seen_at=sale.seen_at_ms announce=true/>
            {move || matches!(live_phase.get(), Phase::Upcoming | Phase::Unknown).then(|| view! {
                <p class="muted" data-testid="starts-at">{starts_ahead.clone()} <When at=starts_at.clone()/>{starts_behind.clone()}</p>
            })}
            // Kept mounted past the start: its notification fires as the phase turns live.
            {(phase(&activity, sale.seen_at_ms).0 != Phase::Ended).then(|| {
                let started = Signal::derive(move || live_phase.get() != Phase::Upcoming && live_phase.get() != Phase::Unknown);
                view! { <div hidden=move || started.get()><ReminderPanel activity=activity.clone() started/></div> }
            })}
            {move || match panel.get() {
                Panel::Room => view! { <WaitingRoom activity=activity.clone() remaining live=live_phase receipt/> }.into_any(),
                Panel::Buy => view! { <BuyPanel activity=activity.clone() remaining admission=Signal::stored(None)/> }.into_any(),
                Panel::Ended => view! {
                    <p class="notice">{tr("sale.ended")} " "
                        <a href=format!("/activities/{}/report", activity.id) data-testid="report-link">{tr("sale.report_link")}</a>
                    </p>
                }.into_any(),
                Panel::Before => view! {
                    <button type="button" data-testid="buy-button" disabled=true>{tr("buy.now")}</button>
                    <p class="muted">{tr("buy.opens_at_start")}</p>
                    // The proof of work is done during the countdown: say so.
                    {move || (signed_in() && activity.bot_check == BotCheck::ProofOfWork)
                        .then(|| work.map(|work| view! { <WorkStatus work/> }))}
                }.into_any(),
            }}
            {drawing}
        </article>
    }
}
