//! A histogram the hot path observes without a lock: one atomic addition to its bucket, one to the
//! count, and a compare-and-swap on the sum's bits. prometheus-client's own `Histogram` takes a
//! mutex on every observation, which every buy (one request, about ten Redis commands) would
//! contend for across the runtime's workers. Encoded by prometheus-client like its own; a scrape
//! may see an observation in its bucket before the count (each figure is exact on its own).

use prometheus_client::{
    encoding::{EncodeMetric, MetricEncoder, NoLabelSet},
    metrics::{MetricType, TypedMetric},
};
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

#[derive(Debug)]
struct Inner {
    bounds: Vec<f64>,
    /// One per bound, and one more for `+Inf`.
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum_bits: AtomicU64,
}

/// Cloned, it is the same histogram (as prometheus-client's metrics are).
#[derive(Clone, Debug)]
pub struct Histogram(Arc<Inner>);

impl Histogram {
    /// Buckets with these upper bounds (ascending), and `+Inf`.
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Histogram {
        let bounds: Vec<f64> = bounds.into_iter().collect();
        let buckets = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Histogram(Arc::new(Inner {
            bounds,
            buckets,
            count: AtomicU64::new(0),
            sum_bits: AtomicU64::new(0f64.to_bits()),
        }))
    }

    pub fn observe(&self, value: f64) {
        let inner = &*self.0;
        let at = inner
            .bounds
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(inner.bounds.len());
        inner.buckets[at].fetch_add(1, Ordering::Relaxed);
        inner.count.fetch_add(1, Ordering::Relaxed);
        let _ = inner
            .sum_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }
}

impl TypedMetric for Histogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> std::fmt::Result {
        let inner = &*self.0;
        let buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(inner.buckets.iter().map(|b| b.load(Ordering::Relaxed)))
            .collect();
        // The count as the buckets add up, so the exposition never says `+Inf` < `_count`.
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = f64::from_bits(inner.sum_bits.load(Ordering::Relaxed));
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::{encoding::text::encode, registry::Registry};

    #[test]
    fn observations_land_in_their_buckets_and_encode_cumulatively() {
        let histogram = Histogram::new([0.1, 1.0]);
        for v in [0.05, 0.1, 0.5, 3.0] {
            histogram.observe(v);
        }
        let mut registry = Registry::default();
        registry.register("wait_seconds", "W", histogram.clone());
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("wait_seconds_bucket{le=\"0.1\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("wait_seconds_bucket{le=\"1.0\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("wait_seconds_bucket{le=\"+Inf\"} 4\n"),
            "{text}"
        );
        assert!(text.contains("wait_seconds_count 4\n"), "{text}");
        assert!(text.contains("wait_seconds_sum 3.65\n"), "{text}");
        assert_eq!(histogram.count(), 4);
    }

    #[test]
    fn concurrent_observations_are_all_counted() {
        let histogram = Histogram::new([1.0]);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let h = histogram.clone();
                std::thread::spawn(move || (0..10_000).for_each(|_| h.observe(0.5)))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(histogram.count(), 40_000);
        assert_eq!(
            f64::from_bits(histogram.0.sum_bits.load(Ordering::Relaxed)),
            20_000.0
        );
    }
}
