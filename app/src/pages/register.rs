//! `/register`: a shopper creates an account and is signed in.

use crate::components::auth_form::{AuthForm, AuthMode};
use crate::{format::page_title, i18n::tr};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn Register() -> impl IntoView {
    view! {
        <Title text=page_title(&tr("auth.create_account"))/>
        <AuthForm mode=AuthMode::Register/>
    }
}
