//! The seckill server: HTTP API, server-side rendering, and (in later modules) the buy path.

pub mod accounts;
pub mod broker;
pub mod config;
pub mod db;
pub mod error;
pub mod health;
pub mod input;
pub mod net;
pub mod password;
pub mod session;
pub mod startup;
pub mod state;
pub mod throttle;

pub use config::Config;
pub use startup::Application;
