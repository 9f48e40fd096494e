//! The dashboard's demand forecast: before the start, the crowd to expect from reminders, page
//! views and the line, the time to sell out and the settings that would serve it, with the
//! reasons and the measured figures they rest on; after the sale, what happened beside it. Every
//! count is written by the page's language's plural and number rules (the API's own `reasons`
//! are English sentences for other clients; the page writes its own from the same figures).

use super::{with_sale, SaleSignal};
use crate::{
    api::{Forecast, SaleId},
    i18n::{self, duration_ms, number, tr, tr_count, tr_with, Catalog},
};
use leptos::prelude::*;

#[component]
pub fn ForecastPanel(id: SaleId, activity: SaleSignal) -> impl IntoView {
    let forecast = RwSignal::new(None::<Result<Forecast, String>>);
    Effect::new(move |_| {
        leptos::task::spawn_local(async move {
            let got = crate::endpoints::forecast(id).await;
            forecast.set(Some(got.map_err(|f| f.message())));
        });
    });
    view! {
        <section class="card forecast" aria-label=tr("forecast.title") data-testid="forecast">
            <h2>{tr("forecast.title")}</h2>
            {move || match forecast.get() {
                None => view! { <p class="muted">{tr("forecast.loading")}</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" role="alert">{e}</p> }.into_any(),
                Some(Ok(f)) => view! { <ForecastFigures f activity/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn ForecastFigures(f: Forecast, activity: SaleSignal) -> impl IntoView {
    let r = &f.recommended;
    let sell_out = f
        .expected_sell_out_ms
        .map_or(tr("forecast.not_expected"), duration_ms);
    let actual = f.actual.clone().map(|a| {
        view! {
            <h3>{tr("forecast.what_happened")}</h3>
            <dl class="stats" data-testid="forecast-actual">
                <div><dt>{tr("forecast.attempts")}</dt><dd>{number(a.attempts)}</dd></div>
                <div><dt>{tr("forecast.unique_buyers")}</dt><dd>{number(a.unique_buyers)}</dd></div>
                {a.joined.map(|j| view! { <div><dt>{tr("forecast.in_line")}</dt><dd>{number(j)}</dd></div> })}
                <div><dt>{tr("forecast.sold_out_after")}</dt><dd>{a.sold_out_after_ms.map_or(tr("forecast.did_not_sell_out"), duration_ms)}</dd></div>
            </dl>
        }
    });
    let recommended = [
        tr_count("forecast.admission", r.admit_per_sec, &[]),
        tr_count("forecast.shards", r.stock_shards, &[]),
        tr(if r.waiting_room {
            "forecast.room_on"
        } else {
            "forecast.room_optional"
        }),
    ]
    .join(" · ");
    let reasons = {
        let f = f.clone();
        move || {
            let catalog = i18n::current();
            match with_sale(activity, |a| {
                (a.activity.total_stock, a.activity.per_user_limit)
            }) {
                Some((stock, limit)) => reasons(&catalog, &f, stock, i64::from(limit)),
                None => f.reasons.clone(),
            }
        }
    };
    let basis = tr_with(
        "forecast.basis",
        &[
            ("buys", &number(f.basis.buys_per_sec)),
            ("cpu_ms", &f.basis.cpu_ms_per_buy.to_string()),
            ("gate", &number(f.basis.gate_calls_per_sec)),
        ],
    );
    view! {
        <dl class="stats">
            <div><dt>{tr("forecast.reminders")}</dt><dd data-testid="forecast-reminders">{number(f.reminders)}</dd></div>
            <div><dt>{tr("forecast.page_views")}</dt><dd data-testid="forecast-views">{number(f.page_views)}</dd></div>
            <div><dt>{tr("forecast.in_line")}</dt><dd>{number(f.joined)}</dd></div>
            <div><dt>{tr("forecast.crowd")}</dt><dd data-testid="forecast-crowd">{number(f.expected_crowd)}</dd></div>
            <div><dt>{tr("forecast.sell_out_in")}</dt><dd>{sell_out}</dd></div>
        </dl>
        <h3>{tr("forecast.recommended")}</h3>
        <p data-testid="forecast-recommended">{recommended}</p>
        <ul class="reasons" data-testid="forecast-reasons">
            {move || reasons().into_iter().map(|why| view! { <li>{why}</li> }).collect_view()}
        </ul>
        <p class="muted small">{basis}</p>
        {actual}
    }
}

/// Why the advice is what it is, one sentence a line, in `c`'s language: from the forecast's own
/// figures and the sale's units and limit (the same steps as the server's advice).
pub fn reasons(c: &Catalog, f: &Forecast, stock: i64, limit: i64) -> Vec<String> {
    let r = &f.recommended;
    let crowd = f.expected_crowd;
    let admit = c.number(r.admit_per_sec);
    let units = c.count("units", stock, &[]);
    let peak = if r.waiting_room {
        r.admit_per_sec
    } else {
        crowd.max(1)
    };
    let crowd_line = c.text(
        "forecast.reason.crowd",
        &[
            ("crowd", &c.count("forecast.at_least", crowd, &[])),
            (
                "reminders",
                &c.count("forecast.n_reminders", f.reminders, &[]),
            ),
            ("views", &c.count("forecast.n_views", f.page_views, &[])),
            ("joined", &c.count("forecast.n_in_line", f.joined, &[])),
        ],
    );
    let room = if r.waiting_room {
        c.count(
            "forecast.reason.room_on",
            crowd,
            &[("admit", &admit), ("units", &units)],
        )
    } else {
        c.count("forecast.reason.room_optional", crowd, &[("admit", &admit)])
    };
    let admission = c.count(
        "forecast.reason.admit",
        r.admit_per_sec,
        &[
            ("capacity", &c.number(f.basis.buys_per_sec)),
            ("cpu_ms", &f.basis.cpu_ms_per_buy.to_string()),
        ],
    );
    let shards = c.count(
        "forecast.reason.shards",
        r.stock_shards,
        &[
            ("peak", &c.count("forecast.n_gate_calls", peak, &[])),
            (
                "gate",
                &c.count("forecast.n_gate_calls", f.basis.gate_calls_per_sec, &[]),
            ),
        ],
    );
    let sell_out = match f.expected_sell_out_ms {
        Some(ms) => c.count("forecast.reason.sells_out", (ms + 999) / 1000, &[]),
        None => c.count(
            "forecast.reason.no_sell_out",
            crowd,
            &[("limit", &c.number(limit)), ("units", &units)],
        ),
    };
    vec![crowd_line, room, admission, shards, sell_out]
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::api::{ForecastBasis, Recommended};

    fn forecast(crowd: i64, waiting_room: bool, shards: i64, sell_out: Option<i64>) -> Forecast {
        Forecast {
            reminders: 1,
            page_views: crowd,
            joined: 0,
            expected_crowd: crowd,
            expected_sell_out_ms: sell_out,
            recommended: Recommended {
                admit_per_sec: 1_000,
                stock_shards: shards,
                waiting_room,
                crowd_threshold: 20,
            },
            reasons: vec![],
            basis: ForecastBasis {
                buys_per_sec: 1_250,
                cpu_ms_per_buy: 0.8,
                gate_calls_per_sec: 40_000,
            },
            actual: None,
        }
    }

    #[test]
    fn the_forecasts_reasons_count_by_each_languages_rules() {
        let en = Catalog::of("en").unwrap();
        let one = reasons(&en, &forecast(1, false, 1, None), 1, 1);
        assert_eq!(
            one[0],
            "At least 1 shopper is expected: the most of 1 reminder, 1 page view before the start and 0 in the line."
        );
        assert_eq!(
            one[1],
            "Waiting room optional: 1 shopper fits within one second at 1,000 buys/s."
        );
        assert!(
            one[2].starts_with("Admit 1,000 shoppers/s: 80 % of the 1,250 buys/s"),
            "{}",
            one[2]
        );
        assert_eq!(
            one[3],
            "1 stock shard: at most 1 gate call/s, and one Redis ran 40,000 gate calls/s in make bench."
        );
        assert_eq!(
            one[4],
            "Not expected to sell out: 1 shopper × 1 per shopper is less than the 1 unit."
        );
        let many = reasons(&en, &forecast(25_000, true, 2, Some(1_500)), 5_000, 2);
        assert!(
            many[0].starts_with("At least 25,000 shoppers are expected"),
            "{}",
            many[0]
        );
        assert!(
            many[1].contains(
                "25,000 shoppers arriving in the first second are more than the 1,000 buys/s"
            ),
            "{}",
            many[1]
        );
        assert!(many[1].contains("twice the 5,000 units"), "{}", many[1]);
        assert!(
            many[3].starts_with("2 stock shards: at most 1,000 gate calls/s"),
            "{}",
            many[3]
        );
        assert_eq!(
            many[4],
            "Expected to sell out in about 2 s, if every shopper buys up to the limit."
        );

        let zh = Catalog::of("zh-CN").unwrap();
        let one = reasons(&zh, &forecast(1, false, 1, None), 1, 1);
        assert!(one[0].contains("1 位"), "{}", one[0]);
        assert!(!one.iter().any(|l| l.contains("shopper")), "{one:?}");
    }
}
