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
        rt.block_on(async {
            let ring = BufRing::new(4, 256).expect("ring");
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let got: Received = Rc::default();
            let mut clients = Vec::new();
            let mut tasks = Vec::new();
            const CONNS: usize = 16;
            for i in 0..CONNS {
                clients.push(TcpStream::connect(addr).await.expect("connect"));
                let (s, _) = listener.accept().await.expect("accept");
                let (ring, got) = (ring.clone(), got.clone());
                tasks.push(crate::spawn(async move {
                    let mut rx = s.recv_stream(&ring);
                    // Bounded: the test sends one message per connection.
                    for _ in 0..4 {
                        match rx.next().await {
                            Some(Ok(buf)) => got.borrow_mut().push((i, buf.to_vec())),
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
            res.expect("write");
            let until = Instant::now() + Duration::from_secs(5);
            while got.borrow().is_empty() && Instant::now() < until {
                crate::time::sleep(Duration::from_millis(5)).await;
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
        });
    }
}
