//! The seckill server: HTTP API, server-side rendering, and (in later modules) the buy path.

pub mod accounts;
pub mod admin;
pub mod attempts;
pub mod broker;
pub mod captcha;
pub mod catalog;
pub mod config;
pub mod crowd;
pub mod db;
pub mod deadline;
pub mod error;
pub mod gate;
pub mod giveback;
pub mod health;
pub mod input;
pub mod journal;
pub mod keys;
pub mod metrics;
pub mod net;
pub mod orders;
pub mod password;
pub mod payment;
pub mod persister;
pub mod reconcile;
pub mod session;
pub mod site;
pub mod soldout;
pub mod startup;
pub mod state;
pub mod throttle;

pub use config::Config;
pub use startup::Application;
