//! Multishot operations (issue 5): multishot accept as a stream, on both drivers (on epoll it
//! is a loop of single accepts).

use std::io::Read;
use std::time::Duration;

use hoop::DriverKind;

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// fd counts are per process: tests in this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn each_driver(f: impl Fn(DriverKind)) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        f(kind);
    }
}

fn rt(kind: DriverKind) -> hoop::Runtime {
    hoop::Runtime::builder().driver(kind).build().unwrap()
}

/// One multishot accept serves many connections; each accepted stream works.
#[test]
fn incoming_accepts_many_connections() {
    each_driver(|kind| {
        rt(kind).block_on(async {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let clients = std::thread::spawn(move || {
                (0..50)
                    .map(|i| {
                        let mut c = std::net::TcpStream::connect(addr).unwrap();
                        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                        std::io::Write::write_all(&mut c, &[i as u8]).unwrap();
                        let mut b = [0u8; 1];
                        c.read_exact(&mut b).unwrap();
                        b[0]
                    })
                    .collect::<Vec<u8>>()
            });
            let mut incoming = l.incoming();
            for _ in 0..50 {
                let s = hoop::time::timeout(Duration::from_secs(10), incoming.next())
                    .await
                    .unwrap_or_else(|_| panic!("driver={kind}: no connection within 10 s"))
                    .expect("stream ended")
                    .unwrap();
                let (res, buf) = s.read(Vec::with_capacity(1)).await;
                assert_eq!(res.unwrap(), 1);
                let reply = vec![buf[0].wrapping_add(1)];
                let (res, _) = s.write_all(reply).await;
                res.unwrap();
            }
            let got = clients.join().unwrap();
            assert_eq!(
                got,
                (0..50u8).map(|i| i + 1).collect::<Vec<_>>(),
                "driver={kind}"
            );
        });
    });
}

/// Invariant 14: connections accepted after the stream was dropped are closed, never leaked;
/// the clients see the close.
#[test]
fn dropped_incoming_leaks_no_fd() {
    each_driver(|kind| {
        let baseline = fd_count();
        let runtime = rt(kind);
        runtime.block_on(async {
            let l = hoop::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let inside = fd_count();
            for _ in 0..20 {
                let mut incoming = l.incoming();
                // Arm it, then let connections arrive while nobody takes them.
                let _ = hoop::time::timeout(Duration::from_millis(1), incoming.next()).await;
                let clients: Vec<_> = (0..5)
                    .map(|_| std::net::TcpStream::connect(addr).unwrap())
                    .collect();
                hoop::time::sleep(Duration::from_millis(5)).await;
                drop(incoming);
                hoop::time::sleep(Duration::from_millis(5)).await;
                drop(clients);
            }
            hoop::time::sleep(Duration::from_millis(20)).await;
            // While the runtime still runs: every connection the dropped streams accepted was
            // closed by the driver (not by the shutdown).
            assert_eq!(fd_count(), inside, "driver={kind}: accepted fds leaked");
            l.close().await.unwrap();
        });
        drop(runtime);
        assert_eq!(
            fd_count(),
            baseline,
            "driver={kind}: fds leaked by a dropped incoming()"
        );
    });
}
