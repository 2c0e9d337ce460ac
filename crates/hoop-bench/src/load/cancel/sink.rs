//! The load of the scenarios that write and drop (drop_after_write,
//! stream_drop_after_write): where the files go and what reached them, and the reader at the
//! other end of the streams. std and libc only: the peers' binary includes it too.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::load::cancel::load::{Counts, Verifier, BUDGET, CHUNK, CLIENT_WAIT};

/// The reader of stream_drop_after_write, on a thread of its own.
pub(crate) struct StreamReader {
    expected: Arc<AtomicU64>,
    handle: JoinHandle<Counts>,
}

/// A listener on 127.0.0.1:0 and a thread that accepts connections one after another and reads
/// each to its end (or until nothing came for [`CLIENT_WAIT`]), counting in `received` the
/// bytes of each that hold the pattern from its start, at most `len`; it stops once it has
/// read as many connections as [`StreamReader::join`] says were made.
pub(crate) fn stream_reader(len: u64) -> io::Result<(SocketAddr, StreamReader)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    l.set_nonblocking(true)?;
    // The runtime does not wait for this reader: its connections queue up meanwhile, beyond
    // std's backlog of 128 (where a dropped SYN would cost a 1 s retransmission).
    // SAFETY: listen() on a listening socket only sets its backlog (capped by somaxconn).
    unsafe { libc::listen(l.as_raw_fd(), 4096) };
    let addr = l.local_addr()?;
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let want = expected.clone();
    let handle = thread::spawn(move || {
        let start = Instant::now();
        let mut c = Counts::default();
        let (mut accepted, mut short) = (0u64, 0u64);
        let mut buf = vec![0u8; CHUNK];
        while accepted < want.load(Ordering::Acquire) {
            let mut s = match l.accept() {
                Ok((s, _)) => s,
                Err(_) if start.elapsed() < BUDGET => {
                    thread::sleep(Duration::from_micros(100));
                    continue;
                }
                Err(e) => {
                    c.add_note(format!("the reader stopped: {e}"));
                    break;
                }
            };
            accepted += 1;
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(CLIENT_WAIT));
            let mut v = Verifier::default();
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => v.feed(&buf[..n]),
                }
            }
            let got = v.received().min(len);
            if got < len {
                short += 1;
            }
            c.received += got;
        }
        if short > 0 {
            c.add_note(format!(
                "{short} of {accepted} streams short of {len} bytes"
            ));
        }
        c
    });
    Ok((addr, StreamReader { expected, handle }))
}

impl StreamReader {
    /// The reader's count once it read the `made` connections the runtime made (its `sent`
    /// is left to the caller).
    pub(crate) fn join(self, made: u64) -> Counts {
        self.expected.store(made, Ordering::Release);
        self.handle.join().unwrap_or_else(|_| Counts {
            note: Some("the reader thread panicked".into()),
            ..Counts::default()
        })
    }
}

/// stream_drop_after_write's count: `sent` bytes in `made` streams written, the writing's
/// error if it stopped early, and what the reader got.
pub(crate) fn stream_counts(
    reader: StreamReader,
    made: u64,
    sent: u64,
    err: Option<io::Error>,
) -> Counts {
    let mut c = reader.join(made);
    c.sent = sent;
    // A stream whose write-all failed counts nothing sent: what its reader got is not counted
    // either.
    c.received = c.received.min(sent);
    if let Some(e) = err {
        c.add_note(format!("writing stopped early: {e}"));
    }
    c
}

/// drop_after_write's count, once the runtime is gone: `sent` bytes written, the writing's
/// error if it stopped early, and what reached the files of `dir` (each `len` bytes; `dir` is
/// removed).
pub(crate) fn file_counts(dir: &Path, sent: u64, err: Option<io::Error>, len: u64) -> Counts {
    let mut c = Counts {
        sent,
        ..Counts::default()
    };
    if let Some(e) = err {
        c.add_note(format!("writing stopped early: {e}"));
    }
    count_files(dir, len, &mut c);
    c
}

/// A fresh directory for `runtime`'s files inside `base`.
pub(crate) fn files_dir(base: &Path, runtime: &str) -> io::Result<PathBuf> {
    let dir = base.join(format!("hoop-cancel-{}-{runtime}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// The path of file `i` in `dir`.
pub(crate) fn file_path(dir: &Path, i: u64) -> PathBuf {
    dir.join(format!("f{i}"))
}

/// The bytes of the files written (`c.sent / len` of them, numbered from 0) in `dir` that hold
/// the pattern from their start (each file's verified prefix, at most `len`), summed into
/// `c.received`; then removes `dir`.
pub(crate) fn count_files(dir: &Path, len: u64, c: &mut Counts) {
    let files = c.sent.checked_div(len).unwrap_or(0);
    let (mut short, mut missing) = (0u64, 0u64);
    for i in 0..files {
        match std::fs::read(file_path(dir, i)) {
            Ok(bytes) => {
                let mut v = Verifier::default();
                v.feed(&bytes[..bytes.len().min(len as usize)]);
                if v.received() < len {
                    short += 1;
                }
                c.received += v.received();
            }
            Err(_) => missing += 1,
        }
    }
    if short + missing > 0 {
        c.add_note(format!(
            "{short} of {files} files short of {len} bytes, {missing} missing"
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
}
