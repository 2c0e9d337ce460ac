//! HTTP/2 over TLS (ALPN `h2`): the `h2` crate's frames, HPACK and flow control on the TLS
//! stream, and every stream answered by the same request loop as HTTP/1.1 (`conn::run`), so
//! files, ranges, conditionals, precompressed and compressed variants, limits, error pages,
//! the service behind the files and the access log are one code.
//!
//! Each stream is a [`StreamIo`]: the request's head is handed to the loop as the HTTP/1.1
//! head it means (`:authority` as `Host`, split cookies joined, a body without a length as
//! chunked), the loop's response head is read back into HEADERS (connection-specific fields
//! dropped) and its body into DATA frames, each waiting for the peer's window. A window that
//! never opens holds the stream until the idle deadline, then the stream is reset; a peer
//! past [`MAX_STREAMS`] concurrent streams is refused by `h2` (REFUSED_STREAM), and the
//! rapid-reset bounds are `h2`'s defaults.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};

use crate::conn::run::serve_transport;
use crate::conn::transport::{TlsStream, Transport};
use crate::conn::Shared;

mod stream;
pub(crate) use stream::StreamIo;

/// Streams a client may have open at once.
pub const MAX_STREAMS: u32 = 128;
/// Each stream's receive window (request bodies), and the connection's.
const WINDOW_BYTES: u32 = 1024 * 1024;
/// Bytes a stream may have queued in `h2` beyond what the peer's window lets out.
const SEND_BUFFER_BYTES: usize = 256 * 1024;
/// Largest decoded header list a client may send (HTTP/1.1's head limit, about).
const HEADER_LIST_BYTES: u32 = 64 * 1024;

/// What one wait of a connection ended with.
enum Event {
    /// The first stream began: the connection is not idle.
    Busy,
    /// The last open stream ended: the connection is idle now.
    Idle,
    /// The connection ended (the client's GOAWAY or close, or an error).
    Closed,
}

/// Serves one HTTP/2 connection until it closes.
///
/// Its streams run inside its task, not as tasks of their own: each wake polls the streams
/// first, then the connection, so every response a batch of streams wrote goes out in one
/// flush (as tasks, each stream's wake of the connection ran the connection after it alone:
/// one TLS record and one send per response).
pub(crate) async fn serve(tls: TlsStream, sh: Rc<Shared>, remote: Option<SocketAddr>) {
    let timer = sh.deadlines.register();
    timer.set(Instant::now() + sh.cfg.header_timeout);
    let handshake = h2::server::Builder::new()
        .initial_window_size(WINDOW_BYTES)
        .initial_connection_window_size(WINDOW_BYTES)
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(HEADER_LIST_BYTES)
        .max_send_buffer_size(SEND_BUFFER_BYTES)
        .handshake::<_, Bytes>(tls);
    let mut conn = match timer.run(handshake).await {
        Some(Ok(c)) => c,
        _ => return,
    };
    // Each stream's answer, polled inside this task; the set holds the futures themselves
    // (one allocation per stream, its node, not a box besides).
    let mut streams = FuturesUnordered::new();
    let mut going_away = false;
    loop {
        // With no stream open the connection is idle: the idle deadline (or the shutdown)
        // sends GOAWAY; with streams open it drives them (each stream's own deadlines bound
        // its waits).
        let idle = streams.is_empty();
        let _idle = idle.then(|| crate::conn::count(&sh.idle));
        if idle {
            if sh.stopping.get() && !going_away {
                conn.graceful_shutdown();
                going_away = true;
            }
            timer.set_idle(Instant::now() + sh.cfg.idle_timeout);
        } else {
            timer.set(Instant::now() + sh.cfg.idle_timeout);
        }
        let event = timer
            .run(poll_fn(|cx| {
                // Every stream the connection has decoded (polling it also flushes what the
                // streams wrote since: one flush per wake, for all of them).
                loop {
                    match conn.poll_accept(cx) {
                        Poll::Ready(Some(Ok((req, respond)))) => {
                            let io = StreamIo::new(req, respond, remote);
                            let t = Transport::H2(Box::new(io));
                            streams.push(serve_transport(t, None, sh.clone()));
                        }
                        Poll::Ready(None) | Poll::Ready(Some(Err(_))) => {
                            return Poll::Ready(Event::Closed)
                        }
                        Poll::Pending => break,
                    }
                }
                // Then the streams: what they write wakes this task through h2, and the
                // next poll flushes it.
                let had = !streams.is_empty();
                while let Poll::Ready(Some(())) = streams.poll_next_unpin(cx) {}
                match (had, streams.is_empty()) {
                    (true, true) => Poll::Ready(Event::Idle),
                    (_, false) if idle => Poll::Ready(Event::Busy),
                    _ => Poll::Pending,
                }
            }))
            .await;
        match event {
            Some(Event::Idle) | Some(Event::Busy) => {}
            Some(Event::Closed) => {
                // Answers in progress finish (h2 sends what they write until they end).
                while !streams.is_empty() {
                    timer.set(Instant::now() + sh.cfg.idle_timeout);
                    let ended = timer.run(poll_fn(|cx| {
                        let _ = conn.poll_closed(cx);
                        streams.poll_next_unpin(cx)
                    }));
                    if ended.await.is_none() {
                        return;
                    }
                }
                return;
            }
            None if !idle => {}
            // GOAWAY was sent and the client keeps the connection open with nothing asked.
            None if going_away => return,
            None => {
                conn.graceful_shutdown();
                going_away = true;
            }
        }
    }
}
