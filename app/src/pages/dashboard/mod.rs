//! `/admin/activities/{id}`: the live dashboard of one sale. Its figures are polled every second
//! (the sale itself every five), charted, and acted on: add stock and pause / resume
//! (`actions.rs`), the stock-addition audit (`actions.rs`) and the orders with CSV (`orders.rs`).

mod actions;
mod forecast;
mod orders;

use crate::components::cord::FailOpenSwitch;
use crate::{
    api::{ActivityStats, AdminActivity, SaleId},
    clock::console_time,
    components::{
        chart::{Chart, Sample},
        merchant_only::MerchantOnly,
    },
    format::page_title,
    i18n::{money, number, tr, tr_count, tr_with},
    pages::{console::status_badge, not_found::NotFound},
};
#[cfg(feature = "hydrate")]
use crate::{client, components::chart::KEEP_SAMPLES};
use actions::{AddStock, PauseSwitch, StockAudit};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use orders::OrdersTable;

#[component]
pub fn DashboardPage() -> impl IntoView {
    let params = use_params_map();
    let id = params
        .read_untracked()
        .get("id")
        .and_then(|id| id.parse::<SaleId>().ok());
    view! {
        <Title text=page_title(&tr("dashboard.title"))/>
        <MerchantOnly>
            {match id {
                Some(id) => view! { <Dashboard id/> }.into_any(),
                None => view! { <NotFound/> }.into_any(),
            }}
        </MerchantOnly>
    }
}

/// The dashboard's sale: `None` while loading, then the sale or why it could not be loaded.
pub type SaleSignal = RwSignal<Option<Result<AdminActivity, String>>>;

/// Reads the loaded sale, if there is one.
pub fn with_sale<T>(sale: SaleSignal, f: impl FnOnce(&AdminActivity) -> T) -> Option<T> {
    sale.with(|s| s.as_ref().and_then(|r| r.as_ref().ok()).map(f))
}

/// Changes the loaded sale, if there is one.
pub fn update_sale(sale: SaleSignal, f: impl FnOnce(&mut AdminActivity)) {
    sale.update(|s| {
        if let Some(Ok(a)) = s {
            f(a)
        }
    });
}

