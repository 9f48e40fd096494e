//! The HTTP layer: one module per section of docs/api.md, each with its `router()` on the
//! application state (`state.rs`: each handler asks for the parts it uses, as `FromRef`
//! sub-states), plus what every request goes through (the error answers, JSON input and its
//! limits, the session cookie, the client address) and the site around the API (server-rendered pages, assets, headers).
//! `startup/routes.rs` merges the routers. Handlers read the request and call into `buy`, `pipeline`,
//! `domain` and `infra`; nothing below imports from here.

pub(crate) mod accounts;
pub mod activities;
pub(crate) mod admin;
pub(crate) mod buy;
pub(crate) mod client_ip;
pub(crate) mod connection;
pub(crate) mod cord;
pub(crate) mod error;
pub(crate) mod exports;
pub(crate) mod forms;
pub(crate) mod input;
pub(crate) mod observe;
pub(crate) mod operator;
pub mod ops;
pub(crate) mod orders;
pub(crate) mod page_edge;
pub(crate) mod reminders;
pub mod session;
pub mod site;
pub mod state;
