//! The dashboard's crowds from one network, for a sale whose line draws its places: the policy
//! (off, observe, demote) and its threshold, set before the start, with the threshold the forecast
//! proposes; after the draw, what it did (the report's words).

use crate::{
    api::{CrowdChange, CrowdOutcome, CrowdPolicy, CrowdSettings, SaleId},
    i18n::{number, tr, tr_with},
};
use leptos::prelude::*;

type Loaded = RwSignal<Option<Result<CrowdSettings, String>>>;

#[component]
pub fn CrowdPanel(id: SaleId) -> impl IntoView {
    let settings: Loaded = RwSignal::new(None);
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::crowd(id).await;
            settings.set(Some(got.map_err(|f| f.message())));
        });
    });
    view! {
        <section class="card crowd" aria-label=tr("crowd.title") data-testid="crowd">
            <h2>{tr("crowd.title")}</h2>
            <p class="muted">{tr("crowd.note")}</p>
            {move || match settings.get() {
                None => view! { <p class="muted">{tr("forecast.loading")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(s)) => view! { <CrowdForm id s settings/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn CrowdForm(id: SaleId, s: CrowdSettings, settings: Loaded) -> impl IntoView {
    let policy = RwSignal::new(s.policy);
    let threshold = RwSignal::new(s.threshold.to_string());
    let save = crate::client::action(move |change: &CrowdChange| {
        let change = change.clone();
        async move {
            match crate::endpoints::set_crowd(id, &change).await {
                Ok(s) => {
                    settings.set(Some(Ok(s)));
                    None
                }
                Err(f) => Some(f.message()),
            }
        }
    });
    let busy = save.pending();
    let error = move || {
        (!busy.get())
            .then(|| save.value().get().flatten())
            .flatten()
    };
    let outcome = s.outcome.as_ref().map(|o| {
        view! { <p role="status" data-testid="crowd-outcome">{outcome_text(o)}</p> }
    });
    let proposed = tr_with(
        "crowd.proposed",
        &[("n", &number(i64::from(s.proposed_threshold)))],
    );
    let options = CrowdPolicy::ALL
        .iter()
        .map(|&p| {
            view! {
                <option value=p.as_str() selected=move || policy.get() == p>
                    {tr(&format!("crowd.policy.{}", p.as_str()))}
                </option>
            }
        })
        .collect_view();
    view! {
        <p data-testid="crowd-proposed">{proposed}</p>
        {outcome}
        <label for="crowd-policy">{tr("crowd.policy")}</label>
        <select id="crowd-policy" data-testid="crowd-policy"
            on:change=move |ev| { if let Ok(p) = event_target_value(&ev).parse() { policy.set(p) } }>
            {options}
        </select>
        <label for="crowd-threshold">{tr("crowd.threshold")}</label>
        <input id="crowd-threshold" data-testid="crowd-threshold" type="number" min="2" max="1000000"
            inputmode="numeric" prop:value=move || threshold.get()
            on:input=move |ev| threshold.set(event_target_value(&ev))/>
        <button type="button" data-testid="crowd-save" disabled=move || busy.get()
            on:click=move |_| {
                // A threshold that is not a number is sent as 0, which the server refuses in words.
                let t = threshold.get_untracked().trim().parse().unwrap_or(0);
                save.dispatch(CrowdChange { policy: policy.get_untracked(), threshold: t });
            }>
            {tr("crowd.save")}
        </button>
        <p class="error" role="alert">{error}</p>
    }
}

/// What a draw did with the crowds from one network, in the page's language (the report's words).
pub fn outcome_text(c: &CrowdOutcome) -> String {
    let figures = [
        ("threshold", number(i64::from(c.threshold))),
        ("groups", number(c.groups_over)),
        ("entries", number(c.entries_over)),
        ("demoted", number(c.demoted)),
        ("all", number(c.entries)),
    ];
    let figures: Vec<(&str, &str)> = figures.iter().map(|(k, v)| (*k, v.as_str())).collect();
    tr_with(&format!("report.crowd.{}", c.policy.as_str()), &figures)
}
