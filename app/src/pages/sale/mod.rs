//! `/activities/{id}`: one sale with its countdown, remaining stock and, while it is on, the buy
//! panel (buy path, bot check, quantity, the buy with its `Idempotency-Key`, then the order
//! tracker). A sale with the proof-of-work check has it solved by the browser from the moment
//! the page loads (`components/proof_of_work.rs`); an image-captcha sale offers it instead.
//! A sale with a waiting room puts the shopper in its line first (`waiting_room.rs`)
//! and opens the buy panel at their turn. "Sold out" while no unit remains, reopening by itself
//! when units come back. The HTML carries no per-user data (it is cacheable); everything live
//! comes after hydration.

use crate::{
    api::{Activity, BotCheck, BuyPath, Captcha, Reservation},
    client,
    clock::ServerClock,
    components::{
        captcha::CaptchaInput,
        countdown::{phase, Countdown, Phase},
        order_tracker::OrderTracker,
        proof_of_work::{Work, WorkStatus},
        stock::{poll_remaining, StockLeft},
    },
    data,
    format::{money, page_title},
    Session,
};
use leptos::prelude::*;
use waiting_room::WaitingRoom;

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
            .and_then(|id| id.parse::<i64>().ok())
    };
    let activity = data::activity(id);
    view! {
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {move || activity.get().map(|r| match r {
                Ok(Some(a)) => view! { <ActivityView activity=a/> }.into_any(),
                Ok(None) => view! { <Title text="Not found — Seckill"/><section class="card narrow"><h1>"No such sale"</h1><p><a href="/">"Back to the sales"</a></p></section> }.into_any(),
                Err(e) => view! { <p class="error" role="alert">"Could not load the sale: " {e}</p> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn ActivityView(activity: Activity) -> impl IntoView {
    let clock = ServerClock::get();
    let remaining = poll_remaining(&activity);
    let a = activity.clone();
    let live_phase = Memo::new(move |_| phase(&a, clock.now_ms.get()).0);
    let waiting_room = activity.waiting_room;
    let work = activity
        .bot_check
        .takes_proof_of_work()
        .then(|| Work::provide(activity.id));
    let session = Session::get();
    let signed_in = move || matches!(session.user.get(), Some(Some(_)));
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
            {activity.accounts_created_before.as_deref().map(|before| {
                let when = format!("{} UTC", before.get(..16).unwrap_or(before).replace('T', " "));
                view! {
                    <p class="notice" data-testid="accounts-rule">
                        "This sale is for accounts created before " <time datetime=before.to_string()>{when}</time> "."
                    </p>
                }
            })}
            <StockLeft remaining total=activity.total_stock per_user_limit=activity.per_user_limit/>
            <Countdown activity=activity.clone() remaining announce=true/>
            {move || match live_phase.get() {
                Phase::Upcoming | Phase::Live if waiting_room => view! { <WaitingRoom activity=activity.clone() remaining live=live_phase/> }.into_any(),
                Phase::Live => view! { <BuyPanel activity=activity.clone() remaining admission=Signal::stored(None)/> }.into_any(),
                Phase::Ended => view! { <p class="notice">"This sale has ended."</p> }.into_any(),
                _ => view! {
                    <button type="button" data-testid="buy-button" disabled=true>"Buy now"</button>
                    <p class="muted">"The buy button opens when the sale starts."</p>
                    // The proof of work is done during the countdown: say so.
                    {move || (signed_in() && activity.bot_check == BotCheck::ProofOfWork)
                        .then(|| work.map(|work| view! { <WorkStatus work/> }))}
                }.into_any(),
            }}
        </article>
    }
}

/// The buy itself. `admission`: the waiting room's ticket, when the sale has one.
#[component]
pub fn BuyPanel(
    activity: Activity,
    remaining: RwSignal<Option<i64>>,
    admission: Signal<Option<String>>,
) -> impl IntoView {
    let session = Session::get();
    let id = activity.id;
    let check = activity.bot_check;
    let work = Work::get();
    // The proof of work is the check, or the image's alternative the shopper chose.
    let use_work = RwSignal::new(check == BotCheck::ProofOfWork);
    let needs_captcha = move || check == BotCheck::Image && !use_work.get();
    let path = RwSignal::new(None::<String>);
    let captcha = RwSignal::new(None::<Captcha>);
    let answer = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    // Closed for good on this page (limit reached, ended). Sold out is `remaining == 0`: it
    // reopens when units come back.
    let closed = RwSignal::new(false);
    let sold_out = move || remaining.get() == Some(0);
    let wait_until = RwSignal::new(None::<f64>);
    let message = RwSignal::new(None::<String>);
    let reservation = RwSignal::new(None::<Reservation>);
    let quantity = RwSignal::new(1i64);

    let load_captcha = move || {
        if check != BotCheck::Image {
            return;
        }
        answer.set(String::new());
        leptos::task::spawn_local(async move {
            match client::get::<Captcha>("/api/captcha").await {
                Ok(c) => captcha.set(Some(c)),
                Err(f) => message.set(Some(f.message())),
            }
        });
    };
    let load_path = move || {
        leptos::task::spawn_local(async move {
            match client::get::<BuyPath>(&format!("/api/activities/{id}/path")).await {
                Ok(p) => path.set(Some(p.path)),
                Err(f) => message.set(Some(f.message())),
            }
        });
    };
    // At the start instant (this panel appears then): the path and the captcha, for signed-in shoppers.
    Effect::new(move |_| {
        if matches!(session.user.get(), Some(Some(_))) && path.get_untracked().is_none() {
            load_path();
            load_captcha();
        }
    });

    let clock = ServerClock::get();
    let waiting = move || {
        wait_until
            .get()
            .zip(clock.now_ms.get())
            .is_some_and(|(until, now)| now < until)
    };
    let can_buy = move || {
        !busy.get()
            && !closed.get()
            && !sold_out()
            && !waiting()
            && reservation.get().is_none()
            && path.get().is_some()
            && match check {
                BotCheck::None => true,
                _ if use_work.get() => work.is_some_and(|w| w.payload.get().is_some()),
                _ => !answer.get().trim().is_empty(),
            }
    };

    // A spent or refused proof of work is replaced only when the shopper can buy again: not
    // after a success, not while sold out (it is when units come back).
    Effect::new(move |_| {
        let Some(work) = work else { return };
        let can_try_again = use_work.get()
            && !busy.get()
            && !closed.get()
            && !sold_out()
            && reservation.get().is_none();
        if can_try_again && work.payload.get().is_none() && !work.solving.get() {
            work.renew();
        }
    });

    let submit = move || {
        if !can_buy() {
            return;
        }
        busy.set(true);
        message.set(None);
        let key = client::new_key();
        let captcha_id = untrack(needs_captcha)
            .then(|| captcha.get_untracked().map(|c| c.id))
            .flatten();
        let pow = use_work
            .get_untracked()
            .then(|| work.and_then(|w| w.take()))
            .flatten();
        let body = crate::api::BuyRequest {
            path: path.get_untracked().unwrap_or_default(),
            captcha_answer: captcha_id
                .as_ref()
                .map(|_| answer.get_untracked().trim().to_string()),
            captcha_id,
            quantity: Some(quantity.get_untracked()),
            admission: admission.get_untracked(),
            pow,
        };
        leptos::task::spawn_local(async move {
            let mut attempt = 0u32;
            loop {
                let result = client::post_with_key::<_, Reservation>(
                    &format!("/api/activities/{id}/buy"),
                    &body,
                    &key,
                )
                .await;
                match result {
                    Ok(r) => {
                        reservation.set(Some(r));
                        remaining.update(|n| {
                            if let Some(n) = n {
                                *n = (*n - 1).max(0)
                            }
                        });
                        break;
                    }
                    // Overloaded or unreachable: retry with the same key, backing off.
                    Err(f) if (f.status == 503 || f.status == 0) && attempt < 5 => {
                        attempt += 1;
                        message.set(Some(format!(
                            "The sale is very busy; retrying ({attempt})…"
                        )));
                        #[cfg(feature = "hydrate")]
                        crate::clock::gloo_timers_sleep(
                            f.retry_after.unwrap_or(1) as u32 * 1000 * attempt,
                        )
                        .await;
                    }
                    Err(f) => {
                        let text = match f.body.error.as_str() {
                            "sold_out" => {
                                remaining.set(Some(0));
                                String::new()
                            }
                            "limit_reached" => {
                                closed.set(true);
                                "You already hold as many units as one shopper may buy.".to_string()
                            }
                            "ended" => {
                                closed.set(true);
                                "The sale has ended.".to_string()
                            }
                            "captcha_invalid" if use_work.get_untracked() => {
                                "Your browser's bot check was refused (it had expired); it is making a new one — try again in a moment.".to_string()
                            }
                            "captcha_invalid" => {
                                load_captcha();
                                "That captcha answer was wrong — here is a new one.".to_string()
                            }
                            "rate_limited" | "blocked" | "overloaded" => {
                                let secs = f.retry_after.unwrap_or(1);
                                wait_until.set(
                                    clock
                                        .now_ms
                                        .get_untracked()
                                        .map(|n| n + secs as f64 * 1000.0),
                                );
                                format!("Too many attempts — you can try again in {secs} s.")
                            }
                            "bad_path" | "not_started" => {
                                load_path();
                                "Please try again.".to_string()
                            }
                            "paused" => {
                                "The sale is paused for a moment; try again shortly.".to_string()
                            }
                            "unauthenticated" => "Please sign in again.".to_string(),
                            "not_admitted" => {
                                "Your turn in the waiting room has lapsed; join the line again."
                                    .to_string()
                            }
                            _ => f.message(),
                        };
                        message.set((!text.is_empty()).then_some(text));
                        break;
                    }
                }
            }
            busy.set(false);
        });
    };

    view! {
        <section class="buy-panel" aria-label="Buy">
            {move || match session.user.get() {
                Some(None) => view! { <p><a href="/login">"Sign in"</a> " to buy."</p> }.into_any(),
                _ => ().into_any(),
            }}
            {move || needs_captcha().then(|| view! {
                <CaptchaInput captcha answer refresh=Callback::new(move |()| load_captcha()) enter=Callback::new(move |()| submit())/>
            })}
            {move || (use_work.get()).then(|| work.map(|work| view! { <WorkStatus work/> }))}
            {(check == BotCheck::Image).then(|| view! {
                <button type="button" class="link" data-testid="use-pow" aria-pressed=move || use_work.get().to_string()
                    on:click=move |_| use_work.update(|w| *w = !*w)>
                    {move || if use_work.get() { "Answer the picture instead" } else { "Can't read the picture? Let your browser do the check instead" }}
                </button>
            })}
            {(activity.per_user_limit > 1).then(|| view! {
                <label for="quantity">"Quantity"</label>
                <input id="quantity" type="number" min="1" max=activity.per_user_limit
                    prop:value=move || quantity.get().to_string()
                    on:input=move |ev| quantity.set(event_target_value(&ev).parse().unwrap_or(1))/>
            })}
            <button type="button" class="buy" data-testid="buy-button" disabled=move || !can_buy() on:click=move |_| submit()>
                {move || if busy.get() { "Buying…" } else { "Buy now" }}
            </button>
            {move || sold_out().then(|| view! {
                <p class="notice" data-testid="sold-out">
                    "Sold out — every unit has found a buyer. Units of unpaid orders may come back; this page reopens by itself if they do."
                </p>
            })}
            <p class="error" role="alert" data-testid="buy-message">{move || message.get()}</p>
            {move || reservation.get().map(|r| view! { <OrderTracker token=r.token initial=r.status/> })}
        </section>
    }
}
