//! The json profile's dataset and its checker. The bench writes the dataset itself (HttpArena's
//! `dataset.json` shape: a JSON array of items) and hands the file to every server with
//! `--dataset FILE`, so it knows what `/json/{count}?m={m}` must answer: `{"count": count,
//! "items": [...]}`, item i being the dataset's item i with `total` = price * quantity * m.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

/// Items in the dataset: `/json/{count}` asks for up to 50.
pub(crate) const ITEMS: u64 = 50;
/// The relative tolerance of `total` and of every other number (servers print floats their
/// own way; a sum computed in another order may differ in its last bits).
pub(crate) const REL_TOLERANCE: f64 = 1e-9;
/// The dataset's file name under the bench's directory.
const FILE_NAME: &str = "dataset.json";
const CATEGORIES: [&str; 5] = ["electronics", "books", "clothing", "home", "sports"];
const TAGS: [&str; 6] = ["new", "sale", "popular", "limited", "eco", "premium"];

/// The 50 items, the same every time: names `Item N`, five categories, prices with cents
/// (0.99 to 100.98), quantities in 1..=100, one or two tags, scores 1.0 to 5.0. (The same
/// generator as the arena server's built-in dataset, so a server that ignored `--dataset`
/// would still answer right; the bench passes the file all the same.)
pub(crate) fn items() -> Vec<Value> {
    (1..=ITEMS)
        .map(|i| {
            let at = |n: u64, len: usize| (n % len as u64) as usize;
            let mut tags = vec![TAGS[at(i, TAGS.len())]];
            if i % 4 != 0 {
                tags.push(TAGS[at(i + 2, TAGS.len())]);
            }
            json!({
                "id": i,
                "name": format!("Item {i}"),
                "category": CATEGORIES[at(i, CATEGORIES.len())],
                "price": ((i * 1_337) % 10_000 + 99) as f64 / 100.0,
                "quantity": (i * 37) % 100 + 1,
                "active": i % 3 != 0,
                "tags": tags,
                "rating": {
                    "score": ((i * 7) % 41 + 10) as f64 / 10.0,
                    "count": (i * 53) % 500,
                },
            })
        })
        .collect()
}

/// Writes the dataset as `dir/dataset.json` (rewritten only when different) and returns its
/// path and items.
pub(crate) fn write(dir: &Path) -> io::Result<(PathBuf, Vec<Value>)> {
    std::fs::create_dir_all(dir)?;
    let items = items();
    let text = serde_json::to_string_pretty(&items).map_err(io::Error::other)? + "\n";
    let path = dir.join(FILE_NAME);
    if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
        std::fs::write(&path, text)?;
    }
    Ok((path, items))
}

/// Whether two numbers agree within [`REL_TOLERANCE`].
fn close_enough(got: f64, want: f64) -> bool {
    (got - want).abs() <= REL_TOLERANCE * want.abs().max(f64::MIN_POSITIVE)
}

/// Whether `got` equals `want`, numbers within the tolerance, objects key by key.
fn same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(g), Value::Number(w)) => match (g.as_f64(), w.as_f64()) {
            (Some(g), Some(w)) => close_enough(g, w),
            _ => false,
        },
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| same(a, b))
        }
        (Value::Object(g), Value::Object(w)) => {
            g.len() == w.len() && w.iter().all(|(k, v)| g.get(k).is_some_and(|x| same(x, v)))
        }
        (g, w) => g == w,
    }
}

/// Checks the body of `/json/{count}?m={m}` against `items`: a sentence saying what is wrong,
/// if anything.
pub(crate) fn check(body: &[u8], items: &[Value], count: usize, m: u64) -> Result<(), String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let obj = v.as_object().ok_or("the body is not a JSON object")?;
    match obj.get("count").and_then(Value::as_u64) {
        Some(c) if c as usize == count => {}
        other => return Err(format!("count is {other:?}, not {count}")),
    }
    let got = obj
        .get("items")
        .and_then(Value::as_array)
        .ok_or("no items array")?;
    if got.len() != count {
        return Err(format!("{} items, not {count}", got.len()));
    }
    if count > items.len() {
        return Err(format!(
            "count {count} is beyond the dataset's {}",
            items.len()
        ));
    }
    for (i, (g, want)) in got.iter().zip(items).enumerate() {
        check_item(g, want, m).map_err(|e| format!("item {i}: {e}"))?;
    }
    Ok(())
}

