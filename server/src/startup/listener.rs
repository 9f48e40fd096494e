//! The listener: accepts connections with a bound on each request head, serves them until told
//! to stop, then drains them (`shutdown.rs` says when).

use super::Application;
use std::{future::Future, net::SocketAddr, time::Duration};
use tower::{Service, ServiceExt};

impl Application {
    /// Serves until `shutdown` completes, then closes the listener (new connections are refused,
    /// so a balancer retries them on another instance) and finishes the requests in flight (at
    /// most `SECKILL_DRAIN_SECS`).
    /// Each connection must send its request head within `header_read_timeout`, so clients that
    /// trickle headers cannot hold connections (axum::serve sets no such limit); the request
    /// timeout layer bounds the rest.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        use hyper_util::rt::{TokioIo, TokioTimer};
        let listener = self.listener;
        let drain = self.state.config.drain;
        let mut make_service =
            axum::ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
                SocketAddr,
            >(self.server);
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.state.config.header_read_timeout);
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let (stream, remote) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of file descriptors and the like: the listener itself is fine.
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let _ = stream.set_nodelay(true);
            let service = match make_service.call(remote).await {
                Ok(service) => service,
                Err(never) => match never {},
            };
            let service = hyper_util::service::TowerToHyperService::new(service.map_request(
                |req: axum::http::Request<hyper::body::Incoming>| req.map(axum::body::Body::new),
            ));
            let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        if tokio::time::timeout(drain, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                drain_secs = drain.as_secs(),
                "requests still in flight at the end of the drain; closing"
            );
        } else {
            tracing::info!("every request in flight answered; stopping the workers");
        }
        self.state.supervisor.shutdown(drain).await;
        Ok(())
    }
}
