//! The answer to a file target, as nginx's static handler: the target decoded and looked up
//! beneath the root (the cache first), `/dir/` to its index or listing, a precompressed
//! variant the client takes, then how the body goes out (cached and sent in one send, by
//! `sendfile(2)`, spliced, or read a chunk at a time).

use std::os::fd::OwnedFd;

use bytes::Bytes;

use super::body::read_whole;
use super::head::Rep;
use super::parts::Source;
use super::Conn;
use crate::cache::{variant_key, Cache, Entry, FdEntry};
use crate::config::AutoindexFormat;
use crate::encoding::Coding;
use crate::lookup::{find, Found};
use crate::parse::Request;
use crate::resolve::{decode, open_error_status};
use crate::response::{decide, write_status, FileMeta, Head};
use crate::status::Status;

impl Conn<'_> {
    /// Serves the file the request names. `Ok(Some(status))`: a response was written;
    /// `Ok(None)`: the connection failed; `Err(status)`: answer with that error instead.
    pub(super) async fn respond_file(
        &mut self,
        req: &Request,
        date: &str,
        keep: bool,
        head_only: bool,
    ) -> Result<Option<Status>, Status> {
        let target = decode(&req.target)?;
        let rel = target.file_rel(self.sh.cfg.index.as_bytes());
        let sh = self.sh;
        let content_type = crate::mime::content_type(&rel);
        self.choose_cache_control(&rel, false, content_type);
        // Whether a precompressed variant may answer for this file, or a body compressed on
        // the fly (and so `Vary`).
        let compressible = crate::mime::compressible(content_type);
        let negotiable = sh.cfg.precompressed && compressible;
        let on_the_fly = sh.cfg.compress && compressible;
        let mut rep = Rep {
            content_type,
            coding: None,
            vary: negotiable || on_the_fly,
        };

        // Without a root, the service answers everything.
        let Some(root) = sh.root.as_deref() else {
            return Err(Status::NotFound);
        };
        let mut found = match find(root, &sh.cache, &rel, &rel).await {
            Ok(found) => found,
            Err(status) => {
                // `/dir/` without an index: a listing with --autoindex, else 403 if the
                // directory exists.
                if target.dir_form && status == Status::NotFound {
                    if let Ok(dir) = root.open_beneath(&target.rel, true).await {
                        if sh.cfg.autoindex {
                            return self
                                .send_listing(dir, &target.rel, date, keep, head_only)
                                .await;
                        }
                        return Err(Status::Forbidden);
                    }
                }
                return Err(status);
            }
        };
        if let Found::Opened(_, meta) = &found {
            if meta.is_dir() {
                if target.dir_form {
                    return Err(Status::Forbidden);
                }
                let head = Head {
                    location: Some((&target.raw_path, &target.raw_query)),
                    ..self.head(Status::MovedPermanently, date, keep)
                };
                write_status(&mut self.out, head, head_only);
                return Ok(Some(Status::MovedPermanently));
            }
            if !meta.is_file() {
                return Err(Status::NotFound);
            }
        }

        // A precompressed variant the client takes, best first: `rel.br`, `rel.gz`, opened
        // beneath the root as the file itself, a regular file not older than it.
        if negotiable {
            let original = found.meta();
            for coding in req.accept_encoding.preferred() {
                let mut variant = rel.clone();
                variant.extend_from_slice(coding.suffix());
                let key = variant_key(&rel, coding);
                if sh.missing.borrow().is_missing(&key) {
                    continue;
                }
                match find(root, &sh.cache, &variant, &key).await {
                    Ok(v) if v.meta().is_file() && v.meta().not_older_than(&original) => {
                        found = v;
                        rep.coding = Some(coding);
                        break;
                    }
                    Err(Status::NotFound) => sh.missing.borrow_mut().note(key),
                    _ => {}
                }
            }
        }

        // No variant: a body compressed on the fly, in the coding the client prefers.
        if on_the_fly && rep.coding.is_none() {
            let meta = found.meta();
            let sized =
                (sh.cfg.compress_min_bytes..=sh.cfg.compress_max_bytes).contains(&meta.size);
            if let (true, true, Some(coding)) = (
                meta.is_file(),
                sized,
                req.accept_encoding.preferred().next(),
            ) {
                if let Some(entry) = self.compressed(&rel, coding, &found).await {
                    let rep = Rep {
                        coding: Some(coding),
                        ..rep
                    };
                    return Ok(self
                        .send_cached(req, &entry, rep, date, keep, head_only)
                        .await);
                }
            }
        }

        let (file, meta) = match found {
            Found::Cached(entry) => {
                return Ok(self
                    .send_cached(req, &entry, rep, date, keep, head_only)
                    .await);
            }
            Found::Fd(entry) => {
                return Ok(self
                    .send_by_fd(req, &entry, rep, date, keep, head_only)
                    .await);
            }
            Found::Opened(file, meta) => (file, meta),
        };
        let key = match rep.coding {
            Some(coding) => variant_key(&rel, coding),
            None => rel,
        };
        let sendfile =
            meta.size >= sh.cfg.sendfile_min_bytes && self.stream.as_tcp_stream().is_some();
        let splice = !sendfile
            && sh.pipes.is_some()
            && self.stream.as_direct().is_some()
            && meta.size >= sh.cfg.splice_min_bytes;
        if sendfile {
            let entry = FdEntry::new(file, meta, rep.coding);
            sh.cache.borrow_mut().insert_fd(key, entry.clone());
            return Ok(self
                .send_by_fd(req, &entry, rep, date, keep, head_only)
                .await);
        }
        let cacheable = !splice
            && meta.size <= sh.cfg.cache_max_file_bytes
            && sh.cache.borrow().fits(meta.size);
        if cacheable {
            // One read per file at a time on this thread: the others wait for its bytes.
            let read = || async { read_whole(&file, meta.size).await.map(Bytes::from) };
            let Some(body) = crate::fill::once(&sh.fills, &key, meta, read).await else {
                return Err(Status::InternalServerError);
            };
            let entry = if body.len() as u64 == meta.size {
                sh.cache.borrow_mut().insert(key, meta, body, rep.coding)
            } else {
                // The file changed size while it was read: serve what was read, keep nothing.
                let meta = FileMeta {
                    size: body.len() as u64,
                    ..meta
                };
                Cache::new(0).insert(key, meta, body, rep.coding)
            };
            return Ok(self
                .send_cached(req, &entry, rep, date, keep, head_only)
                .await);
        }
        let etag = meta.etag_for(rep.coding);
        let last_modified = crate::date::format(meta.mtime_secs);
        let decision = decide(req, &meta, (&etag, &last_modified), sh.cfg.max_ranges);
        let validators = (&*etag, &*last_modified);
        let (status, range) =
            self.write_file_head(decision, &meta, date, (keep, head_only), validators, rep);
        if head_only || range.1 == 0 {
            return Ok(Some(status));
        }
        if let Some(parts) = self.parts.take() {
            let source = match (splice, &sh.pipes) {
                (true, Some(pipes)) => Source::Splice(&file, pipes),
                _ => Source::Stream(&file),
            };
            return Ok(self.send_parts(source, &parts).await.then_some(status));
        }
        if let (true, Some(pipes), Some(direct)) = (splice, &sh.pipes, self.stream.as_direct()) {
            if !self.flush().await {
                return Ok(None);
            }
            let idle = sh.cfg.idle_timeout;
            let sent =
                crate::splice::send_file(pipes, direct, &file, range.0, range.1, self.timer, idle)
                    .await;
            return Ok(sent.then_some(status));
        }
        if self.stream_file(&file, range, 0).await {
            Ok(Some(status))
        } else {
            Ok(None)
        }
    }

    /// `found`'s body in `coding` (`crate::compress`): from the thread's cache, or read,
    /// compressed on the blocking pool and kept. `None` when it cannot be had (a read failed,
    /// the file changed size while read) or is not smaller than the file (remembered for a
    /// second, as a missing variant is): the file is then sent as it is.
    async fn compressed(&self, rel: &[u8], coding: Coding, found: &Found) -> Option<Entry> {
        let sh = self.sh;
        let meta = found.meta();
        let key = crate::compress::key(rel, coding, &meta);
        if let Some(entry) = sh.compressed.borrow_mut().get(&key) {
            return Some(entry.clone());
        }
        if sh.missing.borrow().is_missing(&key) {
            return None;
        }
        // One compression per file at a time on this thread: the others wait for its bytes.
        let encode = || async {
            match compress(coding, found, meta).await {
                Compressed::Body(body) => Some(body),
                Compressed::NotSmaller => {
                    sh.missing.borrow_mut().note(key.clone());
                    None
                }
                Compressed::Unread => None,
            }
        };
        let body = crate::fill::once(&sh.compress_fills, &key, meta, encode).await?;
        let encoded_meta = FileMeta {
            size: body.len() as u64,
            ..meta
        };
        Some(
            sh.compressed
                .borrow_mut()
                .insert(key, encoded_meta, body, Some(coding)),
        )
    }

    /// Answers a directory target without an index file with its listing (`--autoindex`).
    pub(super) async fn send_listing(
        &mut self,
        dir: OwnedFd,
        rel: &[u8],
        date: &str,
        keep: bool,
        head_only: bool,
    ) -> Result<Option<Status>, Status> {
        let max = crate::autoindex::MAX_ENTRIES;
        let listing = match hoop::spawn_blocking(move || crate::autoindex::read(dir, max)).await {
            Ok(Ok(listing)) => listing,
            Ok(Err(e)) if open_error_status(&e) == Status::Forbidden => {
                return Err(Status::Forbidden)
            }
            _ => return Err(Status::InternalServerError),
        };
        let (body, content_type) = match self.sh.cfg.autoindex_format {
            AutoindexFormat::Html => (
                crate::autoindex::html(rel, &listing),
                "text/html; charset=utf-8",
            ),
            AutoindexFormat::Json => (crate::autoindex::json(&listing), "application/json"),
        };
        self.choose_cache_control(rel, !rel.is_empty(), content_type);
        Head {
            content_type,
            content_length: Some(body.len() as u64),
            cache_control: self.cache_control,
            ..self.head(Status::Ok, date, keep)
        }
        .write(&mut self.out);
        if !head_only {
            self.out.extend_from_slice(&body);
            self.file_body.set(body.len() as u64);
        }
        Ok(Some(Status::Ok))
    }
}

/// What compressing a file came to.
enum Compressed {
    /// The encoded body, smaller than the file.
    Body(Bytes),
    /// Encoded, and not smaller (or the encoder failed): remembered for a second.
    NotSmaller,
    /// The file could not be read whole (a read failed, it changed size meanwhile).
    Unread,
}

/// `found`'s body (identity `meta`) in `coding`, compressed on the blocking pool.
async fn compress(coding: Coding, found: &Found, meta: FileMeta) -> Compressed {
    let data = match found {
        Found::Cached(e) => Some(e.body.to_vec()),
        Found::Fd(e) => read_whole(&e.file, meta.size).await,
        Found::Opened(file, _) => read_whole(file, meta.size).await,
    };
    let Some(data) = data.filter(|d| d.len() as u64 == meta.size) else {
        return Compressed::Unread;
    };
    match hoop::spawn_blocking(move || crate::compress::encode(coding, &data)).await {
        Ok(Ok(body)) if (body.len() as u64) < meta.size => Compressed::Body(body.into()),
        _ => Compressed::NotSmaller,
    }
}
