//! The browser entry point: hydrates the server-rendered storefront, keeping what the shopper
//! typed into its forms before the app started (`app::typed`).

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    let typed = app::typed::Typed::read();
    leptos::mount::hydrate_body(app::App);
    typed.restore();
}
