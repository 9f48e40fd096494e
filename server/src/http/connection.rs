//! `Connection: close` on every answer after which the server closes the connection. hyper
//! closes an HTTP/1.1 connection when the answer goes out before the request's body was read to
//! its end (it cannot find the next request in the unread rest), without saying so; a keep-alive
//! client then sends its next request into a closed socket. This layer watches the body: when
//! the handler answered without reading it all (a `413`, a `408`, a refusal before the body), the
//! answer says `Connection: close`. Requests without a body, and bodies read in full (every
//! accepted request, the buy path's refusals), keep the connection.

use axum::{
    body::Body,
    extract::Request,
    http::{header, HeaderValue},
    middleware::Next,
    response::Response,
};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::{
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{Context, Poll},
};

pub async fn close_when_body_unread(req: Request, next: Next) -> Response {
    use http_body::Body as _;
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let finished = Arc::new(AtomicBool::new(false));
    let req = req.map(|inner| {
        Body::new(Watched {
            inner,
            finished: finished.clone(),
        })
    });
    let mut resp = next.run(req).await;
    if !finished.load(Ordering::Acquire) {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// A request body that says when it was read to its end.
struct Watched {
    inner: Body,
    finished: Arc<AtomicBool>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let done = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            _ => false,
        };
        if done {
            self.finished.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
