//! The emergency cord in a console: whether a stop holds, a reason, and the pull that stops
//! every sale (of the merchant's shop, or for the operator of the platform) or lifts the stop;
//! the newest pulls under it. `FailOpenSwitch` is a sale's fail-open on its dashboard.

use crate::{
    api::{Activity, CordState, SaleId},
    clock::console_time,
    i18n::{tr, tr_with},
};
use leptos::prelude::*;

#[component]
pub fn CordSwitch(operator: bool) -> impl IntoView {
    let state = RwSignal::new(None::<Result<CordState, String>>);
    let reason = RwSignal::new(String::new());
    let changes = RwSignal::new(0u32);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        changes.track();
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::cord(operator).await;
            state.try_set(Some(got.map_err(|f| f.message())));
        });
    });
    // Its value: what the last pull did, or why it was refused.
    let pull = crate::client::action(move |(stop, why): &(bool, String)| {
        let (stop, why) = (*stop, why.clone());
        async move {
            let said = match crate::endpoints::pull_cord(operator, stop, why).await {
                Ok(p) => (
                    true,
                    tr_with("cord.done", &[("n", &p.sales.len().to_string())]),
                ),
                Err(f) => (false, f.message()),
            };
            if said.0 {
                reason.set(String::new());
            }
            changes.update(|c| *c += 1);
            said
        }
    });
    let busy = pull.pending();
    let stopped = move || {
        state.with(|s| match s {
            Some(Ok(s)) if operator => s.platform_stopped,
            Some(Ok(s)) => !s.shops_stopped.is_empty(),
            _ => false,
        })
    };
    let platform =
        move || state.with(|s| matches!(s, Some(Ok(s)) if s.platform_stopped && !operator));
    let send = move |stop: bool| {
        if !busy.get_untracked() {
            pull.dispatch((stop, reason.get_untracked()));
        }
    };
    view! {
        <section class="card cord" data-testid="cord">
            <h2>{tr("cord.title")}</h2>
            <p class="muted">{tr(if operator { "cord.note_platform" } else { "cord.note_shop" })}</p>
            <p role="status" data-testid="cord-state">
                {move || tr(if stopped() { "cord.stopped" } else { "cord.running" })}
            </p>
            {move || platform().then(|| view! { <p class="notice" data-testid="cord-platform-stopped">{tr("cord.platform_stopped")}</p> })}
            <label for="cord-reason">{tr("cord.reason")}</label>
            <input id="cord-reason" data-testid="cord-reason" maxlength="500" autocomplete="off"
                prop:value=move || reason.get() on:input=move |ev| reason.set(event_target_value(&ev))/>
            <div class="inline">
                <button type="button" class="danger" data-testid="cord-stop"
                    disabled=move || busy.get() || stopped() || reason.with(|r| r.trim().is_empty())
                    on:click=move |_| send(true)>{tr("cord.stop")}</button>
                " "
                <button type="button" class="secondary" data-testid="cord-release"
                    disabled=move || busy.get() || !stopped() || reason.with(|r| r.trim().is_empty())
                    on:click=move |_| send(false)>{tr("cord.release")}</button>
            </div>
            {move || pull.value().get().map(|(ok, m)| view! {
                <p class=if ok { "ok" } else { "error" } role="status" data-testid="cord-message">{m}</p>
            })}
            <PullList state/>
        </section>
    }
}

/// The newest pulls (at most ten), or why they could not be read.
#[component]
fn PullList(state: RwSignal<Option<Result<CordState, String>>>) -> impl IntoView {
    view! {
        {move || match state.get() {
            Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
            Some(Ok(s)) if !s.pulls.is_empty() => view! {
                <ul class="audit" data-testid="cord-pulls">
                    {s.pulls.into_iter().take(10).map(|p| view! {
                        <li data-testid="cord-pull">{tr_with("cord.pull", &[
                            ("at", &console_time(&p.at)),
                            ("who", &p.actor),
                            ("action", p.action.as_str()),
                            ("reason", &p.reason),
                            ("n", &p.sales.len().to_string()),
                        ])}</li>
                    }).collect_view()}
                </ul>
            }.into_any(),
            _ => ().into_any(),
        }}
    }
}

/// A sale's fail-open: off, its bot check and waiting room are in force; on, every shopper goes
/// straight to the buy (the stock and the per-shopper limit still hold). Needs a reason.
#[component]
pub fn FailOpenSwitch(
    id: SaleId,
    open: Signal<bool>,
    on_change: Callback<Activity>,
) -> impl IntoView {
    let reason = RwSignal::new(String::new());
    let switch = crate::client::action(move |(on, why): &(bool, String)| {
        let (on, why) = (*on, why.clone());
        async move {
            match crate::endpoints::fail_open(id, on, why).await {
                Ok(a) => {
                    reason.set(String::new());
                    on_change.run(a);
                    None
                }
                Err(f) => Some(f.message()),
            }
        }
    });
    let busy = switch.pending();
    let error = move || {
        (!busy.get())
            .then(|| switch.value().get().flatten())
            .flatten()
    };
    view! {
        <div class="card fail-open" data-testid="fail-open">
            <h2>{tr("failopen.title")}</h2>
            <p class="muted">{tr("failopen.note")}</p>
            <p role="status" data-testid="fail-open-state">
                {move || tr(if open.get() { "failopen.state_on" } else { "failopen.state_off" })}
            </p>
            <label for="fail-open-reason">{tr("cord.reason")}</label>
            <input id="fail-open-reason" data-testid="fail-open-reason" maxlength="500" autocomplete="off"
                prop:value=move || reason.get() on:input=move |ev| reason.set(event_target_value(&ev))/>
            <button type="button" data-testid="fail-open-toggle" aria-pressed=move || open.get().to_string()
                class:danger=move || !open.get() class:secondary=move || open.get()
                disabled=move || busy.get() || reason.with(|r| r.trim().is_empty())
                on:click=move |_| { if !busy.get_untracked() { switch.dispatch((!open.get_untracked(), reason.get_untracked())); } }>
                {move || tr(if open.get() { "failopen.off" } else { "failopen.on" })}
            </button>
            <p class="error" role="alert">{error}</p>
        </div>
    }
}
