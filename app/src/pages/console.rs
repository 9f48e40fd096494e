//! `/admin`: the merchant's list of sales with their figures, refreshed while the page is open.

use crate::{
    api::{AdminActivity, SaleStatus},
    clock::console_time,
    components::merchant_only::MerchantOnly,
};
use leptos::prelude::*;
use leptos_meta::Title;

pub fn status_badge(a: &AdminActivity) -> String {
    if a.activity.paused && a.status == SaleStatus::Live {
        "live · paused".to_string()
    } else {
        a.status.label().to_string()
    }
}

#[component]
pub fn AdminHome() -> impl IntoView {
    view! {
        <Title text="Admin — Seckill"/>
        <MerchantOnly>
            <ActivityTable/>
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
                    format!("Times are shown in {}.", shop.time_zone)
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
    view! {
        <section class="card narrow">
            <h2>"Shop time zone"</h2>
            <p class="muted">"The console shows every time in it: "
                <strong data-testid="shop-time-zone">{move || zone.and_then(|z| z.get()).unwrap_or_else(|| "your browser's".to_string())}</strong> "."
            </p>
            <form on:submit=save>
                <label for="time-zone">"Time zone (an IANA name such as Asia/Shanghai or Europe/Paris)"</label>
                <input id="time-zone" data-testid="shop-time-zone-input" autocomplete="off"
                    prop:value=move || typed.get() on:input=move |ev| typed.set(event_target_value(&ev))/>
                <button type="submit" data-testid="shop-time-zone-save" disabled=move || saving.get()>"Save"</button>
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
                <h1>"Sales"</h1>
                <span>
                    <a class="button secondary" href="/admin/audit" data-testid="admin-audit-link">"Audit log"</a>
                    " "
                    <a class="button" href="/admin/activities/new" data-testid="admin-new-activity">"New sale"</a>
                </span>
            </div>
            {move || match list.get() {
                None => view! { <p>"Loading sales…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">"Could not load the sales: " {e}</p> }.into_any(),
                Some(Ok(items)) if items.is_empty() => view! { <p>"No sales yet. Create the first one."</p> }.into_any(),
                Some(Ok(items)) => view! {
                    <div class="table-wrap">
                        <table class="data" data-testid="admin-activity-table">
                            <thead><tr>
                                <th scope="col">"Sale"</th><th scope="col">"Status"</th><th scope="col">"Starts"</th>
                                <th scope="col" class="num">"Remaining"</th><th scope="col" class="num">"Sold"</th>
                                <th scope="col" class="num">"Stock"</th>
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
                                            <td class="num">{crate::format::thousands(a.remaining)}</td>
                                            <td class="num">{crate::format::thousands(a.sold)}</td>
                                            <td class="num">{crate::format::thousands(a.activity.total_stock)}</td>
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
