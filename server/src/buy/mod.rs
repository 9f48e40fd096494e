//! The buy path and what guards it: the gate (`gate.rs`; its Redis scripts, `gate.lua` on the
//! buyer's home shard, `lend.lua` and `settle.lua` when another shard lends the units, are in
//! `infra/scripts/`), the activity cache it reads, this instance's sold-out flags, the blocked
//! clients, the buy-attempt counters, the captcha, the bounds on the public doors, and the waiting
//! room in front of it all (`queue/`: the fair line, its admission step and tickets). Built on
//! `domain` and `infra`; knows nothing of HTTP.

pub mod activities;
pub(crate) mod attempts;
pub mod batch;
pub(crate) mod blocks;
pub(crate) mod captcha;
pub(crate) mod doors;
pub(crate) mod gate;
pub mod heat;
pub mod queue;
pub(crate) mod soldout;
