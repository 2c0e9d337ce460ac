//! The server thread the library's tests start on each driver (`api.rs`, `framing.rs`, and
//! through `site::TestServer` the behaviour tests).

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use hoop::net::TcpListener;
use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::{ServeStats, Server};
use hoop_test_support as common;

/// How long a server thread may take to start or to stop.
pub const THREAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A server thread on driver `kind`: serves `listener` until `token` is cancelled, then sends
/// what `serve` returned; with `hold`, its runtime keeps running after `serve` returned, until
/// `hold` is cancelled (at most [`THREAD_TIMEOUT`]): what `serve` left open stays open. `None`
/// (said on stderr) when io_uring cannot be set up here.
///
/// `attempt` is the attempt of a scenario that a reset (injected) runs again on a new server
/// ([`hoop_test_support::resets::retry`]), 0 otherwise: a driver's fault stream is seeded by
/// its thread's name, so each attempt's server thread is named apart (the test's name, then
/// `#N` after the first attempt), or every attempt would draw the same faults.
pub fn spawn_server_for(
    kind: DriverKind,
    server: Server,
    token: CancellationToken,
    hold: Option<CancellationToken>,
    attempt: u32,
) -> Option<(SocketAddr, mpsc::Receiver<ServeStats>)> {
    // Bound here, as a caller that made its own listener would.
    let listener = TcpListener::bind_with("127.0.0.1:0", false).unwrap();
    let addr = listener.local_addr().unwrap();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let (done_tx, done_rx) = mpsc::channel();
    let name = std::thread::current().name().unwrap_or("server").to_owned();
    let name = if attempt == 0 {
        name
    } else {
        format!("{name}#{attempt}")
    };
    // The calling thread's fault opt-outs, carried over as `common::spawn` does.
    let opted_out = hoop::fault::opted_out();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let _inherited = hoop::fault::opt_out_inherited(opted_out);
        // A runtime on a named driver: the driver matrix's opt-outs (an injected setup
        // failure would only fail the test).
        let _faults = common::matrix_faults_off();
        let rt = match hoop::Runtime::builder().driver(kind).build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return;
            }
        };
        let _ = ready_tx.send(Ok(()));
        let stats = rt.block_on(async {
            let stats = server.serve_until(listener, &token).await;
            if let Some(hold) = hold {
                let _ = done_tx.send(stats);
                let _ = hoop::time::timeout(THREAD_TIMEOUT, hold.cancelled()).await;
                return None;
            }
            Some(stats)
        });
        drop(rt);
        if let Some(stats) = stats {
            let _ = done_tx.send(stats);
        }
    });
    spawned.expect("spawn the server thread");
    match ready_rx
        .recv_timeout(THREAD_TIMEOUT)
        .expect("server thread started")
    {
        Ok(()) => Some((addr, done_rx)),
        Err(e) if kind == DriverKind::Uring => {
            eprintln!("SKIPPED on io_uring: it cannot be set up here ({e})");
            None
        }
        Err(e) => panic!("cannot start the {kind} runtime: {e}"),
    }
}
