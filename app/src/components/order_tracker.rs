//! A reservation followed to its end: polled with backoff from `queued` to `confirmed` (with the
//! payment deadline counting down and a pay button), then `paid`, or `cancelled` / `failed`.

use crate::{
    api::{OrderStatus, OrderView, Token},
    clock::{countdown_text, parse_ms, ServerClock},
    i18n::{tr, tr_with},
};
use leptos::prelude::*;

fn label(status: OrderStatus) -> String {
    tr(match status {
        OrderStatus::Queued => "order.queued",
        OrderStatus::Confirmed => "order.confirmed",
        OrderStatus::Paid => "order.paid",
        OrderStatus::Cancelled => "order.cancelled",
        OrderStatus::Failed => "order.failed",
    })
}

/// The status's badge: its name in the API ("confirmed"), in the page's language.
pub fn badge(status: OrderStatus) -> String {
    tr(match status {
        OrderStatus::Queued => "order.badge.queued",
        OrderStatus::Confirmed => "order.badge.confirmed",
        OrderStatus::Paid => "order.badge.paid",
        OrderStatus::Cancelled => "order.badge.cancelled",
        OrderStatus::Failed => "order.badge.failed",
    })
}

#[component]
pub fn OrderTracker(token: Token, initial: OrderStatus) -> impl IntoView {
    let t = Tracker {
        token,
        status: RwSignal::new(None),
        shown: RwSignal::new(initial),
        history: RwSignal::new(vec![initial]),
        paying: crate::client::action(|t: &Tracker| (*t).pay_now()),
        error: RwSignal::new(None),
        poll_error: RwSignal::new(None),
    };
    #[cfg(feature = "hydrate")]
    {
        // Polling ends with a final status or when the page is left (its signals are gone then).
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move { t.follow(&alive).await });
        });
    }
    let clock = ServerClock::get();
    let (shown, status, paying) = (t.shown, t.status, t.paying.pending());
    view! {
        <div class="order">
            // Announced when the status changes (not the deadline below, which ticks every second).
            <p class="status" role="status" aria-live="polite" aria-atomic="true">
                <span class=move || format!("badge {}", shown.get()) data-testid="order-status" data-history=move || t.history_text()>
                    {move || badge(shown.get())}
                </span>
                " " {move || label(shown.get())}
            </p>
            {move || status.get().and_then(|s| s.reason).map(|r| view! { <p class="muted">{tr_with("order.reason", &[("reason", &r)])}</p> })}
            {move || status.get().and_then(|s| s.order_id).map(|id| view! { <p class="muted">{tr_with("order.number", &[("id", &id.to_string())])}</p> })}
            <p class="deadline" data-testid="pay-deadline">{move || t.deadline(clock)}</p>
            {move || (shown.get() == OrderStatus::Confirmed).then(|| view! {
                <button type="button" data-testid="pay-button" disabled=move || paying.get() on:click=move |_| t.pay()>
                    {move || if paying.get() { tr("order.paying") } else { tr("order.pay") }}
                </button>
            })}
            <p class="error" role="alert" data-testid="order-error">{move || t.error.get().or_else(|| t.poll_error.get())}</p>
            <p class="muted small">{tr("order.token")} " " <code>{token.to_string()}</code></p>
        </div>
    }
}

/// One order's state on the page (signals, so copied into every closure).
#[derive(Clone, Copy)]
struct Tracker {
    token: Token,
    status: RwSignal<Option<OrderView>>,
    shown: RwSignal<OrderStatus>,
    /// Every status this page has shown, in order (tests and curious shoppers read it).
    history: RwSignal<Vec<OrderStatus>>,
    /// The payment on its way (pending while it and the status read after it run).
    paying: Action<Tracker, ()>,
    /// What refused the payment, until the next payment.
    error: RwSignal<Option<String>>,
    /// What the last poll met (a network fault, a 503); gone with the next good answer.
    poll_error: RwSignal<Option<String>>,
}

impl Tracker {
    fn history_text(self) -> String {
        self.history
            .get()
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn record(self, s: OrderView) {
        if self.history.with_untracked(|h| h.last() != Some(&s.status)) {
            self.history.update(|h| h.push(s.status));
        }
        self.shown.set(s.status);
        self.status.set(Some(s));
    }

    /// Polls the status, backing off from 250 ms to 5 s (5 s at once when confirmed: only a
    /// cancellation at the deadline can change it then), until a final status or the page is left.
    #[cfg(feature = "hydrate")]
    async fn follow(self, alive: &std::sync::atomic::AtomicBool) {
        let mut delay = 250.0f64;
        loop {
            let got = crate::endpoints::order(self.token).await;
            if !alive.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            match got {
                Ok(s) => {
                    self.poll_error.set(None);
                    let done = s.status.is_final();
                    let confirmed = s.status == OrderStatus::Confirmed;
                    self.record(s);
                    if done {
                        break;
                    }
                    if confirmed {
                        delay = 5_000.0;
                    }
                }
                Err(f) => self.poll_error.set(Some(f.message())),
            }
            crate::clock::gloo_timers_sleep(delay as u32).await;
            delay = (delay * 1.5).min(5_000.0);
        }
    }

    /// Pays, then shows the status the payment left (paid, or what refused it).
    fn pay(self) {
        if self.paying.pending().get_untracked() {
            return;
        }
        self.error.set(None);
        self.paying.dispatch(self);
    }

    async fn pay_now(self) {
        let paid = crate::endpoints::pay(self.token).await;
        if let Err(f) = paid {
            self.error.set(Some(f.message()));
        }
        if let Ok(s) = crate::endpoints::order(self.token).await {
            self.record(s);
        }
    }

    /// "Pay within 9:59" while confirmed, by the server's clock.
    fn deadline(self, clock: ServerClock) -> Option<String> {
        let s = self.status.get()?;
        if s.status != OrderStatus::Confirmed {
            return None;
        }
        let left = parse_ms(s.pay_by.as_deref()?)? - clock.now_ms.get()?;
        Some(if left > 0.0 {
            tr_with("order.pay_within", &[("left", &countdown_text(left))])
        } else {
            tr("order.window_closed")
        })
    }
}
