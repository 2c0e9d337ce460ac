//! The service behind the files: a [`tower_service::Service`] over [`http::Request`]s that
//! answers every request no file answers ([`Builder::fallback_service`](crate::Builder::fallback_service)).
//!
//! The service is what the program gives (an axum `Router`, a `tower::service_fn`, ...):
//! `Clone + Send`, so each runtime thread gets a clone of its own, made once when the thread
//! starts serving, and calls it without a lock. Its futures and response bodies need not be
//! `Send`: they run on the thread that took the connection. Here it is erased behind
//! `Fallback`, so the connection code is not generic over it.
//!
//! Split by idea: the request body the service reads (`body`), the chunked decoder that
//! feeds it (`chunked`) and the request made from a parsed head (`request`). The exchange on
//! a connection (calling the service while the body arrives, writing its response) lives with
//! the other steps of a connection, in `conn::service`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body_util::BodyExt;

pub(crate) mod body;
pub(crate) mod chunked;
pub(crate) mod request;

pub use body::{Body, BodyError};
pub(crate) use body::{BodyErrorKind, BodySender};

/// The error type a service's errors and its response bodies' errors are turned into.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body of any type, boxed (frames of [`Bytes`]; not `Send`: it is written on the
/// thread that called the service).
pub(crate) type ResponseBody = Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError>>>;

/// What a call to the service yields.
pub(crate) type CallFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<ResponseBody>, BoxError>>>>;

/// One thread's service, erased.
pub(crate) trait Fallback {
    /// The service's `poll_ready`.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>>;
    /// The service's `call`, its response's body boxed.
    fn call(&mut self, req: http::Request<Body>) -> CallFuture;
}

impl std::fmt::Debug for dyn Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fallback")
    }
}

/// A service behind [`Fallback`].
struct Erased<S>(S);

impl<S, B> Fallback for Erased<S>
where
    S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: 'static,
    B: http_body::Body + 'static,
    B::Error: Into<BoxError>,
{
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<Body>) -> CallFuture {
        let fut = self.0.call(req);
        Box::pin(async move {
            let response = fut.await.map_err(Into::into)?;
            // `copy_to_bytes` of a `Bytes` (axum's frames) takes it as it is.
            Ok(response.map(|body| {
                let body: ResponseBody = Box::pin(
                    body.map_frame(|f| f.map_data(|mut d| d.copy_to_bytes(d.remaining())))
                        .map_err(Into::into),
                );
                body
            }))
        })
    }
}

/// Makes each thread's [`Fallback`]: a clone of the program's service.
#[derive(Clone)]
pub(crate) struct MakeFallback(Arc<dyn Fn() -> Box<dyn Fallback> + Send + Sync>);

impl std::fmt::Debug for MakeFallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MakeFallback")
    }
}

impl MakeFallback {
    /// Keeps `service` to clone for each thread. The lock only makes a `Send` service
    /// shareable: it is taken once per serving thread, never per request.
    pub(crate) fn new<S, B>(service: S) -> MakeFallback
    where
        S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
            + Clone
            + Send
            + 'static,
        S::Error: Into<BoxError>,
        S::Future: 'static,
        B: http_body::Body + 'static,
        B::Error: Into<BoxError>,
    {
        let kept = Mutex::new(service);
        MakeFallback(Arc::new(move || {
            let s = kept.lock().unwrap_or_else(|e| e.into_inner()).clone();
            Box::new(Erased(s))
        }))
    }

    /// A service for the calling thread.
    pub(crate) fn make(&self) -> Box<dyn Fallback> {
        (self.0)()
    }
}

/// Polls `fut`, turning a panic into an error: a handler that panics answers 500 and the
/// connection and the server go on.
pub(crate) struct CatchUnwind<F>(pub(crate) F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(fut).poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(Panicked)),
        }
    }
}

/// A service, its future or its response body panicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Panicked;

/// Runs `f`, turning a panic into [`Panicked`].
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|_| Panicked)
}
