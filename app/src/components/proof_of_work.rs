//! The proof-of-work bot check as the browser does it: the sale page fetches a challenge for
//! the signed-in shopper as soon as it loads (during the countdown), solves it in the wasm
//! (ALTCHA v2, the `altcha` crate), and keeps the solution for the buy, so the start second
//! adds no solving time. A buy spends it; the buy panel asks for another only when the shopper
//! can buy again (not after a success, nor while sold out: no extra request at the busiest
//! second), and one that is about to expire is replaced. Nobody is asked to do anything.

use crate::api::SaleId;
use leptos::prelude::*;

/// A sale page's proof of work (a context: the buy panel reads it, inside a waiting room too).
#[derive(Clone, Copy)]
pub struct Work {
    /// The solved payload for the next buy: base64 of the ALTCHA payload JSON.
    pub payload: RwSignal<Option<String>>,
    /// How long the last solve took in this browser (ms).
    pub solve_ms: RwSignal<Option<f64>>,
    /// Set when no challenge could be had (the message shown).
    pub failure: RwSignal<Option<String>>,
    /// While a challenge is fetched and solved.
    pub solving: RwSignal<bool>,
    /// False once the server said no check is asked (`404`).
    pub asked: RwSignal<bool>,
    /// Bumped to ask for a new solution.
    renewals: RwSignal<u32>,
}

impl Work {
    /// Starts the check for sale `id` once the shopper is known to be signed in.
    pub fn provide(id: SaleId) -> Work {
        Work::provide_at(crate::endpoints::paths::buy_challenge(id), true)
    }

    /// Starts the check whose challenges `url` hands out: at once, or once the visitor is known
    /// to be signed in. A `404` means none is asked: the check ends, nothing shown as failed.
    pub fn provide_at(url: String, signed_in_only: bool) -> Work {
        let work = Work {
            payload: RwSignal::new(None),
            solve_ms: RwSignal::new(None),
            failure: RwSignal::new(None),
            // A check that starts at once is under way from the first render.
            solving: RwSignal::new(!signed_in_only),
            asked: RwSignal::new(true),
            renewals: RwSignal::new(0),
        };
        provide_context(work);
        #[cfg(feature = "hydrate")]
        {
            let session = crate::Session::get();
            let started = StoredValue::new(false);
            let alive = crate::clock::while_mounted();
            Effect::new(move |_| {
                let ready = !signed_in_only || matches!(session.user.get(), Some(Some(_)));
                if ready && !started.get_value() {
                    started.set_value(true);
                    leptos::task::spawn_local(work.run(url.clone(), alive.clone()));
                }
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (url, signed_in_only);
        work
    }

    pub fn get() -> Option<Work> {
        use_context::<Work>()
    }

    /// The solution for a buy (spent by it: the next buy needs [`Work::renew`]).
    pub fn take(self) -> Option<String> {
        let payload = self.payload.get_untracked();
        if payload.is_some() {
            self.payload.set(None);
        }
        payload
    }

    /// Compute a new solution (the last one was spent, refused or is about to expire).
    /// The payload is written only when there is one to drop: an effect that reads it and asks
    /// for a renewal (the buy panel's, mounted before the check has started) would otherwise
    /// wake itself forever.
    pub fn renew(self) {
        if self.payload.with_untracked(Option::is_some) {
            self.payload.set(None);
        }
        self.renewals.update(|n| *n += 1);
    }

    #[cfg(feature = "hydrate")]
    async fn run(self, url: String, alive: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        use crate::clock::gloo_timers_sleep;
        use std::sync::atomic::Ordering;
        /// Replaced this long before it expires.
        const MARGIN_SECS: f64 = 60.0;
        while alive.load(Ordering::Relaxed) {
            let renewals = self.renewals.get_untracked();
            self.solving.set(true);
            let challenge = match crate::client::get::<altcha::Challenge>(&url).await {
                Ok(challenge) => challenge,
                Err(f)
                    if f.body.code() == Some(crate::api::ErrorCode::Ended)
                        || f.status == 404
                        || f.status == 401 =>
                {
                    if f.status == 404 {
                        self.asked.set(false);
                    }
                    self.solving.set(false);
                    return;
                }
                Err(f) => {
                    self.failure.set(Some(f.message()));
                    self.solving.set(false);
                    gloo_timers_sleep(5_000).await;
                    continue;
                }
            };
            // Let the page paint and answer input first: the solve holds the main thread.
            gloo_timers_sleep(0).await;
            let started = js_sys::Date::now();
            let solved = altcha::solve_challenge(altcha::SolveChallengeOptions::new(&challenge));
            let Some(payload) = solved.ok().flatten().and_then(|solution| {
                let json = serde_json::to_string(&altcha::Payload {
                    challenge: challenge.clone(),
                    solution,
                })
                .ok()?;
                web_sys::window()?.btoa(&json).ok()
            }) else {
                self.failure.set(Some(crate::i18n::tr("work.failed")));
                self.solving.set(false);
                return;
            };
            self.solve_ms.set(Some(js_sys::Date::now() - started));
            self.failure.set(None);
            self.payload.set(Some(payload));
            self.solving.set(false);
            let expires_ms =
                challenge.parameters.expires_at.unwrap_or(0) as f64 * 1000.0 - MARGIN_SECS * 1000.0;
            // Until a new one is asked for, or this one is about to expire.
            while alive.load(Ordering::Relaxed)
                && self.renewals.get_untracked() == renewals
                && js_sys::Date::now() < expires_ms
            {
                gloo_timers_sleep(500).await;
            }
        }
    }
}

/// What the check is doing, for everyone (a polite live region: it speaks when it changes).
#[component]
pub fn WorkStatus(work: Work) -> impl IntoView {
    let text = move || match (work.payload.get(), work.failure.get()) {
        (Some(_), _) => crate::i18n::tr("work.passed"),
        (None, Some(failure)) => failure,
        (None, None) => crate::i18n::tr("work.solving"),
    };
    view! {
        <p class="muted" role="status" data-testid="pow-status" hidden=move || !work.asked.get()
            data-ready=move || work.payload.get().is_some().to_string()
            data-solve-ms=move || work.solve_ms.get().map(|ms| format!("{ms:.0}"))>
            {text}
        </p>
    }
}
