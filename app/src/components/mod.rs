//! Widgets more than one page uses, or that stand on their own: the header, the countdown, the
//! captcha and the proof of work, the remaining stock, the order tracker, the sign-in form, the console's door and the
//! dashboard's chart.

pub mod auth_form;
pub mod captcha;
pub mod chart;
pub mod cord;
pub mod countdown;
pub mod header;
pub mod merchant_only;
pub mod order_tracker;
pub mod proof_of_work;
pub mod stock;
