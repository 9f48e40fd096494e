//! The form behind `/login` and `/register`: username and password, the server's answer, and
//! where to go after.

use crate::{
    api::Credentials,
    components::proof_of_work::{Work, WorkStatus},
    i18n::{tr, tr_split},
    Session,
};
use leptos::{ev::SubmitEvent, prelude::*};
use leptos_router::hooks::use_navigate;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    Login,
    Register,
}

impl AuthMode {
    fn prefix(self) -> &'static str {
        match self {
            AuthMode::Login => "login",
            AuthMode::Register => "register",
        }
    }
}

/// Only a path on this site may follow a sign-in (`?next=`) or a language switch: never another
/// origin ("//evil.example", "/\\evil", "https://…").
pub fn is_local_path(p: &str) -> bool {
    p.starts_with('/')
        && p.len() <= 2048
        && !p.starts_with("//")
        && !p.contains('\\')
        && !p.chars().any(char::is_control)
}

/// A real form (`POST /login` or `/register`): the browser posts it itself before the app has
/// started or without scripts, and the server answers with a redirect (back here with
/// `?error=…` when refused, rendered below). Once the app runs it posts the JSON API instead.
#[component]
pub fn AuthForm(mode: AuthMode) -> impl IntoView {
    let session = Session::get();
    let query = leptos_router::hooks::use_query_map();
    // What the server's redirect kept: the username, where to go, the refusal.
    let kept = move |name: &str| query.with_untracked(|q| q.get(name));
    // Written into the markup too (`bind:` sets only the property, which has no markup).
    let typed_name = kept("username").unwrap_or_default();
    let username = RwSignal::new(typed_name.clone());
    let password = RwSignal::new(String::new());
    let next = kept("next").filter(|n| is_local_path(n));
    let refused = crate::client::refusal_text(
        kept("error").as_deref(),
        kept("field").as_deref(),
        kept("retry").and_then(|r| r.parse().ok()),
    );
    let p = mode.prefix();
    // A sign-up carries the same proof of work as a buy, solved while the form is filled in.
    let work = (mode == AuthMode::Register).then(|| {
        Work::provide_at(
            crate::endpoints::paths::SIGN_UP_CHALLENGE.to_string(),
            false,
        )
    });
    let post = post(mode, work);
    let busy = post.pending();
    // The last refusal (the app's, else the redirect's), until the next try is sent.
    let error = move || {
        if busy.get() {
            return None;
        }
        post.value().get().flatten().or_else(|| refused.clone())
    };
    let submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        if !busy.get_untracked() {
            post.dispatch(Credentials {
                username: username.get_untracked(),
                password: password.get_untracked(),
                pow: work.and_then(Work::take),
            });
        }
    };
    let (heading, action, other) = texts(mode);
    let target = match mode {
        AuthMode::Login => crate::endpoints::paths::SIGN_IN_FORM,
        AuthMode::Register => crate::endpoints::paths::SIGN_UP_FORM,
    };
    view! {
        <section class="card narrow">
            <h1>{heading}</h1>
            <form class="stack" method="post" action=target on:submit=submit data-testid=format!("{p}-form")>
                {next.map(|next| view! { <input type="hidden" name="next" value=next/> })}
                <label for=format!("{p}-username")>{tr("auth.username")}</label>
                <input
                    id=format!("{p}-username")
                    data-testid=format!("{p}-username")
                    name="username"
                    autocomplete="username"
                    required
                    minlength="3"
                    maxlength="32"
                    pattern="[A-Za-z0-9_.\\-]+"
                    value=typed_name
                    bind:value=username
                />
                <PasswordInput mode password/>
                {work.map(|work| view! { <WorkStatus work/> <PictureCheck/> })}
                <p class="error" role="alert" data-testid="form-error">{error}</p>
                // Enabled as rendered: before the app runs the browser posts the form itself.
                <button
                    type="submit"
                    data-testid=format!("{p}-submit")
                    disabled=move || {
                        busy.get() || (session.hydrated.get() && work.is_some_and(|w| w.solving.get()))
                    }
                >
                    {action}
                </button>
            </form>
            {other}
        </section>
    }
}

