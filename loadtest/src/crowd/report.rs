//! What a crowd saw: answers by outcome, latency, the time to sell out and to persist, the
//! line's figures, and the invariants checked in the database; printed for `make bench`.

use super::*;
use app::api::{Activity, SaleId, Token};
use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

/// What the polling window measured.
#[derive(Debug)]
pub struct PollWindow {
    pub secs: f64,
    pub polls: u64,
    pub board_polls: u64,
    /// Board reads nginx (or a CDN) answered from its cache (`X-Cache-Status` HIT, STALE or
    /// UPDATING).
    pub cached: u64,
    /// Redis commands over the window (`INFO commandstats`, every command), by command.
    pub redis_calls: BTreeMap<String, u64>,
    /// CPU time of each measured process over the window, ms.
    pub cpu_ms: Vec<(u32, f64)>,
}

#[derive(Debug)]
pub struct Report {
    pub activity_id: SaleId,
    pub outcomes: BTreeMap<String, u64>,
    /// Answers that were tried again (by `retry_for`), by outcome.
    pub retried: BTreeMap<String, u64>,
    pub accepted: u64,
    /// The token of every `202`.
    pub tokens: Vec<Token>,
    pub requests: u64,
    pub elapsed: Duration,
    /// Buy latency in microseconds: p50, p90, p99, p99.9, max.
    pub latency_us: [u64; 5],
    /// At a rate (an open loop): each purchase (path + buy) from the instant it was due to its
    /// answer, in microseconds: p50, p90, p99, p99.9, max; and the rate asked.
    pub paced: Option<(u32, [u64; 5])>,
    pub sold_out_after: Option<Duration>,
    pub persisted_after_last_buy: Option<Duration>,
    pub total_stock: i64,
    pub sold: i64,
    pub users_over_limit: i64,
    pub tokens_not_persisted: i64,
    /// Units the crowd asked for: shoppers × the activity's per-user limit.
    pub demand_units: i64,
    /// On a sale with a waiting room: the line's figures.
    pub queue: Option<QueueReport>,
    /// Every buy attempt, in the order answered.
    pub history: Vec<Answer>,
}

/// One buy attempt as the crowd saw it: the history a checker reads (`server/tests/partitions`).
#[derive(Debug, Clone)]
pub struct Answer {
    /// When it was sent, from the crowd's start (its path request first, then the buy).
    pub at: Duration,
    /// From sending to the answer (or to the error).
    pub took: Duration,
    pub shopper: usize,
    /// The `Idempotency-Key` every attempt of this shopper sends.
    pub key: String,
    /// `accepted`, an error code, or a transport outcome (as `outcomes` counts them).
    pub outcome: String,
    /// The order token of a `202`.
    pub token: Option<Token>,
}

#[derive(Debug)]
pub struct QueueReport {
    /// Seconds the joins before the start took.
    pub joined_in: Duration,
    /// Status polls over the whole sale (the board's and the line's).
    pub polls: u64,
    /// Of them, reads of the line's board (`GET …/line`, cacheable), as the page makes once its
    /// place is numbered.
    pub board_polls: u64,
    /// From the start (or a later join) to the admission, in ms: p50, p90, p99, max.
    pub wait_ms: [u64; 4],
    pub admitted: u64,
    /// Shoppers the line told "sold out" while they waited.
    pub told_sold_out: u64,
    /// Board reads answered by a cache in front (`X-Cache-Status`).
    pub board_cached: u64,
    /// Spearman's rank correlation of the places (admission order promised) and the instants
    /// the shoppers saw their admission, over those whose place was numbered; and how many.
    pub order_kept: Option<(f64, usize)>,
    pub window: Option<PollWindow>,
}

impl Report {
    /// the platform's invariants: sold exactly what was accepted, at most the stock and exactly the
    /// stock when demand exceeded it, nobody over the limit, nothing left queued.
    pub fn invariants_hold(&self) -> bool {
        let expected = self.demand_units.min(self.total_stock);
        self.sold == self.accepted as i64
            && self.sold == expected
            && self.users_over_limit == 0
            && self.tokens_not_persisted == 0
    }

