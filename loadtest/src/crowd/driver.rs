//! The crowd itself: each shopper's steps before the start (places, proofs of work), the buys
//! and retries, a waiting room followed as the page does, the tally, and the wait for orders.

use super::*;
use crate::deployment::Deployment;
use anyhow::Context;
use app::api::{
    Activity, BuyPath, BuyRequest, ErrorCode, LineBoard, QueueState, QueueStatus, Role, SaleId,
    Token,
};
use futures_util::{stream, StreamExt};
use hdrhistogram::Histogram;
use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

/// Counters the polling window reads while the crowd runs.
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) polls: AtomicU64,
    pub(crate) board: AtomicU64,
    pub(crate) cached: AtomicU64,
}

pub(crate) struct Tally {
    pub(crate) started: Instant,
    pub(crate) history: Vec<Answer>,
    pub(crate) outcomes: BTreeMap<String, u64>,
    pub(crate) retried: BTreeMap<String, u64>,
    pub(crate) latency: Histogram<u64>,
    pub(crate) paced: Histogram<u64>,
    pub(crate) accepted_units: i64,
    pub(crate) tokens: Vec<Token>,
    pub(crate) sold_out_at: Option<Instant>,
    pub(crate) last_accept: Option<Instant>,
    pub(crate) waits: Histogram<u64>,
    pub(crate) polls: u64,
    pub(crate) board_polls: u64,
    pub(crate) told_sold_out: u64,
    pub(crate) board_cached: u64,
    /// (place, ms from the start to the admission seen) of each admitted shopper with a place.
    pub(crate) admissions: Vec<(i64, u64)>,
}

/// What the shoppers do during the countdown, as the page does: join the line of a sale with a
/// waiting room, solve the proofs of work of a sale that takes them.
pub(crate) struct BeforeStart {
    pub(crate) joined_in: Duration,
    /// Each shopper's place value (the `place` cookie the join set), by shopper.
    pub(crate) places: Vec<Option<String>>,
    pub(crate) proofs: Vec<String>,
    pub(crate) took: Duration,
}

impl BeforeStart {
    pub(crate) async fn prepare(
        http: &reqwest::Client,
        bases: &[&str],
        activity: &Activity,
        users: &[i64],
        cookie: &impl Fn(i64, Role) -> String,
        opts: &CrowdOptions,
    ) -> anyhow::Result<BeforeStart> {
        let joining = Instant::now();
        let mut places = vec![None; users.len()];
        if activity.waiting_room {
            let aid = activity.id;
            let joins: Vec<(usize, anyhow::Result<Joined>)> =
                stream::iter(users.iter().copied().enumerate())
                    .map(|(i, user)| {
                        let (cookie, addr) = (cookie(user, Role::Shopper), addr_of(i));
                        let base = bases[i % bases.len()];
                        async move { (i, join_line(http, base, aid, &cookie, &addr, false).await) }
                    })
                    .buffer_unordered(opts.concurrency)
                    .collect()
                    .await;
            let mut failed = 0;
            for (i, joined) in joins {
                match joined {
                    Ok(j) => places[i] = j.place,
                    Err(_) => failed += 1,
                }
            }
            anyhow::ensure!(
                failed == 0,
                "{failed} shoppers could not join the waiting room"
            );
        }
        let joined_in = joining.elapsed();
        let proofs = if activity.bot_check.takes_proof_of_work() {
            solve_all(http, bases, activity.id, users, cookie, opts.concurrency).await?
        } else {
            Vec::new()
        };
        Ok(BeforeStart {
            joined_in,
            places,
            proofs,
            took: joining.elapsed(),
        })
    }
}

