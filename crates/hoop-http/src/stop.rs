//! When [`Server::run`](crate::Server::run) stops: the builder's token, SIGINT/SIGTERM, or
//! the first of its threads that saw either.

use std::future::Future;
use std::io;
use std::task::Poll;

use hoop::signal::{signal, SignalKind};
use hoop::sync::CancellationToken;

/// When [`Server::run`](crate::Server::run) stops.
#[derive(Debug, Clone, Default)]
pub(crate) struct StopOn {
    pub(crate) token: Option<CancellationToken>,
    pub(crate) signals: bool,
}

/// Completes when `stop` is cancelled, `on.token` is, or (with `on.signals`) SIGINT or
/// SIGTERM arrives; then cancels `stop`.
pub(crate) fn stop_future(
    on: &StopOn,
    stop: CancellationToken,
) -> io::Result<impl Future<Output = ()>> {
    let mut signals = match on.signals {
        true => Some((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        )),
        false => None,
    };
    let mut theirs = on.token.clone().map(|t| Box::pin(t.cancelled_owned()));
    let mut ours = Box::pin(stop.clone().cancelled_owned());
    Ok(std::future::poll_fn(move |cx| {
        let mut done = ours.as_mut().poll(cx).is_ready();
        if let Some(t) = &mut theirs {
            done |= t.as_mut().poll(cx).is_ready();
        }
        if let Some((int, term)) = &mut signals {
            done |= int.poll_recv(cx).is_ready();
            done |= term.poll_recv(cx).is_ready();
        }
        if done {
            stop.cancel();
            return Poll::Ready(());
        }
        Poll::Pending
    }))
}
