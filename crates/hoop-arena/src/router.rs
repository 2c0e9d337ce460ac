//! The endpoints, as HttpArena defines them, and the Router that holds them.
//!
//! Every handler takes the whole [`Request`] and reads what it needs itself (the query by
//! hand, the path's tail, the body frame by frame): no extractor allocates or copies, and no
//! body limit of axum's applies (`DefaultBodyLimit` binds only the buffering extractors), so
//! `/upload` takes 20 MB and more, streamed; `/baseline11` bounds its own read.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::json::{item_bytes_max, write_page};
use crate::query::{operands, parse_i64, query_param};
use crate::Dataset;

/// The most bytes `POST /baseline11` reads: its body is one integer, so a larger one is refused
/// (413) before it costs memory.
pub const BASELINE_BODY_LIMIT_BYTES: usize = 64 * 1024;

/// The most items `/json/{count}` gives (HttpArena's contract), whatever the dataset holds.
pub const JSON_COUNT_MAX: usize = 50;

/// What the handlers share.
struct Arena {
    dataset: Arc<Dataset>,
    /// The longest item's JSON with room for its `total`: each response's buffer is sized from
    /// it once, so that serializing never reallocates.
    item_bytes: usize,
}

/// HttpArena's endpoints on `dataset`:
///
/// * `GET /baseline11?a=A&b=B`: `A+B`; `POST` the same with an integer body: `A+B+body`
///   (text/plain; 400 for a missing or non-integer operand or an overflow, 413 for a body over
///   [`BASELINE_BODY_LIMIT_BYTES`]).
/// * `GET /pipeline`: `ok` (text/plain).
/// * `GET /json/{count}?m=M`: the first `count` items (1..=50, at most the dataset's length),
///   each with `total = price * quantity * M` (M an integer, 1 if absent), and `count`
///   (application/json); 400 otherwise.
/// * `POST /upload`: the number of body bytes received, counted as they stream in (text/plain;
///   400 if the body fails).
///
/// Anything else is axum's own 404 (or 405 for a known path with another method).
pub fn router(dataset: Arc<Dataset>) -> Router {
    let item_bytes = item_bytes_max(&dataset);
    let arena = Arc::new(Arena {
        dataset,
        item_bytes,
    });
    Router::new()
        .route("/baseline11", get(baseline_get).post(baseline_post))
        .route("/pipeline", get(pipeline))
        .route("/json/{count}", get(json))
        .route("/upload", post(upload))
        .with_state(arena)
}

async fn baseline_get(req: Request) -> Response {
    match operands(req.uri().query()) {
        Some((a, b)) => sum_response(a.checked_add(b)),
        None => bad_operands(),
    }
}

async fn baseline_post(req: Request) -> Response {
    let Some((a, b)) = operands(req.uri().query()) else {
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
    let body = match Limited::new(req.into_body(), BASELINE_BODY_LIMIT_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Err(_) => return (StatusCode::BAD_REQUEST, "bad request body\n").into_response(),
    };
    match parse_i64(body.trim_ascii()) {
        Some(c) => sum_response(a.checked_add(b).and_then(|s| s.checked_add(c))),
        None => (StatusCode::BAD_REQUEST, "the body must be an integer\n").into_response(),
    }
}

async fn pipeline() -> Response {
    text(Body::from(Bytes::from_static(b"ok")))
}

async fn json(State(arena): State<Arc<Arena>>, req: Request) -> Response {
    let limit = arena.dataset.items.len().min(JSON_COUNT_MAX);
    // The route is `/json/{count}`, so the path's tail is the count (a nested Router sees
    // the path with its prefix stripped, so this holds there too).
    let count = req
        .uri()
        .path()
        .strip_prefix("/json/")
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|c| (1..=limit).contains(c));
    let Some(count) = count else {
        return (
            StatusCode::BAD_REQUEST,
            format!("count must be an integer in 1..={limit}\n"),
        )
            .into_response();
    };
    let m = match query_param(req.uri().query().unwrap_or(""), "m") {
        None => 1,
        Some(v) => match parse_i64(v.as_bytes()) {
            Some(m) => m,
            None => return (StatusCode::BAD_REQUEST, "m must be an integer\n").into_response(),
        },
    };
    let mut buf = Vec::with_capacity(32 + count * arena.item_bytes);
    if write_page(&mut buf, &arena.dataset.items[..count], m).is_err() {
        // Serializing plain structs into a Vec cannot fail; answered all the same.
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let mut res = Response::new(Body::from(buf));
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

async fn upload(req: Request) -> Response {
    let mut body = req.into_body();
    let mut bytes: u64 = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    bytes += data.len() as u64;
                }
            }
            Err(_) => return (StatusCode::BAD_REQUEST, "bad request body\n").into_response(),
        }
    }
    text(Body::from(bytes.to_string()))
}

fn sum_response(sum: Option<i64>) -> Response {
    match sum {
        Some(n) => text(Body::from(n.to_string())),
        None => (StatusCode::BAD_REQUEST, "the sum overflows an i64\n").into_response(),
    }
}

fn bad_operands() -> Response {
    (
        StatusCode::BAD_REQUEST,
        "a and b must be integers: /baseline11?a=1&b=2\n",
    )
        .into_response()
}

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        "the body must be an integer (at most 64 KiB)\n",
    )
        .into_response()
}

/// A 200 with `text/plain` (what HttpArena checks for; no charset: the bodies are ASCII).
fn text(body: Body) -> Response {
    let mut res = Response::new(body);
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    res
}
