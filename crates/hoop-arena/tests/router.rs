//! The Router's contracts, called in memory (`ServiceExt::oneshot`, no socket): every endpoint's
//! answer and every 400, the JSON checked against the dataset, a streamed upload of a few MB
//! counted exactly, and `Dataset::load` of a good and of bad files.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use hoop_arena::{router, Dataset, Item, Rating};
use http_body::Frame;
use http_body_util::BodyExt;
use tower::ServiceExt;

fn app() -> Router {
    router(Arc::new(Dataset::builtin()))
}

/// Status, Content-Type and body of one request.
async fn call(app: Router, req: Request<Body>) -> (StatusCode, String, Bytes) {
    let res = app.oneshot(req).await.expect("the Router is infallible");
    let status = res.status();
    let ctype = res
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().expect("ASCII content type").to_string())
        .unwrap_or_default();
    let body = res
        .into_body()
        .collect()
        .await
        .expect("the response body")
        .to_bytes();
    (status, ctype, body)
}

async fn get(uri: &str) -> (StatusCode, String, Bytes) {
    call(
        app(),
        Request::get(uri).body(Body::empty()).expect("request"),
    )
    .await
}

async fn post(uri: &str, body: Body) -> (StatusCode, String, Bytes) {
    call(app(), Request::post(uri).body(body).expect("request")).await
}

#[tokio::test]
async fn baseline_get_adds_a_and_b() {
    let (status, ctype, body) = get("/baseline11?a=13&b=42").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ctype, "text/plain");
    assert_eq!(&body[..], b"55");
    let (_, _, body) = get("/baseline11?b=-50&a=8").await;
    assert_eq!(&body[..], b"-42");
}

#[tokio::test]
async fn baseline_post_adds_the_body() {
    let (status, ctype, body) = post("/baseline11?a=13&b=42", Body::from("20")).await;
    assert_eq!(
        (status, ctype.as_str(), &body[..]),
        (StatusCode::OK, "text/plain", &b"75"[..])
    );
    // Whitespace around the integer is trimmed.
    let (status, _, body) = post("/baseline11?a=1&b=2", Body::from(" 3\r\n")).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"6"[..]));
    // A body in several frames (as chunked transfer delivers it) is the same integer.
    let (status, _, body) = post("/baseline11?a=1&b=2", Body::new(Chunks::new(b"1", 3))).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"114"[..]));
}

