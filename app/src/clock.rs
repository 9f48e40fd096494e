//! The server's clock, as the browser sees it. The local clock may be wrong by minutes: the
//! browser samples `GET /api/time` a few times, keeps the sample with the smallest round trip,
//! and takes offset = server + rtt/2 − local. Countdowns read `now()`, never the local clock alone.

use leptos::prelude::*;

#[derive(Clone, Copy)]
pub struct ServerClock {
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    offset_ms: RwSignal<f64>,
    /// Server time in ms since the epoch, ticking four times a second once synced.
    pub now_ms: RwSignal<Option<f64>>,
}

impl ServerClock {
    pub(crate) fn provide() -> ServerClock {
        let clock = ServerClock {
            offset_ms: RwSignal::new(0.0),
            now_ms: RwSignal::new(None),
        };
        provide_context(clock);
        #[cfg(feature = "hydrate")]
        Effect::new(move |_| clock.start());
        clock
    }

    pub fn get() -> ServerClock {
        expect_context::<ServerClock>()
    }

    #[cfg(feature = "hydrate")]
    fn start(self) {
        leptos::task::spawn_local(async move {
            loop {
                if let Some(offset) = sample().await {
                    self.offset_ms.set(offset);
                    self.tick();
                }
                gloo_timers_sleep(60_000).await;
            }
        });
        let _ =
            set_interval_with_handle(move || self.tick(), std::time::Duration::from_millis(250));
    }

    #[cfg(feature = "hydrate")]
    fn tick(self) {
        if self.offset_ms.get_untracked() != 0.0 || self.now_ms.get_untracked().is_some() {
            self.now_ms
                .set(Some(js_sys::Date::now() + self.offset_ms.get_untracked()));
        }
    }
}

#[cfg(feature = "hydrate")]
async fn sample() -> Option<f64> {
    let mut best: Option<(f64, f64)> = None; // (rtt, offset)
    for _ in 0..5 {
        let sent = js_sys::Date::now();
        let Ok(t) = crate::endpoints::server_time().await else {
            continue;
        };
        let received = js_sys::Date::now();
        let rtt = (received - sent).max(0.0);
        let offset = t.now_ms as f64 + rtt / 2.0 - received;
        if best.is_none_or(|(r, _)| rtt < r) {
            best = Some((rtt, offset));
        }
    }
    // An exact zero would read as "not synced"; a sub-millisecond nudge changes nothing shown.
    best.map(|(_, offset)| if offset == 0.0 { 0.001 } else { offset })
}

#[cfg(feature = "hydrate")]
pub(crate) async fn gloo_timers_sleep(ms: u32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms as i32);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// True until the component that called this is unmounted: loops a component starts in the
/// browser (polling) check it and end when the page is left.
#[cfg(feature = "hydrate")]
pub(crate) fn while_mounted() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    };
    let alive = Arc::new(AtomicBool::new(true));
    let flag = alive.clone();
    leptos::prelude::on_cleanup(move || flag.store(false, Ordering::Relaxed));
    alive
}

/// A time from the API in the browser's time zone, as the page's language writes it
/// ("11/22/2026, 10:30:00 AM", "2026/11/22 10:30:00"); the server, which does not know the zone,
/// writes it in UTC.
pub fn local_time(rfc3339: &str) -> String {
    #[cfg(feature = "hydrate")]
    {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(rfc3339));
        if !date.get_time().is_nan() {
            return String::from(date.to_locale_string(
                &crate::i18n::current().tag,
                &wasm_bindgen::JsValue::UNDEFINED,
            ));
        }
    }
    utc_time(rfc3339)
}

/// The merchant's shop time zone, once the app has read it (`None`: not a merchant, or not yet).
#[derive(Clone, Copy)]
pub struct ShopZone(pub RwSignal<Option<String>>);

impl ShopZone {
    /// Provided with the app; read from `GET /api/admin/shop` once the visitor is known to be a
    /// merchant.
    pub(crate) fn provide(session: crate::Session) {
        let zone = ShopZone(RwSignal::new(None));
        provide_context(zone);
        Effect::new(move |_| {
            let merchant = session
                .user
                .with(|u| matches!(u, Some(Some(u)) if u.role == crate::api::Role::Merchant));
            if merchant {
                leptos::task::spawn_local(async move {
                    if let Ok(shop) = crate::endpoints::shop_settings().await {
                        zone.0.set(Some(shop.time_zone));
                    }
                });
            }
        });
    }
}

/// A time from the API as the console shows it: in the shop's time zone, with the zone's short
/// name ("26/11/2026, 18:30:00 GMT+8"), once the app knows it; until then (and for anyone but a
/// merchant) as [`local_time`]. Reactive: called in a closure, it follows the zone.
pub fn console_time(rfc3339: &str) -> String {
    let zone = use_context::<ShopZone>().and_then(|z| z.0.get());
    #[cfg(feature = "hydrate")]
    if let Some(zone) = zone {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(rfc3339));
        if !date.get_time().is_nan() {
            let options = js_sys::Object::new();
            let _ = js_sys::Reflect::set(&options, &"timeZone".into(), &zone.as_str().into());
            let _ = js_sys::Reflect::set(&options, &"timeZoneName".into(), &"short".into());
            return String::from(date.to_locale_string("default", &options));
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = zone;
    local_time(rfc3339)
}

/// "2026-11-22 10:30:00 UTC": a time from the API as the server writes it.
pub fn utc_time(rfc3339: &str) -> String {
    rfc3339
        .replace('T', " ")
        .trim_end_matches('Z')
        .split('.')
        .next()
        .unwrap_or(rfc3339)
        .to_string()
        + " UTC"
}

/// A `<time>`: in UTC in the server's HTML and while the page hydrates (so both agree), then in
/// the browser's own zone.
#[component]
pub fn When(at: String) -> impl IntoView {
    let text = RwSignal::new(utc_time(&at));
    #[cfg(feature = "hydrate")]
    {
        let at = at.clone();
        Effect::new(move |_| text.set(local_time(&at)));
    }
    view! { <time datetime=at>{move || text.get()}</time> }
}

/// "2 d 03:04:05", "03:04:05" or "04:05".
pub fn countdown_text(ms: f64) -> String {
    let total = (ms.max(0.0) / 1000.0).ceil() as i64;
    let (d, h, m, s) = (
        total / 86_400,
        total % 86_400 / 3600,
        total % 3600 / 60,
        total % 60,
    );
    if d > 0 {
        crate::i18n::tr_with(
            "countdown.days",
            &[
                ("d", &d.to_string()),
                ("clock", &format!("{h:02}:{m:02}:{s:02}")),
            ],
        )
    } else if h > 0 {
        format!("{h:02}:{m:02}:{s:02}")
    } else {
        format!("{m:02}:{s:02}")
    }
}

/// Milliseconds since the epoch of an RFC 3339 time written by the API.
pub fn parse_ms(rfc3339: &str) -> Option<f64> {
    #[cfg(feature = "hydrate")]
    {
        let ms = js_sys::Date::parse(rfc3339);
        (!ms.is_nan()).then_some(ms)
    }
    #[cfg(all(feature = "ssr", not(feature = "hydrate")))]
    {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .ok()
            .map(|t| t.timestamp_millis() as f64)
    }
    #[cfg(not(any(feature = "ssr", feature = "hydrate")))]
    {
        let _ = rfc3339;
        None
    }
}
