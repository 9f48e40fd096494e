//! `seckill-load pace`: one request, sent over and over on a fixed number of keep-alive connections,
//! either at a constant arrival rate (an open loop) or as fast as the connections allow (a closed
//! loop, for the maximum). In the open loop request i is due at i / rate from the start whatever
//! the server's pace, and its latency counts from that instant: a server that falls behind is
//! charged the time its requests waited to be sent (no coordinated omission, as in wrk2).

use hdrhistogram::Histogram;
use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};
use tokio::sync::Semaphore;

#[derive(Clone, Debug)]
pub struct PaceOptions {
    pub url: String,
    /// `None`: a GET; else a POST of this JSON body.
    pub body: Option<String>,
    pub headers: Vec<(String, String)>,
    /// Requests per second; 0: a closed loop, as fast as `connections` allow.
    pub rate: u32,
    pub duration: Duration,
    pub connections: usize,
}

#[derive(Debug)]
pub struct PaceReport {
    pub sent: u64,
    /// Answers by status code (0: no answer, a transport error).
    pub statuses: BTreeMap<u16, u64>,
    pub elapsed: Duration,
    /// From the instant due (open loop) or sent (closed loop) to the answer, in microseconds:
    /// p50, p90, p99, p99.9, max.
    pub latency_us: [u64; 5],
    pub rate: u32,
    pub connections: usize,
}

impl PaceReport {
    pub fn print(&self) {
        let secs = self.elapsed.as_secs_f64();
        let shape = if self.rate > 0 {
            format!("open loop at {} req/s", self.rate)
        } else {
            "closed loop".to_string()
        };
        println!(
            "{shape} over {} connections: {} requests in {secs:.2} s = {:.0} req/s",
            self.connections,
            self.sent,
            self.sent as f64 / secs
        );
        for (status, n) in &self.statuses {
            println!("  status {status:<4} {n:>9}");
        }
        let [p50, p90, p99, p999, max] = self.latency_us.map(|us| us as f64 / 1000.0);
        println!(
            "latency ms: p50 {p50:.2}  p90 {p90:.2}  p99 {p99:.2}  p99.9 {p999:.2}  max {max:.2}"
        );
    }
}

struct Tally {
    statuses: BTreeMap<u16, u64>,
    latency: Histogram<u64>,
}

impl Tally {
    fn record(&mut self, status: u16, since: Instant) {
        *self.statuses.entry(status).or_default() += 1;
        let _ = self
            .latency
            .record((since.elapsed().as_micros() as u64).max(1));
    }
}

struct Request {
    http: reqwest::Client,
    url: String,
    body: Option<bytes::Bytes>,
    headers: reqwest::header::HeaderMap,
}

impl Request {
    fn new(opts: &PaceOptions) -> anyhow::Result<Request> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &opts.headers {
            headers.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes())?,
                value.parse()?,
            );
        }
        Ok(Request {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(opts.connections)
                .http1_only()
                .tcp_nodelay(true)
                .timeout(Duration::from_secs(30))
                .build()?,
            url: opts.url.clone(),
            body: opts.body.clone().map(bytes::Bytes::from),
            headers,
        })
    }

    async fn send(&self) -> u16 {
        let builder = match &self.body {
            Some(body) => self
                .http
                .post(&self.url)
                .header("content-type", "application/json")
                .body(body.clone()),
            None => self.http.get(&self.url),
        };
        match builder.headers(self.headers.clone()).send().await {
            // The body read to its end, so that the connection can carry the next request.
            Ok(resp) => {
                let status = resp.status().as_u16();
                match resp.bytes().await {
                    Ok(_) => status,
                    Err(_) => 0,
                }
            }
            Err(_) => 0,
        }
    }
}

pub async fn run(opts: &PaceOptions) -> anyhow::Result<PaceReport> {
    anyhow::ensure!(opts.connections > 0, "no connection");
    let request = Arc::new(Request::new(opts)?);
    // Every connection opened before the clock starts: one request on each at once.
    let warm: Vec<_> = (0..opts.connections)
        .map(|_| {
            let request = request.clone();
            tokio::spawn(async move { request.send().await })
        })
        .collect();
    for w in warm {
        w.await?;
    }
    let tally = Arc::new(Mutex::new(Tally {
        statuses: BTreeMap::new(),
        latency: Histogram::new_with_bounds(1, 60_000_000, 3)?,
    }));
    let started = Instant::now();
    let sent = if opts.rate == 0 {
        closed_loop(&request, &tally, opts, started).await?
    } else {
        open_loop(&request, &tally, opts, started).await?
    };
    let elapsed = started.elapsed();
    let t = tally.lock().expect("tally");
    let q = |p: f64| t.latency.value_at_quantile(p);
    Ok(PaceReport {
        sent,
        statuses: t.statuses.clone(),
        elapsed,
        latency_us: [q(0.5), q(0.9), q(0.99), q(0.999), t.latency.max()],
        rate: opts.rate,
        connections: opts.connections,
    })
}

/// Each connection sends its next request when the last is answered, for the whole duration.
async fn closed_loop(
    request: &Arc<Request>,
    tally: &Arc<Mutex<Tally>>,
    opts: &PaceOptions,
    started: Instant,
) -> anyhow::Result<u64> {
    let end = started + opts.duration;
    let workers: Vec<_> = (0..opts.connections)
        .map(|_| {
            let (request, tally) = (request.clone(), tally.clone());
            tokio::spawn(async move {
                let mut sent = 0u64;
                while Instant::now() < end {
                    let at = Instant::now();
                    let status = request.send().await;
                    tally.lock().expect("tally").record(status, at);
                    sent += 1;
                }
                sent
            })
        })
        .collect();
    let mut sent = 0;
    for w in workers {
        sent += w.await?;
    }
    Ok(sent)
}

/// Request i is due at i / rate whatever the server's pace, with at most one request per
/// connection in flight: a request due while all are busy waits for one, and that wait is part
/// of its latency.
async fn open_loop(
    request: &Arc<Request>,
    tally: &Arc<Mutex<Tally>>,
    opts: &PaceOptions,
    started: Instant,
) -> anyhow::Result<u64> {
    let connections = Arc::new(Semaphore::new(opts.connections));
    let total = (opts.duration.as_secs_f64() * f64::from(opts.rate)) as u64;
    let period = Duration::from_secs_f64(1.0 / f64::from(opts.rate));
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sent = 0u64;
    while sent < total {
        tick.tick().await;
        // Everything due by now goes out; each keeps its own due instant.
        let due_now =
            ((started.elapsed().as_secs_f64() * f64::from(opts.rate)) as u64 + 1).min(total);
        while sent < due_now {
            let due = started + period.mul_f64(sent as f64);
            let permit = connections.clone().acquire_owned().await?;
            let (request, tally) = (request.clone(), tally.clone());
            tokio::spawn(async move {
                let status = request.send().await;
                tally.lock().expect("tally").record(status, due);
                drop(permit);
            });
            sent += 1;
        }
    }
    // Every answer in.
    let _ = connections.acquire_many(opts.connections as u32).await?;
    Ok(sent)
}
