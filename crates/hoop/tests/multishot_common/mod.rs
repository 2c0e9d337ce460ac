//! What `multishot.rs`, `multishot_accept.rs` and `multishot_shared_ring.rs` share: the driver
//! matrix one test at a time, the runtime, the writer peers, and every buffer ring mode (each
//! file uses a part).

#![allow(dead_code)]

use hoop_test_support as common;
use hoop_test_support::resets;

use std::time::Duration;

use hoop::DriverKind;

/// The driver matrix, one test at a time (fd counts are per process).
pub fn each_driver(f: impl Fn(DriverKind)) {
    let _serial = common::serial();
    common::each_driver(f);
}

pub fn rt(kind: DriverKind) -> hoop::Runtime {
    common::runtime(kind)
}

/// Receives `total` bytes over as many connections as resets take: `part(from, got)` makes a
/// connection whose writer sends from byte `from`, receives onto `got`, and returns what
/// ended it; a reset there goes on over a new connection from where it was
/// (`resets::Resumed`), every byte checked by the caller.
pub async fn resuming<F>(
    what: &str,
    total: usize,
    mut part: impl FnMut(usize, Vec<u8>) -> F,
) -> Vec<u8>
where
    F: std::future::Future<Output = (std::io::Result<()>, Vec<u8>)>,
{
    let mut resumed = resets::Resumed::new(what);
    let mut got = Vec::with_capacity(total);
    loop {
        let from = got.len();
        let (res, now) = part(from, got).await;
        got = now;
        match res {
            Ok(()) => return got,
            Err(e) => resumed.after(e, got.len() - from),
        }
    }
}

/// A writer thread: connects to `addr` and writes `data[from..]` in chunks of `chunk` bytes
/// (sleeping `pause` after each); stops at an error (the receiver reset the connection).
pub fn writer(
    addr: std::net::SocketAddr,
    data: std::sync::Arc<Vec<u8>>,
    from: usize,
    chunk: usize,
    pause: Duration,
) -> std::thread::JoinHandle<()> {
    common::spawn(move || {
        let Ok(mut c) = std::net::TcpStream::connect(addr) else {
            return;
        };
        for part in data[from..].chunks(chunk) {
            if std::io::Write::write_all(&mut c, part).is_err() {
                return;
            }
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
    })
}

/// Both ring modes where they exist: kernel-registered (io_uring on 6.0+) and the user-space
/// free list (the fallback, forced).
pub type MakeRing = fn(u16, usize) -> std::io::Result<hoop::BufRing>;

pub fn ring_modes() -> [(&'static str, MakeRing); 5] {
    [
        ("kernel", hoop::BufRing::new),
        ("user", hoop::BufRing::new_user),
        ("incremental", hoop::BufRing::new_incremental),
        ("bundles", bundles),
        ("incremental+bundles", incremental_bundles),
    ]
}

/// A kernel ring whose receives use bundles where the kernel has them.
pub fn bundles(entries: u16, len: usize) -> std::io::Result<hoop::BufRing> {
    let r = hoop::BufRing::new(entries, len)?;
    r.set_bundles(true);
    Ok(r)
}

/// An incremental ring whose receives use bundles where the kernel has them.
pub fn incremental_bundles(entries: u16, len: usize) -> std::io::Result<hoop::BufRing> {
    let r = hoop::BufRing::new_incremental(entries, len)?;
    r.set_bundles(true);
    Ok(r)
}

/// Says (once per test and mode) when a mode asked for runs as a plainer one here: the
/// feature is absent (epoll, or an older kernel).
pub fn note_mode(kind: DriverKind, mode: &str, ring: &hoop::BufRing) {
    let want_inc = mode.starts_with("incremental");
    let want_bundles = mode.ends_with("bundles");
    if (want_inc && !ring.is_incremental()) || (want_bundles && !ring.bundles()) {
        eprintln!(
            "driver={kind} ring={mode}: runs as kernel={} incremental={} bundles={} (feature \
             absent here)",
            ring.is_kernel(),
            ring.is_incremental(),
            ring.bundles()
        );
    }
}

/// Every buffer is back (an incremental ring's partly filled one aside: the kernel keeps it).
pub fn all_back(ring: &hoop::BufRing) -> bool {
    ring.available() + ring.filling() == ring.entries() as usize
}
