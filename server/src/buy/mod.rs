//! The buy path and what guards it: the gate (`gate.rs`; its Redis scripts, `gate.lua` on the
//! buyer's home shard, `lend.lua` and `settle.lua` when another shard lends the units, are in
//! `infra/scripts/`), the activity cache it reads, this instance's sold-out flags, the blocked
//! clients, the buy-attempt counters, the captcha, the bounds on the public doors, and the waiting
//! room in front of it all (`queue/`: the fair line, its admission step and tickets). Built on
//! `domain` and `infra`; knows nothing of HTTP.

pub mod activities;
pub mod attempts;
pub mod batch;
pub mod blocks;
pub mod captcha;
pub mod doors;
pub mod gate;
pub mod pow;
pub mod queue;
pub mod soldout;
