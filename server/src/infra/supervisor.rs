//! Every background task of a process — the relay, the persisters, the deadlines, the
//! reconciler, the listeners and sweeps beside the HTTP server — runs under one supervisor. It
//! runs each in a task of its own; when one ends (a panic, an error it returned, or an abort),
//! the supervisor logs the worker's name and the cause, counts it
//! (`seckill_worker_restarts_total{worker}`), and starts it again after a back-off that doubles
//! from 100 ms to 30 s (back to 100 ms once a run lasted a minute). On shutdown it stops them
//! stage by stage: the relay first (it settles the rounds it has published), then the consumers
//! (each writes and acknowledges the batch in its hands), then the rest.

use crate::infra::metrics::Metrics;
use parking_lot::Mutex;
use std::{collections::HashMap, future::Future, sync::Arc, time::Duration};
use tokio::{
    task::{AbortHandle, JoinError, JoinHandle},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

/// The order of shutdown: each stage is stopped, and awaited, before the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The relay: what it published is confirmed and acknowledged before the consumers stop.
    Relay,
    /// The persisters and the dead-letter consumer.
    Consumers,
    /// Everything else: deadlines, the reconciler, listeners, sweeps.
    Rest,
}

const STAGES: [Stage; 3] = [Stage::Relay, Stage::Consumers, Stage::Rest];
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const LAST_BACKOFF: Duration = Duration::from_secs(30);
/// A run that lasted this long was healthy: the next restart waits the first back-off again.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

struct Worker {
    stage: Stage,
    name: String,
    /// The supervising loop.
    handle: JoinHandle<()>,
}

/// Owns the background tasks: see the module's comment.
pub struct Supervisor {
    metrics: Arc<Metrics>,
    stops: HashMap<Stage, CancellationToken>,
    workers: Mutex<Vec<Worker>>,
    /// The task of each worker's current run, by name (for [`Supervisor::abort_run`]).
    runs: Arc<Mutex<HashMap<String, AbortHandle>>>,
}

/// Why a run ended, as the log says it.
fn cause(ended: Result<(), JoinError>) -> String {
    match ended {
        Ok(()) => "returned".to_string(),
        Err(e) if e.is_cancelled() => "aborted".to_string(),
        Err(e) => {
            let panic = e.into_panic();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            format!("panicked: {message}")
        }
    }
}

impl Supervisor {
    pub fn new(metrics: Arc<Metrics>) -> Arc<Supervisor> {
        Arc::new(Supervisor {
            metrics,
            stops: STAGES
                .iter()
                .map(|s| (*s, CancellationToken::new()))
                .collect(),
            workers: Mutex::default(),
            runs: Arc::default(),
        })
    }