/// Until every accepted unit is an order (or two minutes; not at all without `settle`): the
/// database's figures, and how long after the last accepted buy the last order was written.
pub(crate) async fn settle(
    db: &sqlx::PgPool,
    id: SaleId,
    quantity: i32,
    t: &Tally,
    settle: bool,
) -> anyhow::Result<(Figures, Option<Duration>)> {
    let last_buy = t.last_accept.unwrap_or_else(Instant::now);
    let deadline = Instant::now() + Duration::from_secs(if settle { 120 } else { 0 });
    let tokens: Vec<uuid::Uuid> = t.tokens.iter().map(|t| t.0).collect();
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        poll.tick().await;
        let figures = Figures::read(db, id, quantity, &tokens).await?;
        if figures.tokens_missing == 0 {
            return Ok((figures, Some(last_buy.elapsed())));
        }
        if Instant::now() > deadline {
            return Ok((figures, None));
        }
    }
}

impl Tally {
    pub(crate) fn new() -> anyhow::Result<Tally> {
        Ok(Tally {
            started: Instant::now(),
            history: Vec::new(),
            outcomes: BTreeMap::new(),
            retried: BTreeMap::new(),
            latency: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            paced: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            accepted_units: 0,
            tokens: Vec::new(),
            sold_out_at: None,
            last_accept: None,
            waits: Histogram::new_with_bounds(1, 3_600_000, 3)?,
            polls: 0,
            board_polls: 0,
            told_sold_out: 0,
            board_cached: 0,
            admissions: Vec::new(),
        })
    }
}

impl Target<'_> {
    /// Every shopper at once (paced at `rate` when set), each buying once, or waiting in the
    /// line and then buying; the tally of what they were told.
    pub(crate) async fn crowd(
        &self,
        users: &[i64],
        cookie: &impl Fn(i64, Role) -> String,
        waiting_room: bool,
        opts: &CrowdOptions,
    ) -> anyhow::Result<Tally> {
        let progress = if opts.show_progress {
            indicatif::ProgressBar::new(opts.users as u64)
        } else {
            indicatif::ProgressBar::hidden()
        };
        let tally = Arc::new(Mutex::new(Tally::new()?));
        // In a waiting room every shopper is there at once (polling), and at a rate each comes
        // at their due instant whoever else is still waiting for an answer (an open loop: one
        // shopper's slow buy never holds back another's arrival); `concurrency` bounds the
        // requests in flight instead. Without a rate, `concurrency` shoppers at once.
        let present = if waiting_room || opts.rate > 0 {
            users.len().max(1)
        } else {
            opts.concurrency
        };
        stream::iter(users.iter().enumerate())
            .for_each_concurrent(present, |(i, &user)| {
                let (tally, progress) = (tally.clone(), &progress);
                let cookie = cookie(user, Role::Shopper);
                let addr = addr_of(i);
                let start_at = (opts.rate > 0).then(|| {
                    self.started + Duration::from_secs_f64(i as f64 / f64::from(opts.rate))
                });
                async move {
                    if let Some(at) = start_at {
                        tokio::time::sleep_until(at.into()).await;
                    }
                    let greedy = opts.greedy_every > 0 && i % opts.greedy_every == 0;
                    let outcome = if waiting_room {
                        self.wait_and_shop(i, &cookie, &addr, &tally).await
                    } else if greedy {
                        let (first, second) = tokio::join!(
                            self.shop(i, &cookie, &addr, None, &tally),
                            self.shop(i, &cookie, &addr, None, &tally)
                        );
                        *tally
                            .lock()
                            .expect("tally")
                            .outcomes
                            .entry(second)
                            .or_default() += 1;
                        first
                    } else {
                        self.shop(i, &cookie, &addr, None, &tally).await
                    };
                    let mut t = tally.lock().expect("tally");
                    if let Some(due) = start_at {
                        let _ = t.paced.record((due.elapsed().as_micros() as u64).max(1));
                    }
                    *t.outcomes.entry(outcome).or_default() += 1;
                    progress.inc(1);
                }
            })
            .await;
        progress.finish_and_clear();
        Ok(Arc::try_unwrap(tally)
            .ok()
            .context("tally still shared")?
            .into_inner()
            .expect("tally"))
    }
}

