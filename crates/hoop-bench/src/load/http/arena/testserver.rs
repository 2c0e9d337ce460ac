//! A tiny blocking server of the arena routes for the tests (a thread per connection): it
//! answers every profile right, some answers chunked and some with a length, or wrong on
//! purpose, so the load generator's checks are tried both ways.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::load::http::arena::response::decode_chunked;

/// A test server: right answers, or sums off by one.
pub(crate) fn start(wrong: bool) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let items: Arc<Vec<Value>> = Arc::new(crate::load::http::arena::dataset::items());
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let items = items.clone();
            std::thread::spawn(move || {
                let _ = serve(s, &items, wrong);
            });
        }
    });
    addr
}

/// Serves one connection until it closes or asks to.
fn serve(mut s: TcpStream, items: &[Value], wrong: bool) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut tmp = vec![0u8; 256 * 1024];
    loop {
        // A whole head.
        let (path, head_len, length, chunked, close) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut req = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
                let get = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| String::from_utf8_lossy(h.value).to_string())
                };
                let length: usize = get("content-length").map_or(0, |v| v.parse().unwrap());
                break (
                    req.path.unwrap_or("").to_string(),
                    n,
                    length,
                    get("transfer-encoding").is_some(),
                    get("connection").is_some_and(|c| c == "close"),
                );
            }
            let n = s.read(&mut tmp)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&tmp[..n]);
        };
        buf.drain(..head_len);
        // The body.
        let body = if chunked {
            let mut out = Vec::new();
            loop {
                if let Ok(Some(n)) = decode_chunked(&buf, &mut out) {
                    buf.drain(..n);
                    break out;
                }
                let n = s.read(&mut tmp)?;
                buf.extend_from_slice(&tmp[..n]);
            }
        } else {
            while buf.len() < length {
                let n = s.read(&mut tmp)?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            buf.drain(..length).collect()
        };
        let (answer, as_chunks) = route(&path, &body, items, wrong);
        let conn = if close { "Connection: close\r\n" } else { "" };
        let mut out = if as_chunks {
            let mut o =
                format!("HTTP/1.1 200 OK\r\n{conn}Transfer-Encoding: chunked\r\n\r\n").into_bytes();
            // Two chunks, to try the decoder's joins.
            let mid = answer.len() / 2;
            for part in [&answer[..mid], &answer[mid..]] {
                if !part.is_empty() {
                    o.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                    o.extend_from_slice(part);
                    o.extend_from_slice(b"\r\n");
                }
            }
            o.extend_from_slice(b"0\r\n\r\n");
            o
        } else {
            format!(
                "HTTP/1.1 200 OK\r\n{conn}Content-Length: {}\r\n\r\n",
                answer.len()
            )
            .into_bytes()
        };
        if !as_chunks {
            out.extend_from_slice(&answer);
        }
        s.write_all(&out)?;
        if close {
            return Ok(());
        }
    }
}

/// The answer to `path` with `body`, and whether to send it chunked.
fn route(path: &str, body: &[u8], items: &[Value], wrong: bool) -> (Vec<u8>, bool) {
    let query = |k: &str| -> u64 {
        path.split(['?', '&'])
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .map_or(0, |v| v.parse().unwrap())
    };
    if path.starts_with("/baseline11") {
        let extra: u64 = std::str::from_utf8(body)
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        let sum = query("a") + query("b") + extra + u64::from(wrong);
        (sum.to_string().into_bytes(), query("a") % 2 == 1)
    } else if path == "/pipeline" {
        (b"ok".to_vec(), false)
    } else if let Some(rest) = path.strip_prefix("/json/") {
        let count: usize = rest.split('?').next().unwrap_or("0").parse().unwrap();
        let m = query("m");
        let list: Vec<Value> = items[..count]
            .iter()
            .map(|it| {
                let mut o = it.as_object().cloned().unwrap_or_default();
                let t =
                    it["price"].as_f64().unwrap_or(0.0) * it["quantity"].as_f64().unwrap_or(0.0);
                o.insert("total".into(), json!(t * m as f64));
                Value::Object(o)
            })
            .collect();
        let v = json!({"items": list, "count": count});
        (serde_json::to_vec(&v).unwrap(), count.is_multiple_of(2))
    } else if path == "/upload" {
        (body.len().to_string().into_bytes(), false)
    } else {
        (b"not found".to_vec(), false)
    }
}
