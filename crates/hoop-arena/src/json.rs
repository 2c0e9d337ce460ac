//! The body of `/json/{count}`, serialized straight from the dataset: borrowed fields and a
//! sequence serialized from an iterator, so no item is cloned and no `serde_json::Value` is
//! built.
//!
//! std, serde and serde_json only, with `crate::dataset` as its one path: the peers' actix
//! server compiles this very file (and `dataset.rs`), so its JSON is this crate's.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::dataset::{Dataset, Item, Rating};

/// One item as `/json` answers it: every field of the item, and its `total`.
#[derive(serde::Serialize)]
struct Priced<'a> {
    id: u64,
    name: &'a str,
    category: &'a str,
    price: f64,
    quantity: u64,
    active: bool,
    tags: &'a [String],
    rating: &'a Rating,
    total: f64,
}

impl<'a> Priced<'a> {
    fn new(item: &'a Item, m: i64) -> Priced<'a> {
        Priced {
            id: item.id,
            name: &item.name,
            category: &item.category,
            price: item.price,
            quantity: item.quantity,
            active: item.active,
            tags: &item.tags,
            rating: &item.rating,
            // HttpArena checks `total == price * quantity * m`, computed in this order.
            total: item.price * item.quantity as f64 * m as f64,
        }
    }
}

/// `{"items":[...],"count":N}`.
struct Page<'a> {
    items: &'a [Item],
    m: i64,
}

impl Serialize for Page<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Items<'a>(&'a [Item], i64);
        impl Serialize for Items<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|item| Priced::new(item, self.1)))
            }
        }
        let mut page = s.serialize_struct("Page", 2)?;
        page.serialize_field("items", &Items(self.items, self.m))?;
        page.serialize_field("count", &self.items.len())?;
        page.end()
    }
}

/// Appends the page of `items` with multiplier `m` to `buf`.
pub(crate) fn write_page(buf: &mut Vec<u8>, items: &[Item], m: i64) -> serde_json::Result<()> {
    serde_json::to_writer(buf, &Page { items, m })
}

/// The longest item's JSON in a page, with room for the longest `total` and the separator.
pub(crate) fn item_bytes_max(dataset: &Dataset) -> usize {
    // `total` with m = 1 can be shorter than with another m: 24 bytes is an f64's longest form.
    const TOTAL_SLACK_BYTES: usize = 24;
    dataset
        .items
        .iter()
        .map(|item| serde_json::to_vec(&Priced::new(item, 1)).map_or(0, |v| v.len()))
        .max()
        .unwrap_or(0)
        + TOTAL_SLACK_BYTES
        + 1
}
