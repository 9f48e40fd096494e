//! `/`: the list of sales, each a card with its price, stock and countdown. The HTML carries no
//! per-user data (it is cacheable).

use crate::{
    components::{countdown::Countdown, stock::poll_stock},
    data::{self, SaleState},
    format::{money, units},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn Home() -> impl IntoView {
    let activities = data::activities();
    view! {
        <Title text="Seckill — flash sales"/>
        <section class="hero">
            <h1>"Flash sales"</h1>
            <p>"A few units, one instant, a fair chance for everyone who is there on time."</p>
        </section>
        <Suspense fallback=|| view! { <p>"Loading sales…"</p> }>
            {move || activities.get().map(|r| match r {
                Ok(list) if list.is_empty() => view! { <p>"No sales yet. Come back soon."</p> }.into_any(),
                Ok(list) => view! {
                    <ul class="cards">
                        {list.into_iter().map(|sale| view! { <ActivityCard sale/> }).collect_view()}
                    </ul>
                }.into_any(),
                Err(e) => view! { <p class="error" role="alert">"Could not load the sales: " {e}</p> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn ActivityCard(sale: SaleState) -> impl IntoView {
    // Live, so that a sold-out sale says so (and reopens when units come back) without a click.
    let stock = poll_stock(&sale);
    let activity = sale.activity;
    let href = format!("/activities/{}", activity.id);
    view! {
        <li class="card activity-card" data-testid="activity-card">
            <a href=href class="card-link">
                <h2>{activity.title.clone()}</h2>
            </a>
            <p class="price">
                <span class="now">{money(activity.seckill_price_cents)}</span>
                " " <s class="was">{money(activity.price_cents)}</s>
            </p>
            <p class="muted">{units(activity.total_stock)}</p>
            <Countdown activity=activity stock seen_at=sale.seen_at_ms/>
        </li>
    }
}
