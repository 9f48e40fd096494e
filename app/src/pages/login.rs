//! `/login`: sign in, then back to `?next=` (a path on this site) or the sales.

use crate::components::auth_form::{AuthForm, AuthMode};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn Login() -> impl IntoView {
    view! {
        <Title text="Sign in — Seckill"/>
        <AuthForm mode=AuthMode::Login/>
    }
}
