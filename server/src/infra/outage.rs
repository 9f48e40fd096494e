//! Whether a failure of PostgreSQL or Redis means the dependency is away (down, restarting,
//! loading, in a failover: the caller answers `503` and the client retries) rather than a fault
//! of the request or of the code. Read where errors are classified (`domain::error`) and by the
//! workers that wait for a dependency to come back.

/// Connection failures, an exhausted or closed pool, and PostgreSQL's own "shutting down",
/// "starting up" and "too many connections" (SQLSTATE classes 08, 57P and 53).
pub fn sqlx_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P") || c.starts_with("53")),
        _ => false,
    }
}

/// Connection failures, timeouts, a Redis that is still loading its data, a Redis Cluster
/// whose slot is between two masters (redirects the client could not follow in time), and a
/// Redis that is full: at its `maxmemory` with `noeviction` it refuses every write (`OOM`) before
/// a script has written anything, so the buy took nothing and may be tried again.
pub fn redis_unavailable(e: &redis::RedisError) -> bool {
    e.code() == Some("OOM")
        || e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.kind(),
            redis::ErrorKind::Server(
                redis::ServerErrorKind::BusyLoading
                    | redis::ServerErrorKind::TryAgain
                    | redis::ServerErrorKind::MasterDown
                    // A cluster in a failover: the slot's master is gone and not yet replaced.
                    | redis::ServerErrorKind::Moved
                    | redis::ServerErrorKind::Ask
                    | redis::ServerErrorKind::ClusterDown
                    | redis::ServerErrorKind::ReadOnly
            )
        )
}
