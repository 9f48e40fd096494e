//! `/activities/{id}/report`: the public report of an ended sale, rendered on the server (no
//! sign-in, no script needed): its units and the sums that prove nothing was oversold, its
//! orders, buyers and time to sell out, its attempts by outcome, its waiting room and drawing,
//! and a plot of attempts and units sold over time (SVG). `404` until the sale has ended. The
//! same figures are `GET /api/activities/{id}/report`.

use crate::{
    api::{SaleReport, TimelineStep},
    format::{duration_ms, page_title, thousands, ticks, units},
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
            .and_then(|id| id.parse::<i64>().ok())
    };
    let report = crate::data::report(id);
    view! {
        <Suspense fallback=|| view! { <p>"Loading…"</p> }>
            {move || report.get().map(|r| match r {
                Ok(Some(report)) => view! { <Report report/> }.into_any(),
                Ok(None) => view! { <NoReport/> }.into_any(),
                Err(e) => view! { <p class="error" role="alert">"Could not load the report: " {e}</p> }.into_any(),
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
        <Title text="No report yet — Seckill"/>
        <section class="card narrow" data-testid="no-report">
            <h1>"No report yet"</h1>
            <p>"A sale's report is published once the sale has ended."</p>
            <p><a href="/">"Back to the sales"</a></p>
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
    let sums = format!(
        "{} in confirmed and paid orders = {} counted sold ≤ {} on sale",
        units(u.in_orders),
        thousands(u.sold),
        thousands(u.on_sale)
    );
    let row = |label: &'static str, value: String, testid: &'static str| {
        view! { <tr><th scope="row">{label}</th><td class="num" data-testid=testid>{value}</td></tr> }
    };
    view! {
        <Title text=page_title(&format!("Report: {}", report.title))/>
        <article class="card report" data-testid="sale-report">
            <h1>"Report: " {report.title.clone()}</h1>
            <p class="muted">
                "From " <time datetime=report.starts_at.clone()>{crate::clock::utc_time(&report.starts_at)}</time>
                " to " <time datetime=report.ends_at.clone()>{crate::clock::utc_time(&report.ends_at)}</time>
                ". Figures as of " {crate::clock::utc_time(&report.generated_at)}
                "; no shopper is named. " <a href=format!("/api/activities/{id}/report")>"The same as JSON"</a> "."
            </p>
            <p class=if u.not_oversold { "notice ok" } else { "notice error" } data-testid="not-oversold">
                {if u.not_oversold { "Nothing was oversold: " } else { "The sums disagree: " }} {sums}
            </p>
            <h2>"Units and orders"</h2>
            <table class="data figures">
                <tbody>
                    {row("Units on sale", thousands(u.on_sale), "units-on-sale")}
                    {row("Units sold", thousands(u.sold), "units-sold")}
                    {row("Orders persisted", thousands(o.persisted), "orders-persisted")}
                    {row("Orders paid", thousands(o.paid), "orders-paid")}
                    {row("Orders confirmed, not paid yet", thousands(o.confirmed), "orders-confirmed")}
                    {row("Orders cancelled (unpaid in time)", thousands(o.cancelled), "orders-cancelled")}
                    {row("Unique buyers", thousands(report.unique_buyers), "unique-buyers")}
                    {row("Time to sell out", report.sold_out_after_ms.map_or("did not sell out".to_string(), duration_ms), "sold-out-after")}
                </tbody>
            </table>
            <h2>"Buy attempts"</h2>
            <table class="data figures">
                <tbody>
                    {row("Attempts", thousands(a.total), "attempts-total")}
                    {row("Accepted", thousands(a.accepted), "attempts-accepted")}
                    {row("Refused: bot check failed", thousands(r.bot_check), "refused-bot-check")}
                    {row("Refused: limit per shopper reached", thousands(r.limit), "refused-limit")}
                    {row("Refused: sold out", thousands(r.sold_out), "refused-sold-out")}
                    {row("Refused: blocked", thousands(r.blocked), "refused-blocked")}
                    {row("Refused: too many attempts", thousands(r.rate_limited), "refused-rate-limited")}
                    {row("Refused: other (paused, not admitted, busy…)", thousands(r.other), "refused-other")}
                </tbody>
            </table>
            <Timeline steps=report.timeline.clone()/>
            {report.waiting_room.clone().map(|w| {
                let wait = |ms: Option<i64>| ms.map_or("—".to_string(), duration_ms);
                view! {
                    <h2>"Waiting room"</h2>
                    <table class="data figures">
                        <tbody>
                            {row("Shoppers in the line", thousands(w.joined), "line-joined")}
                            {row("Admitted", thousands(w.admitted), "line-admitted")}
                            {row("Turns that lapsed unclaimed", thousands(w.lapsed), "line-lapsed")}
                            {row("Wait to the turn, median", wait(w.wait_p50_ms), "wait-p50")}
                            {row("Wait, 90th percentile", wait(w.wait_p90_ms), "wait-p90")}
                            {row("Wait, 99th percentile", wait(w.wait_p99_ms), "wait-p99")}
                        </tbody>
                    </table>
                }
            })}
            {report.drawing.clone().map(|d| view! {
                <h2>"The drawing"</h2>
                <p>"Places of those who joined before the start were drawn from this seed, whose fingerprint was published before the sale:"</p>
                <p>"Seed: " <code class="hash" data-testid="report-seed">{d.seed}</code></p>
                <p>"Fingerprint (SHA-256 of the seed): " <code class="hash" data-testid="report-commitment">{d.commitment}</code></p>
                <p class="muted">
                    "Anyone can recompute every place from the seed and the receipts: "
                    <a href=format!("/api/activities/{id}/drawing")>"the published drawing"</a>
                    " (kept for a day after the sale), checked by " <code>"scripts/verify-drawing"</code> "."
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
        return view! { <p class="muted">"No attempt was recorded."</p> }.into_any();
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
        <h2>"Over time"</h2>
        <figure class="chart">
            <svg viewBox=format!("0 0 {W} {H}") role="img" data-testid="report-plot"
                aria-label="Buy attempts and units sold over the sale; the figures are in the table below">
                {y_ticks}
                {bars}
                <polyline class="sold" points=line/>
                {x_ticks}
            </svg>
            <figcaption class="muted small">
                <span class="key attempts">"■ attempts"</span> " " <span class="key sold">"■ units sold"</span>
                {format!(" — per {} from the start", duration_ms(step_ms))}
            </figcaption>
            <details>
                <summary>"The plot's figures"</summary>
                <table class="data chart-table">
                    <thead><tr><th scope="col">"From the start"</th><th scope="col" class="num">"Attempts"</th><th scope="col" class="num">"Units sold"</th></tr></thead>
                    <tbody>{table}</tbody>
                </table>
            </details>
        </figure>
    }
    .into_any()
}
