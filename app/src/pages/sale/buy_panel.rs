//! The buy itself: the buy path fetched at the start, the bot check (the image captcha, or the
//! browser's proof of work), the quantity, the buy with its `Idempotency-Key` (retried with the
//! same key while the sale is busy), the refusals in words, then the order tracker.

use crate::{
    api::{Activity, BotCheck, BuyRequest, Captcha, ErrorCode, Reservation, SaleId},
    client::{self, Failure},
    clock::ServerClock,
    components::{
        captcha::CaptchaInput,
        order_tracker::OrderTracker,
        proof_of_work::{Work, WorkStatus},
    },
    i18n::{tr, tr_split, tr_with},
    Session,
};
use leptos::prelude::*;

/// The buy. `admission`: the waiting room's ticket, when the sale has one.
#[component]
pub fn BuyPanel(
    activity: Activity,
    remaining: RwSignal<Option<i64>>,
    admission: Signal<Option<String>>,
) -> impl IntoView {
    let session = Session::get();
    let panel = Panel::new(&activity, remaining, admission);
    // At the start instant (this panel appears then): the path and the captcha, for signed-in shoppers.
    Effect::new(move |_| {
        if matches!(session.user.get(), Some(Some(_))) && panel.path.get_untracked().is_none() {
            panel.load_path();
            panel.load_captcha();
        }
    });
    Effect::new(move |_| panel.renew_work_when_it_can_be_used());
    let (check, limit, quantity) = (panel.check, activity.per_user_limit, panel.quantity);
    view! {
        <section class="buy-panel" aria-label=tr("buy.label")>
            {move || match session.user.get() {
                Some(None) => {
                    let (ahead, behind) = tr_split("buy.sign_in_to_buy");
                    view! { <p>{ahead}<a href="/login">{tr("header.sign_in")}</a>{behind}</p> }.into_any()
                }
                _ => ().into_any(),
            }}
            {move || panel.needs_captcha().then(|| view! {
                <CaptchaInput captcha=panel.captcha answer=panel.answer
                    refresh=Callback::new(move |()| panel.load_captcha()) enter=Callback::new(move |()| panel.submit())/>
            })}
            {move || panel.use_work.get().then(|| panel.work.map(|work| view! { <WorkStatus work/> }))}
            {(check == BotCheck::Image).then(|| view! { <CheckSwitch use_work=panel.use_work/> })}
            {(limit > 1).then(|| view! {
                <label for="quantity">{tr("buy.quantity")}</label>
                <input id="quantity" type="number" min="1" max=limit value="1"
                    prop:value=move || quantity.get().to_string()
                    on:input=move |ev| quantity.set(event_target_value(&ev).parse().unwrap_or(1))/>
            })}
            <button type="button" class="buy" data-testid="buy-button" disabled=move || !panel.can_buy() on:click=move |_| panel.submit()>
                {move || if panel.buying.pending().get() { tr("buy.buying") } else { tr("buy.now") }}
            </button>
            {move || panel.sold_out().then(|| view! {
                <p class="notice" data-testid="sold-out">
                    {tr("buy.sold_out")}
                </p>
            })}
            // Until the app runs the button cannot buy (the buy carries the browser's proof of
            // work): the page says so, and without scripts says what it needs.
            {move || (!session.hydrated.get()).then(|| view! {
                <p class="muted with-scripts" data-testid="app-starting">{tr("buy.app_starting")}</p>
            })}
            <p class="notice without-scripts" data-testid="needs-scripts">{tr("buy.needs_scripts")}</p>
            <p class="error" role="alert" data-testid="buy-message">{move || panel.message.get()}</p>
            {move || panel.reservation.get().map(|r| view! { <OrderTracker token=r.token initial=r.status/> })}
        </section>
    }
}

/// On an image-captcha sale: the browser's proof of work instead, or back to the picture.
#[component]
fn CheckSwitch(use_work: RwSignal<bool>) -> impl IntoView {
    view! {
        <button type="button" class="link" data-testid="use-pow" aria-pressed=move || use_work.get().to_string()
            on:click=move |_| use_work.update(|w| *w = !*w)>
            {move || if use_work.get() { tr("buy.use_picture") } else { tr("buy.use_work") }}
        </button>
    }
}

