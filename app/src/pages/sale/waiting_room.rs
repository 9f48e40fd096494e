//! A sale's waiting room on its page: opening the page joins the line (before the start too:
//! places are drawn at random at the start), the place, how many are ahead and the estimated
//! wait are polled when the server says (`poll_after_ms`) and announced politely to screen
//! readers, and at the shopper's turn the buy panel opens with the admission ticket. "Sold out"
//! reaches everyone still waiting from the stock poll and from the line.

use super::buy_panel::BuyPanel;
use crate::{
    api::{Activity, QueueState, QueueStatus, SaleId},
    components::countdown::Phase,
    i18n::{number as thousands, tr, tr_count, tr_split, tr_with},
    Session,
};
use leptos::prelude::*;

fn eta(secs: i64) -> String {
    match secs {
        s if s < 5 => tr("queue.eta.now"),
        s if s < 90 => tr_with("queue.eta.secs", &[("secs", &thousands(s))]),
        s => tr_with("queue.eta.mins", &[("mins", &thousands((s + 30) / 60))]),
    }
}

/// The odds that a unit is left at the turn of a shopper with `ahead` shoppers before them
/// (those admitted and still buying included), in words: each one ahead may buy up to `per_user`
/// units, and units of unpaid orders may come back, so it is an estimate, said as one.
fn odds(units_left: i64, ahead: i64, per_user: i64) -> String {
    let per_user = per_user.max(1);
    let needed = ahead.saturating_add(1).saturating_mul(per_user);
    if units_left <= 0 {
        tr("queue.odds.none")
    } else if units_left >= needed {
        tr("queue.odds.all")
    } else {
        // Shoppers ahead per unit-sized share of what is left.
        let one_in = (ahead * per_user + units_left - 1) / units_left;
        tr_count(
            "queue.odds.some",
            units_left,
            &[("one_in", &thousands(one_in.max(2)))],
        )
    }
}

#[component]
pub fn WaitingRoom(
    activity: Activity,
    remaining: RwSignal<Option<i64>>,
    live: Memo<Phase>,
    /// Where the join's receipt goes (shown by [`DrawingProof`]).
    receipt: RwSignal<Option<String>>,
) -> impl IntoView {
    let session = Session::get();
    let line = Line {
        id: activity.id,
        status: RwSignal::new(None),
        ticket: RwSignal::new(None),
        error: RwSignal::new(None),
        receipt,
    };
    #[cfg(feature = "hydrate")]
    {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        let alive = crate::clock::while_mounted();
        let polling = std::sync::Arc::new(AtomicBool::new(false));
        Effect::new(move |_| {
            if !matches!(session.user.get(), Some(Some(_))) || polling.swap(true, Relaxed) {
                return;
            }
            let (alive, polling) = (alive.clone(), polling.clone());
            leptos::task::spawn_local(async move {
                line.follow(&alive).await;
                polling.store(false, Relaxed);
            });
        });
    }
    let (status, ticket) = (line.status, line.ticket);
    let per_user = i64::from(activity.per_user_limit);
    // Whether the browser may still be asked to show a notification at the turn (known once
    // hydrated: the server's HTML never offers it).
    let can_ask = RwSignal::new(false);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| can_ask.set(crate::notify::askable()));
    let ask = Callback::new(move |()| {
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            crate::notify::ask().await;
            can_ask.set(crate::notify::askable());
        });
    });
    // `None` while joining.
    let state = Signal::derive(move || {
        if remaining.get() == Some(0) && live.get() == Phase::Live && ticket.get().is_none() {
            return Some(QueueState::SoldOut);
        }
        status.with(|s| s.as_ref().map(|s| s.state))
    });
    let sign_in = tr_split("queue.sign_in");
    view! {
        <section class="waiting-room" aria-label=tr("queue.label") data-testid="waiting-room" data-state=move || state.get().map_or("joining", QueueState::as_str)>
            <p hidden=move || session.user.get() != Some(None)>{sign_in.0}<a href="/login">{tr("header.sign_in")}</a>{sign_in.1}</p>
            <div aria-live="polite" aria-atomic="true" hidden=move || session.user.get() == Some(None)>
                <LineWords state status per_user again=Callback::new(move |()| line.join_again())/>
            </div>
            <p hidden=move || !can_ask.get() || !matches!(state.get(), Some(QueueState::Drawing | QueueState::Waiting | QueueState::Paused))>
                <button type="button" class="secondary" data-testid="queue-notify" on:click=move |_| ask.run(())>
                    {tr("queue.notify")}
                </button>
                " " {tr("queue.notify.note")}
            </p>
            <p class="error" role="alert">{move || line.error.get()}</p>
            {move || match ticket.get() {
                Some(t) if live.get() == Phase::Live => view! {
                    <BuyPanel activity=activity.clone() remaining admission=Signal::stored(Some(t))/>
                }.into_any(),
                _ => view! {
                    <button type="button" data-testid="buy-button" disabled=true>{tr("buy.now")}</button>
                }.into_any(),
            }}
        </section>
    }
}

