//! `/admin`: the merchant's list of sales with their figures, refreshed while the page is open.

use crate::{
    api::{AdminActivity, SaleStatus},
    clock::console_time,
    components::merchant_only::MerchantOnly,
    format::page_title,
    i18n::{number, tr, tr_split, tr_with},
};
use leptos::prelude::*;
use leptos_meta::Title;

/// The sale's state as the console shows it, in the page's language ("live · paused").
pub fn status_badge(a: &AdminActivity) -> String {
    let status = tr(match a.status {
        SaleStatus::Upcoming => "console.status.upcoming",
        SaleStatus::Live => "console.status.live",
        SaleStatus::SoldOut => "console.status.sold_out",
        SaleStatus::Ended => "console.status.ended",
    });
    if a.activity.paused && a.status == SaleStatus::Live {
        tr_with("console.status.paused", &[("status", &status)])
    } else {
        status
    }
}

#[component]
pub fn AdminHome() -> impl IntoView {
    view! {
        <Title text=page_title(&tr("console.title"))/>
        <MerchantOnly>
            <ActivityTable/>
            <crate::components::cord::CordSwitch operator=false/>
            <ShopTimeZone/>
        </MerchantOnly>
    }
}

/// The shop's time zone, in which the console shows its times (a shop setting).
#[component]
fn ShopTimeZone() -> impl IntoView {
    let zone = use_context::<crate::clock::ShopZone>().map(|z| z.0);
    let typed = RwSignal::new(String::new());
    // Its value: what the shop is told of the last save.
    let post = crate::client::action(move |body: &crate::api::ShopSettingsChange| {
        let body = body.clone();
        async move {
            match crate::endpoints::change_shop_settings(&body).await {
                Ok(shop) => {
                    if let Some(zone) = zone {
                        zone.set(Some(shop.time_zone.clone()));
                    }
                    tr_with("console.zone.saved", &[("zone", &shop.time_zone)])
                }
                Err(f) => f.message(),
            }
        }
    });
    let saving = post.pending();
    let save = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if !saving.get_untracked() {
            post.dispatch(crate::api::ShopSettingsChange {
                time_zone: typed.get_untracked(),
            });
        }
    };
    let (zone_ahead, zone_behind) = tr_split("console.zone.shown_in");
    view! {
        <section class="card narrow">
            <h2>{tr("console.zone.title")}</h2>
            <p class="muted">{zone_ahead} <strong data-testid="shop-time-zone">{move || zone.and_then(|z| z.get()).unwrap_or_else(|| tr("console.zone.browsers"))}</strong>{zone_behind}</p>
            <form on:submit=save>
                <label for="time-zone">{tr("console.zone.label")}</label>
                <input id="time-zone" data-testid="shop-time-zone-input" autocomplete="off"
                    prop:value=move || typed.get() on:input=move |ev| typed.set(event_target_value(&ev))/>
                <button type="submit" data-testid="shop-time-zone-save" disabled=move || saving.get()>{tr("console.save")}</button>
                <p role="status" data-testid="shop-time-zone-message">{move || post.value().get()}</p>
            </form>
        </section>
    }
}

#[component]
pub fn ActivityTable() -> impl IntoView {
    let list = RwSignal::new(None::<Result<Vec<AdminActivity>, String>>);
    #[cfg(feature = "hydrate")]
    {
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move {
                while alive.load(std::sync::atomic::Ordering::Relaxed) {
                    let got = crate::endpoints::shop_sales().await;
                    if !alive.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    list.set(Some(got.map(|l| l.activities).map_err(|f| f.message())));
                    crate::clock::gloo_timers_sleep(5_000).await;
                }
            });
        });
    }
    view! {
        <section class="admin">
            <div class="admin-head">
                <h1>{tr("console.sales")}</h1>
                <span>
                    <a class="button secondary" href="/admin/audit" data-testid="admin-audit-link">{tr("audit.title")}</a>
                    " "
                    <a class="button" href="/admin/activities/new" data-testid="admin-new-activity">{tr("console.new_sale")}</a>
                </span>
            </div>
            {move || match list.get() {
                None => view! { <p>{tr("console.loading_sales")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{tr_with("console.load_failed", &[("error", &e)])}</p> }.into_any(),
                Some(Ok(items)) if items.is_empty() => view! { <p>{tr("console.no_sales")}</p> }.into_any(),
                Some(Ok(items)) => view! {
                    <div class="table-wrap">
                        <table class="data" data-testid="admin-activity-table">
                            <thead><tr>
                                <th scope="col">{tr("console.sale")}</th><th scope="col">{tr("orders.status")}</th><th scope="col">{tr("console.starts")}</th>
                                <th scope="col" class="num">{tr("dashboard.remaining")}</th><th scope="col" class="num">{tr("console.sold")}</th>
                                <th scope="col" class="num">{tr("dashboard.stock")}</th>
                            </tr></thead>
                            <tbody>
                                {items.into_iter().map(|a| {
                                    let href = format!("/admin/activities/{}", a.activity.id);
                                    let badge = status_badge(&a);
                                    let class = format!("badge {}", a.status.label().replace(' ', "-"));
                                    view! {
                                        <tr data-testid="admin-activity-row" data-id=a.activity.id.to_string()>
                                            <td><a href=href>{a.activity.title.clone()}</a></td>
                                            <td><span class=class data-testid="admin-activity-status">{badge}</span></td>
                                            <td data-testid="admin-starts-at">{let at = a.activity.starts_at.clone(); move || console_time(&at)}</td>
                                            <td class="num">{number(a.remaining)}</td>
                                            <td class="num">{number(a.sold)}</td>
                                            <td class="num">{number(a.activity.total_stock)}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any(),
            }}
        </section>
    }
}
