//! A reservation followed to its end: polled with backoff from `queued` to `confirmed` (with the
//! payment deadline counting down and a pay button), then `paid`, or `cancelled` / `failed`.

use crate::{
    api::{OrderStatus, PaymentResult},
    client,
    clock::{countdown_text, parse_ms, ServerClock},
};
use leptos::prelude::*;

#[cfg(feature = "hydrate")]
fn is_final(status: &str) -> bool {
    matches!(status, "paid" | "cancelled" | "failed")
}

fn label(status: &str) -> &'static str {
    match status {
        "queued" => "Queued — your unit is reserved; confirming your order…",
        "confirmed" => "Confirmed — pay before the deadline to keep it",
        "paid" => "Paid — thank you!",
        "cancelled" => "Cancelled",
        "failed" => "Failed — the unit went back on sale",
        _ => "Unknown",
    }
}

#[component]
pub fn OrderTracker(token: String, initial: String) -> impl IntoView {
    let status = RwSignal::new(None::<OrderStatus>);
    let shown = RwSignal::new(initial.clone());
    // Every status this page has shown, in order (tests and curious shoppers read it).
    let history = RwSignal::new(vec![initial]);
    let paying = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let clock = ServerClock::get();

    let record = move |s: OrderStatus| {
        if history.with_untracked(|h| h.last() != Some(&s.status)) {
            history.update(|h| h.push(s.status.clone()));
        }
        shown.set(s.status.clone());
        status.set(Some(s));
    };

    #[cfg(feature = "hydrate")]
    {
        let token = token.clone();
        // Polling ends with a final status or when the page is left (its signals are gone then).
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let (token, alive) = (token.clone(), alive.clone());
            leptos::task::spawn_local(async move {
                let mut delay = 250.0f64;
                loop {
                    let got = client::get::<OrderStatus>(&format!("/api/orders/{token}")).await;
                    if !alive.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    match got {
                        Ok(s) => {
                            let done = is_final(&s.status);
                            let confirmed = s.status == "confirmed";
                            record(s);
                            if done {
                                break;
                            }
                            // Once confirmed, only a cancellation at the deadline can change it.
                            if confirmed {
                                delay = 5_000.0;
                            }
                        }
                        Err(f) => error.set(Some(f.message())),
                    }
                    crate::clock::gloo_timers_sleep(delay as u32).await;
                    delay = (delay * 1.5).min(5_000.0);
                }
            });
        });
    }

    let pay_token = token.clone();
    let pay = move |_| {
        if paying.get_untracked() {
            return;
        }
        paying.set(true);
        error.set(None);
        let token = pay_token.clone();
        leptos::task::spawn_local(async move {
            match client::post::<_, PaymentResult>(&format!("/api/orders/{token}/pay"), &()).await {
                Ok(_) => {
                    if let Ok(s) = client::get::<OrderStatus>(&format!("/api/orders/{token}")).await
                    {
                        record(s);
                    }
                }
                Err(f) => {
                    error.set(Some(f.message()));
                    if let Ok(s) = client::get::<OrderStatus>(&format!("/api/orders/{token}")).await
                    {
                        record(s);
                    }
                }
            }
            paying.set(false);
        });
    };

    let deadline = move || {
        let s = status.get()?;
        if s.status != "confirmed" {
            return None;
        }
        let left = parse_ms(s.pay_by.as_deref()?)? - clock.now_ms.get()?;
        Some(if left > 0.0 {
            format!("Pay within {}", countdown_text(left))
        } else {
            "The payment window has closed".into()
        })
    };

    view! {
        <div class="order">
            // Announced when the status changes (not the deadline below, which ticks every second).
            <p class="status" role="status" aria-live="polite" aria-atomic="true">
                <span class=move || format!("badge {}", shown.get()) data-testid="order-status" data-history=move || history.get().join(",")>
                    {move || shown.get()}
                </span>
                " " {move || label(&shown.get())}
            </p>
            {move || status.get().and_then(|s| s.reason).map(|r| view! { <p class="muted">"Reason: " {r}</p> })}
            {move || status.get().and_then(|s| s.order_id).map(|id| view! { <p class="muted">"Order #" {id}</p> })}
            <p class="deadline" data-testid="pay-deadline">{deadline}</p>
            {move || (shown.get() == "confirmed").then(|| view! {
                <button type="button" data-testid="pay-button" disabled=move || paying.get() on:click=pay.clone()>
                    {move || if paying.get() { "Paying…" } else { "Pay now" }}
                </button>
            })}
            <p class="error" role="alert">{move || error.get()}</p>
            <p class="muted small">"Token " <code>{token.clone()}</code></p>
        </div>
    }
}