/// The database's side of the report.
#[derive(sqlx::FromRow)]
pub(crate) struct Figures {
    pub(crate) total_stock: i64,
    pub(crate) sold: i64,
    pub(crate) users_over_limit: i64,
    /// Tokens a `202` named that are no order.
    pub(crate) tokens_missing: i64,
}

impl Figures {
    /// Asked again for up to a minute while PostgreSQL does not answer (a fault test may have
    /// just restarted it).
    /// `tokens`: every token a `202` named; those that are no order (of any status) are counted
    /// one by one, not as a sum of units that other orders could make up for.
    pub(crate) async fn read(
        db: &sqlx::PgPool,
        id: SaleId,
        per_user_limit: i32,
        tokens: &[uuid::Uuid],
    ) -> anyhow::Result<Figures> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let read = sqlx::query_as(
                "SELECT total_stock, sold,
                        (SELECT count(*) FROM (SELECT user_id FROM orders WHERE activity_id = $1 AND status IN ('confirmed', 'paid')
                         GROUP BY user_id HAVING sum(quantity) > $2) o) AS users_over_limit,
                        (SELECT count(*) FROM unnest($3::uuid[]) AS t(token)
                         WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.token = t.token)) AS tokens_missing
                 FROM activities WHERE id = $1",
            )
            .bind(id.0)
            .bind(i64::from(per_user_limit))
            .bind(tokens)
            .fetch_one(db)
            .await;
            match read {
                // Retried until the deadline: the database may be down for a while (the fault suites).
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                read => return Ok(read?),
            }
        }
    }
}

/// Where and what the crowd buys.
pub(crate) struct Target<'a> {
    pub(crate) http: &'a reqwest::Client,
    pub(crate) bases: &'a [&'a str],
    pub(crate) id: SaleId,
    pub(crate) quantity: i32,
    pub(crate) retry_for: Duration,
    /// Requests in flight at once (a waiting room's crowd is all there, polling).
    pub(crate) requests: tokio::sync::Semaphore,
    pub(crate) started: Instant,
    /// Each shopper's solved proof of work (empty when the sale takes none).
    pub(crate) proofs: Vec<String>,
    /// Each shopper's place value in the waiting room, as the join left it.
    pub(crate) places: Vec<Option<String>>,
    pub(crate) seen: Seen,
}

/// Every shopper's proof of work for sale `id`: the challenges fetched as each shopper, solved
/// on every core (the solving is the browser's cost; it is paid here before the start).
pub(crate) async fn solve_all(
    http: &reqwest::Client,
    bases: &[&str],
    id: SaleId,
    users: &[i64],
    cookie: &impl Fn(i64, Role) -> String,
    concurrency: usize,
) -> anyhow::Result<Vec<String>> {
    let challenges: Vec<anyhow::Result<altcha::Challenge>> =
        stream::iter(users.iter().copied().enumerate())
            .map(|(i, user)| {
                let (cookie, base) = (cookie(user, Role::Shopper), bases[i % bases.len()]);
                async move {
                    let resp = http
                        .get(format!("{base}/api/activities/{id}/challenge"))
                        .header("cookie", cookie)
                        .send()
                        .await?;
                    anyhow::ensure!(resp.status().is_success(), "challenge: {}", resp.status());
                    Ok(resp.json().await?)
                }
            })
            .buffered(concurrency)
            .collect()
            .await;
    let challenges = challenges.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_task = challenges.len().div_ceil(cores).max(1);
    let mut tasks = Vec::new();
    for part in challenges.chunks(per_task) {
        let part = part.to_vec();
        tasks.push(tokio::task::spawn_blocking(move || {
            part.into_iter()
                .map(|challenge| {
                    signing::pow::solve(challenge)
                        .context("no solution within the solver's time limit")
                })
                .collect::<anyhow::Result<Vec<String>>>()
        }));
    }
    let mut proofs = Vec::with_capacity(users.len());
    for task in tasks {
        proofs.extend(task.await??);
    }
    Ok(proofs)
}

