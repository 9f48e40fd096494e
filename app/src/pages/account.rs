//! `/account`: the signed-in user's account: change the password (every other session ends) and
//! sign out everywhere.

use crate::{api::PasswordChange, api::User, client, Session};
use leptos::{ev::SubmitEvent, prelude::*};
use leptos_meta::Title;
use leptos_router::hooks::use_navigate;

#[component]
pub fn AccountPage() -> impl IntoView {
    let session = Session::get();
    let message = RwSignal::new(None::<(bool, String)>);
    let navigate = use_navigate();
    let everywhere = move |_| {
        let navigate = navigate.clone();
        leptos::task::spawn_local(async move {
            match client::post::<_, ()>("/api/auth/logout-everywhere", &()).await {
                Ok(()) => {
                    session.user.set(Some(None));
                    navigate("/login", Default::default());
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
        });
    };
    view! {
        <Title text="Your account — Seckill"/>
        {move || match session.user.get() {
            None => view! { <p>"Loading…"</p> }.into_any(),
            Some(None) => view! {
                <section class="card narrow">
                    <h1>"Your account"</h1>
                    <p><a href="/login?next=%2Faccount">"Sign in"</a> " to manage your account."</p>
                </section>
            }.into_any(),
            Some(Some(user)) => view! {
                <section class="card narrow">
                    <h1>"Your account"</h1>
                    <p>"Signed in as " <strong>{user.username}</strong>
                        {user.shop.map(|s| format!(" of {}", s.name))}"."</p>
                    <PasswordChangeForm message/>
                    <p role="status" data-testid="account-message"
                        class=move || if message.get().is_some_and(|(ok, _)| ok) { "ok" } else { "error" }>
                        {move || message.get().map(|(_, m)| m)}
                    </p>
                    <h2>"Sessions"</h2>
                    <p class="muted small">"Signs you out on every device, this one too (a lost phone, a shared computer)."</p>
                    <button type="button" class="secondary" data-testid="account-logout-everywhere" on:click=everywhere.clone()>
                        "Sign out everywhere"
                    </button>
                </section>
            }.into_any(),
        }}
    }
}

/// The current password and a new one; every other session ends when it changes.
#[component]
fn PasswordChangeForm(message: RwSignal<Option<(bool, String)>>) -> impl IntoView {
    let current = RwSignal::new(String::new());
    let new = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let change = move |ev: SubmitEvent| {
        ev.prevent_default();
        let body = PasswordChange {
            current_password: current.get_untracked(),
            new_password: new.get_untracked(),
        };
        busy.set(true);
        leptos::task::spawn_local(async move {
            match client::post::<_, User>("/api/auth/password", &body).await {
                Ok(_) => {
                    current.set(String::new());
                    new.set(String::new());
                    message.set(Some((
                        true,
                        "Password changed. Every other session of yours has ended.".into(),
                    )));
                }
                Err(f) => message.set(Some((false, f.message()))),
            }
            busy.set(false);
        });
    };
    view! {
        <form on:submit=change data-testid="account-password-form">
            <h2>"Change your password"</h2>
            <label for="current-password">"Current password"</label>
            <input id="current-password" type="password" required autocomplete="current-password"
                data-testid="account-current-password"
                prop:value=move || current.get() on:input=move |ev| current.set(event_target_value(&ev))/>
            <label for="new-password">"New password (8 to 128 characters, not a common one)"</label>
            <input id="new-password" type="password" required minlength="8" maxlength="128" autocomplete="new-password"
                data-testid="account-new-password"
                prop:value=move || new.get() on:input=move |ev| new.set(event_target_value(&ev))/>
            <button type="submit" data-testid="account-password-submit" disabled=move || busy.get()>"Change password"</button>
        </form>
    }
}