#[component]
pub fn Dashboard(id: SaleId) -> impl IntoView {
    let activity: SaleSignal = RwSignal::new(None);
    let stats = RwSignal::new(None::<ActivityStats>);
    let stale = RwSignal::new(None::<String>);
    let updated = RwSignal::new(None::<String>);
    let samples = RwSignal::new(Vec::<Sample>::new());
    // Bumped after every merchant action, so the audit and the orders reload.
    let changes = RwSignal::new(0u32);

    #[cfg(feature = "hydrate")]
    {
        let live = Live {
            activity,
            stats,
            stale,
            updated,
            samples,
        };
        let alive = crate::clock::while_mounted();
        Effect::new(move |_| {
            let alive = alive.clone();
            leptos::task::spawn_local(async move { live.follow(id, &alive).await });
        });
    }
    let loaded = Memo::new(move |_| with_sale(activity, |_| ()).is_some());
    view! {
        <section class="admin dashboard">
            {move || match activity.get() {
                None => view! { <p>{tr("dashboard.loading")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(a)) => view! { <DashboardHead a activity/> }.into_any(),
            }}
            <StatsPanel stats stale updated/>
            <Chart samples/>
            // Mounted once the sale is known, and not again on every refresh (that would wipe
            // what the merchant is typing).
            {move || loaded.get().then(|| view! {
                <div class="admin-actions">
                    <AddStock id activity changes/>
                    <PauseSwitch id activity/>
                    <FailOpenSwitch id
                        open=Signal::derive(move || with_sale(activity, |a| a.activity.fail_open).unwrap_or(false))
                        on_change=Callback::new(move |a| update_sale(activity, |cur| cur.activity = a))/>
                </div>
            })}
            <forecast::ForecastPanel id activity/>
            <StockAudit id changes/>
            <OrdersTable id changes/>
        </section>
    }
}

/// What the dashboard shows of the sale as it goes.
#[cfg(feature = "hydrate")]
#[derive(Clone, Copy)]
struct Live {
    activity: SaleSignal,
    stats: RwSignal<Option<ActivityStats>>,
    stale: RwSignal<Option<String>>,
    updated: RwSignal<Option<String>>,
    samples: RwSignal<Vec<Sample>>,
}

#[cfg(feature = "hydrate")]
impl Live {
    /// The figures each second, the sale itself every fifth, until the page is left.
    async fn follow(self, id: SaleId, alive: &std::sync::atomic::AtomicBool) {
        use std::sync::atomic::Ordering::Relaxed;
        let mut tick = 0u64;
        while alive.load(Relaxed) {
            if tick.is_multiple_of(5) {
                let got = crate::endpoints::shop_sale(id).await;
                if !alive.load(Relaxed) {
                    break;
                }
                self.sale(got);
            }
            let got = crate::endpoints::sale_stats(id).await;
            if !alive.load(Relaxed) {
                break;
            }
            match got {
                Ok(s) => self.figures(s),
                Err(f) => self.stale.set(Some(f.message())),
            }
            tick += 1;
            crate::clock::gloo_timers_sleep(1_000).await;
        }
    }

    /// The sale as read; a failure shown only when nothing was shown yet or the sale is gone.
    fn sale(self, got: Result<AdminActivity, client::Failure>) {
        match got {
            Ok(a) => self.activity.set(Some(Ok(a))),
            Err(f) if self.activity.get_untracked().is_none() || f.status == 404 => {
                self.activity.set(Some(Err(if f.status == 404 {
                    tr("dashboard.no_such_sale")
                } else {
                    f.message()
                })))
            }
            Err(_) => {}
        }
    }

    /// New figures, and a sample of them for the chart (the last `KEEP_SAMPLES`).
    fn figures(self, s: ActivityStats) {
        let now = js_sys::Date::now();
        self.samples.update(|v| {
            v.push(Sample {
                at_ms: now,
                remaining: s.remaining,
                sold: s.units_taken(),
            });
            if v.len() > KEEP_SAMPLES {
                v.remove(0);
            }
        });
        self.stats.set(Some(s));
        self.stale.set(None);
        self.updated.set(Some(String::from(
            js_sys::Date::new_0().to_locale_time_string("default"),
        )));
    }
}

impl ActivityStats {
    /// Units the sale has taken (reserved, confirmed or paid) and not given back.
    pub fn units_taken(&self) -> i64 {
        self.total_stock - self.remaining
    }
}

#[component]
pub fn DashboardHead(a: AdminActivity, activity: SaleSignal) -> impl IntoView {
    let shop = format!("/activities/{}", a.activity.id);
    let badge = move || with_sale(activity, status_badge).unwrap_or_default();
    view! {
        <Title text=page_title(&tr_with("dashboard.sale_title", &[("title", &a.activity.title)]))/>
        <p><a href="/admin">{tr("dashboard.all_sales")}</a></p>
        <div class="admin-head">
            <h1 data-testid="admin-activity-title">{a.activity.title.clone()}</h1>
            <span class="badge" data-testid="admin-activity-status">{badge}</span>
        </div>
        <p class="muted">
            {let at = a.activity.starts_at.clone(); move || console_time(&at)} " → " {let at = a.activity.ends_at.clone(); move || console_time(&at)}
            " · " {tr_with("dashboard.price", &[("now", &money(a.activity.seckill_price_cents)), ("was", &money(a.activity.price_cents))])}
            " · " {tr_count("dashboard.per_shopper", i64::from(a.activity.per_user_limit), &[])} " · "
            <a href=shop>{tr("dashboard.storefront_page")}</a>
        </p>
    }
}

#[component]
pub fn StatsPanel(
    stats: RwSignal<Option<ActivityStats>>,
    stale: RwSignal<Option<String>>,
    updated: RwSignal<Option<String>>,
) -> impl IntoView {
    let figure = move |pick: fn(&ActivityStats) -> i64| {
        move || stats.with(|s| s.as_ref().map_or("…".to_string(), |s| number(pick(s))))
    };
    view! {
        <dl class="stats" data-testid="admin-stats" aria-live="off">
            <div><dt>{tr("dashboard.stock")}</dt><dd data-testid="stat-total_stock">{figure(|s| s.total_stock)}</dd></div>
            <div><dt>{tr("dashboard.remaining")}</dt><dd data-testid="stat-remaining">{figure(|s| s.remaining)}</dd></div>
            <div><dt>{tr("status.queued")}</dt><dd data-testid="stat-queued">{figure(|s| s.queued)}</dd></div>
            <div><dt>{tr("status.confirmed")}</dt><dd data-testid="stat-confirmed">{figure(|s| s.confirmed)}</dd></div>
            <div><dt>{tr("status.paid")}</dt><dd data-testid="stat-paid">{figure(|s| s.paid)}</dd></div>
            <div><dt>{tr("status.cancelled")}</dt><dd data-testid="stat-cancelled">{figure(|s| s.cancelled)}</dd></div>
            <div><dt>{tr("status.failed")}</dt><dd data-testid="stat-failed">{figure(|s| s.failed)}</dd></div>
            <div><dt>{tr("dashboard.attempts_per_sec")}</dt><dd data-testid="stat-attempts_per_sec">{figure(|s| s.attempts_per_sec)}</dd></div>
            <div><dt>{tr("dashboard.reminders")}</dt><dd data-testid="stat-reminders">{figure(|s| s.reminders)}</dd></div>
            <div><dt>{tr("dashboard.heat")}</dt><dd data-testid="stat-heat">{move || stats.with(|s| s.as_ref().map_or("…".to_string(), |s| {
                let views = number(s.views_per_sec);
                tr_with(if s.hot { "dashboard.heat_hot" } else { "dashboard.heat_views" }, &[("n", &views)])
            }))}</dd></div>
        </dl>
        {move || stats.with(|s| s.as_ref().and_then(|s| s.queue.clone())).map(|q| view! {
            <dl class="stats" data-testid="admin-queue" aria-label=tr("queue.label")>
                <div><dt>{tr("dashboard.waiting")}</dt><dd data-testid="stat-queue-waiting">{number(q.waiting)}</dd></div>
                <div><dt>{tr("dashboard.admitted")}</dt><dd data-testid="stat-queue-admitted">{number(q.admitted)}</dd></div>
                <div><dt>{tr("dashboard.in_flight")}</dt><dd data-testid="stat-queue-in_flight">{number(q.in_flight)}</dd></div>
                <div><dt>{tr("dashboard.admitted_per_sec")}</dt><dd data-testid="stat-queue-rate">{tr_with("dashboard.of", &[("part", &number(q.admitted_last_sec)), ("whole", &number(i64::from(q.admit_per_sec)))])}</dd></div>
                <div><dt>{tr("dashboard.lapsed")}</dt><dd data-testid="stat-queue-lapsed">{number(q.lapsed)}</dd></div>
                <div><dt>{tr("dashboard.admission")}</dt><dd data-testid="stat-queue-held">{q.held_back.map_or(tr("dashboard.flowing"), |why| tr_with("dashboard.held_back", &[("why", &why)]))}</dd></div>
            </dl>
        })}
        <p class="muted small">
            <span data-testid="admin-updated">{move || updated.get().map(|t| tr_with("dashboard.updated", &[("time", &t)]))}</span>
            {move || stale.get().map(|e| view! { <span class="error" role="status">" · " {tr_with("dashboard.stale", &[("error", &e)])}</span> })}
        </p>
    }
}