/// What a join handed the shopper: the place value it set.
pub(crate) struct Joined {
    pub(crate) place: Option<String>,
}

/// The `place` value a response set, if any.
pub(crate) fn place_set(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("place="))
        .map(|c| c.split(';').next().unwrap_or_default().to_string())
        .filter(|v| !v.is_empty())
}

/// Joins (or `again`: re-joins) a sale's waiting room; the place value it hands back.
pub(crate) async fn join_line(
    http: &reqwest::Client,
    base: &str,
    id: SaleId,
    cookie: &str,
    addr: &str,
    again: bool,
) -> anyhow::Result<Joined> {
    let resp = http
        .post(format!("{base}/api/activities/{id}/queue"))
        .header("cookie", cookie)
        .header("x-forwarded-for", addr)
        .json(&serde_json::json!({ "again": again }))
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "join: {}", resp.status());
    let place = place_set(&resp);
    let _: QueueStatus = resp.json().await?;
    Ok(Joined { place })
}

/// What one attempt came to, and whether a client would try it again.
pub(crate) struct Attempt {
    pub(crate) outcome: String,
    pub(crate) retry: bool,
}

impl Attempt {
    pub(crate) fn done(outcome: impl Into<String>) -> Attempt {
        Attempt {
            outcome: outcome.into(),
            retry: false,
        }
    }

    pub(crate) fn transport(e: &reqwest::Error, step: &str) -> Attempt {
        let what = if e.is_timeout() {
            "timeout"
        } else {
            "transport_error"
        };
        Attempt {
            outcome: format!("{step}{what}"),
            retry: true,
        }
    }
}