/// The panel's state (signals, so copied into every closure) and its steps.
#[derive(Clone, Copy)]
struct Panel {
    id: SaleId,
    check: BotCheck,
    work: Option<Work>,
    clock: ServerClock,
    remaining: RwSignal<Option<i64>>,
    admission: Signal<Option<String>>,
    /// The proof of work is the check, or the image's alternative the shopper chose.
    use_work: RwSignal<bool>,
    path: RwSignal<Option<String>>,
    captcha: RwSignal<Option<Captcha>>,
    answer: RwSignal<String>,
    /// The buy on its way: (the panel, its body, its `Idempotency-Key`). Pending while it and
    /// its retries run.
    buying: Action<(Panel, BuyRequest, String), ()>,
    /// Closed for good on this page (limit reached, ended). Sold out is `remaining == 0`: it
    /// reopens when units come back.
    closed: RwSignal<bool>,
    /// Told to wait (rate limited, blocked, overloaded) until this server instant.
    wait_until: RwSignal<Option<f64>>,
    message: RwSignal<Option<String>>,
    reservation: RwSignal<Option<Reservation>>,
    quantity: RwSignal<i64>,
}

impl Panel {
    fn new(
        activity: &Activity,
        remaining: RwSignal<Option<i64>>,
        admission: Signal<Option<String>>,
    ) -> Panel {
        Panel {
            id: activity.id,
            check: activity.bot_check,
            work: Work::get(),
            clock: ServerClock::get(),
            remaining,
            admission,
            use_work: RwSignal::new(activity.bot_check == BotCheck::ProofOfWork),
            path: RwSignal::new(None),
            captcha: RwSignal::new(None),
            answer: RwSignal::new(String::new()),
            buying: crate::client::action(|(panel, body, key): &(Panel, BuyRequest, String)| {
                let (panel, body, key) = (*panel, body.clone(), key.clone());
                async move { panel.send(&body, &key).await }
            }),
            closed: RwSignal::new(false),
            wait_until: RwSignal::new(None),
            message: RwSignal::new(None),
            reservation: RwSignal::new(None),
            quantity: RwSignal::new(1),
        }
    }

    fn needs_captcha(self) -> bool {
        self.check == BotCheck::Image && !self.use_work.get()
    }

    fn sold_out(self) -> bool {
        self.remaining.get() == Some(0)
    }

    fn waiting(self) -> bool {
        self.wait_until
            .get()
            .zip(self.clock.now_ms.get())
            .is_some_and(|(until, now)| now < until)
    }

    /// Open, not busy, nothing bought yet, the path in hand and the bot check ready.
    fn can_buy(self) -> bool {
        !self.buying.pending().get()
            && !self.closed.get()
            && !self.sold_out()
            && !self.waiting()
            && self.reservation.get().is_none()
            && self.path.get().is_some()
            && match self.check {
                BotCheck::None => true,
                _ if self.use_work.get() => self.work.is_some_and(|w| w.payload.get().is_some()),
                _ => !self.answer.get().trim().is_empty(),
            }
    }

    fn load_captcha(self) {
        if self.check != BotCheck::Image {
            return;
        }
        self.answer.set(String::new());
        leptos::task::spawn_local(async move {
            match crate::endpoints::captcha().await {
                Ok(c) => self.captcha.set(Some(c)),
                Err(f) => self.message.set(Some(f.message())),
            }
        });
    }

    fn load_path(self) {
        leptos::task::spawn_local(async move {
            match crate::endpoints::buy_path(self.id).await {
                Ok(p) => self.path.set(Some(p.path)),
                Err(f) => self.message.set(Some(f.message())),
            }
        });
    }

