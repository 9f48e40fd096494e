//! The CSV exports running on this instance, by merchant: at most [`EXPORTS_PER_MERCHANT`] at
//! once per merchant and [`EXPORTS_PER_INSTANCE`] per instance (`http/admin/orders.rs` runs
//! them; the shared state holds the count).

use crate::domain::{ApiError, ApiResult};
use parking_lot::Mutex;
use std::{collections::HashMap, sync::Arc};

/// Exports at once, per merchant and per instance.
pub const EXPORTS_PER_MERCHANT: usize = 2;
pub const EXPORTS_PER_INSTANCE: usize = 16;

/// The exports running on this instance, by merchant.
#[derive(Clone, Default)]
pub struct Exports(Arc<Mutex<HashMap<i64, usize>>>);

/// One running export; its place is given back when it is dropped (ended, failed or cut off).
pub(crate) struct ExportSlot {
    exports: Exports,
    merchant: i64,
}

impl Exports {
    pub(crate) fn start(&self, merchant: i64) -> ApiResult<ExportSlot> {
        let mut running = self.0.lock();
        let all: usize = running.values().sum();
        let mine = running.get(&merchant).copied().unwrap_or(0);
        if mine >= EXPORTS_PER_MERCHANT || all >= EXPORTS_PER_INSTANCE {
            return Err(ApiError::RateLimited { retry_after: 5 });
        }
        *running.entry(merchant).or_default() += 1;
        Ok(ExportSlot {
            exports: self.clone(),
            merchant,
        })
    }
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        let mut running = self.exports.0.lock();
        if let Some(n) = running.get_mut(&self.merchant) {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.merchant);
            }
        }
    }
}