#[tokio::test]
async fn baseline_refuses_bad_operands() {
    for uri in [
        "/baseline11",
        "/baseline11?a=13",
        "/baseline11?a=x&b=42",
        "/baseline11?a=13&b=",
        "/baseline11?a=1.5&b=2",
        "/baseline11?a=9223372036854775807&b=1",
        "/baseline11?a=99999999999999999999&b=1",
    ] {
        let (status, _, body) = get(uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(!body.is_empty(), "{uri}: a 400 says why");
    }
    for b in ["", "twenty", "2 0", "9223372036854775807"] {
        let (status, _, _) = post("/baseline11?a=13&b=42", Body::from(b)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "body {b:?}");
    }
}

#[tokio::test]
async fn baseline_refuses_a_huge_body_without_reading_it_all() {
    // Declared too long: refused on the header.
    let req = Request::post("/baseline11?a=1&b=2")
        .header(header::CONTENT_LENGTH, "100000000")
        .body(Body::from("1"))
        .expect("request");
    assert_eq!(call(app(), req).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    // Streamed without a length: refused once the limit is passed.
    let (status, _, _) = post(
        "/baseline11?a=1&b=2",
        Body::new(Chunks::new(&[b'1'; 4096], 1000)),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn pipeline_answers_ok() {
    let (status, ctype, body) = get("/pipeline").await;
    assert_eq!(
        (status, ctype.as_str(), &body[..]),
        (StatusCode::OK, "text/plain", &b"ok"[..])
    );
}

#[tokio::test]
async fn json_gives_the_first_items_with_totals() {
    let dataset = Dataset::builtin();
    for (count, m, uri) in [
        (3usize, 2i64, "/json/3?m=2".to_string()),
        (1, 1, "/json/1".to_string()),
        (50, 5, "/json/50?m=5".to_string()),
        (12, -3, "/json/12?x=1&m=-3".to_string()),
    ] {
        let (status, ctype, body) = get(&uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert_eq!(ctype, "application/json");
        let v: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(v["count"], count as u64, "{uri}");
        let items = v["items"].as_array().expect("items");
        assert_eq!(items.len(), count);
        for (got, want) in items.iter().zip(&dataset.items) {
            // Every field of the item, as it is, and the total.
            let mut item: serde_json::Map<String, serde_json::Value> =
                serde_json::from_value(got.clone()).expect("an object");
            let total = item
                .remove("total")
                .and_then(|t| t.as_f64())
                .expect("total");
            let back: Item = serde_json::from_value(item.into()).expect("the item's fields");
            assert_eq!(&back, want);
            assert_eq!(total, want.price * want.quantity as f64 * m as f64);
        }
    }
}

#[tokio::test]
async fn json_refuses_bad_counts_and_multipliers() {
    for uri in [
        "/json/0",
        "/json/51",
        "/json/-1",
        "/json/abc",
        "/json/3?m=x",
        "/json/3?m=",
        "/json/3?m=2.5",
    ] {
        let (status, _, _) = get(uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
    }
    // A dataset shorter than 50 bounds the count too.
    let small = Dataset {
        items: Dataset::builtin().items[..5].to_vec(),
    };
    let req = Request::get("/json/6")
        .body(Body::empty())
        .expect("request");
    let (status, _, _) = call(router(Arc::new(small)), req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn upload_counts_a_streamed_body() {
    // 3 MB in 64 KiB frames and a short one, no length: past axum's 2 MB default limit.
    let chunk = [7u8; 64 * 1024];
    let frames = 48;
    let (status, ctype, body) = post("/upload", Body::new(Chunks::new(&chunk, frames))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ctype, "text/plain");
    assert_eq!(body, (chunk.len() * frames).to_string());
    let (_, _, body) = post("/upload", Body::from("Hello, HttpArena!")).await;
    assert_eq!(&body[..], b"17");
    let (_, _, body) = post("/upload", Body::empty()).await;
    assert_eq!(&body[..], b"0");
}

#[tokio::test]
async fn upload_refuses_a_failing_body() {
    let (status, _, _) = post("/upload", Body::new(Chunks::failing(b"abc", 2))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn anything_else_is_not_found() {
    assert_eq!(get("/").await.0, StatusCode::NOT_FOUND);
    assert_eq!(get("/json").await.0, StatusCode::NOT_FOUND);
    assert_eq!(get("/baseline2").await.0, StatusCode::NOT_FOUND);
    let req = Request::builder()
        .method(Method::GET)
        .uri("/upload")
        .body(Body::empty())
        .expect("request");
    assert_eq!(call(app(), req).await.0, StatusCode::METHOD_NOT_ALLOWED);
}

#[test]
fn builtin_dataset_has_the_promised_shape() {
    let d = Dataset::builtin();
    assert_eq!(d.items.len(), 50);
    assert_eq!(d, Dataset::builtin(), "deterministic");
    for (i, it) in d.items.iter().enumerate() {
        assert_eq!(it.id, i as u64 + 1);
        assert_eq!(it.name, format!("Item {}", i + 1));
        assert!((1..=100).contains(&it.quantity));
        assert!(it.price > 0.0 && (it.price * 100.0).round() / 100.0 == it.price);
        assert!(!it.tags.is_empty());
        assert!((1.0..=5.0).contains(&it.rating.score));
    }
}

#[test]
fn load_reads_a_dataset_file_and_names_a_bad_one() {
    let dir = std::env::temp_dir();
    let unique = format!(
        "hoop-arena-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    );
    let good = dir.join(format!("{unique}-good.json"));
    let items = vec![Item {
        id: 7,
        name: "Widget".into(),
        category: "tools".into(),
        price: 12.0,
        quantity: 3,
        active: true,
        tags: vec!["a".into()],
        rating: Rating {
            score: 4.5,
            count: 9,
        },
    }];
    // HttpArena's file: whole-number prices, and fields this crate does not use.
    std::fs::write(
        &good,
        r#"[{"id":7,"name":"Widget","category":"tools","price":12,"quantity":3,"active":true,
            "tags":["a"],"rating":{"score":4.5,"count":9},"extra":null}]"#,
    )
    .expect("write");
    let loaded = Dataset::load(&good);
    let _ = std::fs::remove_file(&good);
    assert_eq!(loaded.expect("loads").items, items);

    for (name, text) in [
        ("object", r#"{"items":[]}"#),
        ("empty", "[]"),
        ("garbage", "not json"),
        ("missing", r#"[{"id":1}]"#),
    ] {
        let bad = dir.join(format!("{unique}-{name}.json"));
        std::fs::write(&bad, text).expect("write");
        let err = Dataset::load(&bad).expect_err(name);
        let _ = std::fs::remove_file(&bad);
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{name}");
        assert!(
            err.to_string().contains(&bad.display().to_string()),
            "{name}: {err}"
        );
    }
    let absent = dir.join(format!("{unique}-absent.json"));
    let err = Dataset::load(&absent).expect_err("absent");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains(&absent.display().to_string()));
}

/// A request body of `frames` copies of `chunk`, one frame each (as a chunked upload arrives),
/// optionally failing after them.
struct Chunks {
    chunk: Bytes,
    left: usize,
    fail: bool,
}

impl Chunks {
    fn new(chunk: &[u8], frames: usize) -> Chunks {
        Chunks {
            chunk: Bytes::copy_from_slice(chunk),
            left: frames,
            fail: false,
        }
    }

    fn failing(chunk: &[u8], frames: usize) -> Chunks {
        Chunks {
            fail: true,
            ..Chunks::new(chunk, frames)
        }
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if self.left > 0 {
            self.left -= 1;
            return Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))));
        }
        if self.fail {
            self.fail = false;
            return Poll::Ready(Some(Err(std::io::Error::other("the client went away"))));
        }
        Poll::Ready(None)
    }
}
