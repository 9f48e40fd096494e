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
                _ => view! {
                    <button type="button" class="secondary" data-testid="reminder-ask" disabled=move || busy() || session.user.get().is_none()
                        on:click=move |_| if !busy() { ask.dispatch(()); }>{tr("reminder.ask")}</button>
                }.into_any(),
            }}
            <p class="muted small">
                <a href=crate::endpoints::paths::calendar(id) data-testid="reminder-ics" download=format!("sale-{id}.ics")>{tr("reminder.calendar")}</a>
            </p>
            <p class="error" role="alert">{move || message.get()}</p>
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
