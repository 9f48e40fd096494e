//! Integration tests: the real application against the real services.

mod accounts;
mod admin;
mod crowd;
mod fuzz;
mod health;
mod hostile;
mod helpers;
mod input;
mod lifecycle;
mod seckill;
mod site;
