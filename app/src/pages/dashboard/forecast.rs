//! The dashboard's demand forecast: before the start, the crowd to expect from reminders, page
//! views and the line, the time to sell out and the settings that would serve it, with the
//! reasons and the measured figures they rest on; after the sale, what happened beside it.

use crate::{
    api::{Forecast, SaleId},
    format::{duration_ms, thousands},
};
use leptos::prelude::*;

#[component]
pub fn ForecastPanel(id: SaleId) -> impl IntoView {
    let forecast = RwSignal::new(None::<Result<Forecast, String>>);
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::forecast(id).await;
            forecast.set(Some(got.map_err(|f| f.message())));
        });
    });
    view! {
        <section class="card forecast" aria-label="Demand forecast" data-testid="forecast">
            <h2>"Demand forecast"</h2>
            {move || match forecast.get() {
                None => view! { <p class="muted">"Loading the forecast…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(f)) => view! { <ForecastFigures f/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn ForecastFigures(f: Forecast) -> impl IntoView {
    let r = &f.recommended;
    let sell_out = f
        .expected_sell_out_ms
        .map_or("not expected".to_string(), duration_ms);
    let actual = f.actual.clone().map(|a| {
        view! {
            <h3>"What happened"</h3>
            <dl class="stats" data-testid="forecast-actual">
                <div><dt>"Buy attempts"</dt><dd>{thousands(a.attempts)}</dd></div>
                <div><dt>"Unique buyers"</dt><dd>{thousands(a.unique_buyers)}</dd></div>
                {a.joined.map(|j| view! { <div><dt>"In the line"</dt><dd>{thousands(j)}</dd></div> })}
                <div><dt>"Sold out after"</dt><dd>{a.sold_out_after_ms.map_or("did not sell out".to_string(), duration_ms)}</dd></div>
            </dl>
        }
    });
    view! {
        <dl class="stats">
            <div><dt>"Reminders"</dt><dd data-testid="forecast-reminders">{thousands(f.reminders)}</dd></div>
            <div><dt>"Page views before the start"</dt><dd data-testid="forecast-views">{thousands(f.page_views)}</dd></div>
            <div><dt>"In the line"</dt><dd>{thousands(f.joined)}</dd></div>
            <div><dt>"Expected crowd, at least"</dt><dd data-testid="forecast-crowd">{thousands(f.expected_crowd)}</dd></div>
            <div><dt>"Expected to sell out in"</dt><dd>{sell_out}</dd></div>
        </dl>
        <h3>"Recommended"</h3>
        <p data-testid="forecast-recommended">
            {format!("Admission {} shoppers/s · {} stock shard{} · waiting room {}",
                thousands(r.admit_per_sec), r.stock_shards, if r.stock_shards == 1 { "" } else { "s" },
                if r.waiting_room { "on" } else { "optional" })}
        </p>
        <ul class="reasons">{f.reasons.iter().map(|why| view! { <li>{why.clone()}</li> }).collect_view()}</ul>
        <p class="muted small">
            {format!("Measured by make bench on the reference box: {} buys/s, {} CPU-ms per buy, {} gate calls/s per Redis.",
                thousands(f.basis.buys_per_sec), f.basis.cpu_ms_per_buy, thousands(f.basis.gate_calls_per_sec))}
        </p>
        {actual}
    }
}
