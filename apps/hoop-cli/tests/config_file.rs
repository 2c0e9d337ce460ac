//! `hoop serve http --config FILE`: the flags of a TOML file. A file's settings are honoured
//! (seen from outside: the index file, the listing, precompressed files off, the access log,
//! the driver), a flag on the command line wins over the file, and every kind of bad file
//! stops the command with exit status 1 and one line on stderr naming the file and the line.
//! The merge itself (a repeatable flag's list replaced by the command line's, counts, aliases)
//! is unit-tested on a command of its own in `crates/hoop-flags/src/config_file/tests.rs`.
//!
//! Servers run on both drivers (io_uring skipped, visibly, where it cannot be set up); every
//! server is a child process killed on drop; every read has a timeout and every loop a bound.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hoop_test_support as common;
use hoop_test_support::resets;

use common::http::{make_root, IO_TIMEOUT};
use support::{ask_fresh, Response};

const START_TIMEOUT: Duration = Duration::from_secs(20);

fn hoop() -> Command {
    common::command(env!("CARGO_BIN_EXE_hoop"))
}

/// Whether io_uring can run here (else the uring runs are skipped, visibly): asked of
/// `hoop probe` without injected faults, so that no ring is ever set up in the test process
/// (a ring's task work interrupts the clients' socket reads, which have timeouts, with EINTR).
fn uring_works() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_hoop"))
        .arg("probe")
        .env_remove("HOOP_FAULTS")
        .stdin(Stdio::null())
        .output()
        .expect("run hoop probe");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l == "driver: uring")
}

/// Runs `f` with `uring` and `epoll`, skipping io_uring visibly where it cannot be set up.
/// An injected ring setup failure is opted out of, as the driver matrix does: a server
/// started on `--driver uring` must get the driver it was asked for.
fn each_driver(mut f: impl FnMut(&str)) {
    let _faults = common::faults_off(&["setup"], "each server runs on the driver it names");
    for driver in ["uring", "epoll"] {
        if driver == "uring" && !uring_works() {
            common::skip(hoop::DriverKind::Uring, "io_uring cannot be set up here");
            continue;
        }
        f(driver);
    }
}

/// A running `hoop serve http`, killed when dropped, with its stdout and stderr lines.
struct Server {
    child: Child,
    addr: SocketAddr,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of `r`, read on a thread of their own (so the child never blocks on a pipe).
fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Server {
    /// `hoop serve http ARGS` in the directory `cwd`, up to its `listening on` line.
    fn start(cwd: &Path, args: &[&str]) -> Server {
        Server::start_serve(cwd, "http", args)
    }

    /// `hoop serve WHAT ARGS` in the directory `cwd`, up to its `listening on` line.
    fn start_serve(cwd: &Path, what: &str, args: &[&str]) -> Server {
        let mut child = support::spawn_server(
            hoop().current_dir(cwd).args(["serve", what]).args(args),
            Stdio::piped(),
        );
        let stdout = lines(child.stdout.take().expect("piped stdout"));
        let stderr = lines(child.stderr.take().expect("piped stderr"));
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stdout,
            stderr,
        };
        let first = server.stdout.recv_timeout(START_TIMEOUT);
        let Ok(first) = first else {
            let err: Vec<String> = server.stderr.try_iter().collect();
            panic!("no `listening on` line in time ({args:?}); stderr: {err:?}");
        };
        server.addr = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .parse()
            .expect("IP:PORT");
        server
    }

    /// GET `path` with extra header lines (each ending in CRLF), on a fresh connection
    /// (retried on another after a reset).
    fn get(&self, path: &str, headers: &str) -> Response {
        ask_fresh(
            self.addr,
            &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{headers}\r\n"),
        )
    }

