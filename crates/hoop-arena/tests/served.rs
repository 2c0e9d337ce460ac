//! HttpArena's profiles through hoop-http, on both drivers (io_uring and epoll): the Router
//! (`hoop_arena::router`) as hoop-http's service, as `hoop serve arena` runs it, asked through
//! a socket the way a benchmark client asks.
//!
//! * baseline: `GET` and `POST` (a length, one chunk, two chunks) on one keep-alive
//!   connection, and the three pipelined in one write;
//! * pipelined: 16 `GET /pipeline` in one write, then 16 with POSTs and their bodies among them;
//! * short-lived: connections of 10 requests, the 10th with `Connection: close`;
//! * json: counts and multipliers checked item by item against the built-in dataset and against
//!   one `Dataset::load` read from a file;
//! * upload: 500 kB and 20 MB with a length, 2 MB chunked, and `Expect: 100-continue`, counted
//!   exactly;
//! * static: a root in front of the Router (the `.gz` variant negotiated, the Router behind);
//! * bad input: each endpoint's 400 (and a 404, a 405) is an ordinary response: the same
//!   connection answers the next request;
//! * a client that leaves mid-upload leaves no connection open.
//!
//! Every read has a timeout, every loop is bounded, nothing measures speed. Each scenario is
//! cut in units of a few exchanges; a unit that meets a reset (injected by CI's fault plans)
//! runs again on a new server (`resets::retry`), and a wrong answer fails the test whatever
//! the plan. The uploads opt out of the kinds that fail a receive (`UPLOADS`: an upload is too
//! many receives for any attempt to finish at CI's rate).

mod served_common;

use hoop_test_support as common;
use served_common::{
    arena, ask, expect_closed, expect_ok, get, on_each_driver, post, post_chunked, served, Req,
    Running,
};

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use common::http::{try_connect, try_read_any, try_read_head, Response};
use common::{resets, ReadRetry as _};
use hoop::DriverKind;
use hoop_arena::{router, Dataset, Item};

#[test]
fn baseline_sums_with_get_post_and_chunked_on_one_connection() {
    let pairs = [
        (13i64, 42i64),
        (0, 0),
        (-50, 8),
        (1_000_000, 2_345_678),
        (7, -7),
    ];
    on_each_driver(
        "baseline",
        &pairs,
        || arena(Dataset::builtin()),
        |kind, srv, &(a, b)| {
            let mut s = try_connect(srv.addr)?;
            let path = format!("/baseline11?a={a}&b={b}");
            let (sum, with_body) = ((a + b).to_string(), (a + b + 20).to_string());
            let two_chunks = format!(
                "POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
                 1\r\n2\r\n1\r\n0\r\n0\r\n\r\n"
            );
            for (req, want, what) in [
                (get(&path), &sum, "GET"),
                (post(&path, "20"), &with_body, "POST, a length"),
                (post_chunked(&path, &["20"]), &with_body, "POST, one chunk"),
                (two_chunks, &with_body, "POST, two chunks"),
            ] {
                s.write_all(req.as_bytes())?;
                expect_ok(kind, &mut s, want, &format!("{what} {path}"))?;
            }
            // The three shapes in one write, the chunked POST in the middle, answered in order.
            let p = |d: i64| format!("/baseline11?a={}&b={b}", a + d);
            let batch = get(&p(0)) + &post_chunked(&p(1), &["2", "0"]) + &post(&p(2), "20");
            s.write_all(batch.as_bytes())?;
            for (d, extra, what) in [(0, 0, "GET"), (1, 20, "chunked"), (2, 20, "length")] {
                let want = (a + d + b + extra).to_string();
                expect_ok(kind, &mut s, &want, &format!("pipelined {what} {}", p(d)))?;
            }
            Ok(())
        },
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    on_each_driver(
        "pipelined",
        &["16 GETs, then 16 with bodies among them"],
        || arena(Dataset::builtin()),
        |kind, srv, _| {
            let mut s = try_connect(srv.addr)?;
            s.write_all(get("/pipeline").repeat(16).as_bytes())?;
            for i in 0..16 {
                let r = try_read_any(&mut s)?;
                assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]), "{kind}: #{i}");
                assert_eq!(r.header("content-type"), Some("text/plain"), "{kind}");
            }
            // 16 more, with bodies among them: a POST's body must not be taken for a request.
            let upload = "x".repeat(3000);
            let mut batch = String::new();
            let mut want = Vec::new();
            for i in 0..16 {
                let (req, answer) = match i {
                    5 => (post("/baseline11?a=1&b=2", "3"), "6".to_string()),
                    9 => (
                        post_chunked("/upload", &[&upload, "GET /pipeline"]),
                        "3013".into(),
                    ),
                    12 => (
                        post("/upload", &get("/pipeline")),
                        get("/pipeline").len().to_string(),
                    ),
                    _ => (get("/pipeline"), "ok".to_string()),
                };
                batch.push_str(&req);
                want.push(answer);
            }
            s.write_all(batch.as_bytes())?;
            for (i, answer) in want.iter().enumerate() {
                expect_ok(kind, &mut s, answer, &format!("pipelined #{i}"))?;
            }
            Ok(())
        },
    );
}

