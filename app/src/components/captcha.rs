//! The captcha of the buy panel: its image (a click shows another) and the answer field (Enter
//! buys). Fetching it is the buy panel's: it loads one at the start instant.

use crate::api::Captcha;
use crate::i18n::tr;
use leptos::prelude::*;

#[component]
pub fn CaptchaInput(
    captcha: RwSignal<Option<Captcha>>,
    answer: RwSignal<String>,
    /// Asks for another captcha.
    refresh: Callback<()>,
    /// Enter in the answer field.
    enter: Callback<()>,
) -> impl IntoView {
    view! {
        <div class="captcha">
            {move || captcha.get().map(|c| view! {
                <button type="button" class="captcha-refresh" title=tr("captcha.another") on:click=move |_| refresh.run(())>
                    <img data-testid="captcha-image" src=c.image alt=tr("captcha.alt") width="200" height="70"/>
                </button>
            })}
            <label for="captcha-input">{tr("captcha.label")}</label>
            <input id="captcha-input" data-testid="captcha-input" autocomplete="off" maxlength="16" bind:value=answer
                on:keydown=move |ev| if ev.key() == "Enter" { enter.run(()) }/>
        </div>
    }
}
