//! The countdown of a sale, from the server's clock: "Starts in 01:02", "On sale — ends in
//! 10:00", "Paused", "Sold out" (while no unit remains) or "Ended"; and the phase of a sale that
//! the buy panel follows. The server renders it from its own clock and figures, and the hydrating
//! page starts from the same ones (`SaleState`), so the HTML already says it. The ticking text is
//! silent for screen readers; a polite live region beside it speaks only at milestones (an hour,
//! ten, five and one minute, ten seconds before the start) and when the sale starts, pauses,
//! sells out or ends.

use crate::{
    api::Activity,
    clock::{countdown_text, parse_ms, utc_time, ServerClock},
    components::stock::Stock,
    i18n::{tr, tr_with},
};
use leptos::prelude::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// The server clock is not known yet (a page reached by a link, before the first sync).
    Unknown,
    Upcoming,
    Live,
    Ended,
}

pub fn phase(a: &Activity, now: Option<f64>) -> (Phase, f64) {
    let (Some(now), Some(starts), Some(ends)) = (now, parse_ms(&a.starts_at), parse_ms(&a.ends_at))
    else {
        return (Phase::Unknown, 0.0);
    };
    if now < starts {
        (Phase::Upcoming, starts - now)
    } else if now < ends {
        (Phase::Live, ends - now)
    } else {
        (Phase::Ended, 0.0)
    }
}

/// The server's time as the page knows it: the synced clock, else the instant the server
/// rendered the page (`seen_at`), which is what the server's HTML was written from.
pub fn server_now(seen_at: Option<f64>) -> Signal<Option<f64>> {
    let clock = ServerClock::get();
    Signal::derive(move || clock.now_ms.get().or(seen_at))
}

/// What a sale's countdown shows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shown {
    Unknown,
    Upcoming,
    OnSale,
    Paused,
    SoldOut,
    Ended,
}

impl Shown {
    pub fn of(phase: Phase, stock: Stock) -> Shown {
        match phase {
            Phase::Unknown => Shown::Unknown,
            Phase::Upcoming => Shown::Upcoming,
            Phase::Live if stock.paused.get() => Shown::Paused,
            Phase::Live if stock.remaining.get() == Some(0) => Shown::SoldOut,
            Phase::Live => Shown::OnSale,
            Phase::Ended => Shown::Ended,
        }
    }

    /// For `data-phase` (tests, styles).
    pub fn as_str(self) -> &'static str {
        match self {
            Shown::Unknown => "unknown",
            Shown::Upcoming => "upcoming",
            Shown::OnSale => "on-sale",
            Shown::Paused => "paused",
            Shown::SoldOut => "sold-out",
            Shown::Ended => "ended",
        }
    }
}

/// "Starts in 01:02", "On sale — ends in 10:00", "Paused", "Sold out" or "Ended", from the
/// server's clock and the sale's stock.
#[component]
pub fn Countdown(
    activity: Activity,
    stock: Stock,
    /// When the server rendered the page (`SaleState::seen_at_ms`).
    seen_at: Option<f64>,
    /// Whether milestones are spoken (the sale's own page; not every card of the list).
    #[prop(optional)]
    announce: bool,
) -> impl IntoView {
    let now = server_now(seen_at);
    let starts = activity.starts_at.clone();
    let a = activity.clone();
    let timed = Memo::new(move |_| phase(&a, now.get()));
    let shown = Memo::new(move |_| Shown::of(timed.get().0, stock));
    let text = move || match (shown.get(), timed.get().1) {
        (Shown::Unknown, _) => tr_with("sale.starts_at", &[("time", &utc_time(&starts))]),
        (Shown::Upcoming, ms) => tr_with("countdown.starts_in", &[("left", &countdown_text(ms))]),
        (Shown::Paused, _) => tr("countdown.paused"),
        (Shown::SoldOut, _) => tr("countdown.sold_out"),
        (Shown::OnSale, ms) => tr_with("countdown.on_sale", &[("left", &countdown_text(ms))]),
        (Shown::Ended, _) => tr("countdown.ended"),
    };
    // A memo: the region's text (so what is spoken) changes only when the milestone does.
    let milestone = Memo::new(move |_| {
        let (_, ms) = timed.get();
        milestone_text(shown.get(), ms)
    });
    view! {
        <p class="countdown" class:sold-out=move || shown.get() == Shown::SoldOut
            data-phase=move || shown.get().as_str() data-testid="countdown" aria-live="off">{text}</p>
        {announce.then(|| view! {
            <p class="sr-only" role="status" aria-live="polite" data-testid="countdown-announcement">{move || milestone.get()}</p>
        })}
    }
}

/// What the live region says: the next milestone before the start, or the sale's state.
pub fn milestone_text(shown: Shown, ms_left: f64) -> String {
    let secs = ms_left / 1000.0;
    match shown {
        Shown::Unknown => String::new(),
        Shown::Upcoming if secs <= 10.0 => tr("milestone.10s"),
        Shown::Upcoming if secs <= 60.0 => tr("milestone.1min"),
        Shown::Upcoming if secs <= 300.0 => tr("milestone.5min"),
        Shown::Upcoming if secs <= 600.0 => tr("milestone.10min"),
        Shown::Upcoming if secs <= 3600.0 => tr("milestone.1h"),
        Shown::Upcoming => tr("milestone.not_started"),
        Shown::Paused => tr("milestone.paused"),
        Shown::SoldOut => tr("milestone.sold_out"),
        Shown::OnSale => tr("milestone.on_sale"),
        Shown::Ended => tr("milestone.ended"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_region_speaks_at_milestones_only() {
        let said: std::collections::BTreeSet<String> = (0..7_200)
            .map(|s| milestone_text(Shown::Upcoming, f64::from(7_200 - s) * 1000.0))
            .collect();
        // Two hours of ticking seconds say six different things, not 7,200.
        assert_eq!(said.len(), 6, "{said:?}");
        assert_eq!(
            milestone_text(Shown::Upcoming, 9_000.0),
            "The sale starts in less than 10 seconds."
        );
        assert_eq!(milestone_text(Shown::SoldOut, 1.0), "Sold out.");
    }
}
