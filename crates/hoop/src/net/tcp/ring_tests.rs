//! Receive streams and a buffer ring: idle receives hold no buffer.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::net::{TcpListener, TcpStream};
use crate::{BufRing, DriverKind};

/// What each connection received: (its index, the bytes).
type Received = Rc<RefCell<Vec<(usize, Vec<u8>)>>>;

/// Receives waiting on idle connections hold no buffer of the ring (on epoll too,
/// where the ring is a free list in user memory and each arm used to take its buffer when
/// armed), so a connection that has data is served however many idle ones outnumber the
/// ring's buffers. Before, the first four idle streams held all four buffers and the
/// fifth connection's data was never received.
#[test]
fn idle_receives_hold_no_buffer_and_starve_no_one() {
    for kind in [DriverKind::Epoll, DriverKind::Uring] {
        let Ok(rt) = crate::Runtime::builder().driver(kind).build() else {
            eprintln!("skipped on {kind}: no such driver here");
            continue;
        };
        // A reset injected into the one write or receive that counts ends a round: it is
        // run again on fresh connections (bounded), only while resets are injected.
        let mut resets = 0;
        while !rt.block_on(one_round(kind)) {
            resets += 1;
            assert!(
                resets < 20,
                "{kind}: 20 rounds in a row ended by injected resets"
            );
        }
        if resets > 0 {
            // One write, in the form CI collects (`hoop faults: TEST retried N ...`).
            use std::io::Write as _;
            let line = format!(
                "hoop faults: {} retried {resets} exchanges after resets: a round on {kind} \
                 (HOOP_FAULTS={})\n",
                std::thread::current().name().unwrap_or("?"),
                hoop_driver::fault::describe().unwrap_or_default()
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

/// One round of the test above: false when an injected reset ended it.
async fn one_round(kind: DriverKind) -> bool {
    let ring = BufRing::new(4, 256).expect("ring");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let got: Received = Rc::default();
    let reset = Rc::new(std::cell::Cell::new(false));
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    const CONNS: usize = 16;
    for i in 0..CONNS {
        clients.push(TcpStream::connect(addr).await.expect("connect"));
        let (s, _) = listener.accept().await.expect("accept");
        let (ring, got, reset) = (ring.clone(), got.clone(), reset.clone());
        tasks.push(crate::spawn(async move {
            let mut rx = s.recv_stream(&ring);
            // Bounded: the test sends one message per connection.
            for _ in 0..4 {
                match rx.next().await {
                    Some(Ok(buf)) => got.borrow_mut().push((i, buf.to_vec())),
                    Some(Err(e)) if is_injected_reset(&e) => {
                        reset.set(true);
                        break;
                    }
                    _ => break,
                }
            }
        }));
    }
    // Every stream armed and waiting.
    crate::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(ring.available(), 4, "{kind}: idle receives hold no buffer");
    let last = &clients[CONNS - 1];
    let (res, _) = last.write_all(b"hello".to_vec()).await;
    match res {
        Err(e) if is_injected_reset(&e) => return false,
        res => res.expect("write"),
    }
    let until = Instant::now() + Duration::from_secs(5);
    while got.borrow().is_empty() && !reset.get() && Instant::now() < until {
        crate::time::sleep(Duration::from_millis(5)).await;
    }
    if got.borrow().is_empty() && reset.get() {
        return false;
    }
    assert_eq!(
        got.borrow().as_slice(),
        &[(CONNS - 1, b"hello".to_vec())],
        "{kind}: the data of the last connection was received"
    );
    assert_eq!(ring.available(), 4, "{kind}: the buffer went back");
    for t in tasks {
        t.abort();
    }
    true
}

/// A reset-like error while this thread's fault plan injects resets.
fn is_injected_reset(e: &std::io::Error) -> bool {
    crate::net::connection_lost(e) && hoop_driver::fault::injects("econnreset")
}