    /// Waits for a stdout line (after `listening on`) containing `want`; a request a reset
    /// ended may have been logged before it was asked again, so a few lines may come first.
    fn wait_stdout_line(&self, want: &str) -> String {
        for _ in 0..4 + 4 * resets::MAX_RETRIES {
            let line = self
                .stdout
                .recv_timeout(IO_TIMEOUT)
                .unwrap_or_else(|_| panic!("no stdout line with {want:?}"));
            if line.contains(want) {
                return line;
            }
        }
        panic!("no stdout line with {want:?} among the first ones");
    }

    /// Waits for a stderr line containing `want`, within the first few.
    fn wait_stderr_line(&self, want: &str) -> String {
        let mut seen = Vec::new();
        for _ in 0..8 {
            let Ok(line) = self.stderr.recv_timeout(IO_TIMEOUT) else {
                break;
            };
            if line.contains(want) {
                return line;
            }
            seen.push(line);
        }
        panic!("no stderr line with {want:?}: {seen:?}");
    }
}

/// The test's root (`base/www`, see `make_root`) with `home.htm` in it and in `docs/`, and
/// `a.css` with a fresh `.br` variant; and `base` itself, the working directory.
fn site(name: &str) -> (common::TempDir, PathBuf, PathBuf) {
    let (base, root) = make_root(name);
    std::fs::write(root.join("home.htm"), b"home page\n").unwrap();
    // Each variant written after its file: not older than it.
    std::fs::write(root.join("a.css"), b"body { color: red }\n").unwrap();
    std::fs::write(root.join("a.css.br"), b"BR-BYTES").unwrap();
    let dir = base.0.clone();
    (base, dir, root)
}

/// Writes `text` to `dir/name` and returns its path as a string.
fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().expect("utf-8 temp path").to_string()
}

// ===== a file's settings =====

/// Every setting of the file is honoured: the root relative to the working directory, the
/// address, the driver, --index, --autoindex, --no-precompressed, --access-log, and the
/// numbers (checked by their parsers at start, and the server then serves).
fn file_settings_are_honoured(driver: &str) {
    let (_base, dir, _root) = site(&format!("honoured-{driver}"));
    let file = format!(
        "# hoop serve http, from a file\n\
         root = \"www\"   # relative to the working directory\n\
         addr = \"127.0.0.1:0\"\n\
         driver = \"{driver}\"\n\
         index = \"home.htm\"\n\
         autoindex = true\n\
         no-precompressed = true\n\
         access-log = true\n\
         cache-bytes = \"1M\"\n\
         max-conns = 100\n\
         header-timeout-ms = 5_000\n\
         idle-timeout-ms = 60000\n\
         threads = 1\n\
         backlog = 128\n"
    );
    let config = write_file(&dir, "hoop.toml", &file);
    let server = Server::start(&dir, &["--config", &config]);
    server.wait_stderr_line(&format!("driver {driver} ("));
    // --index home.htm.
    let r = server.get("/", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"home page\n"[..]));
    // --autoindex: `docs/` has an index.html but no home.htm, so it is listed.
    let r = server.get("/docs/", "");
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(r.status, 200, "{body}");
    assert!(
        body.contains("Index of /docs/") && body.contains("index.html"),
        "{body}"
    );
    // --no-precompressed: the file itself, though the client takes br.
    let r = server.get("/a.css", "Accept-Encoding: br\r\n");
    assert_eq!(
        (r.status, &r.body[..], r.header("content-encoding")),
        (200, &b"body { color: red }\n"[..], None)
    );
    // --access-log: a line for each request.
    server.wait_stdout_line("\"GET /a.css HTTP/1.1\" 200");
}

#[test]
fn file_settings_are_honoured_on_both_drivers() {
    each_driver(file_settings_are_honoured);
}