/// One item: the dataset's fields, each equal, and `total` = price * quantity * m.
fn check_item(got: &Value, want: &Value, m: u64) -> Result<(), String> {
    let g: &Map<String, Value> = got.as_object().ok_or("not an object")?;
    let w = want
        .as_object()
        .ok_or("the dataset's item is not an object")?;
    for (k, v) in w {
        match g.get(k) {
            Some(x) if same(x, v) => {}
            Some(x) => return Err(format!("{k} is {x}, the dataset has {v}")),
            None => return Err(format!("no {k}")),
        }
    }
    let price = w.get("price").and_then(Value::as_f64).unwrap_or(0.0);
    let quantity = w.get("quantity").and_then(Value::as_f64).unwrap_or(0.0);
    let want_total = price * quantity * m as f64;
    match g.get("total").and_then(Value::as_f64) {
        Some(t) if close_enough(t, want_total) => {}
        other => return Err(format!("total is {other:?}, not {want_total}")),
    }
    if let Some(extra) = g.keys().find(|k| *k != "total" && !w.contains_key(*k)) {
        return Err(format!("a field the dataset has not: {extra}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer a right server gives.
    fn answer(items: &[Value], count: usize, m: u64) -> Value {
        let list: Vec<Value> = items[..count]
            .iter()
            .map(|it| {
                let mut o = it.as_object().unwrap().clone();
                let t = it["price"].as_f64().unwrap() * it["quantity"].as_f64().unwrap();
                o.insert("total".into(), json!(t * m as f64));
                Value::Object(o)
            })
            .collect();
        json!({"items": list, "count": count})
    }

    #[test]
    fn the_dataset_is_fifty_deterministic_items() {
        let it = items();
        assert_eq!(it.len(), 50);
        assert_eq!(it, items());
        for x in &it {
            let q = x["quantity"].as_u64().unwrap();
            assert!((1..=100).contains(&q));
            let cents = x["price"].as_f64().unwrap() * 100.0;
            assert!((cents - cents.round()).abs() < 1e-6);
        }
        assert_eq!(it[0]["name"], "Item 1");
    }

    #[test]
    fn right_answers_pass_and_wrong_ones_say_why() {
        let it = items();
        let ok = serde_json::to_vec(&answer(&it, 5, 7)).unwrap();
        assert_eq!(check(&ok, &it, 5, 7), Ok(()));
        // A total off in its last bits still passes; one off by a cent does not.
        let mut v = answer(&it, 1, 3);
        let t = v["items"][0]["total"].as_f64().unwrap();
        v["items"][0]["total"] = json!(t * (1.0 + 1e-12));
        assert_eq!(check(&serde_json::to_vec(&v).unwrap(), &it, 1, 3), Ok(()));
        v["items"][0]["total"] = json!(t + 0.01);
        let e = check(&serde_json::to_vec(&v).unwrap(), &it, 1, 3).unwrap_err();
        assert!(e.starts_with("item 0: total"), "{e}");
        assert!(check(&ok, &it, 5, 8).unwrap_err().contains("total"));
        assert!(check(&ok, &it, 4, 7).unwrap_err().starts_with("count"));
        let mut v = answer(&it, 2, 2);
        v["items"][1]["name"] = json!("Item 9");
        let e = check(&serde_json::to_vec(&v).unwrap(), &it, 2, 2).unwrap_err();
        assert!(e.starts_with("item 1: name"), "{e}");
        assert!(check(b"{", &it, 1, 1).unwrap_err().contains("not JSON"));
    }
}
