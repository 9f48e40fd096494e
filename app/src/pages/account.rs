//! `/account`: the signed-in user's account: change the password (every other session ends) and
//! sign out everywhere.

use crate::{
    api::PasswordChange,
    format::page_title,
    i18n::{tr, tr_split, tr_with},
    Session,
};
use leptos::{ev::SubmitEvent, prelude::*};
use leptos_meta::Title;
use leptos_router::hooks::use_navigate;

#[component]
pub fn AccountPage() -> impl IntoView {
    let session = Session::get();
    let message = RwSignal::new(None::<(bool, String)>);
    let navigate = use_navigate();
    let everywhere = crate::client::action(move |_: &()| {
        let navigate = navigate.clone();
        async move {
            match crate::endpoints::sign_out_everywhere().await {
                Ok(()) => {
                    session.user.set(Some(None));
                    navigate("/login", Default::default());
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
        }
    });
    view! {
        <Title text=page_title(&tr("account.title"))/>
        {move || match session.user.get() {
            None => view! { <p>{tr("loading")}</p> }.into_any(),
            Some(None) => {
                let (ahead, behind) = tr_split("account.sign_in");
                view! {
                    <section class="card narrow">
                        <h1>{tr("account.title")}</h1>
                        <p>{ahead}<a href="/login?next=%2Faccount">{tr("header.sign_in")}</a>{behind}</p>
                    </section>
                }.into_any()
            }
            Some(Some(user)) => {
                let signed_in = tr_split("account.signed_in_as");
                view! {
                <section class="card narrow">
                    <h1>{tr("account.title")}</h1>
                    <p>{signed_in.0} <strong>{user.username}</strong>
                        {user.shop.map(|s| tr_with("account.of_shop", &[("shop", &s.name)]))}{signed_in.1}</p>
                    <PasswordChangeForm message/>
                    <p role="status" data-testid="account-message"
                        class=move || if message.get().is_some_and(|(ok, _)| ok) { "ok" } else { "error" }>
                        {move || message.get().map(|(_, m)| m)}
                    </p>
                    <h2>{tr("account.sessions")}</h2>
                    <p class="muted small">{tr("account.sessions.note")}</p>
                    <button type="button" class="secondary" data-testid="account-logout-everywhere"
                        disabled=move || everywhere.pending().get()
                        on:click=move |_| { everywhere.dispatch(()); }>
                        {tr("account.sign_out_everywhere")}
                    </button>
                </section>
            }.into_any()
            }
        }}
    }
}

/// The current password and a new one; every other session ends when it changes.
#[component]
fn PasswordChangeForm(message: RwSignal<Option<(bool, String)>>) -> impl IntoView {
    let current = RwSignal::new(String::new());
    let new = RwSignal::new(String::new());
    let post = crate::client::action(move |body: &PasswordChange| {
        let body = body.clone();
        async move {
            match crate::endpoints::change_password(&body).await {
                Ok(_) => {
                    current.set(String::new());
                    new.set(String::new());
                    message.set(Some((true, tr("account.password_changed"))));
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
        }
    });
    let busy = post.pending();
    let change = move |ev: SubmitEvent| {
        ev.prevent_default();
        if !busy.get_untracked() {
            post.dispatch(PasswordChange {
                current_password: current.get_untracked(),
                new_password: new.get_untracked(),
            });
        }
    };
    view! {
        <form on:submit=change data-testid="account-password-form">
            <h2>{tr("account.change_password")}</h2>
            <label for="current-password">{tr("account.current_password")}</label>
            <input id="current-password" type="password" required autocomplete="current-password"
                data-testid="account-current-password"
                prop:value=move || current.get() on:input=move |ev| current.set(event_target_value(&ev))/>
            <label for="new-password">{tr("account.new_password")}</label>
            <input id="new-password" type="password" required minlength="8" maxlength="128" autocomplete="new-password"
                data-testid="account-new-password"
                prop:value=move || new.get() on:input=move |ev| new.set(event_target_value(&ev))/>
            <button type="submit" data-testid="account-password-submit" disabled=move || busy.get()>{tr("account.change")}</button>
        </form>
    }
}
