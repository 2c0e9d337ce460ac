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
    pub body: bytes::Bytes,
    /// `ETag`.
    pub etag: Rc<str>,
    /// `Last-Modified`.
    pub last_modified: Rc<str>,
    last_used: u64,
}

/// One open file kept for `sendfile(2)` (files too big to keep in memory): nginx's
/// `open_file_cache`, validated like a cached body by a fresh `statx` of the path per request.
#[derive(Debug, Clone)]
pub struct FdEntry {
    /// Its identity when opened.
    pub meta: FileMeta,
    /// The open file.
    pub file: Rc<hoop::fs::File>,
    /// `ETag`.
    pub etag: Rc<str>,
    /// `Last-Modified`.
    pub last_modified: Rc<str>,
    last_used: u64,
}

impl FdEntry {
    /// An entry for `file` (opened with identity `meta`), served in `coding` or as it is.
    pub fn new(file: hoop::fs::File, meta: FileMeta, coding: Option<Coding>) -> FdEntry {
        FdEntry {
            meta,
            file: Rc::new(file),
            etag: meta.etag_for(coding).into(),
            last_modified: super::date::format(meta.mtime_secs).into(),
            last_used: 0,
        }
    }
}

/// Precompressed variants found missing, each remembered for [`MISSING_FOR`]: a site without
/// variants would otherwise pay a failed open per accepted coding on every request of a
/// compressible file. A variant created meanwhile is served within that second.
#[derive(Debug, Default)]
pub struct Missing {
    since: HashMap<Vec<u8>, std::time::Instant>,
}

/// How long a variant found missing is not looked for again.
pub const MISSING_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// Variants remembered as missing per thread, at most (then the memory starts afresh).
const MAX_MISSING: usize = 4096;

impl Missing {
    /// Whether `key` was found missing less than [`MISSING_FOR`] ago.
    pub fn is_missing(&self, key: &[u8]) -> bool {
        self.since
            .get(key)
            .is_some_and(|t| t.elapsed() < MISSING_FOR)
    }

    /// Remembers `key` as missing from now.
    pub fn note(&mut self, key: Vec<u8>) {
        if self.since.len() >= MAX_MISSING {
            self.since.clear();
        }
        self.since.insert(key, std::time::Instant::now());
    }
}

/// Open files kept per thread, at most.
const MAX_FDS: usize = 512;

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
    fds: HashMap<Vec<u8>, FdEntry>,
    bytes: u64,
    budget_bytes: u64,
    clock: u64,
}

impl Cache {
    /// An empty cache of at most `budget_bytes` bytes of file content.
    pub fn new(budget_bytes: u64) -> Cache {
        Cache {
            map: HashMap::new(),
            fds: HashMap::new(),
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

    /// The open file kept for `path`, if any (its identity still to be checked).
    pub fn get_fd(&mut self, path: &[u8]) -> Option<&FdEntry> {
        self.clock += 1;
        let clock = self.clock;
        let e = self.fds.get_mut(path)?;
        e.last_used = clock;
        Some(e)
    }

    /// Keeps `entry` for `path` (nothing when the cache is off: a budget of 0 bytes), the
    /// least recently used open file closed first past [`MAX_FDS`].
    pub fn insert_fd(&mut self, path: Vec<u8>, mut entry: FdEntry) {
        if self.budget_bytes == 0 {
            return;
        }
        if self.fds.len() >= MAX_FDS && !self.fds.contains_key(&path) {
            let oldest = self
                .fds
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.fds.remove(&k);
            }
        }
        self.clock += 1;
        entry.last_used = self.clock;
        self.fds.insert(path, entry);
    }

    /// Forgets `path`.
    pub fn remove(&mut self, path: &[u8]) {
        self.fds.remove(path);
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
        body: bytes::Bytes,
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
        // Every coding apart, with a validator of its own.
        let zkey = variant_key(b"a.css", Coding::Zstd);
        assert_ne!(zkey, key);
        c.insert(zkey.clone(), meta(2), b"zs"[..].into(), Some(Coding::Zstd));
        let z = c.get(&zkey).unwrap().clone();
        assert_eq!(&*z.body, b"zs");
        assert_ne!(z.etag, v.etag);
        assert_ne!(variant_key(b"a.css", Coding::Br), zkey);
    }

    #[test]
    fn a_missing_variant_is_remembered_for_a_second_only() {
        let mut m = Missing::default();
        assert!(!m.is_missing(b"a.css\0br"));
        m.note(b"a.css\0br".to_vec());
        assert!(m.is_missing(b"a.css\0br"));
        assert!(!m.is_missing(b"a.css\0gzip"));
        m.since
            .insert(b"old".to_vec(), std::time::Instant::now() - MISSING_FOR);
        assert!(
            !m.is_missing(b"old"),
            "older than MISSING_FOR: looked for again"
        );
        for i in 0..MAX_MISSING + 1 {
            m.note(format!("k{i}").into_bytes());
        }
        assert!(m.since.len() <= MAX_MISSING, "bounded");
    }
}