    pub fn print(&self) {
        let secs = self.elapsed.as_secs_f64();
        println!(
            "activity {}: {} shoppers (each: GET path + POST buy) in {:.2} s = {:.0} shoppers/s",
            self.activity_id,
            self.requests,
            secs,
            self.requests as f64 / secs
        );
        for (outcome, n) in &self.outcomes {
            println!("  {outcome:<16} {n:>9}");
        }
        for (outcome, n) in &self.retried {
            println!("  retried after {outcome:<16} {n:>9}");
        }
        let [p50, p90, p99, p999, max] = self.latency_us.map(|us| us as f64 / 1000.0);
        println!("buy latency ms: p50 {p50:.2}  p90 {p90:.2}  p99 {p99:.2}  p99.9 {p999:.2}  max {max:.2}");
        if let Some((rate, paced)) = self.paced {
            let [p50, p90, p99, p999, max] = paced.map(|us| us as f64 / 1000.0);
            println!("open loop at {rate} shoppers/s, purchase (path + buy) from its due instant ms: p50 {p50:.2}  p90 {p90:.2}  p99 {p99:.2}  p99.9 {p999:.2}  max {max:.2}");
        }
        let ms = |d: Option<Duration>| {
            d.map_or("n/a".to_string(), |d| {
                format!("{:.0} ms", d.as_secs_f64() * 1000.0)
            })
        };
        println!(
            "sold out after {} from the start; every order persisted {} after the last buy",
            ms(self.sold_out_after),
            ms(self.persisted_after_last_buy)
        );
        if let Some(q) = &self.queue {
            let [p50, p90, p99, max] = q.wait_ms.map(|ms| ms as f64 / 1000.0);
            println!(
                "waiting room: joined in {:.1} s before the start; {} admitted, {} told sold out while waiting; {} status polls ({} of the board)",
                q.joined_in.as_secs_f64(), q.admitted, q.told_sold_out, q.polls, q.board_polls
            );
            println!(
                "wait for admission s: p50 {p50:.1}  p90 {p90:.1}  p99 {p99:.1}  max {max:.1}"
            );
            println!(
                "board reads answered by the cache in front: {} of {}",
                q.board_cached, q.board_polls
            );
            if let Some((rho, n)) = q.order_kept {
                println!("order kept: rank correlation of place and admission (Spearman) {rho:.4} over {n} admitted");
            }
            if let Some(w) = &q.window {
                w.print();
            }
        }
        println!(
            "invariants: sold {} of {} (accepted {}), users over the limit {}, tokens not persisted {} → {}",
            self.sold,
            self.total_stock,
            self.accepted,
            self.users_over_limit,
            self.tokens_not_persisted,
            if self.invariants_hold() { "OK" } else { "BROKEN" }
        );
    }
}

impl PollWindow {
    pub fn print(&self) {
        let total: u64 = self.redis_calls.values().sum();
        let per_poll = |n: f64| n / (self.polls.max(1) as f64);
        println!(
            "polling window: {} polls in {:.1} s ({:.0}/s), {} of the board, {} answered by the cache ({:.1} %)",
            self.polls,
            self.secs,
            self.polls as f64 / self.secs,
            self.board_polls,
            self.cached,
            100.0 * self.cached as f64 / self.board_polls.max(1) as f64
        );
        println!(
            "polling window: {total} Redis commands = {:.4} per poll",
            per_poll(total as f64)
        );
        let mut top: Vec<_> = self.redis_calls.iter().filter(|(_, n)| **n > 0).collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        for (cmd, n) in top.iter().take(8) {
            println!(
                "  redis {cmd:<16} {n:>9}  ({:.4} per poll)",
                per_poll(**n as f64)
            );
        }
        for (pid, ms) in &self.cpu_ms {
            println!(
                "polling window: process {pid} CPU {ms:.0} ms = {:.1} µs per poll",
                1000.0 * per_poll(*ms)
            );
        }
    }
}

/// A process's CPU time so far (user + system), ms, from `/proc` (Linux).
pub(crate) fn cpu_ms(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // The kernel's clock ticks are 100 a second on Linux.
    Some(ticks * 10.0)
}