#[test]
fn short_lived_connections_close_after_the_tenth_request() {
    on_each_driver(
        "short-lived, connection",
        &[0, 1, 2],
        || arena(Dataset::builtin()),
        |kind, srv, &conn| {
            let mut s = try_connect(srv.addr)?;
            for i in 0..9 {
                s.write_all(get(&format!("/baseline11?a={conn}&b={i}")).as_bytes())?;
                expect_ok(kind, &mut s, &(conn + i).to_string(), &format!("#{i}"))?;
            }
            let last = format!(
                "GET /baseline11?a={conn}&b=9 HTTP/1.1\r\nHost: localhost\r\n\
                 Connection: close\r\n\r\n"
            );
            let r = ask(&mut s, &last)?;
            let want = (conn + 9).to_string();
            assert_eq!((r.status, &r.body[..]), (200, want.as_bytes()), "{kind}");
            assert!(r.closes(), "{kind}: the 10th says Connection: close");
            expect_closed(kind, &mut s, "after the 10th")
        },
    );
}

/// An item as `/json` answers it: the item's fields and its `total`.
#[derive(serde::Deserialize)]
struct Priced {
    #[serde(flatten)]
    item: Item,
    total: f64,
}

/// `/json/{count}?m={m}`, twice on one connection, checked against `dataset`.
fn check_json(
    kind: DriverKind,
    srv: &Running,
    dataset: &Dataset,
    count: usize,
    m: i64,
) -> io::Result<()> {
    let uri = format!("/json/{count}?m={m}");
    let mut s = try_connect(srv.addr)?;
    for _ in 0..2 {
        check_page(kind, &ask(&mut s, &get(&uri))?, &uri, dataset, count, m);
    }
    Ok(())
}

/// A `/json` page (`uri`'s) checked against `dataset`'s first `count` items times `m`.
fn check_page(kind: DriverKind, r: &Response, uri: &str, dataset: &Dataset, count: usize, m: i64) {
    assert_eq!(
        r.status,
        200,
        "{kind}: {uri}: {:?}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{kind}: {uri}"
    );
    let page: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
    let page = page.as_object().expect("an object");
    let keys: Vec<&str> = page.keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 2, "{kind}: {uri}: {keys:?}");
    assert_eq!(page["count"].as_u64(), Some(count as u64), "{kind}: {uri}");
    let items = page["items"].as_array().expect("items");
    assert_eq!(items.len(), count, "{kind}: {uri}");
    for (got, want) in items.iter().zip(&dataset.items) {
        // The item's 8 fields and `total`, nothing else.
        assert_eq!(
            got.as_object().map(|o| o.len()),
            Some(9),
            "{kind}: {uri}: {got}"
        );
        let got: Priced = serde_json::from_value(got.clone()).expect("an item and its total");
        assert_eq!(&got.item, want, "{kind}: {uri}");
        let total = want.price * want.quantity as f64 * m as f64;
        let tolerance = 1e-9 * total.abs().max(f64::MIN_POSITIVE);
        assert!(
            (got.total - total).abs() <= tolerance,
            "{kind}: {uri}: total {} != {total}",
            got.total
        );
    }
}

const JSON_PAIRS: [(usize, i64); 7] = [(1, 3), (5, 7), (10, 2), (15, 5), (25, 4), (40, 8), (50, 6)];

#[test]
fn json_pages_match_the_builtin_dataset() {
    let dataset = Dataset::builtin();
    on_each_driver(
        "json (count, m)",
        &JSON_PAIRS,
        || arena(Dataset::builtin()),
        |kind, srv, &(count, m)| check_json(kind, srv, &dataset, count, m),
    );
}

#[test]
fn json_pages_match_a_loaded_dataset() {
    let dir = common::TempDir::new("arena", "dataset");
    let path = dir.join("dataset.json");
    // 60 items as HttpArena's file has them: some whole-number prices, an unused field.
    let items: Vec<String> = (1..=60)
        .map(|i| {
            let price = if i % 2 == 0 {
                format!("{}", i * 3)
            } else {
                format!("{}.{:02}", i, i * 7 % 100)
            };
            format!(
                r#"{{"id":{},"name":"Thing {i}","category":"c{}","price":{price},"quantity":{},
                "active":{},"tags":["t{i}"],"rating":{{"score":{}.5,"count":{}}},"extra":[1]}}"#,
                1000 + i,
                i % 4,
                i * 11 % 97,
                i % 2 == 1,
                i % 5,
                i * 13
            )
        })
        .collect();
    std::fs::write(&path, format!("[{}]", items.join(",\n"))).unwrap();
    let dataset = Dataset::load(&path).expect("the dataset loads");
    assert_eq!(dataset.items.len(), 60);
    on_each_driver(
        "json, a loaded dataset (count, m)",
        &JSON_PAIRS,
        || arena(Dataset::load(&path).unwrap()),
        |kind, srv, &(count, m)| check_json(kind, srv, &dataset, count, m),
    );
}

