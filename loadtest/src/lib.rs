//! The load and cost measurements of the seckill server (`seckill-load`): a client of the whole
//! server, never part of it. `crowd` is a flash crowd with the invariants checked afterwards,
//! `pace` one request at a constant rate, `ceiling` the bare handlers the product is measured
//! against, `costs` the in-process checks of the buy path one at a time, `wrk` the in-stock buy for wrk.

pub mod ceiling;
pub mod costs;
pub mod crowd;
pub mod deployment;
pub mod pace;
pub mod sign;
pub mod wrk;

pub use deployment::Deployment;
