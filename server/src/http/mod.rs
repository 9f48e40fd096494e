//! The HTTP layer: one module per section of docs/api.md, each with its `router()` on the
//! application state (`state.rs`: each handler asks for the parts it uses, as `FromRef`
//! sub-states), plus what every request goes through (the error answers, JSON input and its
//! limits, the session cookie, the client address) and the site around the API (server-rendered pages, assets, headers).
//! `startup.rs` merges the routers. Handlers read the request and call into `buy`, `pipeline`,
//! `domain` and `infra`; nothing below imports from here.

pub mod accounts;
pub mod activities;
pub mod admin;
pub mod buy;
pub mod client_ip;
pub mod connection;
pub mod error;
pub mod exports;
pub mod input;
pub mod operator;
pub mod ops;
pub mod orders;
pub mod reminders;
pub mod session;
pub mod site;
pub mod state;
