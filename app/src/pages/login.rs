//! `/login`: sign in, then back to `?next=` (a path on this site) or the sales.

use crate::components::auth_form::{AuthForm, AuthMode};
use crate::{format::page_title, i18n::tr};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn Login() -> impl IntoView {
    view! {
        <Title text=page_title(&tr("header.sign_in"))/>
        <AuthForm mode=AuthMode::Login/>
    }
}
