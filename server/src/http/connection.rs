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
    response::Response,
};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{ready, Context, Poll},
};

/// The layer (a service of its own: no boxed future, no clone of the stack under it).
#[derive(Clone, Copy)]
pub struct CloseWhenUnreadLayer;

impl<S> tower::Layer<S> for CloseWhenUnreadLayer {
    type Service = CloseWhenUnread<S>;

    fn layer(&self, inner: S) -> CloseWhenUnread<S> {
        CloseWhenUnread(inner)
    }
}

#[derive(Clone)]
pub struct CloseWhenUnread<S>(S);

impl<S> tower::Service<Request> for CloseWhenUnread<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Watching<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        use http_body::Body as _;
        if req.body().is_end_stream() {
            return Watching {
                inner: self.0.call(req),
                finished: None,
            };
        }
        let finished = Arc::new(AtomicBool::new(false));
        let req = req.map(|inner| {
            Body::new(Watched {
                inner,
                finished: finished.clone(),
            })
        });
        Watching {
            inner: self.0.call(req),
            finished: Some(finished),
        }
    }
}

pin_project_lite::pin_project! {
    /// [`CloseWhenUnread`]'s answer: `Connection: close` when the body was not read to its end.
    pub struct Watching<F> {
        #[pin]
        inner: F,
        finished: Option<Arc<AtomicBool>>,
    }
}

impl<F> Future for Watching<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(mut resp) = ready!(this.inner.poll(cx));
        if this
            .finished
            .as_ref()
            .is_some_and(|f| !f.load(Ordering::Acquire))
        {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Poll::Ready(Ok(resp))
    }
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
