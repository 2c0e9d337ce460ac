//! `hoop-peer arena-actix --addr 127.0.0.1:0 --workers N [--dataset FILE]`: HttpArena's
//! endpoints on actix-web, the baseline beside hoop-arena's axum Router (on hoop-http and on
//! tokio), with the same contracts:
//!
//! * `GET /baseline11?a=A&b=B`: `A+B`; `POST` with an integer body: `A+B+body` (text/plain; 400
//!   for a missing or non-integer operand or an overflow, 413 for a body over 64 KiB).
//! * `GET /pipeline`: `ok`.
//! * `GET /json/{count}?m=M`: the first `count` items (1..=50, at most the dataset's) with
//!   `total = price * quantity * M` (M an integer, 1 if absent), and `count`; 400 otherwise.
//!   The dataset (`--dataset`, HttpArena's dataset.json; else the built-in 50 items) and the
//!   body's serialization are hoop-arena's own files (`dataset.rs`, `json.rs`, compiled here).
//! * `POST /upload`: the body's bytes, counted as they stream in (`web::Payload`, which no
//!   `PayloadConfig` limit binds); 400 if the body fails.
//! * anything else: actix's 404.
//!
//! `--workers N` (default 1) actix workers, each a thread with its own single-thread runtime;
//! `TCP_NODELAY` on every connection. Prints `listening on IP:PORT` first, then serves until
//! the process is killed.

use std::io::{self, Write};
use std::path::Path;

use actix_web::http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use futures_util::StreamExt;

use crate::dataset::Dataset;
use crate::json::{item_bytes_max, write_page};
use crate::query::{operands, parse_i64, query_param};
use crate::{invalid, workers_flag, Flags};

/// The most bytes `POST /baseline11` reads (its body is one integer): hoop-arena's limit.
const BASELINE_BODY_LIMIT_BYTES: usize = 64 * 1024;
/// The most items `/json/{count}` gives.
const JSON_COUNT_MAX: usize = 50;

/// What the handlers share (one `web::Data`, an `Arc`, cloned into every worker's App).
struct Arena {
    dataset: Dataset,
    /// The longest item's JSON with room for its total: a response's buffer size per item.
    item_bytes: usize,
}

pub(crate) fn run(f: &Flags) -> io::Result<()> {
    let addr = f.get("addr").unwrap_or("127.0.0.1:0").to_string();
    let workers = workers_flag(f)?.unwrap_or(1);
    let dataset = match f.get("dataset") {
        Some(path) => Dataset::load(Path::new(path))?,
        None if f.has("dataset") => return Err(invalid("--dataset needs a file")),
        None => Dataset::builtin(),
    };
    let item_bytes = item_bytes_max(&dataset);
    let arena = web::Data::new(Arena {
        dataset,
        item_bytes,
    });
    actix_web::rt::System::new().block_on(async move {
        let server = HttpServer::new(move || {
            App::new()
                .app_data(arena.clone())
                .route("/baseline11", web::get().to(baseline_get))
                .route("/baseline11", web::post().to(baseline_post))
                .route("/pipeline", web::get().to(pipeline))
                .route("/json/{count}", web::get().to(json))
                .route("/upload", web::post().to(upload))
        })
        .workers(workers)
        .tcp_nodelay(true)
        // SIGTERM stops it in a second, whatever keep-alive connections a load left open
        // (actix's default waits up to 30 s for them).
        .shutdown_timeout(1)
        .bind(addr.as_str())
        .map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
        let bound = server
            .addrs()
            .first()
            .copied()
            .ok_or_else(|| io::Error::other(format!("binding {addr}: no address")))?;
        {
            let mut out = io::stdout().lock();
            writeln!(out, "listening on {bound}")?;
            out.flush()?;
        }
        server.run().await
    })
}

async fn baseline_get(req: HttpRequest) -> HttpResponse {
    match operands(Some(req.query_string())) {
        Some((a, b)) => sum_response(a.checked_add(b)),
        None => bad_operands(),
    }
}

async fn baseline_post(req: HttpRequest, body: web::Payload) -> HttpResponse {
    let Some((a, b)) = operands(Some(req.query_string())) else {
        return bad_operands();
    };
    // A declared length over the limit is refused before anything is read.
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > BASELINE_BODY_LIMIT_BYTES as u64) {
        return too_large();
    }
    let body = match body.to_bytes_limited(BASELINE_BODY_LIMIT_BYTES).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return error(StatusCode::BAD_REQUEST, "bad request body\n"),
        Err(_) => return too_large(),
    };
    match parse_i64(body.trim_ascii()) {
        Some(c) => sum_response(a.checked_add(b).and_then(|s| s.checked_add(c))),
        None => error(StatusCode::BAD_REQUEST, "the body must be an integer\n"),
    }
}

async fn pipeline() -> HttpResponse {
    text("ok")
}

async fn json(req: HttpRequest, arena: web::Data<Arena>) -> HttpResponse {
    let limit = arena.dataset.items.len().min(JSON_COUNT_MAX);
    let count = req
        .match_info()
        .get("count")
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|c| (1..=limit).contains(c));
    let Some(count) = count else {
        return HttpResponse::BadRequest()
            .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/plain")))
            .body(format!("count must be an integer in 1..={limit}\n"));
    };
    let m = match query_param(req.query_string(), "m") {
        None => 1,
        Some(v) => match parse_i64(v.as_bytes()) {
            Some(m) => m,
            None => return error(StatusCode::BAD_REQUEST, "m must be an integer\n"),
        },
    };
    let mut buf = Vec::with_capacity(32 + count * arena.item_bytes);
    if write_page(&mut buf, &arena.dataset.items[..count], m).is_err() {
        // Serializing plain structs into a Vec cannot fail; answered all the same.
        return HttpResponse::InternalServerError().finish();
    }
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
        .body(buf)
}

async fn upload(mut body: web::Payload) -> HttpResponse {
    let mut bytes: u64 = 0;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => bytes += chunk.len() as u64,
            Err(_) => return error(StatusCode::BAD_REQUEST, "bad request body\n"),
        }
    }
    text(bytes.to_string())
}

fn sum_response(sum: Option<i64>) -> HttpResponse {
    match sum {
        Some(n) => text(n.to_string()),
        None => error(StatusCode::BAD_REQUEST, "the sum overflows an i64\n"),
    }
}

fn bad_operands() -> HttpResponse {
    error(
        StatusCode::BAD_REQUEST,
        "a and b must be integers: /baseline11?a=1&b=2\n",
    )
}

fn too_large() -> HttpResponse {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "the body must be an integer (at most 64 KiB)\n",
    )
}

/// A 200 with `text/plain`, as hoop-arena's.
fn text(body: impl actix_web::body::MessageBody + 'static) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/plain")))
        .body(body)
}

fn error(status: StatusCode, msg: &'static str) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("text/plain")))
        .body(msg)
}
