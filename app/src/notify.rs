//! Notifications of the browser (the Notifications API), for a shopper who allowed them: the
//! waiting room's "your turn" and a reminded sale's start, shown while the page is open.

use web_sys::{Notification, NotificationOptions, NotificationPermission};

fn supported() -> bool {
    web_sys::window().is_some_and(|w| {
        js_sys::Reflect::has(&w, &wasm_bindgen::JsValue::from_str("Notification")).unwrap_or(false)
    })
}

pub fn granted() -> bool {
    supported() && Notification::permission() == NotificationPermission::Granted
}

/// Whether the browser may still be asked (neither allowed nor refused yet).
pub fn askable() -> bool {
    supported() && Notification::permission() == NotificationPermission::Default
}

pub async fn ask() {
    if let Ok(asked) = Notification::request_permission() {
        let _ = wasm_bindgen_futures::JsFuture::from(asked).await;
    }
}

/// Shows `title` with `body`, when the shopper allowed it; `tag` replaces an earlier one.
pub fn show(title: &str, body: &str, tag: &str) {
    if !granted() {
        return;
    }
    let options = NotificationOptions::new();
    options.set_body(body);
    options.set_tag(tag);
    let _ = Notification::new_with_options(title, &options);
}

/// Says the waiting room's turn has come.
pub fn turn() {
    show(
        &crate::i18n::tr("queue.notice.title"),
        &crate::i18n::tr("queue.notice.body"),
        "seckill-turn",
    );
}
