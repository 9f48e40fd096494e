//! The header on every page: the site's name, the shopper's links, and who is signed in.

use crate::{client, Session};
use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

#[component]
pub fn Header(session: Session) -> impl IntoView {
    let navigate = use_navigate();
    let sign_out = move |_| {
        let navigate = navigate.clone();
        leptos::task::spawn_local(async move {
            if client::post::<_, ()>("/api/auth/logout", &()).await.is_ok() {
                session.user.set(Some(None));
                navigate("/login", Default::default());
            }
        });
    };
    view! {
        <header class="site-header">
            <a class="brand" href="/">"Seckill"</a>
            <nav aria-label="Account">
                <a href="/orders">"My orders"</a>
                {move || match session.user.get() {
                    Some(Some(user)) => view! {
                        {match user.role {
                            crate::api::Role::Merchant => Some(view! { <a href="/admin" data-testid="admin-link">"Admin"</a> }.into_any()),
                            crate::api::Role::Operator => Some(view! { <a href="/operator" data-testid="operator-link">"Operator"</a> }.into_any()),
                            crate::api::Role::Shopper => None,
                        }}
                        <a href="/account" class="who" data-testid="current-user"
                            title=user.shop.as_ref().map(|s| format!("Merchant of {}", s.name))>{user.username}</a>
                        <button type="button" class="link" data-testid="logout-button" on:click=sign_out.clone()>
                            "Sign out"
                        </button>
                    }.into_any(),
                    _ => view! {
                        <a href="/login">"Sign in"</a>
                        <a href="/register">"Register"</a>
                    }.into_any(),
                }}
            </nav>
        </header>
    }
}
