//! The console's door: merchants see the shop's pages, the operator the platform's pages, anyone
//! else a "forbidden" page; visitors are sent to sign in. Who asks is what the server's admin guard established (server rendering) or
//! `GET /api/me` (in the browser).

use crate::api::Role;
use leptos::prelude::*;
use leptos_meta::Title;

/// Who is asking for an admin page: on the server, what the admin guard established from the
/// cookie; in the browser (navigating between pages), `GET /api/me`. `None`: a visitor.
fn viewer() -> Resource<Option<Role>> {
    Resource::new(
        || (),
        |_| {
            #[cfg(feature = "ssr")]
            {
                let role = use_context::<http::request::Parts>()
                    .and_then(|p| p.extensions.get::<crate::PageViewer>().copied())
                    .map(|v| v.0);
                async move { role }
            }
            #[cfg(not(feature = "ssr"))]
            crate::data::browser(async move { crate::endpoints::me().await.ok().map(|u| u.role) })
        },
    )
}

/// Shows `children` to merchants only: anyone else sees "forbidden", a visitor is sent to sign in.
#[component]
pub fn MerchantOnly(children: ChildrenFn) -> impl IntoView {
    view! { <RoleOnly role=Role::Merchant children/> }
}

/// Shows `children` to the platform's operator only.
#[component]
pub fn OperatorOnly(children: ChildrenFn) -> impl IntoView {
    view! { <RoleOnly role=Role::Operator children/> }
}

#[component]
fn RoleOnly(role: Role, children: ChildrenFn) -> impl IntoView {
    let viewer = viewer();
    let children = StoredValue::new(children);
    view! {
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {move || viewer.get().map(|viewer| match viewer {
                Some(r) if r == role => children.with_value(|c| c()).into_any(),
                Some(r) => view! { <Forbidden needed=role signed_in_as=r/> }.into_any(),
                None => view! { <SignInFirst/> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Forbidden(needed: Role, signed_in_as: Role) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::FORBIDDEN);
    }
    view! {
        <Title text="Forbidden — Seckill"/>
        <section class="card narrow" data-testid="forbidden">
            <h1>"Forbidden"</h1>
            <p>{format!("This page is for {} accounts. You are signed in as {} {}.", needed.as_str(),
                if signed_in_as == Role::Operator { "an" } else { "a" }, signed_in_as.as_str())}</p>
            <p><a href="/">"Back to the sales"</a></p>
        </section>
    }
}

#[component]
fn SignInFirst() -> impl IntoView {
    #[cfg(feature = "hydrate")]
    {
        let navigate = leptos_router::hooks::use_navigate();
        Effect::new(move |_| {
            let here = window()
                .location()
                .pathname()
                .unwrap_or_else(|_| "/admin".into());
            let next = String::from(js_sys::encode_uri_component(&here));
            navigate(&format!("/login?next={next}"), Default::default());
        });
    }
    view! {
        <section class="card narrow">
            <h1>"Sign in"</h1>
            <p>"This page needs a merchant or operator account. " <a href="/login?next=%2Fadmin">"Sign in"</a></p>
        </section>
    }
}
