//! What every answer of the site gets on its way out, as one service around the router (and the
//! API's edge): the console pages' guard (`admin::guard_console`), the HTML cache policy
//! (`site::html_cache_policy`), the security headers (`site::security_headers`, and HSTS when
//! served over HTTPS). One service of its own rather than a `from_fn` middleware and four header
//! layers: a request passes it without a boxed future, a clone of the stack under it or a
//! future wrapped per header (docs/benchmarks.md "Idempotency per sale, and the site's edge as one service");
//! only a console page, which waits for its session, is guarded in a future of its own.

use super::{admin, session::SessionKeys, site};
use axum::{extract::Request, response::Response};
use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};

/// Which of the edge's parts are on (all are, unless a measurement leaves one out).
#[derive(Clone)]
pub struct PageEdgeLayer {
    /// The console pages' guard, with the keys that read a session.
    pub guard: Option<Arc<SessionKeys>>,
    pub cache_policy: bool,
    pub security_headers: bool,
    /// `Strict-Transport-Security` (with the security headers, when served over HTTPS).
    pub hsts: bool,
}

impl<S> tower::Layer<S> for PageEdgeLayer {
    type Service = PageEdge<S>;

    fn layer(&self, inner: S) -> PageEdge<S> {
        PageEdge {
            inner,
            edge: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct PageEdge<S> {
    inner: S,
    edge: PageEdgeLayer,
}

/// What the answer to one request gets on its way out.
#[derive(Clone, Copy)]
struct Outgoing {
    /// `/` or a sale's page: the storefront's, cacheable for a few seconds.
    storefront: bool,
    cache_policy: bool,
    security_headers: bool,
    hsts: bool,
}

impl Outgoing {
    fn finish(self, mut resp: Response) -> Response {
        if self.cache_policy {
            site::html_cache_policy(self.storefront, &mut resp);
        }
        if self.security_headers {
            site::security_headers(resp.headers_mut(), self.hsts);
        }
        resp
    }
}

impl<S> tower::Service<Request> for PageEdge<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = PageAnswer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let path = req.uri().path();
        let outgoing = Outgoing {
            storefront: path == "/" || path.starts_with("/activities/"),
            cache_policy: self.edge.cache_policy,
            security_headers: self.edge.security_headers,
            hsts: self.edge.hsts,
        };
        let console = self
            .edge
            .guard
            .as_ref()
            .and_then(|keys| admin::console_role(path).map(|role| (keys.clone(), role)));
        let Some((keys, needed)) = console else {
            return PageAnswer::Passed {
                inner: self.inner.call(req),
                outgoing,
            };
        };
        // The service made ready is the one called; a clone stays for the next request.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let guarded = admin::guard_console(keys, needed, req, move |req| {
            let mut ready = ready;
            async move {
                let Ok(resp) = ready.call(req).await;
                resp
            }
        });
        PageAnswer::Guarded {
            guarded: Box::pin(guarded),
            outgoing,
        }
    }
}

pin_project_lite::pin_project! {
    /// [`PageEdge`]'s answer.
    #[project = PageAnswerProj]
    pub enum PageAnswer<F> {
        Passed { #[pin] inner: F, outgoing: Outgoing },
        Guarded { guarded: Pin<Box<dyn Future<Output = Response> + Send>>, outgoing: Outgoing },
    }
}

impl<F> Future for PageAnswer<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (resp, outgoing) = match self.project() {
            PageAnswerProj::Passed { inner, outgoing } => {
                let Ok(resp) = ready!(inner.poll(cx));
                (resp, *outgoing)
            }
            PageAnswerProj::Guarded { guarded, outgoing } => {
                (ready!(guarded.as_mut().poll(cx)), *outgoing)
            }
        };
        Poll::Ready(Ok(outgoing.finish(resp)))
    }
}
