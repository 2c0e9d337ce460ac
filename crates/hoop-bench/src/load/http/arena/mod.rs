//! HttpArena's profiles as loads: the requests each sends and the answers it expects, the
//! json profile's dataset and checker, the response framing (length or chunked), a
//! connection's reader, and the load generator. (The static profile runs on the static-file
//! client of [`crate::load::http::client`] with the static mix.)

pub mod client;
pub mod dataset;
pub mod reader;
pub mod requests;
pub mod response;
#[cfg(test)]
mod testserver;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::client::{run_arena, ArenaLoad};
    use super::requests::{upload_body, Shape};
    use super::testserver;

    fn load(addr: std::net::SocketAddr, shape: Shape, conns: usize) -> ArenaLoad {
        ArenaLoad {
            addr,
            host: addr.to_string(),
            conns,
            secs: Duration::from_millis(300),
            shape,
        }
    }

    #[test]
    fn every_shape_verifies_against_a_right_server() {
        let addr = testserver::start(false);
        let items = Arc::from(super::dataset::items());
        for shape in [
            Shape::Baseline,
            Shape::Pipelined,
            Shape::ShortLived,
            Shape::Json(items),
            Shape::Upload(upload_body()),
        ] {
            let what = format!("{shape:?}").chars().take(20).collect::<String>();
            let o = run_arena(&load(addr, shape, 6), None, || {}).unwrap();
            assert!(o.requests > 0, "{what}: nothing verified");
            assert_eq!(o.error_count(), 0, "{what}: {:?}", o.first_error);
        }
    }

    #[test]
    fn json_answers_seen_before_pass_by_compare_and_others_are_parsed() {
        use super::client::{check, JsonSeen};
        use super::requests::Expect;
        use super::response::{Framing, Head};
        let items: Arc<[serde_json::Value]> = Arc::from(super::dataset::items());
        let shape = Shape::Json(items.clone());
        let head = Head {
            status: 200,
            framing: Framing::Length(0),
            close: false,
            head_bytes: 0,
        };
        let mut item = items[0].as_object().unwrap().clone();
        let total = item["price"].as_f64().unwrap() * item["quantity"].as_f64().unwrap() * 3.0;
        item.insert("total".into(), serde_json::json!(total));
        let good = serde_json::to_vec(&serde_json::json!({"count": 1, "items": [item]})).unwrap();
        let seen = JsonSeen::default();
        let expect = Expect::Json { count: 1, m: 3 };
        assert_eq!(check(&expect, &head, &good, &shape, &seen), Ok(()));
        assert_eq!(seen.borrow().len(), 1);
        assert_eq!(check(&expect, &head, &good, &shape, &seen), Ok(()));
        let bad = String::from_utf8(good).unwrap().replace("Item 1", "Item 2");
        let e = check(&expect, &head, bad.as_bytes(), &shape, &seen).unwrap_err();
        assert_eq!(e.kind, "json");
        let other = Expect::Json { count: 1, m: 4 };
        assert!(check(&other, &head, bad.as_bytes(), &shape, &seen).is_err());
        let not_found = Head {
            status: 404,
            ..head
        };
        assert_eq!(
            check(&expect, &not_found, b"", &shape, &seen)
                .unwrap_err()
                .kind,
            "status"
        );
    }

    #[test]
    fn wrong_sums_are_body_errors() {
        let addr = testserver::start(true);
        let o = run_arena(&load(addr, Shape::Baseline, 3), None, || {}).unwrap();
        assert_eq!(o.requests, 0);
        assert!(
            o.errors.get("body").is_some_and(|&n| n > 0),
            "{:?}",
            o.errors
        );
        let first = o.first_error.unwrap_or_default();
        assert!(first.starts_with("body: body \""), "{first}");
    }
}