/// A flag on the command line wins over its key in the file (--root, --addr, --index,
/// --precompressed over the file's no-precompressed, --driver); the file's other keys still
/// apply (autoindex).
fn flags_override_the_file(driver: &str) {
    let (_base, dir, root) = site(&format!("override-{driver}"));
    let other = if driver == "epoll" { "uring" } else { "epoll" };
    let file = format!(
        "root = \"/\"\n\
         addr = \"256.0.0.1:1\"\n\
         driver = \"{other}\"\n\
         index = \"home.htm\"\n\
         no-precompressed = true\n\
         autoindex = true\n"
    );
    let config = write_file(&dir, "hoop.toml", &file);
    let root = root.to_str().expect("utf-8 temp path");
    let server = Server::start(
        &dir,
        &[
            "--config",
            &config,
            "--root",
            root,
            "--addr",
            "127.0.0.1:0",
            "--index",
            "index.html",
            "--precompressed",
            "--driver",
            driver,
        ],
    );
    server.wait_stderr_line(&format!("driver {driver} ("));
    let r = server.get("/", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"<h1>home</h1>\n"[..]));
    let r = server.get("/a.css", "Accept-Encoding: br\r\n");
    assert_eq!(
        (r.status, &r.body[..], r.header("content-encoding")),
        (200, &b"BR-BYTES"[..], Some("br"))
    );
    // The file's autoindex still holds: `empty/` has no index.html and is listed.
    let r = server.get("/empty/", "");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    drop(server);
    // A switch the file turns on, the command line turns off (`--autoindex=false`), and
    // `--autoindex=true` is `--autoindex`.
    for (flag, status) in [("--autoindex=false", 403), ("--autoindex=true", 200)] {
        let server = Server::start(
            &dir,
            &[
                "--config",
                &config,
                "--root",
                root,
                "--addr",
                "127.0.0.1:0",
                flag,
                "--driver",
                driver,
            ],
        );
        server.wait_stderr_line(&format!("driver {driver} ("));
        let r = server.get("/empty/", "");
        assert_eq!(r.status, status, "{flag}");
    }
}

#[test]
fn flags_override_the_file_on_both_drivers() {
    each_driver(flags_override_the_file);
}