/// POSTs `/upload` with `body` (after `head`, which ends its headers) written from another
/// thread, and checks the answer is the byte count.
fn upload(
    kind: DriverKind,
    s: &mut TcpStream,
    head: &str,
    body: Vec<u8>,
    count: usize,
) -> io::Result<()> {
    let mut w = s.try_clone()?;
    let head = head.to_string();
    // Written from another thread: the server reads as the handler asks for the body.
    let writer = std::thread::spawn(move || {
        w.write_all(head.as_bytes())?;
        w.write_all(&body)
    });
    let r = try_read_any(s)?;
    // Checked before the writer's end: an answer before the whole body is a wrong answer,
    // not the reset the writer would then meet.
    let got = String::from_utf8_lossy(&r.body);
    assert_eq!(
        (r.status, &*got),
        (200, &*count.to_string()),
        "{kind}: {count} B uploaded"
    );
    writer.join().expect("the writer")
}

fn upload_head(len: usize) -> String {
    format!(
        "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {len}\r\n\r\n"
    )
}

/// An upload of the upload test.
#[derive(Debug, Clone, Copy)]
enum Upload {
    Length(usize),
    /// In 64 KiB chunks.
    Chunked(usize),
    /// With a length, after `100 Continue`.
    Continue(usize),
}

#[test]
fn uploads_are_counted_exactly() {
    let units = [
        Upload::Length(500_000),
        Upload::Length(20_000_000),
        Upload::Chunked(2_000_000),
        Upload::Continue(300_000),
    ];
    served(
        "upload",
        &units,
        || arena(Dataset::builtin()),
        |kind, srv, &unit| {
            let mut s = try_connect(srv.addr)?;
            match unit {
                Upload::Length(len) => {
                    let body = common::http::bytes(len, len as u64);
                    upload(kind, &mut s, &upload_head(len), body, len)?;
                }
                Upload::Chunked(len) => {
                    let mut body = Vec::with_capacity(len + 1024);
                    for piece in common::http::bytes(len, 3).chunks(64 * 1024) {
                        body.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                        body.extend_from_slice(piece);
                        body.extend_from_slice(b"\r\n");
                    }
                    body.extend_from_slice(b"0\r\n\r\n");
                    let head = "POST /upload HTTP/1.1\r\nHost: localhost\r\n\
                                Transfer-Encoding: chunked\r\n\r\n";
                    upload(kind, &mut s, head, body, len)?;
                }
                Upload::Continue(len) => {
                    // The body goes once the server asks for it.
                    let head = format!(
                        "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len}\r\n\
                         Expect: 100-continue\r\n\r\n"
                    );
                    s.write_all(head.as_bytes())?;
                    let interim = try_read_head(&mut s)?;
                    let interim = String::from_utf8_lossy(&interim);
                    assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n", "{kind}");
                    upload(kind, &mut s, "", common::http::bytes(len, 4), len)?;
                }
            }
            s.write_all(get("/pipeline").as_bytes())?;
            expect_ok(kind, &mut s, "ok", &format!("after {unit:?}"))
        },
        true,
    );
}

const CSS: &[u8] = b"body { color: red }\n";
/// `CSS`, gzipped.
const CSS_GZ: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\x4b\xca\x4f\xa9\x54\xa8\x56\x48\
    \xce\xcf\xc9\x2f\xb2\x52\x28\x4a\x4d\x51\xa8\xe5\x02\x00\x96\x24\xd3\x5e\x14\x00\x00\x00";

