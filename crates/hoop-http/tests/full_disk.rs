//! The access log on a full disk, on both drivers: an `AccessLogWriter` appending to a file on
//! a 1 MiB tmpfs (`hoop_test_support::fullfs::SmallFs`) with one page left. The server answers
//! every request (200, the right body) while the log cannot be written; the lines that fit
//! are whole, the one cut by `ENOSPC` is ended by a newline, the rest are counted as lost, in
//! one outage (said once on stderr); once space is freed, the lines are written again.
//!
//! Root only (a mount); elsewhere the test prints `skip TEST: REASON` and passes. Every read
//! and write has a timeout and every loop is bounded.

use hoop_test_support as common;
mod serve;

use common::fullfs::SmallFs;
use common::http::{make_root, Client};
use hoop::sync::CancellationToken;
use hoop::DriverKind;
use hoop_http::{AccessLogWriter, Server};
use serve::{spawn_server_for, THREAD_TIMEOUT};

/// Requests while the disk is full (more than one page of lines), and after it is freed.
const FULL_REQUESTS: usize = 200;
const FREED_REQUESTS: usize = 5;

/// One request, on a client that reconnects and asks again when a reset ended the exchange
/// (then the server may have logged it twice: the counts allow one line per retry).
fn get(client: &mut Client) {
    let r = client.get("/a.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello, world\n");
}

/// A line of the log: `[DATE] "GET /a.txt HTTP/1.1" 200`.
fn is_whole(line: &str) -> bool {
    line.starts_with('[') && line.ends_with("] \"GET /a.txt HTTP/1.1\" 200")
}

#[test]
fn the_access_log_on_a_full_disk_counts_what_it_loses_and_the_server_keeps_serving() {
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        let Some(fs) = SmallFs::new(&format!("http-access-log-{kind}"), 1 << 20) else {
            return;
        };
        // Full, then one page freed: the log's first lines fit, then it fills up.
        fs.fill("filler", 1 << 20);
        let filler = fs.join("filler");
        let len = std::fs::metadata(&filler).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&filler)
            .unwrap()
            .set_len(len - 4096)
            .unwrap();
        let log_path = fs.join("access.log");
        let log = AccessLogWriter::append(&log_path).unwrap();
        let (_base, root) = make_root(&format!("full-disk-{kind}"));
        let server = Server::builder(&root)
            .access_log(log.hook())
            .build()
            .unwrap();
        let token = CancellationToken::new();
        let Some((addr, done)) = spawn_server_for(kind, server, token.clone(), None, 0) else {
            continue;
        };
        let mut client = Client::new(addr);
        for _ in 0..FULL_REQUESTS {
            get(&mut client);
        }
        let (written, lost) = (log.lines_written(), log.lines_lost());
        let logged = written + lost;
        let retries = u64::from(client.retries());
        assert!(
            (FULL_REQUESTS as u64..=FULL_REQUESTS as u64 + retries).contains(&logged),
            "{kind}: {retries} retries: {log:?}"
        );
        assert!(
            written > 0 && lost > 0,
            "{kind}: one page fits some lines: {log:?}"
        );
        assert_eq!(log.outages(), 1, "{kind}: one outage, said once: {log:?}");
        std::fs::remove_file(&filler).unwrap();
        for _ in 0..FREED_REQUESTS {
            get(&mut client);
        }
        let retries = u64::from(client.retries());
        let freed_written = log.lines_written() - written;
        assert!(
            (FREED_REQUESTS as u64..=FREED_REQUESTS as u64 + retries).contains(&freed_written),
            "{kind}: {retries} retries: {log:?}"
        );
        assert_eq!(log.lines_lost(), lost, "{kind}");
        assert_eq!(log.outages(), 1, "{kind}");
        token.cancel();
        let stats = done
            .recv_timeout(THREAD_TIMEOUT)
            .expect("serve returned after the stop");
        let asked = (FULL_REQUESTS + FREED_REQUESTS) as u64;
        assert!(
            (asked..=asked + retries).contains(&stats.requests),
            "{kind}: {} requests, {retries} retries",
            stats.requests
        );
        // Every line is whole but the one the error cut, which ends where the disk filled.
        let text = String::from_utf8(std::fs::read(&log_path).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let whole = lines.iter().filter(|l| is_whole(l)).count() as u64;
        assert_eq!(whole, log.lines_written(), "{kind}: {text}");
        // The lines are of one length (the date's format is fixed): unless a page holds a
        // whole number of them, the error cut one, a prefix of a line, ended by a newline.
        let line_len = lines[0].len() as u64 + 1;
        let cut: Vec<&&str> = lines.iter().filter(|l| !is_whole(l)).collect();
        assert_eq!(
            cut.len(),
            usize::from(4096 % line_len != 0),
            "{kind}: {text}"
        );
        assert!(cut
            .iter()
            .all(|l| l.starts_with('[') && l.len() < lines[0].len()));
        assert!(text.ends_with('\n'));
    }
}

