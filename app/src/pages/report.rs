//! `/activities/{id}/report`: the public report of an ended sale, rendered on the server (no
//! sign-in, no script needed): its units and the sums that prove nothing was oversold, its
//! orders, buyers and time to sell out, its attempts by outcome, its waiting room and drawing,
//! and a plot of attempts and units sold over time (SVG). `404` until the sale has ended. The
//! same figures are `GET /api/activities/{id}/report`.

use crate::{
    api::{SaleId, SaleReport, TimelineStep},
    format::{page_title, ticks},
    i18n::{duration_ms, number as thousands, tr, tr_count, tr_with},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn ReportPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || {
        params
            .read()
            .get("id")
            .and_then(|id| id.parse::<SaleId>().ok())
    };
    let report = crate::data::report(id);
    view! {
        <Suspense fallback=|| view! { <p>{tr("loading")}</p> }>
            {move || report.get().map(|r| match r {
                Ok(Some(report)) => view! { <Report report/> }.into_any(),
                Ok(None) => view! { <NoReport/> }.into_any(),
                Err(e) => view! { <p class="error" role="alert">{tr_with("report.load_failed", &[("error", &e)])}</p> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn NoReport() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text=page_title(&tr("report.none"))/>
        <section class="card narrow" data-testid="no-report">
            <h1>{tr("report.none")}</h1>
            <p>{tr("report.none.note")}</p>
            <p><a href="/">{tr("back_to_sales")}</a></p>
        </section>
    }
}

#[component]
fn Report(report: SaleReport) -> impl IntoView {
    let id = report.activity_id;
    let u = &report.units;
    let o = &report.orders;
    let a = &report.attempts;
    let r = &a.refused;
    let sums = tr_count(
        "report.sums",
        u.in_orders,
        &[
            ("sold", &thousands(u.sold)),
            ("on_sale", &thousands(u.on_sale)),
        ],
    );
    let row = |label: String, value: String, testid: &'static str| {
        view! { <tr><th scope="row">{label}</th><td class="num" data-testid=testid>{value}</td></tr> }
    };
    view! {
        <Title text=page_title(&tr_with("report.title", &[("title", &report.title)]))/>
        <article class="card report" data-testid="sale-report">
            <h1>{tr_with("report.title", &[("title", &report.title)])}</h1>
            <p class="muted">
                {tr("report.from")} " " <time datetime=report.starts_at.clone()>{crate::clock::utc_time(&report.starts_at)}</time>
                " " {tr("report.to")} " " <time datetime=report.ends_at.clone()>{crate::clock::utc_time(&report.ends_at)}</time>
                {tr_with("report.as_of", &[("time", &crate::clock::utc_time(&report.generated_at))])} " "
                <a href=crate::endpoints::paths::report(id)>{tr("report.json")}</a> "."
            </p>
            <p class=if u.not_oversold { "notice ok" } else { "notice error" } data-testid="not-oversold">
                {if u.not_oversold { tr("report.not_oversold") } else { tr("report.disagree") }} " " {sums}
            </p>
            <h2>{tr("report.units_and_orders")}</h2>
            <table class="data figures">
                <tbody>
                    {row(tr("report.units_on_sale"), thousands(u.on_sale), "units-on-sale")}
                    {row(tr("report.units_sold"), thousands(u.sold), "units-sold")}
                    {row(tr("report.orders_persisted"), thousands(o.persisted), "orders-persisted")}
                    {row(tr("report.orders_paid"), thousands(o.paid), "orders-paid")}
                    {row(tr("report.orders_confirmed"), thousands(o.confirmed), "orders-confirmed")}
                    {row(tr("report.orders_cancelled"), thousands(o.cancelled), "orders-cancelled")}
                    {row(tr("report.unique_buyers"), thousands(report.unique_buyers), "unique-buyers")}
                    {row(tr("report.time_to_sell_out"), report.sold_out_after_ms.map_or(tr("report.not_sold_out"), duration_ms), "sold-out-after")}
                </tbody>
            </table>
            <h2>{tr("report.buy_attempts")}</h2>
            <table class="data figures">
                <tbody>
                    {row(tr("report.attempts"), thousands(a.total), "attempts-total")}
                    {row(tr("report.accepted"), thousands(a.accepted), "attempts-accepted")}
                    {row(tr("report.refused_bot_check"), thousands(r.bot_check), "refused-bot-check")}
                    {row(tr("report.refused_limit"), thousands(r.limit), "refused-limit")}
                    {row(tr("report.refused_sold_out"), thousands(r.sold_out), "refused-sold-out")}
                    {row(tr("report.refused_blocked"), thousands(r.blocked), "refused-blocked")}
                    {row(tr("report.refused_rate_limited"), thousands(r.rate_limited), "refused-rate-limited")}
                    {row(tr("report.refused_other"), thousands(r.other), "refused-other")}
                </tbody>
            </table>
            <Timeline steps=report.timeline.clone()/>
            {report.waiting_room.clone().map(|w| {
                let wait = |ms: Option<i64>| ms.map_or("—".to_string(), duration_ms);
                view! {
                    <h2>{tr("queue.label")}</h2>
                    <table class="data figures">
                        <tbody>
                            {row(tr("report.line_joined"), thousands(w.joined), "line-joined")}
                            {row(tr("report.line_admitted"), thousands(w.admitted), "line-admitted")}
                            {row(tr("report.line_lapsed"), thousands(w.lapsed), "line-lapsed")}
                            {row(tr("report.wait_p50"), wait(w.wait_p50_ms), "wait-p50")}
                            {row(tr("report.wait_p90"), wait(w.wait_p90_ms), "wait-p90")}
                            {row(tr("report.wait_p99"), wait(w.wait_p99_ms), "wait-p99")}
                        </tbody>
                    </table>
                }
            })}
            {(!report.cord.is_empty()).then(|| view! {
                <h2>{tr("report.cord")}</h2>
                <ul class="audit" data-testid="report-cord">
                    {report.cord.iter().map(|c| {
                        let what = tr(&format!("report.cord.{}.{}", c.action.as_str(), c.scope));
                        let time = c.at.get(..19).unwrap_or(&c.at).replace('T', " ");
                        view! { <li data-testid="report-cord-pull">{tr_with("report.cord.entry", &[("time", &time), ("what", &what)])}</li> }
                    }).collect_view()}
                </ul>
            })}
            {report.crowd.clone().map(|c| view! {
                <h2>{tr("report.crowd")}</h2>
                <p data-testid="report-crowd">{crowd_text(&c)}</p>
            })}
            {report.drawing.clone().map(|d| view! {
                <h2>{tr("report.drawing")}</h2>
                <p>{tr("report.drawing.note")}</p>
                <p>{tr("drawing.seed")} " " <code class="hash" data-testid="report-seed">{d.seed}</code></p>
                <p>{tr("report.fingerprint")} <code class="hash" data-testid="report-commitment">{d.commitment}</code></p>
                <p class="muted">
                    {tr("report.recompute")} " "
                    <a href=crate::endpoints::paths::drawing(id)>{tr("report.published_drawing")}</a>
                    " " {tr("report.checked_by")} " " <code>"scripts/verify-drawing"</code> "."
                </p>
            })}
        </article>
    }
}

/// Attempts (bars) and units sold (line) per step of the sale, drawn as SVG on the server.
#[component]
fn Timeline(steps: Vec<TimelineStep>) -> impl IntoView {
    const W: f64 = 720.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 56.0;
    const BOTTOM: f64 = 28.0;
    if steps.is_empty() {
        return view! { <p class="muted">{tr("report.no_attempts")}</p> }.into_any();
    }
    let step_ms = steps.get(1).map_or(1_000, |s| s.from_ms).max(1);
    let top = steps
        .iter()
        .map(|s| s.attempts.max(s.sold))
        .max()
        .unwrap_or(1)
        .max(1);
    let axis = ticks(top, 5);
    let y_max = *axis.last().unwrap_or(&top) as f64;
    let (plot_w, plot_h) = (W - LEFT - 8.0, H - BOTTOM - 8.0);
    let x = |i: usize| LEFT + plot_w * i as f64 / steps.len() as f64;
    let y = |v: i64| 8.0 + plot_h * (1.0 - v as f64 / y_max);
    let bar_w = (plot_w / steps.len() as f64 * 0.8).max(1.0);
    let bars = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            view! { <rect class="attempts" x=format!("{:.1}", x(i)) y=format!("{:.1}", y(s.attempts))
                width=format!("{bar_w:.1}") height=format!("{:.1}", y(0) - y(s.attempts))/> }
        })
        .collect_view();
    let line = steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{:.1},{:.1}", x(i) + bar_w / 2.0, y(s.sold)))
        .collect::<Vec<_>>()
        .join(" ");
    let y_ticks = axis
        .iter()
        .map(|&v| {
            view! {
                <line class="grid" x1=LEFT x2=W - 8.0 y1=format!("{:.1}", y(v)) y2=format!("{:.1}", y(v))/>
                <text class="tick" x=LEFT - 6.0 y=format!("{:.1}", y(v) + 4.0) text-anchor="end">{thousands(v)}</text>
            }
        })
        .collect_view();
    let x_ticks = ticks(steps.len() as i64, 6)
        .into_iter()
        .filter(|&i| (i as usize) < steps.len())
        .map(|i| {
            view! { <text class="tick" x=format!("{:.1}", x(i as usize)) y=H - 8.0 text-anchor="middle">{duration_ms(i * step_ms)}</text> }
        })
        .collect_view();
    let table = steps
        .iter()
        .filter(|s| s.attempts > 0 || s.sold > 0)
        .map(|s| {
            view! { <tr><td>{duration_ms(s.from_ms)}</td><td class="num">{thousands(s.attempts)}</td><td class="num">{thousands(s.sold)}</td></tr> }
        })
        .collect_view();
    view! {
        <h2>{tr("report.over_time")}</h2>
        <figure class="chart">
            <svg viewBox=format!("0 0 {W} {H}") role="img" data-testid="report-plot"
                aria-label=tr("report.plot_label")>
                {y_ticks}
                {bars}
                <polyline class="sold" points=line/>
                {x_ticks}
            </svg>
            <figcaption class="muted small">
                <span class="key attempts">{tr("report.key_attempts")}</span> " " <span class="key sold">{tr("report.key_sold")}</span>
                {tr_with("report.per_step", &[("step", &duration_ms(step_ms))])}
            </figcaption>
            <details>
                <summary>{tr("report.plot_figures")}</summary>
                <table class="data chart-table">
                    <thead><tr><th scope="col">{tr("report.from_start")}</th><th scope="col" class="num">{tr("report.attempts")}</th><th scope="col" class="num">{tr("report.units_sold")}</th></tr></thead>
                    <tbody>{table}</tbody>
                </table>
            </details>
        </figure>
    }
    .into_any()
}

/// What a draw did with the crowds from one network, in the page's language.
fn crowd_text(c: &crate::api::CrowdOutcome) -> String {
    let figures = [
        ("threshold", thousands(i64::from(c.threshold))),
        ("groups", thousands(c.groups_over)),
        ("entries", thousands(c.entries_over)),
        ("demoted", thousands(c.demoted)),
        ("all", thousands(c.entries)),
    ];
    let figures: Vec<(&str, &str)> = figures.iter().map(|(k, v)| (*k, v.as_str())).collect();
    tr_with(&format!("report.crowd.{}", c.policy.as_str()), &figures)
}
