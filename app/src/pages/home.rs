//! `/`: the list of sales, each a card with its image, price, stock and countdown, grouped as
//! "On sale now", "Starting soon" and "Ended or sold out" (so ended and sold-out sales never
//! bury the live ones), [`PAGE`] cards a page (`?page=2`). The groups follow the phase the server
//! saw when it rendered the page; the cards then follow the live clock and stock. The HTML carries
//! no per-user data (it is cacheable).

use crate::{
    clock::{parse_ms, ServerClock},
    components::{countdown::Countdown, stock::poll_stock},
    data::{self, SaleState},
    format::page_title,
    i18n::{money, tr, tr_count, tr_with},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// Cards on one page of the list.
pub const PAGE: usize = 24;

/// The list's groups, in the order they are shown.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Group {
    OnSale,
    Soon,
    Over,
}

impl Group {
    fn heading(self) -> String {
        match self {
            Group::OnSale => tr("home.on_sale"),
            Group::Soon => tr("home.soon"),
            Group::Over => tr("home.over"),
        }
    }

    fn of(sale: &SaleState, now: Option<f64>) -> Group {
        let a = &sale.activity;
        let (Some(now), Some(starts), Some(ends)) =
            (now, parse_ms(&a.starts_at), parse_ms(&a.ends_at))
        else {
            return Group::OnSale;
        };
        if now >= ends || (now >= starts && sale.remaining == Some(0)) {
            Group::Over
        } else if now < starts {
            Group::Soon
        } else {
            Group::OnSale
        }
    }
}

/// The sales in list order at server time `now`: on sale (newest start first), starting soon
/// (soonest first), ended or sold out (latest end first); then the `page`-th slice of [`PAGE`]
/// (from 1) and whether more follow.
pub fn arrange(
    mut sales: Vec<SaleState>,
    now: Option<f64>,
    page: usize,
) -> (Vec<(Group, SaleState)>, bool) {
    let key = |s: &SaleState| {
        let (starts, ends) = (
            parse_ms(&s.activity.starts_at).unwrap_or(0.0),
            parse_ms(&s.activity.ends_at).unwrap_or(0.0),
        );
        match Group::of(s, now) {
            Group::OnSale => (Group::OnSale, -starts),
            Group::Soon => (Group::Soon, starts),
            Group::Over => (Group::Over, -ends),
        }
    };
    sales.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    let from = page.saturating_sub(1) * PAGE;
    let more = sales.len() > from + PAGE;
    let shown = sales
        .into_iter()
        .skip(from)
        .take(PAGE)
        .map(|s| (Group::of(&s, now), s))
        .collect();
    (shown, more)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Activity;

    fn sale(id: i64, starts: &str, ends: &str, remaining: i64) -> SaleState {
        let activity: Activity = serde_json::from_value(serde_json::json!({
            "id": id, "title": "t", "description": "d", "image_url": null, "price_cents": 2,
            "seckill_price_cents": 1, "starts_at": starts, "ends_at": ends, "total_stock": 5,
            "per_user_limit": 1, "captcha_required": false, "payment_window_secs": 600,
            "paused": false,
        }))
        .unwrap();
        SaleState {
            activity,
            remaining: Some(remaining),
            seen_at_ms: None,
        }
    }

    #[test]
    fn live_sales_come_first_then_the_soonest_then_the_latest_ended() {
        let now = parse_ms("2026-11-26T12:00:00Z");
        let sales = vec![
            sale(1, "2026-11-20T10:00:00Z", "2026-11-20T11:00:00Z", 3),
            sale(2, "2026-11-26T11:00:00Z", "2026-11-26T13:00:00Z", 0),
            sale(3, "2026-11-26T11:30:00Z", "2026-11-26T13:00:00Z", 2),
            sale(4, "2026-11-27T10:00:00Z", "2026-11-27T11:00:00Z", 5),
            sale(5, "2026-11-26T13:00:00Z", "2026-11-26T14:00:00Z", 5),
            sale(6, "2026-11-25T10:00:00Z", "2026-11-25T11:00:00Z", 0),
            sale(7, "2026-11-26T10:00:00Z", "2026-11-26T12:30:00Z", 1),
        ];
        let (shown, more) = arrange(sales.clone(), now, 1);
        let order: Vec<(Group, i64)> = shown.iter().map(|(g, s)| (*g, s.activity.id.0)).collect();
        assert_eq!(
            order,
            vec![
                (Group::OnSale, 3),
                (Group::OnSale, 7),
                (Group::Soon, 5),
                (Group::Soon, 4),
                (Group::Over, 2),
                (Group::Over, 6),
                (Group::Over, 1),
            ]
        );
        assert!(!more);
        // Pages of PAGE: 60 live sales fill two pages and a half; the ended one comes last.
        let many: Vec<SaleState> = (0..60)
            .map(|i| sale(100 + i, "2026-11-26T11:00:00Z", "2026-11-26T13:00:00Z", 1))
            .chain([sale(1, "2026-11-20T10:00:00Z", "2026-11-20T11:00:00Z", 3)])
            .collect();
        let (first, more) = arrange(many.clone(), now, 1);
        assert_eq!((first.len(), more), (PAGE, true));
        let (last, more) = arrange(many, now, 3);
        assert_eq!((last.len(), more), (61 - 2 * PAGE, false));
        assert_eq!(
            last.last().map(|(g, s)| (*g, s.activity.id.0)),
            Some((Group::Over, 1))
        );
    }
}

