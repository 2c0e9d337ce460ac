//! The in-memory file cache of one server thread: whole small files, keyed by their path under
//! the root (a precompressed variant by [`variant_key`], never by the identity file's key, so
//! a client that takes no coding never gets encoded bytes), each remembered with the identity
//! it had when read (device, inode, size, mtime). A hit is served only when a fresh `statx` of
//! the path still shows that identity, so a file replaced, rewritten or resized is read again.
//! Bounded by bytes; the least recently used entries go first.

use std::collections::HashMap;
use std::rc::Rc;

use super::encoding::Coding;
use super::response::FileMeta;

/// One cached file.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its identity when read.
    pub meta: FileMeta,
    /// Its bytes.
    pub body: Rc<[u8]>,
    /// `ETag`.
    pub etag: Rc<str>,
    /// `Last-Modified`.
    pub last_modified: Rc<str>,
    last_used: u64,
}

/// The cache key of `rel`'s precompressed variant in `coding`: `rel`, a NUL (which no path
/// holds), the coding's name. `a.css.gz` asked for by name is cached under its own path.
pub fn variant_key(rel: &[u8], coding: Coding) -> Vec<u8> {
    let mut key = Vec::with_capacity(rel.len() + 5);
    key.extend_from_slice(rel);
    key.push(0);
    key.extend_from_slice(coding.name().as_bytes());
    key
}

/// A bounded map from path to [`Entry`].
#[derive(Debug)]
pub struct Cache {
    map: HashMap<Vec<u8>, Entry>,
    bytes: u64,
    budget_bytes: u64,
    clock: u64,
}

impl Cache {
    /// An empty cache of at most `budget_bytes` bytes of file content.
    pub fn new(budget_bytes: u64) -> Cache {
        Cache {
            map: HashMap::new(),
            bytes: 0,
            budget_bytes,
            clock: 0,
        }
    }

    /// Whether a file of `size` bytes could be kept at all.
    pub fn fits(&self, size: u64) -> bool {
        size <= self.budget_bytes
    }

    /// The entry for `path`, if any (its identity still to be checked by the caller).
    pub fn get(&mut self, path: &[u8]) -> Option<&Entry> {
        self.clock += 1;
        let clock = self.clock;
        let e = self.map.get_mut(path)?;
        e.last_used = clock;
        Some(e)
    }

    /// Forgets `path`.
    pub fn remove(&mut self, path: &[u8]) {
        if let Some(e) = self.map.remove(path) {
            self.bytes -= e.body.len() as u64;
        }
    }

    /// Keeps `body` for `path`, evicting the least recently used entries to make room.
    /// `coding`: the body is a precompressed variant (its `ETag` says so).
    pub fn insert(
        &mut self,
        path: Vec<u8>,
        meta: FileMeta,
        body: Rc<[u8]>,
        coding: Option<Coding>,
    ) -> Entry {
        self.remove(&path);
        let size = body.len() as u64;
        while self.fits(size) && self.bytes + size > self.budget_bytes {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.remove(&oldest);
        }
        self.clock += 1;
        let entry = Entry {
            meta,
            body,
            etag: meta.etag_for(coding).into(),
            last_modified: super::date::format(meta.mtime_secs).into(),
            last_used: self.clock,
        };
        if self.bytes + size <= self.budget_bytes {
            self.bytes += size;
            self.map.insert(path, entry.clone());
        }
        entry
    }

    /// Bytes of file content held.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64) -> FileMeta {
        FileMeta {
            size,
            mtime_secs: 1,
            mtime_nsec: 0,
            ino: 1,
            dev: 1,
            kind: libc::S_IFREG,
        }
    }

    #[test]
    fn bounded_and_least_recently_used_first() {
        let mut c = Cache::new(100);
        c.insert(b"a".to_vec(), meta(40), vec![0; 40].into(), None);
        c.insert(b"b".to_vec(), meta(40), vec![0; 40].into(), None);
        assert!(c.get(b"a").is_some());
        c.insert(b"c".to_vec(), meta(40), vec![0; 40].into(), None);
        assert!(c.get(b"b").is_none(), "b was the least recently used");
        assert!(c.get(b"a").is_some() && c.get(b"c").is_some());
        assert_eq!(c.bytes(), 80);
        c.insert(b"d".to_vec(), meta(200), vec![0; 200].into(), None);
        assert!(c.get(b"d").is_none(), "too big to keep");
        assert!(c.bytes() <= 100);
    }

    #[test]
    fn variants_are_kept_apart() {
        let mut c = Cache::new(100);
        c.insert(b"a.css".to_vec(), meta(3), b"abc"[..].into(), None);
        let key = variant_key(b"a.css", Coding::Gzip);
        c.insert(key.clone(), meta(2), b"gz"[..].into(), Some(Coding::Gzip));
        assert_eq!(&*c.get(b"a.css").unwrap().body, b"abc");
        let v = c.get(&key).unwrap().clone();
        assert_eq!(&*v.body, b"gz");
        assert_ne!(v.etag, c.get(b"a.css").unwrap().etag);
        assert!(c.get(b"a.css.gz").is_none());
    }
}