const STDOUT_CHILD: &str = "HOOP_HTTP_FULL_DISK_STDOUT_CHILD";

/// The built-in logger (`Config::access_log`: stdout, as `hoop serve http --access-log`
/// prints it) with stdout redirected to a file on a full disk: the server answers every
/// request, and the loss is said once per outage on stderr, with the count when writing
/// resumes. In a child process (its fd 1 is pointed at the file while it serves).
#[test]
fn the_stdout_logger_on_a_full_disk_says_so_once_and_the_server_keeps_serving() {
    let name = "the_stdout_logger_on_a_full_disk_says_so_once_and_the_server_keeps_serving";
    if std::env::var_os(STDOUT_CHILD).is_some() {
        return stdout_child(name);
    }
    let run = common::run_test_child(name, STDOUT_CHILD);
    assert!(
        run.status.success(),
        "child failed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    if run.stderr.contains(&format!("skip {name}")) {
        eprintln!("{}", run.stderr);
        return;
    }
    let full = run
        .stderr
        .matches("hoop-http: access log stdout: No space left on device");
    assert_eq!(
        full.count(),
        2,
        "once per server (one per driver):\n{}",
        run.stderr
    );
    let again = run
        .stderr
        .matches("hoop-http: access log stdout: writing again; ");
    assert_eq!(again.count(), 2, "{}", run.stderr);
}

fn stdout_child(name: &str) {
    use std::os::fd::AsRawFd;
    let Some(fs) = SmallFs::new(name, 1 << 20) else {
        return;
    };
    let (_base, root) = make_root("full-disk-stdout");
    // SAFETY: dup/dup2 on fds this process owns; fd 1 is restored before the harness
    // prints its result.
    let saved = unsafe { libc::dup(1) };
    assert!(saved >= 0);
    for kind in [DriverKind::Uring, DriverKind::Epoll] {
        // A file of its own (the last page of another one may have room left), then full.
        let out = std::fs::File::create(fs.join(&format!("stdout-{kind}.log"))).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::dup2(out.as_raw_fd(), 1) }, 1);
        fs.fill("filler", 1 << 20);
        let cfg = hoop_http::Config {
            access_log: true,
            ..Default::default()
        };
        let server = Server::builder(&root).config(cfg).build().unwrap();
        let token = CancellationToken::new();
        let Some((addr, done)) = spawn_server_for(kind, server, token.clone(), None, 0) else {
            continue;
        };
        let mut client = Client::new(addr);
        for _ in 0..20 {
            get(&mut client);
        }
        std::fs::remove_file(fs.join("filler")).unwrap();
        for _ in 0..3 {
            get(&mut client);
        }
        token.cancel();
        let stats = done.recv_timeout(THREAD_TIMEOUT).expect("serve returned");
        let retries = u64::from(client.retries());
        assert!(
            (23..=23 + retries).contains(&stats.requests),
            "{retries} retries"
        );
    }
    // SAFETY: as above.
    assert_eq!(unsafe { libc::dup2(saved, 1) }, 1);
    // SAFETY: `saved` is ours, closed once.
    unsafe { libc::close(saved) };
}
