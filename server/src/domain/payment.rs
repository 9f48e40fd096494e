//! The payment provider, behind a small trait so that a real one can replace the simulated one.
//! The race between paying and the deadline is decided in the database (`http/orders.rs` pays,
//! `pipeline/deadline.rs` cancels, each by a conditional update), so an order ends paid or
//! cancelled, never both.

use std::{future::Future, pin::Pin};

pub struct Charge {
    pub token: uuid::Uuid,
    pub amount_cents: i64,
}

pub type ProviderResult<'a, T> = Pin<Box<dyn Future<Output = anyhow::Result<T>> + Send + 'a>>;

pub trait PaymentProvider: Send + Sync {
    /// Takes the money; the token is the idempotency key, so charging twice charges once.
    fn charge<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()>;
    /// Gives the money back for an order that could not be paid after all.
    fn refund<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()>;
}

/// Accepts every payment at once (a stand-in for a real provider).
pub struct SimulatedProvider;

impl PaymentProvider for SimulatedProvider {
    fn charge<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()> {
        Box::pin(async move {
            tracing::info!(order.token = %charge.token, amount_cents = charge.amount_cents, "simulated charge");
            Ok(())
        })
    }

    fn refund<'a>(&'a self, charge: &'a Charge) -> ProviderResult<'a, ()> {
        Box::pin(async move {
            tracing::info!(order.token = %charge.token, amount_cents = charge.amount_cents, "simulated refund");
            Ok(())
        })
    }
}