impl Target<'_> {
    /// One shopper in a waiting room, as the page follows it: once the place is numbered, reads
    /// the line's board and works out where it stands; asks the line itself (`GET …/queue`,
    /// with the place value) before that and when its turn has come; once admitted, buys with
    /// the ticket.
    pub(crate) async fn wait_and_shop(
        &self,
        shopper: usize,
        cookie: &str,
        addr: &str,
        tally: &Mutex<Tally>,
    ) -> String {
        let base = self.bases[shopper % self.bases.len()];
        let id = self.id;
        let mut held = self.places.get(shopper).cloned().flatten();
        let mut place: Option<i64> = None;
        loop {
            let on_board = match place {
                Some(p) => self.board(base, tally).await.map(|b| b.status_of(p, 0)),
                None => Some(None),
            };
            let status = match on_board {
                Some(Some(status)) => Some(status),
                Some(None) => self
                    .line(base, cookie, held.as_deref(), addr, tally)
                    .await
                    .map(|(status, renewed)| {
                        held = renewed.or(held.take());
                        status
                    }),
                None => None,
            };
            let Some(status) = status else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            if status.place.is_some() {
                place = status.place;
            }
            match status.state {
                QueueState::Admitted => {
                    let waited = self.started.elapsed().as_millis() as u64;
                    {
                        let mut t = tally.lock().expect("tally");
                        let _ = t.waits.record(waited.max(1));
                        if let Some(p) = place {
                            t.admissions.push((p, waited));
                        }
                    }
                    let ticket = status.ticket.unwrap_or_default();
                    return self.shop(shopper, cookie, addr, Some(&ticket), tally).await;
                }
                QueueState::SoldOut => {
                    tally.lock().expect("tally").told_sold_out += 1;
                    return "sold_out_waiting".into();
                }
                QueueState::Ended => return QueueState::Ended.as_str().into(),
                QueueState::Passed | QueueState::NotJoined => {
                    let _permit = self.requests.acquire().await.expect("never closed");
                    place = None;
                    if let Ok(joined) = join_line(self.http, base, id, cookie, addr, true).await {
                        held = joined.place;
                    }
                }
                _ => {
                    let after = status.poll_after_ms.clamp(100, 60_000) as u64;
                    tokio::time::sleep(Duration::from_millis(after)).await;
                }
            }
        }
    }

    /// The crowd, and beside it the polling window when asked (a sale with a waiting room).
    pub(crate) async fn crowd_and_window(
        &self,
        deployment: &Deployment,
        shoppers: &[i64],
        cookie: &impl Fn(i64, Role) -> String,
        merchant: &str,
        activity: &Activity,
        opts: &CrowdOptions,
    ) -> anyhow::Result<(Tally, Option<PollWindow>)> {
        let (tally, window) = tokio::join!(
            self.crowd(shoppers, cookie, activity.waiting_room, opts),
            async {
                match (&opts.poll_window, activity.waiting_room) {
                    (Some(w), true) => Some(self.poll_window(deployment, w, merchant).await),
                    _ => None,
                }
            }
        );
        Ok((tally?, window.transpose()?))
    }

    /// The polling window: some seconds after the start the sale is paused (admission stops,
    /// everyone still in line waits and polls as told), then measured for `w.secs`, then resumed.
    pub(crate) async fn poll_window(
        &self,
        deployment: &Deployment,
        w: &PollWindowOptions,
        merchant: &str,
    ) -> anyhow::Result<PollWindow> {
        let client = redis::Client::open(deployment.single_redis()?)?;
        let mut redis = redis::aio::ConnectionManager::new(client).await?;
        tokio::time::sleep_until((self.started + Duration::from_secs(w.after_secs)).into()).await;
        let base = self.bases[0];
        let pause = |action: &'static str| {
            self.http
                .post(format!("{base}/api/admin/activities/{}/{action}", self.id))
                .header("cookie", merchant)
                .json(&serde_json::json!({}))
                .send()
        };
        anyhow::ensure!(
            pause("pause").await?.status().is_success(),
            "pausing the sale"
        );
        // Every instance's activity cache and board, and the cache in front, see the pause.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let before = self.snapshot(&mut redis, &w.pids).await?;
        let at = Instant::now();
        tokio::time::sleep(Duration::from_secs(w.secs)).await;
        let after = self.snapshot(&mut redis, &w.pids).await?;
        let secs = at.elapsed().as_secs_f64();
        anyhow::ensure!(
            pause("resume").await?.status().is_success(),
            "resuming the sale"
        );
        let (calls_before, cpu_before, seen_before) = before;
        let (calls_after, cpu_after, seen_after) = after;
        Ok(PollWindow {
            secs,
            polls: seen_after[0] - seen_before[0],
            board_polls: seen_after[1] - seen_before[1],
            cached: seen_after[2] - seen_before[2],
            redis_calls: calls_after
                .iter()
                .map(|(k, n)| (k.clone(), n - calls_before.get(k).copied().unwrap_or(0)))
                .collect(),
            cpu_ms: cpu_after
                .iter()
                .zip(&cpu_before)
                .map(|((pid, a), (_, b))| (*pid, a - b))
                .collect(),
        })
    }

    /// Redis's commands so far by command (`INFO commandstats`), the processes' CPU time, and
    /// the polls, board reads and cache hits seen so far.
    pub(crate) async fn snapshot(
        &self,
        redis: &mut redis::aio::ConnectionManager,
        pids: &[u32],
    ) -> anyhow::Result<(BTreeMap<String, u64>, Vec<(u32, f64)>, [u64; 3])> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(redis)
            .await?;
        let calls = info
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
                Some((name.to_string(), rest.split(',').next()?.parse().ok()?))
            })
            .collect();
        let cpu = pids
            .iter()
            .map(|&pid| (pid, cpu_ms(pid).unwrap_or(0.0)))
            .collect();
        let seen = [
            self.seen.polls.load(Relaxed),
            self.seen.board.load(Relaxed),
            self.seen.cached.load(Relaxed),
        ];
        Ok((calls, cpu, seen))
    }

    /// The line's board of the sale (`None`: not read).
    pub(crate) async fn board(&self, base: &str, tally: &Mutex<Tally>) -> Option<LineBoard> {
        let resp = {
            let _permit = self.requests.acquire().await.expect("never closed");
            self.http
                .get(format!("{base}/api/activities/{}/line", self.id))
                .send()
                .await
        };
        let cached = resp.as_ref().is_ok_and(|r| {
            r.headers()
                .get("x-cache-status")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| matches!(v, "HIT" | "STALE" | "UPDATING"))
        });
        {
            let mut t = tally.lock().expect("tally");
            t.polls += 1;
            t.board_polls += 1;
            t.board_cached += u64::from(cached);
        }
        self.seen.polls.fetch_add(1, Relaxed);
        self.seen.board.fetch_add(1, Relaxed);
        self.seen.cached.fetch_add(u64::from(cached), Relaxed);
        match resp {
            Ok(r) if r.status().is_success() => r.json::<LineBoard>().await.ok(),
            _ => None,
        }
    }

    /// Where the shopper stands, from the line itself; and the place value it handed back.
    pub(crate) async fn line(
        &self,
        base: &str,
        cookie: &str,
        held: Option<&str>,
        addr: &str,
        tally: &Mutex<Tally>,
    ) -> Option<(QueueStatus, Option<String>)> {
        let cookies = match held {
            Some(place) => format!("{cookie}; place={place}"),
            None => cookie.to_string(),
        };
        let resp = {
            let _permit = self.requests.acquire().await.expect("never closed");
            self.http
                .get(format!("{base}/api/activities/{}/queue", self.id))
                .header("cookie", cookies)
                .header("x-forwarded-for", addr)
                .send()
                .await
        };
        tally.lock().expect("tally").polls += 1;
        self.seen.polls.fetch_add(1, Relaxed);
        match resp {
            Ok(r) if r.status().is_success() => {
                let renewed = place_set(&r);
                r.json::<QueueStatus>().await.ok().map(|s| (s, renewed))
            }
            _ => None,
        }
    }

    /// One shopper: the path, then the buy (the whole quantity the limit allows), tried again
    /// within `retry_for` on the next instance after a transport error or a `503`. Returns the outcome.
    pub(crate) async fn shop(
        &self,
        shopper: usize,
        cookie: &str,
        addr: &str,
        admission: Option<&str>,
        tally: &Mutex<Tally>,
    ) -> String {
        let give_up = Instant::now() + self.retry_for;
        let key = uuid::Uuid::new_v4().to_string();
        let mut backoff = Duration::from_millis(50);
        for attempt in shopper.. {
            let base = self.bases[attempt % self.bases.len()];
            let Attempt { outcome, retry } = {
                let _permit = self.requests.acquire().await.expect("never closed");
                let proof = self.proofs.get(shopper).map(String::as_str);
                self.attempt(shopper, base, cookie, addr, &key, admission, proof, tally)
                    .await
            };
            if !retry || Instant::now() + backoff >= give_up {
                return outcome;
            }
            *tally
                .lock()
                .expect("tally")
                .retried
                .entry(outcome)
                .or_default() += 1;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
        unreachable!("the attempts never run out")
    }

    // One buy request's whole context; a struct for it would be used once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn attempt(
        &self,
        shopper: usize,
        base: &str,
        cookie: &str,
        addr: &str,
        key: &str,
        admission: Option<&str>,
        proof: Option<&str>,
        tally: &Mutex<Tally>,
    ) -> Attempt {
        let id = self.id;
        let asked = Instant::now();
        let answered = |outcome: &str, token: Option<Token>| {
            let mut t = tally.lock().expect("tally");
            let at = asked.saturating_duration_since(t.started);
            t.history.push(Answer {
                at,
                took: asked.elapsed(),
                shopper,
                key: key.to_string(),
                outcome: outcome.to_string(),
                token,
            });
        };
        let path = match self.path(base, cookie, addr).await {
            Ok(path) => path,
            Err(refused) => {
                answered(&refused.outcome, None);
                return refused;
            }
        };
        let sent = Instant::now();
        let resp = self
            .http
            .post(format!("{base}/api/activities/{id}/buy"))
            .header("cookie", cookie)
            .header("x-forwarded-for", addr)
            .header("idempotency-key", key)
            .json(&BuyRequest {
                path,
                captcha_id: None,
                captcha_answer: None,
                quantity: Some(i64::from(self.quantity)),
                admission: admission.map(str::to_string),
                pow: proof.map(str::to_string),
            })
            .send()
            .await;
        let took = sent.elapsed().as_micros() as u64;
        let (attempt, token) = answer_of(resp).await;
        answered(&attempt.outcome, token);
        let units = i64::from(self.quantity);
        tally
            .lock()
            .expect("tally")
            .record_buy(took, token, &attempt.outcome, units);
        attempt
    }

    /// The buy path, as the page fetches it at the start; else the attempt's outcome.
    pub(crate) async fn path(
        &self,
        base: &str,
        cookie: &str,
        addr: &str,
    ) -> Result<String, Attempt> {
        let resp = self
            .http
            .get(format!("{base}/api/activities/{}/path", self.id))
            .header("cookie", cookie)
            .header("x-forwarded-for", addr)
            .send()
            .await;
        match resp {
            Ok(r) if r.status().is_success() => match r.json::<BuyPath>().await {
                Ok(p) => Ok(p.path),
                Err(_) => Err(Attempt::done("path_unreadable")),
            },
            Ok(r) => Err(Attempt {
                outcome: format!("path_{}", r.status().as_u16()),
                retry: gateway_or_unavailable(r.status().as_u16()),
            }),
            Err(e) => Err(Attempt::transport(&e, "path_")),
        }
    }
}