/// The shopper's place in the line, as the server last said it.
#[derive(Clone, Copy)]
struct Line {
    /// The sale; its line's board (`GET …/line`) is the same for everyone.
    id: SaleId,
    status: RwSignal<Option<QueueStatus>>,
    /// Set once at the shopper's turn; the buy panel keeps it (the line is not polled after).
    ticket: RwSignal<Option<String>>,
    error: RwSignal<Option<String>>,
    /// The signed join receipt of a place drawn before the start (set by the polling, which
    /// only the browser does).
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    receipt: RwSignal<Option<String>>,
}

impl Line {
    /// Joins the line, then follows it at the pace the server asks, until the shopper's turn or
    /// the end of the sale (or the page is left); joins again when the server forgot the place.
    /// Once the place is numbered, the page reads the line's board (the same small document for
    /// everyone, cached by the CDN) and works out where it stands itself; it asks the server
    /// only when its turn has come.
    #[cfg(feature = "hydrate")]
    async fn follow(self, alive: &std::sync::atomic::AtomicBool) {
        use crate::endpoints;
        use std::sync::atomic::Ordering::Relaxed;
        let id = self.id;
        let mut join = true;
        let mut place: Option<i64> = None;
        while alive.load(Relaxed) {
            // A hidden tab does not poll (Page Visibility): it asks again as soon as it is shown;
            // unless the shopper asked to be notified at the turn, which it must see come.
            if tab_hidden() && !crate::notify::granted() {
                crate::clock::gloo_timers_sleep(500).await;
                continue;
            }
            let answer = if join {
                endpoints::join_line(id, &crate::api::JoinQueue::default()).await
            } else if let Some(p) = place {
                let jitter = (js_sys::Math::random() * 500.0) as i64;
                match endpoints::line_board(id).await {
                    Ok(board) => match board.status_of(p, jitter) {
                        Some(s) => Ok(s),
                        None => endpoints::place_in_line(id).await,
                    },
                    Err(f) => Err(f),
                }
            } else {
                endpoints::place_in_line(id).await
            };
            let delay = match answer {
                Ok(s) => {
                    join = s.state == QueueState::NotJoined;
                    if s.receipt.is_some() {
                        self.receipt.set(s.receipt.clone());
                    }
                    if s.place.is_some() {
                        place = s.place;
                    }
                    // A place that had its turn is asked about on the server, not the board.
                    if matches!(s.state, QueueState::Passed | QueueState::NotJoined) {
                        place = None;
                    }
                    self.error.set(None);
                    let delay = s.poll_after_ms;
                    if s.state == QueueState::Admitted {
                        self.ticket.set(s.ticket.clone());
                        if tab_hidden() {
                            crate::notify::turn();
                        }
                    }
                    let done = matches!(s.state, QueueState::Admitted | QueueState::Ended);
                    self.status.set(Some(s));
                    if done {
                        break;
                    }
                    delay
                }
                Err(f) => {
                    self.error.set(Some(f.message()));
                    2_000
                }
            };
            crate::clock::gloo_timers_sleep(delay.clamp(250, 30_000) as u32).await;
        }
    }

    /// After a turn that came and went: a new place at the back of the line.
    fn join_again(self) {
        leptos::task::spawn_local(async move {
            let again = crate::api::JoinQueue { again: Some(true) };
            match crate::endpoints::join_line(self.id, &again).await {
                Ok(s) => self.status.set(Some(s)),
                Err(f) => self.error.set(Some(f.message())),
            }
        });
    }
}

