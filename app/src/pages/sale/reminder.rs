//! Before a sale starts: "Remind me" for a signed-in shopper (one reminder per shopper and sale,
//! withdrawable), the sale's calendar entry (`.ics`) for anyone, and, with the browser's leave, a
//! notification at the start while the page is open.

use crate::{
    api::{Activity, Reminder},
    i18n::{tr, tr_split},
    Session,
};
use leptos::prelude::*;

#[component]
pub fn ReminderPanel(activity: Activity, started: Signal<bool>) -> impl IntoView {
    let session = Session::get();
    let id = activity.id;
    let reminder = RwSignal::new(None::<Reminder>);
    let message = RwSignal::new(None::<String>);
    // The shopper's reminder, once they are known to be signed in.
    Effect::new(move |_| {
        if matches!(session.user.get(), Some(Some(_))) {
            leptos::task::spawn_local(async move {
                if let Ok(mine) = crate::endpoints::my_reminder(id).await {
                    reminder.set(mine.reminder);
                }
            });
        }
    });
    // Asking and withdrawing, one at a time: either disables both buttons while it runs.
    let ask = crate::client::action(move |_: &()| async move {
        #[cfg(feature = "hydrate")]
        if crate::notify::askable() {
            crate::notify::ask().await;
        }
        match crate::endpoints::remind_me(id).await {
            Ok(r) => {
                reminder.set(Some(r));
                message.set(None);
            }
            Err(f) => message.set(Some(f.message())),
        }
    });
    let withdraw = crate::client::action(move |r: &Reminder| {
        let r = r.clone();
        async move {
            match crate::endpoints::withdraw_reminder(r.id).await {
                Ok(()) => {
                    reminder.set(None);
                    message.set(None);
                }
                Err(f) => message.set(Some(f.message())),
            }
        }
    });
    let busy = move || ask.pending().get() || withdraw.pending().get();
    // The form's post without the app came back here: `?reminder=set`, or `?error=…`.
    let query = leptos_router::hooks::use_query_map();
    let asked_by_form = query.with_untracked(|q| q.get("reminder")).as_deref() == Some("set");
    let refused = query
        .with_untracked(|q| crate::client::refusal_text(q.get("error").as_deref(), None, None));
    notify_at_start(&activity, started, reminder);
    view! {
        <section class="reminder" aria-label=tr("reminder.label") data-testid="reminder">
            {move || match (session.user.get(), reminder.get()) {
                (Some(None), _) => {
                    let (ahead, behind) = tr_split("reminder.sign_in");
                    view! { <p>{ahead}<a href="/login">{tr("header.sign_in")}</a>{behind}</p> }.into_any()
                }
                (_, Some(_)) => view! {
                    <p data-testid="reminder-set">{tr("reminder.set")} " "
                        <button type="button" class="link" data-testid="reminder-withdraw" disabled=busy on:click=move |_| {
                            if let (false, Some(r)) = (busy(), reminder.get_untracked()) {
                                withdraw.dispatch(r);
                            }
                        }>{tr("reminder.withdraw")}</button>
                    </p>
                }.into_any(),
                // A real form: before the app runs (or without scripts) the browser posts it,
                // and the server signs the visitor in first or comes back with `?reminder=set`,
                // said until the app knows the shopper's own reminder.
                (None, None) if asked_by_form => view! { <p data-testid="reminder-set">{tr("reminder.set")}</p> }.into_any(),
                _ => view! {
                    <form method="post" action=crate::endpoints::paths::reminder_form(id)
                        on:submit=move |ev| { ev.prevent_default(); if !busy() { ask.dispatch(()); } }>
                        <button type="submit" class="secondary" data-testid="reminder-ask" disabled=busy>{tr("reminder.ask")}</button>
                    </form>
                }.into_any(),
            }}
            <p class="muted small">
                <a href=crate::endpoints::paths::calendar(id) data-testid="reminder-ics" download=format!("sale-{id}.ics")>{tr("reminder.calendar")}</a>
            </p>
            <p class="error" role="alert" data-testid="reminder-error">{move || message.get().or_else(|| refused.clone())}</p>
        </section>
    }
}

/// At the start, with a reminder and the browser's leave: a notification.
fn notify_at_start(
    activity: &Activity,
    started: Signal<bool>,
    reminder: RwSignal<Option<Reminder>>,
) {
    #[cfg(feature = "hydrate")]
    {
        let (id, title) = (activity.id, activity.title.clone());
        Effect::new(move |was: Option<bool>| {
            let now = started.get();
            if now && was == Some(false) && reminder.get_untracked().is_some() {
                crate::notify::show(
                    &crate::i18n::tr_with("reminder.notice.title", &[("title", &title)]),
                    &crate::i18n::tr("reminder.notice.body"),
                    &format!("seckill-start-{id}"),
                );
            }
            now
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (activity, started, reminder);
}