/// A buy's answer: its outcome (the error code, with the status past 499 but for `overloaded`)
/// and, when accepted, the order token.
pub(crate) async fn answer_of(
    resp: reqwest::Result<reqwest::Response>,
) -> (Attempt, Option<Token>) {
    match resp {
        Ok(r) if r.status().as_u16() == 202 => match r.json::<app::api::Reservation>().await {
            Ok(reservation) => (Attempt::done("accepted"), Some(reservation.token)),
            // Taken, but the answer was lost on the way: the same key gets it again.
            Err(e) => (Attempt::transport(&e, ""), None),
        },
        Ok(r) => {
            let status = r.status().as_u16();
            let code = r
                .json::<app::api::ErrorBody>()
                .await
                .map(|b| b.error)
                .unwrap_or_else(|_| format!("http_{status}"));
            let outcome = if status >= 500 && code != "overloaded" {
                format!("{code}_{status}")
            } else {
                code
            };
            let retry = gateway_or_unavailable(status);
            (Attempt { outcome, retry }, None)
        }
        Err(e) => (Attempt::transport(&e, ""), None),
    }
}

impl Tally {
    /// One buy's latency, and what it took or told.
    pub(crate) fn record_buy(
        &mut self,
        took_us: u64,
        token: Option<Token>,
        outcome: &str,
        units: i64,
    ) {
        let _ = self.latency.record(took_us.max(1));
        if let Some(token) = token {
            self.accepted_units += units;
            self.tokens.push(token);
            self.last_accept = Some(Instant::now());
        } else if outcome == ErrorCode::SoldOut.as_str() && self.sold_out_at.is_none() {
            self.sold_out_at = Some(Instant::now());
        }
    }
}

/// Answers after which a shopper tries again with the same key: the instance is overloaded or
/// unavailable (`503`), or the load balancer in front could not get an answer from one (`502`,
/// `504`: the buy may or may not have run, which the key makes safe to ask again).
pub(crate) fn gateway_or_unavailable(status: u16) -> bool {
    matches!(status, 502..=504)
}