    /// A spent or refused proof of work is replaced only when the shopper can buy again: not
    /// after a success, not while sold out (it is when units come back).
    fn renew_work_when_it_can_be_used(self) {
        let Some(work) = self.work else { return };
        let can_try_again = self.use_work.get()
            && !self.buying.pending().get()
            && !self.closed.get()
            && !self.sold_out()
            && self.reservation.get().is_none();
        if can_try_again && work.payload.get().is_none() && !work.solving.get() {
            work.renew();
        }
    }

    /// The buy's body: the path, the captcha answer or the proof of work, the quantity, the ticket.
    fn request(self) -> BuyRequest {
        let captcha_id = untrack(|| self.needs_captcha())
            .then(|| self.captcha.get_untracked().map(|c| c.id))
            .flatten();
        let pow = self
            .use_work
            .get_untracked()
            .then(|| self.work.and_then(|w| w.take()))
            .flatten();
        BuyRequest {
            path: self.path.get_untracked().unwrap_or_default(),
            captcha_answer: captcha_id
                .as_ref()
                .map(|_| self.answer.get_untracked().trim().to_string()),
            captcha_id,
            quantity: Some(self.quantity.get_untracked()),
            admission: self.admission.get_untracked(),
            pow,
        }
    }

    fn submit(self) {
        if !self.can_buy() {
            return;
        }
        self.message.set(None);
        self.buying
            .dispatch((self, self.request(), client::new_key()));
    }

    /// The buy, tried again with the same key (backing off) while the sale is overloaded or
    /// out of reach, at most five times.
    async fn send(self, body: &BuyRequest, key: &str) {
        let mut attempt = 0u32;
        loop {
            match crate::endpoints::buy(self.id, body, key).await {
                Ok(r) => {
                    self.reservation.set(Some(r));
                    self.remaining.update(|n| *n = n.map(|n| (n - 1).max(0)));
                    return;
                }
                Err(f) if (f.status == 503 || f.status == 0) && attempt < 5 => {
                    attempt += 1;
                    self.message.set(Some(tr_with(
                        "buy.retrying",
                        &[("attempt", &attempt.to_string())],
                    )));
                    #[cfg(feature = "hydrate")]
                    crate::clock::gloo_timers_sleep(
                        f.retry_after.unwrap_or(1) as u32 * 1000 * attempt,
                    )
                    .await;
                }
                Err(f) => {
                    let text = self.refused(&f);
                    self.message.set((!text.is_empty()).then_some(text));
                    return;
                }
            }
        }
    }

    /// What a refusal means to the shopper, and what the panel does about it (closes, waits,
    /// fetches a new path or captcha); empty when the page says it otherwise (sold out).
    fn refused(self, f: &Failure) -> String {
        match f.body.code() {
            Some(ErrorCode::SoldOut) => {
                self.remaining.set(Some(0));
                String::new()
            }
            Some(ErrorCode::LimitReached) => {
                self.closed.set(true);
                tr("buy.limit_reached")
            }
            Some(ErrorCode::Ended) => {
                self.closed.set(true);
                tr("buy.ended")
            }
            Some(ErrorCode::CaptchaInvalid) if self.use_work.get_untracked() => {
                tr("buy.work_refused")
            }
            Some(ErrorCode::CaptchaInvalid) => {
                self.load_captcha();
                tr("buy.captcha_wrong")
            }
            Some(ErrorCode::RateLimited | ErrorCode::Blocked | ErrorCode::Overloaded) => {
                let secs = f.retry_after.unwrap_or(1);
                let now = self.clock.now_ms.get_untracked();
                self.wait_until.set(now.map(|n| n + secs as f64 * 1000.0));
                tr_with("buy.wait", &[("secs", &secs.to_string())])
            }
            Some(ErrorCode::BadPath | ErrorCode::NotStarted) => {
                self.load_path();
                tr("buy.try_again")
            }
            Some(ErrorCode::Paused) => tr("buy.paused"),
            Some(ErrorCode::Unauthenticated) => tr("buy.sign_in_again"),
            Some(ErrorCode::NotAdmitted) => tr("buy.turn_lapsed"),
            _ => f.message(),
        }
    }
}
