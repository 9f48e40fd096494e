//! The console's door: merchants see the shop's pages, the operator the platform's pages, anyone
//! else a "forbidden" page; visitors are sent to sign in. Who asks is what the server's admin guard established (server rendering) or
//! `GET /api/me` (in the browser).

use crate::{
    api::Role,
    format::page_title,
    i18n::{tr, tr_with},
};
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
        <Suspense fallback=|| view! { <p>{tr("loading")}</p> }>
            {move || viewer.get().map(|viewer| match viewer {
                Some(r) if r == role => children.with_value(|c| c()).into_any(),
                Some(r) => view! { <Forbidden needed=role signed_in_as=r/> }.into_any(),
                None => view! { <SignInFirst/> }.into_any(),
            })}
        </Suspense>
    }
}

/// A role as the page's language names it ("merchant"), or one who has it ("a merchant").
fn role_name(role: Role, one_who_has_it: bool) -> String {
    tr(match (role, one_who_has_it) {
        (Role::Shopper, false) => "console.role.shopper",
        (Role::Merchant, false) => "console.role.merchant",
        (Role::Operator, false) => "console.role.operator",
        (Role::Shopper, true) => "console.as_role.shopper",
        (Role::Merchant, true) => "console.as_role.merchant",
        (Role::Operator, true) => "console.as_role.operator",
    })
}

#[component]
fn Forbidden(needed: Role, signed_in_as: Role) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::FORBIDDEN);
    }
    view! {
        <Title text=page_title(&tr("console.forbidden"))/>
        <section class="card narrow" data-testid="forbidden">
            <h1>{tr("console.forbidden")}</h1>
            <p>{tr_with("console.forbidden_for", &[("needed", &role_name(needed, false)), ("role", &role_name(signed_in_as, true))])}</p>
            <p><a href="/">{tr("back_to_sales")}</a></p>
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
            <h1>{tr("header.sign_in")}</h1>
            <p>{tr("console.needs_account")} " " <a href="/login?next=%2Fadmin">{tr("header.sign_in")}</a></p>
        </section>
    }
}
