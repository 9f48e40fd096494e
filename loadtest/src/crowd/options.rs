//! What a crowd is asked to be: its size, the sale it buys on, its pace and its manners.

use std::time::Duration;

#[derive(Clone, Debug)]
pub struct CrowdOptions {
    /// The instances (or one load balancer); shopper i starts on instance i mod n.
    pub base_urls: Vec<String>,
    pub users: usize,
    pub stock: i64,
    pub per_user_limit: i32,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Seconds between creating the sale and its start.
    pub lead_secs: i64,
    pub show_progress: bool,
    /// Wait until every accepted unit is an order (off when no persister runs).
    pub settle: bool,
    /// Buy on this existing activity (its stock, limit and start) instead of creating one; it
    /// must not need a captcha.
    pub activity_id: Option<i64>,
    /// Shoppers started per second (0: as fast as `concurrency` allows). At a rate the run is an
    /// open loop: shopper i is due at i / rate from the start whatever the server's pace, and
    /// the report adds each purchase's latency from the instant it was due (no coordinated
    /// omission: a server that falls behind is charged the time its shoppers waited to start).
    pub rate: u32,
    /// How long a shopper keeps trying after a transport error, a `503`, or a load balancer's
    /// `502`/`504` (the request may not have reached an instance), each time on the next
    /// instance and with the same `Idempotency-Key`, as a client behind a load balancer does
    /// (zero: no second try).
    pub retry_for: Duration,
    /// Stock shards of the sale it creates (`None`: the server's default).
    pub stock_shards: Option<i16>,
    /// Every shopper's home (the shard their buys go to first) is the sale's first shard: the
    /// other shards' units are sold by borrowing. Needs `stock_shards`.
    pub homes_on_one_shard: bool,
    /// Whether the sale it creates has a waiting room (`None`: not named, the server's default).
    /// On a sale with one, every shopper joins the line before the start, polls it as the page
    /// does, and buys with the ticket once admitted.
    pub waiting_room: Option<bool>,
    /// The proof-of-work difficulty of the sale it creates (`None`: no bot check). On a sale
    /// that takes a proof of work, every shopper fetches a challenge and solves it before the
    /// start, as the page does during the countdown, and buys with it.
    pub proof_of_work: Option<i32>,
    /// Every n-th shopper (0: none) sends two buys at once, each of the whole limit: with the
    /// per-user limit held, one of them is refused; without it the shopper ends over the limit,
    /// which the report's invariants catch.
    pub greedy_every: usize,
    /// On a sale with a waiting room: a window in which everyone waits and polls (the sale
    /// paused, some seconds after the start), measured for `make bench-waiting-room`.
    pub poll_window: Option<PollWindowOptions>,
}

impl CrowdOptions {
    /// The one home of every shopper, as (the sale's stock shards, the shard), when the crowd has
    /// one.
    pub(crate) fn home(&self) -> anyhow::Result<Option<(i16, i16)>> {
        match (self.homes_on_one_shard, self.stock_shards) {
            (false, _) => Ok(None),
            (true, Some(shards)) => Ok(Some((shards, 0))),
            (true, None) => anyhow::bail!("a crowd of one home needs the sale's stock shards"),
        }
    }
}

/// The polling window's settings.
#[derive(Clone, Debug)]
pub struct PollWindowOptions {
    /// Seconds after the start at which the sale is paused (the places numbered by then).
    pub after_secs: u64,
    /// Seconds measured while it is paused.
    pub secs: u64,
    /// Processes whose CPU time is measured over the window (the instances, nginx).
    pub pids: Vec<u32>,
}
