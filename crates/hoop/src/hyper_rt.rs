//! hyper 1.x on hoop's runtime (feature `hyper`): the executor and timer hyper's `rt` traits
//! ask for, backed by hoop, so a hyper connection served on a [`spawn`](crate::spawn)ed task
//! has header-read timeouts, keep-alive timers and HTTP/2's background tasks, as it has on tokio
//! with `hyper_util::rt::{TokioExecutor, TokioTimer}`.
//!
//! ```no_run
//! # async fn conn(stream: hoop::net::TcpStream) {
//! use std::convert::Infallible;
//! use std::time::Duration;
//! use hoop::hyper::HoopTimer;
//! use http_body_util::Full;
//! use hyper::body::Bytes;
//! use hyper::server::conn::http1;
//! use hyper::service::service_fn;
//! use hyper_util::rt::TokioIo;
//!
//! let hello = |_req| async { Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("hi")))) };
//! let served = http1::Builder::new()
//!     .timer(HoopTimer)
//!     .header_read_timeout(Duration::from_secs(5))
//!     .serve_connection(TokioIo::new(stream), service_fn(hello))
//!     .await;
//! # }
//! ```
//!
//! The stream goes to hyper through `hyper_util::rt::TokioIo`: hoop's sockets implement
//! tokio's `AsyncRead`/`AsyncWrite` (this feature turns on `tokio`, which needs no tokio
//! runtime). The `hyper_local` example serves HTTP/1.1 and HTTP/2 this way on
//! [`run_per_core`](crate::run_per_core).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// hyper's `rt::Executor` on hoop: [`execute`](::hyper::rt::Executor::execute) spawns the
/// future on the current thread's runtime with [`spawn`](crate::spawn) (hoop's tasks need not
/// be `Send`), detached. HTTP/2 connections use it for their streams. Called where no hoop
/// runtime runs, it panics as `spawn` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct HoopExecutor;

impl<F> ::hyper::rt::Executor<F> for HoopExecutor
where
    F: Future + 'static,
{
    fn execute(&self, fut: F) {
        drop(crate::spawn(fut));
    }
}

/// hyper's `rt::Timer` on hoop's timers ([`time::sleep_until`](crate::time::sleep_until)):
/// polled on a hoop runtime's thread a sleep waits in that runtime's timer map, elsewhere on
/// hoop's timer thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct HoopTimer;

impl ::hyper::rt::Timer for HoopTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(HoopSleep(crate::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(HoopSleep(crate::time::sleep_until(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn ::hyper::rt::Sleep>>, new_deadline: Instant) {
        // A sleep of ours is moved in place; any other is replaced (hyper's own rule).
        match sleep.as_mut().downcast_mut_pin::<HoopSleep>() {
            Some(s) => s.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A [`time::Sleep`](crate::time::Sleep) as hyper's `rt::Sleep`.
#[derive(Debug)]
struct HoopSleep(crate::time::Sleep);

impl HoopSleep {
    fn reset(self: Pin<&mut Self>, deadline: Instant) {
        // `time::Sleep` is `Unpin`: no pin projection needed.
        Pin::new(&mut self.get_mut().0).reset(deadline);
    }
}

impl Future for HoopSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

impl ::hyper::rt::Sleep for HoopSleep {}

#[cfg(test)]
mod tests {
    use super::*;
    use ::hyper::rt::Timer as _;

    fn assert_send_sync<T: Send + Sync>() {}

    /// hyper's `Sleep` must be `Send + Sync`: ours is, and completes at its deadline, after a
    /// reset to a later one too.
    #[test]
    fn sleeps_and_resets() {
        assert_send_sync::<HoopSleep>();
        crate::__private::each_driver(
            &[crate::DriverKind::Uring, crate::DriverKind::Epoll],
            false,
            |kind| {
                let rt = crate::Runtime::builder().driver(kind).build().unwrap();
                rt.block_on(async {
                    let start = Instant::now();
                    HoopTimer.sleep(Duration::from_millis(5)).await;
                    assert!(start.elapsed() >= Duration::from_millis(5));
                    let mut s = HoopTimer.sleep(Duration::from_millis(1));
                    let later = Instant::now() + Duration::from_millis(20);
                    HoopTimer.reset(&mut s, later);
                    s.await;
                    assert!(Instant::now() >= later);
                });
            },
        );
    }

    /// `execute` runs the future on the current runtime.
    #[test]
    fn executes_on_the_runtime() {
        use ::hyper::rt::Executor as _;
        let rt = crate::Runtime::new().unwrap();
        rt.block_on(async {
            let (tx, rx) = futures::channel::oneshot::channel();
            HoopExecutor.execute(async move {
                let _ = tx.send(std::rc::Rc::new(7));
            });
            assert_eq!(*rx.await.unwrap(), 7);
        });
    }
}
