//! Integration tests: the real application against the real services.

mod accounts;
mod admin;
mod bot_check;
mod crowd;
mod doors;
mod fuzz;
mod health;
mod helpers;
mod hostile;
mod input;
mod keepalive;
mod lifecycle;
mod limits;
mod queue;
mod replication;
mod seckill;
mod sessions;
mod shards;
mod site;