/// The page's heading, its button's words and the link to the other form.
fn texts(mode: AuthMode) -> (String, String, AnyView) {
    match mode {
        AuthMode::Login => {
            let (ahead, behind) = tr_split("auth.new_here");
            (
                tr("header.sign_in"),
                tr("header.sign_in"),
                view! { <p>{ahead}<a href="/register">{tr("auth.create_account")}</a>{behind}</p> }
                    .into_any(),
            )
        }
        AuthMode::Register => {
            let (ahead, behind) = tr_split("auth.have_account");
            (
                tr("auth.create_account"),
                tr("auth.create"),
                view! { <p>{ahead}<a href="/login">{tr("header.sign_in")}</a>{behind}</p> }
                    .into_any(),
            )
        }
    }
}

/// Without scripts a sign-up cannot make its proof of work: the browser shows the image captcha
/// instead (its picture from `GET /register/captcha`, which names it in a cookie for the post).
/// Hidden where scripts run (`without-scripts`), and lazy, so such a browser never fetches it.
/// Not `required`: a hidden field must not stop the app's own post.
#[component]
fn PictureCheck() -> impl IntoView {
    view! {
        <div class="captcha without-scripts">
            <img data-testid="signup-captcha-image" src=crate::endpoints::paths::SIGN_UP_CAPTCHA
                loading="lazy" alt=tr("captcha.alt") width="200" height="70"/>
            <label for="signup-captcha">{tr("captcha.label")}</label>
            <input id="signup-captcha" data-testid="signup-captcha-input" name="captcha_answer"
                autocomplete="off" maxlength="16"/>
        </div>
    }
}

/// The password, with a button that shows it as typed; a sign-up says its length.
#[component]
fn PasswordInput(mode: AuthMode, password: RwSignal<String>) -> impl IntoView {
    let session = Session::get();
    let show = RwSignal::new(false);
    let p = mode.prefix();
    let register = mode == AuthMode::Register;
    view! {
        <label for=format!("{p}-password")>{tr("auth.password")}</label>
        <div class="password-row">
            <input
                id=format!("{p}-password")
                data-testid=format!("{p}-password")
                name="password"
                type=move || if show.get() { "text" } else { "password" }
                autocomplete=if register { "new-password" } else { "current-password" }
                aria-describedby=register.then_some("password-hint")
                required
                minlength=if register { "8" } else { "1" }
                maxlength="128"
                bind:value=password
            />
            <button
                type="button"
                class="secondary"
                data-testid="toggle-password"
                aria-pressed=move || show.get().to_string()
                disabled=move || !session.hydrated.get()
                on:click=move |_| show.update(|s| *s = !*s)
            >
                {move || if show.get() { tr("auth.hide") } else { tr("auth.show") }}
            </button>
        </div>
        {register.then(|| view! { <small id="password-hint">{tr("auth.password_hint")}</small> })}
    }
}

/// Signs in or up with what was sent, then goes to `?next=` (a local path only) or home; its
/// value is the refusal to show, and a sign-up's proof of work is made anew for the next try.
fn post(mode: AuthMode, work: Option<Work>) -> Action<Credentials, Option<String>> {
    let session = Session::get();
    let navigate = use_navigate();
    let query = leptos_router::hooks::use_query_map();
    crate::client::action(move |creds: &Credentials| {
        let creds = creds.clone();
        let navigate = navigate.clone();
        async move {
            let answer = match mode {
                AuthMode::Login => crate::endpoints::sign_in(&creds).await,
                AuthMode::Register => crate::endpoints::sign_up(&creds).await,
            };
            match answer {
                Ok(user) => {
                    session.user.set(Some(Some(user)));
                    let next = query
                        .with_untracked(|q| q.get("next"))
                        .filter(|n| is_local_path(n));
                    navigate(next.as_deref().unwrap_or("/"), Default::default());
                    None
                }
                Err(failure) => {
                    // The solution may have been spent: a new one for the next try.
                    if let Some(work) = work {
                        work.renew();
                    }
                    Some(failure.message())
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_local_paths_follow_a_sign_in() {
        for ok in ["/", "/admin", "/admin/activities/3?x=1"] {
            assert!(super::is_local_path(ok), "{ok}");
        }
        for bad in [
            "",
            "admin",
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "/\nx",
        ] {
            assert!(!super::is_local_path(bad), "{bad}");
        }
    }
}