#[component]
pub fn Home() -> impl IntoView {
    let activities = data::activities();
    let query = use_query_map();
    let page = move || {
        query
            .read()
            .get("page")
            .and_then(|p| p.parse::<usize>().ok())
            .filter(|p| *p >= 1)
            .unwrap_or(1)
    };
    view! {
        <Title text=page_title(&tr("home.title"))/>
        <section class="hero">
            <h1>{tr("home.title")}</h1>
            <p>{tr("home.tagline")}</p>
        </section>
        <Suspense fallback=|| view! { <p>{tr("home.loading")}</p> }>
            {move || activities.get().map(|r| match r {
                Ok(list) if list.is_empty() => view! { <p>{tr("home.empty")}</p> }.into_any(),
                Ok(list) => view! { <Listing list page=page()/> }.into_any(),
                Err(e) => view! { <p class="error" role="alert">{tr_with("home.load_failed", &[("error", &e)])}</p> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn Listing(list: Vec<SaleState>, page: usize) -> impl IntoView {
    // What the server saw when it rendered the page (so the hydrating page agrees), else the
    // synced clock (a page reached by a link).
    let now = list
        .first()
        .and_then(|s| s.seen_at_ms)
        .or_else(|| ServerClock::get().now_ms.get_untracked());
    let (shown, more) = arrange(list, now, page);
    let mut groups: Vec<(Group, Vec<SaleState>)> = Vec::new();
    for (group, sale) in shown {
        match groups.last_mut() {
            Some((g, sales)) if *g == group => sales.push(sale),
            _ => groups.push((group, vec![sale])),
        }
    }
    let empty = groups.is_empty();
    view! {
        {groups.into_iter().map(|(group, sales)| view! {
            <section class="sale-group" data-testid="sale-group" data-group=format!("{group:?}")>
                <h2>{group.heading()}</h2>
                <ul class="cards">
                    {sales.into_iter().map(|sale| view! { <ActivityCard sale/> }).collect_view()}
                </ul>
            </section>
        }).collect_view()}
        {empty.then(|| view! { <p>{tr("home.page_empty")}</p> })}
        <nav class="pages" aria-label=tr("home.pages")>
            {(page > 1).then(|| view! { <a href=format!("/?page={}", page - 1) rel="prev" data-testid="page-prev">{tr("home.prev")}</a> })}
            {more.then(|| view! { <a href=format!("/?page={}", page + 1) rel="next" data-testid="page-next">{tr("home.next")}</a> })}
        </nav>
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
            {activity.image_url.clone().map(|src| view! { <img class="card-image" src=src alt="" loading="lazy" width="320" height="180"/> })}
            <a href=href class="card-link">
                <h3>{activity.title.clone()}</h3>
            </a>
            <p class="price">
                <span class="now">{money(activity.seckill_price_cents)}</span>
                " " <s class="was">{money(activity.price_cents)}</s>
            </p>
            <p class="muted">{tr_count("units", activity.total_stock, &[])}</p>
            <Countdown activity=activity stock seen_at=sale.seen_at_ms/>
        </li>
    }
}