#[test]
fn static_files_in_front_of_the_router() {
    let root = common::TempDir::new("arena", "static");
    for (name, data, secs) in [
        ("a.css", CSS, 1_700_000_000),
        ("a.css.gz", CSS_GZ, 1_700_000_010),
    ] {
        std::fs::write(root.join(name), data).unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(root.join(name))
            .unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }
    let server = || {
        hoop_http::Builder::new()
            .root(&root.0)
            .fallback_service(router(Arc::new(Dataset::builtin())))
            .build()
            .unwrap()
    };
    on_each_driver("static", &["a root"], server, |kind, srv, _| {
        let mut s = try_connect(srv.addr)?;
        let gz = "GET /a.css HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: br, gzip\r\n\r\n";
        let r = ask(&mut s, gz)?;
        assert_eq!(
            (r.status, &r.body[..]),
            (200, CSS_GZ),
            "{kind}: the .gz variant"
        );
        assert_eq!(r.header("content-encoding"), Some("gzip"), "{kind}");
        let r = ask(&mut s, &get("/a.css"))?;
        assert_eq!(
            (r.status, &r.body[..]),
            (200, CSS),
            "{kind}: the identity file"
        );
        assert_eq!(r.header("content-encoding"), None, "{kind}");
        // The Router still answers what no file does.
        let r = ask(&mut s, &get("/baseline11?a=1&b=2"))?;
        assert_eq!(
            (r.status, &r.body[..]),
            (200, &b"3"[..]),
            "{kind}: the Router behind"
        );
        s.write_all(post_chunked("/baseline11?a=1&b=2", &["3"]).as_bytes())?;
        expect_ok(kind, &mut s, "6", "a POST behind the files")?;
        upload(
            kind,
            &mut s,
            &upload_head(70_000),
            vec![b'u'; 70_000],
            70_000,
        )?;
        let r = ask(&mut s, &get("/json/2"))?;
        assert_eq!(r.status, 200, "{kind}: /json behind the files");
        Ok(())
    });
}

#[test]
fn bad_input_is_an_ordinary_response_and_the_connection_goes_on() {
    let cases = [
        (get("/baseline11?a=x&b=1"), 400),
        (get("/baseline11?a=1"), 400),
        (post("/baseline11?a=1&b=2", "abc"), 400),
        (post_chunked("/baseline11?a=1&b=2", &["a", "bc"]), 400),
        // The handler refuses before reading the body: the server drops the short body.
        (post("/baseline11?a=x&b=2", "20"), 400),
        (get("/json/0"), 400),
        (get("/json/51"), 400),
        (get("/json/5?m=x"), 400),
        (get("/no/such/path"), 404),
        (get("/upload"), 405),
    ]
    .map(|(req, status)| (Req::new(req), status));
    on_each_driver(
        "bad input",
        &cases,
        || arena(Dataset::builtin()),
        |kind, srv, (req, status)| {
            let (line, req) = (&req.what, &req.bytes);
            let mut s = try_connect(srv.addr)?;
            for i in 0..2 {
                let r = ask(&mut s, req)?;
                assert_eq!(r.status, *status, "{kind}: {line}");
                assert!(!r.closes(), "{kind}: {line}: the connection is kept");
                s.write_all(get(&format!("/baseline11?a={i}&b=100")).as_bytes())?;
                expect_ok(
                    kind,
                    &mut s,
                    &(i + 100).to_string(),
                    &format!("after {line}"),
                )?;
            }
            Ok(())
        },
    );
}

#[test]
fn a_client_that_leaves_mid_upload_leaves_no_connection() {
    let chunked = "POST /upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
                   989680\r\n";
    served(
        "a client leaves mid-upload",
        &[
            Req::named("Content-Length", upload_head(10_000_000)),
            Req::named("chunked", chunked.to_string()),
        ],
        || arena(Dataset::builtin()),
        |kind, srv, head| {
            let mut s = try_connect(srv.addr)?;
            s.write_all(head.bytes.as_bytes())?;
            s.write_all(&vec![b'z'; 1_000_000])?;
            held(srv, &mut s)?;
            drop(s);
            let give_up = Instant::now() + Duration::from_secs(20);
            while srv.server.open_connections() > 0 && Instant::now() < give_up {
                std::thread::sleep(Duration::from_millis(10));
            }
            let open = srv.server.open_connections();
            assert_eq!(open, 0, "{kind}: connections still open after 20 s");
            let mut s = try_connect(srv.addr)?;
            s.write_all(get("/pipeline").as_bytes())?;
            expect_ok(kind, &mut s, "ok", "the server goes on")
        },
        true,
    );
}

/// Waits (at most 20 s) until the server counts the upload on `s` open; the server closing
/// it first (an injected reset) is returned as an early end.
fn held(srv: &Running, s: &mut TcpStream) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_millis(10)))?;
    let give_up = Instant::now() + Duration::from_secs(20);
    while srv.server.open_connections() == 0 && Instant::now() < give_up {
        let mut b = [0u8; 64];
        match s.read_retry(&mut b) {
            Ok(0) => return Err(resets::closed_early("the end of the upload")),
            Ok(n) => panic!(
                "an answer to an unfinished upload: {:?}",
                String::from_utf8_lossy(&b[..n])
            ),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    assert!(
        srv.server.open_connections() > 0,
        "the upload's connection was never counted"
    );
    Ok(())
}
