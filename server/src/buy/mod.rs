//! The buy path and what guards it: the gate (`gate.rs` and its one Redis script `gate.lua`),
//! the activity cache it reads, this instance's sold-out flags, the buy-attempt counters, the
//! captcha, and the login throttle. Built on `domain` and `infra`; knows nothing of HTTP.

pub mod activities;
pub mod attempts;
pub mod captcha;
pub mod gate;
pub mod soldout;
pub mod throttle;