    /// A worker that stops itself: `make` builds each run from the token cancelled at the
    /// worker's stage of shutdown, and the run returns once it has put down what it holds.
    pub fn spawn_graceful<F, Fut>(&self, name: impl Into<String>, stage: Stage, mut make: F)
    where
        F: FnMut(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let name = name.into();
        let stop = self.stops[&stage].clone();
        // Its restart counter exists from the start, at 0: an increase over it is then a number.
        self.metrics.worker_restarts(&name);
        let (metrics, runs, worker) = (self.metrics.clone(), self.runs.clone(), name.clone());
        let handle = tokio::spawn(async move {
            let mut backoff = FIRST_BACKOFF;
            while !stop.is_cancelled() {
                let started = Instant::now();
                let run = tokio::spawn(make(stop.clone()));
                runs.lock().insert(name.clone(), run.abort_handle());
                let ended = run.await;
                if stop.is_cancelled() && ended.is_ok() {
                    tracing::info!(worker = %name, "worker stopped");
                    break;
                }
                if started.elapsed() >= HEALTHY_RUN {
                    backoff = FIRST_BACKOFF;
                }
                tracing::error!(
                    worker = %name,
                    cause = %cause(ended),
                    restart_in_ms = backoff.as_millis() as u64,
                    "worker ended; restarting"
                );
                metrics.worker_restarted(&name);
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = stop.cancelled() => break,
                }
                backoff = (backoff * 2).min(LAST_BACKOFF);
            }
        });
        self.workers.lock().push(Worker {
            stage,
            name: worker,
            handle,
        });
    }

    /// A worker that holds nothing between its steps (a loop of idempotent steps): at its stage
    /// of shutdown its run is dropped where it waits.
    pub fn spawn<F, Fut>(&self, name: impl Into<String>, stage: Stage, mut make: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.spawn_graceful(name, stage, move |stop| {
            let run = make();
            async move {
                tokio::select! {
                    () = run => {}
                    () = stop.cancelled() => {}
                }
            }
        });
    }

    /// Ends a worker's current run as a crash would (its supervisor starts the next); false when
    /// no worker has that name.
    pub fn abort_run(&self, name: &str) -> bool {
        let runs = self.runs.lock();
        match runs.get(name) {
            Some(run) => {
                run.abort();
                true
            }
            None => false,
        }
    }

    /// Stops the workers stage by stage, each stage given `grace` to finish what it holds before
    /// its runs are aborted.
    pub async fn shutdown(&self, grace: Duration) {
        for stage in STAGES {
            self.stops[&stage].cancel();
            let workers: Vec<Worker> = {
                let mut all = self.workers.lock();
                let (now, later) = all.drain(..).partition(|w| w.stage == stage);
                *all = later;
                now
            };
            let deadline = Instant::now() + grace;
            for mut worker in workers {
                if tokio::time::timeout_at(deadline, &mut worker.handle)
                    .await
                    .is_err()
                {
                    tracing::warn!(worker = %worker.name, "the worker did not stop within the grace; aborted");
                    worker.handle.abort();
                    self.abort_run(&worker.name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn until(what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_worker_that_panics_is_counted_and_started_again() {
        let metrics = Metrics::new();
        let supervisor = Supervisor::new(metrics.clone());
        let runs = Arc::new(AtomicUsize::new(0));
        supervisor.spawn("flaky", Stage::Rest, {
            let runs = runs.clone();
            move || {
                let run = runs.fetch_add(1, Ordering::SeqCst);
                async move {
                    assert!(run > 0, "the first run fails");
                    std::future::pending::<()>().await;
                }
            }
        });
        until("a second run", || runs.load(Ordering::SeqCst) == 2).await;
        assert_eq!(metrics.worker_restarts("flaky"), 1);
        assert!(supervisor.abort_run("flaky"));
        until("a third run", || runs.load(Ordering::SeqCst) == 3).await;
        assert_eq!(metrics.worker_restarts("flaky"), 2);
        supervisor.shutdown(Duration::from_secs(5)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "no run after shutdown");
    }

    #[tokio::test]
    async fn shutdown_stops_the_relay_before_the_consumers_and_restarts_nothing() {
        let metrics = Metrics::new();
        let supervisor = Supervisor::new(metrics.clone());
        let stopped = Arc::new(Mutex::new(Vec::new()));
        let started = Arc::new(AtomicUsize::new(0));
        for (name, stage, takes) in [
            ("rest", Stage::Rest, 0),
            ("consumer", Stage::Consumers, 0),
            ("relay", Stage::Relay, 50),
        ] {
            let (stopped, started) = (stopped.clone(), started.clone());
            supervisor.spawn_graceful(name, stage, move |stop| {
                let stopped = stopped.clone();
                started.fetch_add(1, Ordering::SeqCst);
                async move {
                    stop.cancelled().await;
                    // Settling what it holds takes a while.
                    tokio::time::sleep(Duration::from_millis(takes)).await;
                    stopped.lock().push(name);
                }
            });
        }
        until("every worker running", || {
            started.load(Ordering::SeqCst) == 3
        })
        .await;
        supervisor.shutdown(Duration::from_secs(5)).await;
        assert_eq!(*stopped.lock(), ["relay", "consumer", "rest"]);
        for name in ["relay", "consumer", "rest"] {
            assert_eq!(metrics.worker_restarts(name), 0, "{name}");
        }
    }

    #[tokio::test]
    async fn a_worker_that_does_not_stop_is_aborted_after_the_grace() {
        let supervisor = Supervisor::new(Metrics::new());
        let (ended, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        supervisor.spawn_graceful("stubborn", Stage::Relay, {
            let ended = ended.clone();
            move |_| {
                let ended = ended.clone();
                ended.fetch_add(10, Ordering::SeqCst);
                async move {
                    // Dropped when aborted: counts the end of the run.
                    struct Ends(Arc<AtomicUsize>);
                    impl Drop for Ends {
                        fn drop(&mut self) {
                            self.0.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    let _ends = Ends(ended);
                    std::future::pending::<()>().await;
                }
            }
        });
        supervisor.spawn_graceful("next", Stage::Consumers, {
            let stopped = stopped.clone();
            move |stop| {
                let stopped = stopped.clone();
                async move {
                    stop.cancelled().await;
                    stopped.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        until("the stubborn run started", || {
            ended.load(Ordering::SeqCst) == 10
        })
        .await;
        supervisor.shutdown(Duration::from_millis(100)).await;
        until("the stubborn run aborted", || {
            ended.load(Ordering::SeqCst) == 11
        })
        .await;
        assert_eq!(
            stopped.load(Ordering::SeqCst),
            1,
            "the next stage still stopped"
        );
    }
}
