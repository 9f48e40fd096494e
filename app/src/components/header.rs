//! The header on every page: the site's name, the shopper's links, who is signed in, and the
//! language switch.

use crate::{
    i18n::{self, tr, tr_with},
    Session,
};
use leptos::prelude::*;
use leptos_router::hooks::{use_location, use_navigate};

#[component]
pub fn Header(session: Session) -> impl IntoView {
    let navigate = use_navigate();
    let sign_out = crate::client::action(move |_: &()| {
        let navigate = navigate.clone();
        async move {
            if crate::endpoints::sign_out().await.is_ok() {
                session.user.set(Some(None));
                navigate("/login", Default::default());
            }
        }
    });
    let signing_out = sign_out.pending();
    view! {
        <header class="site-header">
            <a class="brand" href="/">"Seckill"</a>
            <nav aria-label=tr("header.account")>
                <a href="/orders">{tr("header.orders")}</a>
                {move || match session.user.get() {
                    Some(Some(user)) => view! {
                        {match user.role {
                            crate::api::Role::Merchant => Some(view! { <a href="/admin" data-testid="admin-link">{tr("header.admin")}</a> }.into_any()),
                            crate::api::Role::Operator => Some(view! { <a href="/operator" data-testid="operator-link">{tr("header.operator")}</a> }.into_any()),
                            crate::api::Role::Shopper => None,
                        }}
                        <a href="/account" class="who" data-testid="current-user"
                            title=user.shop.as_ref().map(|s| tr_with("header.merchant_of", &[("shop", &s.name)]))>{user.username}</a>
                        <form class="inline" method="post" action=crate::endpoints::paths::SIGN_OUT_FORM
                            on:submit=move |ev| { ev.prevent_default(); sign_out.dispatch(()); }>
                            <button type="submit" class="link" data-testid="logout-button"
                                disabled=move || signing_out.get()>
                                {tr("header.sign_out")}
                            </button>
                        </form>
                    }.into_any(),
                    _ => view! {
                        <a href="/login">{tr("header.sign_in")}</a>
                        <a href="/register">{tr("header.register")}</a>
                        <SignOutWithoutScripts/>
                    }.into_any(),
                }}
            </nav>
            <LanguageSwitch/>
        </header>
    }
}

/// Pages are rendered without knowing who asks (they stay cacheable), so a browser without
/// scripts never learns whether it is signed in: it is offered the sign-out form as well, a plain
/// `POST /logout`. Hidden where scripts run: the app shows its own once it knows.
#[component]
fn SignOutWithoutScripts() -> impl IntoView {
    view! {
        <form class="inline without-scripts" method="post" action=crate::endpoints::paths::SIGN_OUT_FORM>
            <button type="submit" class="link" data-testid="logout-form-button">{tr("header.sign_out")}</button>
        </form>
    }
}

/// Every language by its own name; choosing one asks the server to remember it (the `lang`
/// cookie) and to send this page again in it. A plain form: it works before the app has started,
/// and without scripts.
#[component]
fn LanguageSwitch() -> impl IntoView {
    let lang = i18n::current();
    let location = use_location();
    // The router's search has no `?`.
    let back = move || {
        let (path, search) = (location.pathname.get(), location.search.get());
        match search.trim_start_matches('?') {
            "" => path,
            query => format!("{path}?{query}"),
        }
    };
    let buttons = lang
        .languages
        .iter()
        .map(|(tag, name)| {
            if *tag == lang.tag {
                view! { <span class="current" lang=tag.clone() aria-current="true">{name.clone()}</span> }.into_any()
            } else {
                view! {
                    <button type="submit" name="to" value=tag.clone() lang=tag.clone() class="link"
                        data-testid=format!("language-{tag}")>{name.clone()}</button>
                }
                .into_any()
            }
        })
        .collect_view();
    view! {
        <form class="language-switch" method="post" action="/language" aria-label=tr("header.language")
            data-testid="language-switch">
            <input type="hidden" name="back" value=back/>
            {buttons}
        </form>
    }
}
