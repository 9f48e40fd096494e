//! The countdown of a sale, from the server's clock: "Starts in 01:02", "On sale — ends in
//! 10:00", "Sold out" (while no unit remains) or "Ended"; and the phase of a sale that the buy
//! panel follows.

use crate::{
    api::Activity,
    clock::{countdown_text, parse_ms, ServerClock},
};
use leptos::prelude::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// The server clock is not known yet (before hydration and the first sync).
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

/// "Starts in 01:02", "On sale — ends in 10:00", "Sold out" or "Ended", from the server's clock
/// and the units left (`None` until known).
#[component]
pub fn Countdown(activity: Activity, remaining: RwSignal<Option<i64>>) -> impl IntoView {
    let clock = ServerClock::get();
    let starts = activity.starts_at.clone();
    let text = move || match phase(&activity, clock.now_ms.get()) {
        (Phase::Unknown, _) => format!("Starts {starts}"),
        (Phase::Upcoming, ms) => format!("Starts in {}", countdown_text(ms)),
        (Phase::Live, _) if remaining.get() == Some(0) => "Sold out".to_string(),
        (Phase::Live, ms) => format!("On sale — ends in {}", countdown_text(ms)),
        (Phase::Ended, _) => "Ended".to_string(),
    };
    let sold_out = move || remaining.get() == Some(0);
    view! { <p class="countdown" class:sold-out=sold_out data-testid="countdown" aria-live="off">{text}</p> }
}
