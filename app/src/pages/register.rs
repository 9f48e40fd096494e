//! `/register`: a shopper creates an account and is signed in.

use crate::components::auth_form::{AuthForm, AuthMode};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn Register() -> impl IntoView {
    view! {
        <Title text="Create an account — Seckill"/>
        <AuthForm mode=AuthMode::Register/>
    }
}
