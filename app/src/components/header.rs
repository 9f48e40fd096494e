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
                            crate::api::Role::Merchant => Some(view! { <a href="/admin" data-testid="admin-link">"Admin"</a> }.into_any()),
                            crate::api::Role::Operator => Some(view! { <a href="/operator" data-testid="operator-link">"Operator"</a> }.into_any()),
                            crate::api::Role::Shopper => None,
                        }}
                        <a href="/account" class="who" data-testid="current-user"
                            title=user.shop.as_ref().map(|s| tr_with("header.merchant_of", &[("shop", &s.name)]))>{user.username}</a>
                        <button type="button" class="link" data-testid="logout-button"
                            disabled=move || signing_out.get()
                            on:click=move |_| { sign_out.dispatch(()); }>
                            {tr("header.sign_out")}
                        </button>
                    }.into_any(),
                    _ => view! {
                        <a href="/login">{tr("header.sign_in")}</a>
                        <a href="/register">{tr("header.register")}</a>
                    }.into_any(),
                }}
            </nav>
            <LanguageSwitch/>
        </header>
    }
}

/// Every language by its own name; choosing one asks the server to remember it (the `lang`
/// cookie) and to send this page again in it. A plain form: it works before the app has started,
/// and without scripts.
#[component]
fn LanguageSwitch() -> impl IntoView {
    let lang = i18n::current();
    let location = use_location();
    let back = move || format!("{}{}", location.pathname.get(), location.search.get());
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
