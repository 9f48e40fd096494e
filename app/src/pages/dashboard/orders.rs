//! The sale's orders on the dashboard: filtered by status, paged, exported as CSV.

use crate::{
    api::{AdminOrderPage, OrderStatus, SaleId},
    clock::console_time,
    i18n::{number, tr, tr_count, tr_with},
};
use leptos::prelude::*;

pub const PAGE_SIZE: i64 = 20;

#[component]
pub fn OrdersTable(id: SaleId, changes: RwSignal<u32>) -> impl IntoView {
    let status = RwSignal::new(String::new());
    let offset = RwSignal::new(0i64);
    let reload = RwSignal::new(0u32);
    let page = RwSignal::new(None::<Result<AdminOrderPage, String>>);

    #[cfg(feature = "hydrate")]
    follow(id, changes, status, offset, reload, page);
    #[cfg(not(feature = "hydrate"))]
    let _ = (changes, reload);
    let csv = crate::endpoints::paths::orders_csv(id);
    let total = move || {
        page.with(|p| {
            p.as_ref()
                .and_then(|r| r.as_ref().ok())
                .map_or(0, |p| p.total)
        })
    };
    view! {
        <section class="card admin-orders">
            <div class="admin-head">
                <h2>{tr("orders.title")}</h2>
                <a class="button secondary" href=csv download=format!("orders-{id}.csv") data-testid="admin-csv-download">{tr("orders.csv")}</a>
            </div>
            <label for="orders-status">{tr("orders.status")}</label>
            <select id="orders-status" data-testid="admin-orders-status"
                on:change=move |ev| { offset.set(0); status.set(event_target_value(&ev)) }>
                <option value="">{tr("orders.all")}</option>
                {OrderStatus::STORED.into_iter().map(|s| view! { <option value=s.as_str()>{tr(&format!("order.badge.{s}"))}</option> }).collect_view()}
            </select>
            {move || match page.get() {
                None => view! { <p>{tr("orders.loading")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
                Some(Ok(p)) => view! { <OrdersPage page=p/> }.into_any(),
            }}
            <nav class="pager" aria-label=tr("orders.pages")>
                <button type="button" class="secondary" data-testid="admin-orders-prev" disabled=move || offset.get() == 0
                    on:click=move |_| offset.update(|o| *o = (*o - PAGE_SIZE).max(0))>{tr("orders.newer")}</button>
                <span data-testid="admin-orders-range">{move || tr_with("orders.range", &[("first", &number((offset.get() + 1).min(total()))), ("last", &number((offset.get() + PAGE_SIZE).min(total()))), ("total", &number(total()))])}</span>
                <button type="button" class="secondary" data-testid="admin-orders-next" disabled=move || { offset.get() + PAGE_SIZE >= total() }
                    on:click=move |_| offset.update(|o| *o += PAGE_SIZE)>{tr("orders.older")}</button>
            </nav>
        </section>
    }
}

/// Fetches the page the filter and offset name, again on every change of the sale and every
/// 5 s while the first page is shown (it follows the sale by itself).
#[cfg(feature = "hydrate")]
fn follow(
    id: SaleId,
    changes: RwSignal<u32>,
    status: RwSignal<String>,
    offset: RwSignal<i64>,
    reload: RwSignal<u32>,
    page: RwSignal<Option<Result<AdminOrderPage, String>>>,
) {
    Effect::new(move |_| {
        changes.track();
        reload.track();
        let (status, offset) = (status.get(), offset.get());
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::shop_orders(id, &status, PAGE_SIZE, offset).await;
            page.try_set(Some(got.map_err(|f| f.message())));
        });
    });
    let alive = crate::clock::while_mounted();
    Effect::new(move |_| {
        let alive = alive.clone();
        leptos::task::spawn_local(async move {
            loop {
                crate::clock::gloo_timers_sleep(5_000).await;
                if !alive.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                if offset.get_untracked() == 0 {
                    reload.update(|r| *r += 1);
                }
            }
        });
    });
}

/// One page of orders as a table.
#[component]
fn OrdersPage(page: AdminOrderPage) -> impl IntoView {
    let total = page.total;
    view! {
        <p class="muted small" data-testid="admin-orders-total">{tr_count("orders.count", total, &[])}</p>
        <div class="table-wrap">
            <table class="data" data-testid="admin-orders-table">
                <thead><tr>
                    <th scope="col" class="num">{tr("orders.order")}</th><th scope="col">{tr("orders.shopper")}</th><th scope="col" class="num">{tr("orders.qty")}</th>
                    <th scope="col">{tr("orders.status")}</th><th scope="col">{tr("orders.reserved")}</th><th scope="col">{tr("orders.pay_by")}</th>
                </tr></thead>
                <tbody>
                    {page.orders.into_iter().map(|o| view! {
                        <tr data-testid="admin-order-row">
                            <td class="num">{o.order_id}</td>
                            <td>{o.username}</td>
                            <td class="num">{o.quantity}</td>
                            <td>{tr(&format!("order.badge.{}", o.status.as_str()))}{o.reason.map(|r| format!(" ({r})"))}</td>
                            <td>{console_time(&o.reserved_at)}</td>
                            <td>{o.pay_by.as_deref().map(console_time)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}
