//! `/admin`: the merchant's list of sales with their figures, refreshed while the page is open.

#[cfg(feature = "hydrate")]
use crate::client;
use crate::{
    api::{AdminActivity, SaleStatus},
    clock::local_time,
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
        </MerchantOnly>
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
                    let got =
                        client::get::<crate::api::AdminActivityList>("/api/admin/activities").await;
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
                                            <td>{local_time(&a.activity.starts_at)}</td>
                                            <td class="num">{a.remaining}</td>
                                            <td class="num">{a.sold}</td>
                                            <td class="num">{a.activity.total_stock}</td>
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
