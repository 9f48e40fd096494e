//! The countdown of a sale, from the server's clock: "Starts in 01:02", "On sale — ends in
//! 10:00", "Sold out" (while no unit remains) or "Ended"; and the phase of a sale that the buy
//! panel follows. The ticking text is silent for screen readers; a polite live region beside it
//! speaks only at milestones (an hour, ten, five and one minute, ten seconds before the start) and
//! when the sale starts, sells out or ends.

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
pub fn Countdown(
    activity: Activity,
    remaining: RwSignal<Option<i64>>,
    /// Whether milestones are spoken (the sale's own page; not every card of the list).
    #[prop(optional)]
    announce: bool,
) -> impl IntoView {
    let clock = ServerClock::get();
    let starts = activity.starts_at.clone();
    let a = activity.clone();
    let text = move || match phase(&a, clock.now_ms.get()) {
        (Phase::Unknown, _) => format!("Starts {starts}"),
        (Phase::Upcoming, ms) => format!("Starts in {}", countdown_text(ms)),
        (Phase::Live, _) if remaining.get() == Some(0) => "Sold out".to_string(),
        (Phase::Live, ms) => format!("On sale — ends in {}", countdown_text(ms)),
        (Phase::Ended, _) => "Ended".to_string(),
    };
    let sold_out = move || remaining.get() == Some(0);
    // A memo: the region's text (so what is spoken) changes only when the milestone does.
    let milestone = Memo::new(move |_| {
        let (phase, ms) = phase(&activity, clock.now_ms.get());
        milestone_text(phase, ms, remaining.get() == Some(0))
    });
    view! {
        <p class="countdown" class:sold-out=sold_out data-testid="countdown" aria-live="off">{text}</p>
        {announce.then(|| view! {
            <p class="sr-only" role="status" aria-live="polite" data-testid="countdown-announcement">{move || milestone.get()}</p>
        })}
    }
}

/// What the live region says: the next milestone before the start, or the sale's state.
pub fn milestone_text(phase: Phase, ms_left: f64, sold_out: bool) -> String {
    const MARKS: [(f64, &str); 5] = [
        (10.0, "10 seconds"),
        (60.0, "1 minute"),
        (300.0, "5 minutes"),
        (600.0, "10 minutes"),
        (3600.0, "an hour"),
    ];
    match phase {
        Phase::Unknown => String::new(),
        Phase::Upcoming => MARKS
            .iter()
            .find(|(secs, _)| ms_left <= secs * 1000.0)
            .map_or_else(
                || "The sale has not started yet.".to_string(),
                |(_, label)| format!("The sale starts in less than {label}."),
            ),
        Phase::Live if sold_out => "Sold out.".to_string(),
        Phase::Live => "The sale is on: you can buy now.".to_string(),
        Phase::Ended => "The sale has ended.".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_region_speaks_at_milestones_only() {
        let said: std::collections::BTreeSet<String> = (0..7_200)
            .map(|s| milestone_text(Phase::Upcoming, f64::from(7_200 - s) * 1000.0, false))
            .collect();
        // Two hours of ticking seconds say six different things, not 7,200.
        assert_eq!(said.len(), 6, "{said:?}");
        assert_eq!(
            milestone_text(Phase::Upcoming, 9_000.0, false),
            "The sale starts in less than 10 seconds."
        );
        assert_eq!(milestone_text(Phase::Live, 1.0, true), "Sold out.");
    }
}
