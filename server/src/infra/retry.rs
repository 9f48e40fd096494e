//! Start-up patience: PostgreSQL and Redis may still be starting when an instance does.

use std::{future::Future, time::Duration};

/// How long start-up waits for a dependency to answer before giving up.
pub const DEPENDENCY_DEADLINE: Duration = Duration::from_secs(30);

/// Calls `attempt` until it succeeds or `DEPENDENCY_DEADLINE` has passed, logging each failure.
pub async fn until_available<T, F, Fut>(what: &str, mut attempt: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + DEPENDENCY_DEADLINE;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %format!("{e:#}"), "{what} not available yet; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e.context(format!("{what} did not become available"))),
        }
    }
}