/// Spearman's rank correlation of the pairs (ties share their mean rank).
pub fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    pub(crate) fn ranks(values: Vec<f64>) -> Vec<f64> {
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
        let mut ranks = vec![0.0; values.len()];
        let mut i = 0;
        while i < order.len() {
            let mut j = i;
            while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
                j += 1;
            }
            let mean = (i + j) as f64 / 2.0;
            for k in i..=j {
                ranks[order[k]] = mean;
            }
            i = j + 1;
        }
        ranks
    }
    if pairs.len() < 2 {
        return None;
    }
    let x = ranks(pairs.iter().map(|p| p.0).collect());
    let y = ranks(pairs.iter().map(|p| p.1).collect());
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(&y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sx = x.iter().map(|a| (a - mx).powi(2)).sum::<f64>().sqrt();
    let sy = y.iter().map(|b| (b - my).powi(2)).sum::<f64>().sqrt();
    (sx > 0.0 && sy > 0.0).then(|| cov / (sx * sy))
}

pub(crate) struct Timings {
    pub(crate) joined_in: Duration,
    pub(crate) elapsed: Duration,
    pub(crate) started: Instant,
    pub(crate) persisted_after_last_buy: Option<Duration>,
    pub(crate) window: Option<PollWindow>,
}

impl Report {
    pub(crate) fn new(
        opts: &CrowdOptions,
        activity: &Activity,
        t: Tally,
        figures: Figures,
        timings: Timings,
    ) -> Report {
        let q = |p: f64| t.latency.value_at_quantile(p);
        let w = |p: f64| t.waits.value_at_quantile(p);
        let queue = activity.waiting_room.then(|| QueueReport {
            joined_in: timings.joined_in,
            polls: t.polls,
            board_polls: t.board_polls,
            wait_ms: [w(0.5), w(0.9), w(0.99), t.waits.max()],
            admitted: t.waits.len(),
            told_sold_out: t.told_sold_out,
            board_cached: t.board_cached,
            order_kept: spearman(
                &t.admissions
                    .iter()
                    .map(|&(p, w)| (p as f64, w as f64))
                    .collect::<Vec<_>>(),
            )
            .map(|rho| (rho, t.admissions.len())),
            window: timings.window,
        });
        Report {
            activity_id: activity.id,
            requests: t.outcomes.values().sum::<u64>(),
            accepted: t.accepted_units as u64,
            latency_us: [q(0.5), q(0.9), q(0.99), q(0.999), t.latency.max()],
            paced: (opts.rate > 0).then(|| {
                let p = |q: f64| t.paced.value_at_quantile(q);
                (
                    opts.rate,
                    [p(0.5), p(0.9), p(0.99), p(0.999), t.paced.max()],
                )
            }),
            sold_out_after: t.sold_out_at.map(|at| at - timings.started),
            tokens_not_persisted: figures.tokens_missing,
            tokens: t.tokens,
            outcomes: t.outcomes,
            retried: t.retried,
            elapsed: timings.elapsed,
            persisted_after_last_buy: timings.persisted_after_last_buy,
            total_stock: figures.total_stock,
            sold: figures.sold,
            users_over_limit: figures.users_over_limit,
            demand_units: opts.users as i64 * i64::from(activity.per_user_limit),
            queue,
            history: t.history,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::spearman;

    #[test]
    pub(crate) fn rank_correlation_of_order_kept_reversed_and_shuffled() {
        let kept: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, (i * 7) as f64)).collect();
        assert!((spearman(&kept).unwrap() - 1.0).abs() < 1e-12);
        let reversed: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, -(i as f64))).collect();
        assert!((spearman(&reversed).unwrap() + 1.0).abs() < 1e-12);
        // Admissions seen at the same poll share a rank: a close but not perfect correlation.
        let polled: Vec<(f64, f64)> = (0..100).map(|i| (i as f64, (i / 10) as f64)).collect();
        let rho = spearman(&polled).unwrap();
        assert!(rho > 0.98 && rho < 1.0, "{rho}");
        assert_eq!(spearman(&[(1.0, 1.0)]), None);
        assert_eq!(spearman(&[(1.0, 1.0), (2.0, 1.0)]), None, "no spread");
    }
}