/// The drawing's proof on the page: the seed's hash before the line opens, the seed once it
/// is published (a little after the start), the shopper's receipt, and where to check.
#[component]
pub fn DrawingProof(
    id: SaleId,
    commitment: String,
    seed: Option<String>,
    receipt: RwSignal<Option<String>>,
    live: Memo<Phase>,
) -> impl IntoView {
    let seed = RwSignal::new(seed);
    #[cfg(feature = "hydrate")]
    {
        let asking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        Effect::new(move |_| {
            use std::sync::atomic::Ordering::Relaxed;
            if live.get() != Phase::Live
                || seed.get_untracked().is_some()
                || asking.swap(true, Relaxed)
            {
                return;
            }
            leptos::task::spawn_local(async move {
                for _ in 0..30 {
                    if let Ok(d) = crate::endpoints::drawing(id).await {
                        if d.seed.is_some() {
                            seed.set(d.seed);
                            return;
                        }
                    }
                    crate::clock::gloo_timers_sleep(2_000).await;
                }
            });
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = live;
    view! {
        <details class="drawing" data-testid="drawing">
            <summary>{tr("drawing.summary")}</summary>
            <p class="muted">
                {tr("drawing.explained")}
            </p>
            <p>{tr("drawing.fingerprint")} " " <code class="hash" data-testid="drawing-commitment">{commitment}</code></p>
            <p>
                {tr("drawing.seed")} " "
                {move || match seed.get() {
                    Some(s) => view! { <code class="hash" data-testid="drawing-seed">{s}</code> }.into_any(),
                    None => view! { <span class="muted" data-testid="drawing-seed-pending">{tr("drawing.seed_pending")}</span> }.into_any(),
                }}
            </p>
            {move || receipt.get().map(|r| view! {
                <p>{tr("drawing.receipt")} " " <code class="hash" data-testid="drawing-receipt">{r}</code></p>
            })}
            <p><a href={crate::endpoints::paths::drawing(id)}>{tr("drawing.published")}</a></p>
        </details>
    }
}

/// Whether the page is in a tab the shopper does not see.
#[cfg(feature = "hydrate")]
fn tab_hidden() -> bool {
    web_sys::window()
        .and_then(|w| w.document())
        .is_some_and(|d| d.hidden())
}

/// What the line's state means, in words.
#[component]
fn LineWords(
    state: Signal<Option<QueueState>>,
    status: RwSignal<Option<QueueStatus>>,
    per_user: i64,
    again: Callback<()>,
) -> impl IntoView {
    let field = move |f: fn(&QueueStatus) -> Option<i64>| status.with(|s| s.as_ref().and_then(f));
    move || {
        let Some(state) = state.get() else {
            return view! { <p>{tr("queue.joining")}</p> }.into_any();
        };
        match state {
        QueueState::Drawing => view! {
            <p>{tr("queue.drawing")}</p>
            <p class="muted" data-testid="queue-waiting">{move || tr_count("queue.waiting", status.with(|s| s.as_ref().map_or(0, |s| s.waiting)), &[])}</p>
        }.into_any(),
        QueueState::Waiting => view! {
            <p class="queue-place">
                {tr("queue.place")} " "
                <strong data-testid="queue-position">{move || field(|s| s.position).map(thousands)}</strong>
            </p>
            <p class="muted">
                <span data-testid="queue-ahead">{move || field(|s| s.ahead).map(thousands)}</span>
                {tr("queue.ahead")}
                <span data-testid="queue-eta">{move || field(|s| s.estimated_wait_secs).map(eta)}</span>
                {tr("queue.keep_open")}
            </p>
            <p class="muted" data-testid="queue-odds">
                {move || status.with(|s| s.as_ref().and_then(|s| {
                    Some(odds(s.units_left?, s.ahead? + s.buying.unwrap_or(0), per_user))
                }))}
            </p>
        }.into_any(),
        QueueState::Paused => {
            let paused = tr_split("queue.paused");
            view! {
            <p class="notice" data-testid="queue-paused">
                {paused.0}
                <strong data-testid="queue-position">{move || field(|s| s.position).map(thousands)}</strong>
                {paused.1}
            </p>
        }.into_any()
        },
        QueueState::Admitted => view! {
            <p class="queue-turn" data-testid="queue-admitted">{tr("queue.turn")}</p>
        }.into_any(),
        QueueState::SoldOut => view! {
            <p class="notice" data-testid="queue-sold-out">
                {tr("queue.sold_out")}
            </p>
        }.into_any(),
        QueueState::Passed => view! {
            <p>{tr("queue.passed")}</p>
            <button type="button" data-testid="queue-again" on:click=move |_| again.run(())>{tr("queue.again")}</button>
        }.into_any(),
        QueueState::Ended => view! { <p class="notice">{tr("sale.ended")}</p> }.into_any(),
        QueueState::NotJoined | QueueState::Open => view! { <p>{tr("queue.open")}</p> }.into_any(),
    }
    }
}

#[cfg(test)]
mod tests {
    use super::odds;

    #[test]
    fn the_odds_say_how_many_ahead_will_find_a_unit() {
        assert_eq!(
            odds(100, 30, 1),
            "There are units left for everyone ahead of you, and for you."
        );
        assert_eq!(
            odds(1_000, 2_999, 1),
            "1,000 units left: about 1 in 3 of those ahead of you will find one."
        );
        // Two units each: 1,000 units are 500 shoppers' worth.
        assert_eq!(
            odds(1_000, 1_500, 2),
            "1,000 units left: about 1 in 3 of those ahead of you will find one."
        );
        assert!(odds(0, 10, 1).starts_with("No units are left"));
    }
}
