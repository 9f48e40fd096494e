//! Figures read at each scrape rather than counted as they happen: the process's own (the
//! `process_*` names every Prometheus client library exports, from `/proc`), the async runtime's,
//! and the PostgreSQL pool's use. Nothing here is on a request's way.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
};
use sqlx::PgPool;
use std::sync::OnceLock;

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&prometheus_client::registry::Unit>,
    value: f64,
) -> std::fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
}

/// `process_*`: CPU seconds, resident and virtual memory, open and allowed file descriptors,
/// threads, start time. Left out, each on its own, where `/proc` does not answer.
#[derive(Debug, Default)]
pub struct Process;

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        use prometheus_client::registry::Unit;
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second().max(1) as f64;
            let cpu = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu",
                "User and system CPU time spent by this process",
                Some(&Unit::Seconds),
                cpu.metric_type(),
            )?)?;
            let page = procfs::page_size() as f64;
            gauge(
                &mut encoder,
                "process_resident_memory",
                "Resident memory size",
                Some(&Unit::Bytes),
                stat.rss as f64 * page,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory",
                "Virtual memory size",
                Some(&Unit::Bytes),
                stat.vsize as f64,
            )?;
            gauge(
                &mut encoder,
                "process_threads",
                "OS threads of this process",
                None,
                stat.num_threads as f64,
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                let started = boot as f64 + stat.starttime as f64 / ticks;
                gauge(
                    &mut encoder,
                    "process_start_time",
                    "Start time of the process since the Unix epoch",
                    Some(&Unit::Seconds),
                    started,
                )?;
            }
        }
        if let Ok(fds) = me.fd_count() {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Open file descriptors",
                None,
                fds as f64,
            )?;
        }
        if let Ok(limits) = me.limits() {
            if let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit {
                gauge(
                    &mut encoder,
                    "process_max_fds",
                    "The most file descriptors this process may open",
                    None,
                    max as f64,
                )?;
            }
        }
        Ok(())
    }
}

/// The tokio runtime the scrape is answered on (every task of the process runs on it): its
/// workers, the tasks alive, and the tasks queued on no worker yet (a runtime falling behind).
#[derive(Debug, Default)]
pub struct Runtime;

impl Collector for Runtime {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return Ok(());
        };
        let runtime = handle.metrics();
        gauge(
            &mut encoder,
            "runtime_workers",
            "Worker threads of the async runtime",
            None,
            runtime.num_workers() as f64,
        )?;
        gauge(
            &mut encoder,
            "runtime_alive_tasks",
            "Tasks alive on the async runtime",
            None,
            runtime.num_alive_tasks() as f64,
        )?;
        gauge(
            &mut encoder,
            "runtime_global_queue_depth",
            "Tasks scheduled and waiting in the runtime's shared queue for a worker",
            None,
            runtime.global_queue_depth() as f64,
        )
    }
}

/// The PostgreSQL pool of this process, once it has one: its connections open, idle and at most.
#[derive(Debug, Default)]
pub struct Pool(pub OnceLock<PgPool>);

impl Collector for Pool {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(pool) = self.0.get() else {
            return Ok(());
        };
        let (open, idle) = (f64::from(pool.size()), pool.num_idle() as f64);
        gauge(
            &mut encoder,
            "db_pool_connections",
            "PostgreSQL connections open in this process's pool",
            None,
            open,
        )?;
        gauge(
            &mut encoder,
            "db_pool_idle_connections",
            "Of them, idle: open minus idle is in use",
            None,
            idle,
        )?;
        gauge(
            &mut encoder,
            "db_pool_max_connections",
            "The most connections the pool opens",
            None,
            f64::from(pool.options().get_max_connections()),
        )
    }
}