/// The response settings from a file, repeatable ones as arrays (`cache-control`) or a
/// single value (`error-page`): each is honoured; then a `--cache-control` on the command
/// line replaces the file's whole list, while the file's other keys still apply.
fn response_keys_from_the_file(driver: &str) {
    let (_base, dir, root) = site(&format!("response-{driver}"));
    std::fs::write(root.join("404.html"), b"<h1>not here</h1>\n").unwrap();
    let file = format!(
        "root = \"www\"\n\
         addr = \"127.0.0.1:0\"\n\
         driver = \"{driver}\"\n\
         cache-control = [\n  \"*.css=max-age=60\",\n  \"text/html=no-cache\",\n]\n\
         error-page = \"404=/404.html\"\n\
         security-headers = true\n\
         content-security-policy = \"default-src 'self'\"\n\
         max-ranges = 1\n\
         autoindex = true\n\
         autoindex-format = \"json\"\n"
    );
    let config = write_file(&dir, "hoop.toml", &file);
    {
        let server = Server::start(&dir, &["--config", &config]);
        let r = server.get("/a.css", "");
        assert_eq!(r.header("cache-control"), Some("max-age=60"), "{}", r.head);
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(
            r.header("content-security-policy"),
            Some("default-src 'self'")
        );
        let r = server.get("/index.html", "");
        assert_eq!(r.header("cache-control"), Some("no-cache"), "{}", r.head);
        let r = server.get("/missing.txt", "");
        assert_eq!(
            (r.status, &r.body[..], r.header("content-type")),
            (404, &b"<h1>not here</h1>\n"[..], Some("text/html"))
        );
        // max-ranges = 1: two ranges get the whole file.
        let r = server.get("/a.txt", "Range: bytes=0-1,3-4\r\n");
        assert_eq!((r.status, &r.body[..]), (200, &b"hello, world\n"[..]));
        let r = server.get("/empty/", "");
        assert_eq!(
            (r.status, r.header("content-type"), &r.body[..]),
            (200, Some("application/json"), &b"[]\n"[..])
        );
    }
    // The command line's --cache-control replaces the file's list: the HTML rule is gone.
    let server = Server::start(
        &dir,
        &["--config", &config, "--cache-control", "*.css=max-age=5"],
    );
    let r = server.get("/a.css", "");
    assert_eq!(r.header("cache-control"), Some("max-age=5"), "{}", r.head);
    let r = server.get("/index.html", "");
    assert_eq!(r.header("cache-control"), None, "{}", r.head);
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn response_keys_from_the_file_on_both_drivers() {
    each_driver(response_keys_from_the_file);
}

// ===== bad files =====

/// `hoop serve http ARGS` in `dir`: its exit code, stderr and stdout.
fn run(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = hoop()
        .current_dir(dir)
        .args(["serve", "http"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run hoop");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `hoop serve echo` and `hoop serve fanout` take `--config` too: the file's keys are their
/// flags (a switch too), and a bad key is refused with its line.
#[test]
fn echo_and_fanout_take_a_config_file() {
    let (_base, dir, _root) = site("echo-fanout");
    let echo = write_file(
        &dir,
        "echo.toml",
        "addr = \"127.0.0.1:0\"\nthreads = 1\nbasic = true\n",
    );
    let server = Server::start_serve(&dir, "echo", &["--config", &echo]);
    resets::retry("an echo through the config file's server", |_| {
        let mut s = std::net::TcpStream::connect(server.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"ping")?;
        let mut got = [0u8; 4];
        s.read_exact(&mut got)?;
        assert_eq!(&got, b"ping");
        Ok(())
    });
    drop(server);
    let fanout = write_file(&dir, "fanout.toml", "addr = \"127.0.0.1:0\"\n");
    drop(Server::start_serve(&dir, "fanout", &["--config", &fanout]));
    for what in ["echo", "fanout"] {
        let bad = write_file(&dir, "bad.toml", "addr = \"127.0.0.1:0\"\nroot = \"www\"\n");
        let out = hoop()
            .current_dir(&dir)
            .args(["serve", what, "--config", &bad])
            .stdin(Stdio::null())
            .output()
            .expect("run hoop");
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("hoop: {bad}:2: unknown key `root`\n"),
            "{what}"
        );
    }
}

/// Each kind of bad file: exit status 1, nothing on stdout, and exactly one line on stderr,
/// naming the file and the line (and the column, for TOML syntax).
#[test]
fn bad_files_exit_one_with_the_file_and_line() {
    let (_base, dir, _root) = site("bad");
    let head = "root = \"www\"\naddr = \"127.0.0.1:0\"\n";
    let cases: &[(&str, &str)] = &[
        // An unknown key.
        ("\nfoo = 1\n", "4: unknown key `foo`"),
        // snake_case for a kebab-case flag.
        (
            "cache_bytes = \"1M\"\n",
            "3: unknown key `cache_bytes` (did you mean `cache-bytes`?)",
        ),
        // A value the flag's own parser refuses, with clap's reason.
        ("threads = 2\nthreads-x = 1\n", "4: unknown key `threads-x`"),
        (
            "\n\nthreads = \"many\"\n",
            "5: bad value for `threads`: invalid value 'many' for '--threads <THREADS>': \
             invalid digit found in string",
        ),
        (
            "cache-bytes = \"12x\"\n",
            "3: bad value for `cache-bytes`: invalid value '12x' for '--cache-bytes <BYTES>': \
             not a byte count: \"12x\" (examples: 0, 4096, 512k, 64M)",
        ),
        (
            "driver = \"nosuch\"\n",
            "3: bad value for `driver`: invalid value 'nosuch' for '--driver <DRIVER>' \
             [possible values: auto, uring, epoll]",
        ),
        (
            "max-conns = -1\n",
            "3: bad value for `max-conns`: invalid value '-1' for '--max-conns <N>': \
             invalid digit found in string",
        ),
        // Values the server would refuse at start, refused with the line.
        (
            "threads = 0\n",
            "3: bad value for `threads`: invalid value '0' for '--threads <THREADS>': must be \
             between 1 and 1024",
        ),
        (
            "idle-timeout-ms = 0\n",
            "3: bad value for `idle-timeout-ms`: invalid value '0' for '--idle-timeout-ms <MS>': \
             must be at least 1 ms",
        ),
        (
            "content-security-policy = \"a\\u0001b\"\n",
            "3: bad value for `content-security-policy`: invalid value 'ab' for \
             '--content-security-policy <VALUE>': content-security-policy \"a\\u{1}b\": the \
             value must be visible ASCII and spaces (no control characters)",
        ),
        // Wrong types.
        (
            "access-log = \"yes\"\n",
            "3: bad value for `access-log`: --access-log is a switch: true or false, not \
             a string",
        ),
        (
            "threads = [1, 2]\n",
            "3: bad value for `threads`: --threads takes one value, not an array",
        ),
        (
            "index = true\n",
            "3: bad value for `index`: --index takes a string or a number, not a boolean",
        ),
        // TOML syntax: line and column.
        (
            "threads = 1\nindex = \"a\n",
            "4:11: invalid basic string, expected `\"`",
        ),
        ("threads 1\n", "3:9: key with no value, expected `=`"),
        // Tables and sections.
        (
            "\n[server]\nthreads = 1\n",
            "4: `server` is a table: the file takes `key = value` lines only, no tables or \
             sections",
        ),
        (
            "limits = { threads = 1 }\n",
            "3: `limits` is a table: the file takes `key = value` lines only, no tables or \
             sections",
        ),
        // `config` is not a key.
        (
            "config = \"other.toml\"\n",
            "3: unknown key `config` (a config file cannot name another)",
        ),
    ];
    for (i, (rest, want)) in cases.iter().enumerate() {
        let name = format!("bad-{i}.toml");
        let path = write_file(&dir, &name, &format!("{head}{rest}"));
        let (code, err, out) = run(&dir, &["--config", &path]);
        assert_eq!(code, Some(1), "{rest:?}: {err}");
        assert_eq!(err, format!("hoop: {path}:{want}\n"), "{rest:?}");
        assert!(out.is_empty(), "{rest:?}: {out}");
    }
    // A root that is not there: the line that names it.
    let path = write_file(
        &dir,
        "noroot.toml",
        "addr = \"127.0.0.1:0\"\nroot = \"nope\"\n",
    );
    let (code, err, _) = run(&dir, &["--config", &path]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "hoop: {path}:2: bad value for `root`: invalid value 'nope'"
        )),
        "{err}"
    );
    // A bad line is refused even when the command line gives the same flag.
    let path = write_file(&dir, "overridden.toml", &format!("{head}threads = \"x\"\n"));
    let (code, err, _) = run(&dir, &["--config", &path, "--threads", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with(&format!("hoop: {path}:3: bad value for `threads`")),
        "{err}"
    );
    // A missing file: its path and the OS error, one line.
    let missing = dir.join("nope.toml");
    let missing = missing.to_str().unwrap();
    let (code, err, out) = run(&dir, &["--config", missing]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        format!("hoop: {missing}: No such file or directory (os error 2)\n")
    );
    assert!(out.is_empty());
    // A file without `root` and a command line without `--root`: clap's own line.
    let path = write_file(&dir, "no-root.toml", "addr = \"127.0.0.1:0\"\n");
    let (code, err, _) = run(&dir, &["--config", &path]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "hoop: the following required arguments were not provided: --root <ROOT>\n"
    );
}

/// `hoop serve http --help` documents --config and the rules of its keys.
#[test]
fn help_documents_the_config_file() {
    let out = hoop().args(["serve", "http", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "--config <FILE>",
        "long names of the flags without their dashes",
        "`access-log = true`",
        "the command line's list replaces the file's",
        "no tables or sections",
    ] {
        assert!(help.contains(want), "{want:?} not in:\n{help}");
    }
}
