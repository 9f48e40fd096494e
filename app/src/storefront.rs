//! The shopper's pages: the list of sales and one sale with its countdown and buy panel.
//! The HTML carries no per-user data (it is cacheable); everything live comes after hydration.

use crate::{
    api::{Activity, BuyPath, Captcha, Reservation},
    client,
    clock::{countdown_text, parse_ms, ServerClock},
    data,
    orders::OrderTracker,
    Session,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

/// Text for the document `<title>`. leptos_meta writes it into the HTML unescaped, so a title
/// holding `</title><script>` would break out of it: angle brackets become look-alikes there
/// (the page body shows the exact text, escaped as usual).
pub(crate) fn page_title(text: &str) -> String {
    format!("{} — Seckill", text.replace('<', "‹").replace('>', "›"))
}

pub(crate) fn money(cents: i64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// The server clock is not known yet (before hydration and the first sync).
    Unknown,
    Upcoming,
    Live,
    Ended,
}

fn phase(a: &Activity, now: Option<f64>) -> (Phase, f64) {
    let (Some(now), Some(starts), Some(ends)) = (now, parse_ms(&a.starts_at), parse_ms(&a.ends_at)) else {
        return (Phase::Unknown, 0.0);
    };
    if now < starts {
        (Phase::Upcoming, starts - now)
    } else if now < ends {
        (Phase::Live, ends - now)
    } else {
        (Phase::Ended, 0.0)
    }
}

/// "Starts in 01:02", "Ends in 10:00" or "Ended", from the server's clock.
#[component]
fn Countdown(activity: Activity) -> impl IntoView {
    let clock = ServerClock::get();
    let starts = activity.starts_at.clone();
    let text = move || match phase(&activity, clock.now_ms.get()) {
        (Phase::Unknown, _) => format!("Starts {starts}"),
        (Phase::Upcoming, ms) => format!("Starts in {}", countdown_text(ms)),
        (Phase::Live, ms) => format!("On sale — ends in {}", countdown_text(ms)),
        (Phase::Ended, _) => "Ended".to_string(),
    };
    view! { <p class="countdown" data-testid="countdown" aria-live="off">{text}</p> }
}

#[component]
pub fn Home() -> impl IntoView {
    let activities = data::activities();
    view! {
        <Title text="Seckill — flash sales"/>
        <section class="hero">
            <h1>"Flash sales"</h1>
            <p>"A few units, one instant, a fair chance for everyone who is there on time."</p>
        </section>
        <Suspense fallback=|| view! { <p>"Loading sales…"</p> }>
            {move || activities.get().map(|r| match r {
                Ok(list) if list.is_empty() => view! { <p>"No sales yet. Come back soon."</p> }.into_any(),
                Ok(list) => view! {
                    <ul class="cards">
                        {list.into_iter().map(|a| view! { <ActivityCard activity=a/> }).collect_view()}
                    </ul>
                }.into_any(),
                Err(e) => view! { <p class="error" role="alert">"Could not load the sales: " {e}</p> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn ActivityCard(activity: Activity) -> impl IntoView {
    let href = format!("/activities/{}", activity.id);
    view! {
        <li class="card activity-card" data-testid="activity-card">
            <a href=href class="card-link">
                <h2>{activity.title.clone()}</h2>
            </a>
            <p class="price">
                <span class="now">{money(activity.seckill_price_cents)}</span>
                " " <s class="was">{money(activity.price_cents)}</s>
            </p>
            <p class="muted">{activity.total_stock} " units"</p>
            <Countdown activity=activity/>
        </li>
    }
}

#[component]
pub fn ActivityPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").and_then(|id| id.parse::<i64>().ok());
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
    let remaining = RwSignal::new(None::<i64>);
    // Remaining stock, refreshed while the page is open (the API allows it to be 1 s stale).
    #[cfg(feature = "hydrate")]
    let id = activity.id;
    #[cfg(feature = "hydrate")]
    let alive = crate::clock::while_mounted();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let alive = alive.clone();
        leptos::task::spawn_local(async move {
            // Until the page is left.
            while alive.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(r) = client::get::<crate::api::Remaining>(&format!("/api/activities/{id}/stock")).await {
                    remaining.try_set(Some(r.remaining));
                }
                crate::clock::gloo_timers_sleep(2_000).await;
            }
        });
    });
    let a = activity.clone();
    let live_phase = Memo::new(move |_| phase(&a, clock.now_ms.get()).0);
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
            <p class="muted">
                "Stock left: "
                <strong data-testid="stock-remaining">{move || remaining.get().map_or("…".to_string(), |r| r.to_string())}</strong>
                " of " {activity.total_stock}
                " · at most " {activity.per_user_limit} " per shopper"
            </p>
            <Countdown activity=activity.clone()/>
            {move || match live_phase.get() {
                Phase::Live => view! { <BuyPanel activity=activity.clone() remaining/> }.into_any(),
                Phase::Ended => view! { <p class="notice">"This sale has ended."</p> }.into_any(),
                _ => view! {
                    <button type="button" data-testid="buy-button" disabled=true>"Buy now"</button>
                    <p class="muted">"The buy button opens when the sale starts."</p>
                }.into_any(),
            }}
        </article>
    }
}

fn new_key() -> String {
    #[cfg(feature = "hydrate")]
    {
        let mut bytes = [0u8; 16];
        if let Some(crypto) = web_sys::window().and_then(|w| w.crypto().ok()) {
            let _ = crypto.get_random_values_with_u8_array(&mut bytes);
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
    #[cfg(not(feature = "hydrate"))]
    String::new()
}

#[component]
fn BuyPanel(activity: Activity, remaining: RwSignal<Option<i64>>) -> impl IntoView {
    let session = Session::get();
    let id = activity.id;
    let needs_captcha = activity.captcha_required;
    let path = RwSignal::new(None::<String>);
    let captcha = RwSignal::new(None::<Captcha>);
    let answer = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    // Closed for good on this page (sold out, limit reached, ended).
    let closed = RwSignal::new(false);
    let wait_until = RwSignal::new(None::<f64>);
    let message = RwSignal::new(None::<String>);
    let reservation = RwSignal::new(None::<Reservation>);
    let quantity = RwSignal::new(1i64);

    let load_captcha = move || {
        if !needs_captcha {
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
    let waiting = move || wait_until.get().zip(clock.now_ms.get()).is_some_and(|(until, now)| now < until);
    let can_buy = move || {
        !busy.get()
            && !closed.get()
            && !waiting()
            && reservation.get().is_none()
            && path.get().is_some()
            && (!needs_captcha || !answer.get().trim().is_empty())
    };

    let submit = move || {
        if !can_buy() {
            return;
        }
        busy.set(true);
        message.set(None);
        let key = new_key();
        let body = buy_request(path.get_untracked().unwrap_or_default(), needs_captcha.then(|| captcha.get_untracked().map(|c| c.id)).flatten(), answer.get_untracked(), quantity.get_untracked());
        leptos::task::spawn_local(async move {
            let mut attempt = 0u32;
            loop {
                let result = client::post_with_key::<_, Reservation>(&format!("/api/activities/{id}/buy"), &body, &key).await;
                match result {
                    Ok(r) => {
                        reservation.set(Some(r));
                        remaining.update(|n| if let Some(n) = n { *n = (*n - 1).max(0) });
                        break;
                    }
                    // Overloaded or unreachable: retry with the same key, backing off.
                    Err(f) if (f.status == 503 || f.status == 0) && attempt < 5 => {
                        attempt += 1;
                        message.set(Some(format!("The sale is very busy; retrying ({attempt})…")));
                        #[cfg(feature = "hydrate")]
                        crate::clock::gloo_timers_sleep(f.retry_after.unwrap_or(1) as u32 * 1000 * attempt).await;
                    }
                    Err(f) => {
                        let text = match f.body.error.as_str() {
                            "sold_out" => {
                                closed.set(true);
                                "Sold out — every unit has found a buyer.".to_string()
                            }
                            "limit_reached" => {
                                closed.set(true);
                                "You already hold as many units as one shopper may buy.".to_string()
                            }
                            "ended" => {
                                closed.set(true);
                                "The sale has ended.".to_string()
                            }
                            "captcha_invalid" => {
                                load_captcha();
                                "That captcha answer was wrong — here is a new one.".to_string()
                            }
                            "rate_limited" | "blocked" | "overloaded" => {
                                let secs = f.retry_after.unwrap_or(1);
                                wait_until.set(clock.now_ms.get_untracked().map(|n| n + secs as f64 * 1000.0));
                                format!("Too many attempts — you can try again in {secs} s.")
                            }
                            "bad_path" | "not_started" => {
                                load_path();
                                "Please try again.".to_string()
                            }
                            "paused" => "The sale is paused for a moment; try again shortly.".to_string(),
                            "unauthenticated" => "Please sign in again.".to_string(),
                            _ => f.message(),
                        };
                        message.set(Some(text));
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
            {move || needs_captcha.then(|| view! {
                <div class="captcha">
                    {move || captcha.get().map(|c| view! {
                        <button type="button" class="captcha-refresh" title="Show another captcha" on:click=move |_| load_captcha()>
                            <img data-testid="captcha-image" src=c.image alt="Captcha: type the characters shown" width="200" height="70"/>
                        </button>
                    })}
                    <label for="captcha-input">"Type the characters in the picture"</label>
                    <input id="captcha-input" data-testid="captcha-input" autocomplete="off" maxlength="16" bind:value=answer
                        on:keydown=move |ev| if ev.key() == "Enter" { submit() }/>
                </div>
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
            <p class="error" role="alert" data-testid="buy-message">{move || message.get()}</p>
            {move || reservation.get().map(|r| view! { <OrderTracker token=r.token initial=r.status/> })}
        </section>
    }
}

fn buy_request(path: String, captcha_id: Option<String>, answer: String, quantity: i64) -> crate::api::BuyRequest {
    crate::api::BuyRequest {
        path,
        captcha_answer: captcha_id.as_ref().map(|_| answer.trim().to_string()),
        captcha_id,
        quantity: Some(quantity),
    }
}
