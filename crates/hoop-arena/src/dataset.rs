//! The items `/json/{count}` answers with: HttpArena's `dataset.json` (a JSON array of items),
//! or a built-in deterministic one of the same shape for runs without that file.
//!
//! std, serde and serde_json only: the peers' actix server compiles this very file (`#[path]`
//! in `peers/src/lib.rs`), so its built-in dataset is this one, item for item.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The items, in the order `/json/{count}` takes them (the first `count`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    /// Never empty when built by [`Dataset::load`] or [`Dataset::builtin`].
    pub items: Vec<Item>,
}

/// One item of HttpArena's dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The item's id.
    pub id: u64,
    /// Its display name.
    pub name: String,
    /// Its category.
    pub category: String,
    /// Its unit price (HttpArena's own file may carry whole numbers: they parse as well).
    pub price: f64,
    /// Units in stock.
    pub quantity: u64,
    /// Whether it is on sale.
    pub active: bool,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// Its reviews.
    pub rating: Rating,
}

/// An item's reviews.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rating {
    /// The mean score.
    pub score: f64,
    /// How many reviews.
    pub count: u64,
}

/// The built-in dataset's length: `/json/{count}` allows up to 50.
const BUILTIN_ITEMS: u64 = 50;
const CATEGORIES: [&str; 5] = ["electronics", "books", "clothing", "home", "sports"];
const TAGS: [&str; 6] = ["new", "sale", "popular", "limited", "eco", "premium"];

impl Dataset {
    /// Reads HttpArena's `dataset.json`: a JSON array of items. A file of another shape, or
    /// with no items, is `InvalidData` naming the file (as is one that cannot be read, with
    /// the error's own kind).
    pub fn load(path: &Path) -> io::Result<Dataset> {
        let bytes = std::fs::read(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let items: Vec<Item> = serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: not a JSON array of dataset items (id, name, category, price, quantity, \
                     active, tags, rating {{score, count}}): {e}",
                    path.display()
                ),
            )
        })?;
        if items.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: the dataset has no items", path.display()),
            ));
        }
        Ok(Dataset { items })
    }

    /// 50 items made in code, the same every time (the peers' actix server compiles this very
    /// generator): names `Item N`, five categories, prices with cents,
    /// quantities in 1..=100, one or two tags, scores 1.0..=5.0.
    pub fn builtin() -> Dataset {
        let items = (1..=BUILTIN_ITEMS)
            .map(|i| {
                let at = |n: u64, len: usize| (n % len as u64) as usize;
                let mut tags = vec![TAGS[at(i, TAGS.len())].to_string()];
                if i % 4 != 0 {
                    tags.push(TAGS[at(i + 2, TAGS.len())].to_string());
                }
                Item {
                    id: i,
                    name: format!("Item {i}"),
                    category: CATEGORIES[at(i, CATEGORIES.len())].to_string(),
                    // 0.99 ..= 100.98, in cents.
                    price: ((i * 1_337) % 10_000 + 99) as f64 / 100.0,
                    quantity: (i * 37) % 100 + 1,
                    active: i % 3 != 0,
                    tags,
                    rating: Rating {
                        score: ((i * 7) % 41 + 10) as f64 / 10.0,
                        count: (i * 53) % 500,
                    },
                }
            })
            .collect();
        Dataset { items }
    }
}
