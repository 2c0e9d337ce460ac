//! Compression on the fly ([`Config::compress`](crate::Config::compress)), as nginx's
//! `gzip on`, Caddy's `encode` and tower-http's layer: a compressible file (`mime::compressible`)
//! of [`Config::compress_min_bytes`](crate::Config::compress_min_bytes) to
//! [`Config::compress_max_bytes`](crate::Config::compress_max_bytes) that has no precompressed
//! variant the client takes is sent encoded in the coding the client prefers (the weights of
//! `Accept-Encoding`, as for the variants; a precompressed variant still wins).
//!
//! Each body is compressed once per file identity and coding, on the blocking pool (a 1 MiB
//! file at brotli quality 5 takes milliseconds: never on the serving thread), and kept in a
//! per-thread cache bounded by [`Config::compress_cache_bytes`](crate::Config::compress_cache_bytes),
//! keyed by the path, the coding and the file's identity (device, inode, size, mtime), so a
//! changed file is compressed again and its old bodies age out. The answer is then a cached
//! body like any other: the same conditionals and ranges (on the encoded bytes), its own
//! `ETag` per coding (`FileMeta::etag_for`), `Last-Modified` of the file, `Vary:
//! Accept-Encoding`. A body that does not get smaller is not sent encoded.
//!
//! Levels: gzip 6 (zlib's default), brotli quality 5 (a 4 MiB window), zstd 3 (its default):
//! the middle of each, since a body is compressed once and sent many times.

use std::io::{self, Write};

use crate::encoding::Coding;
use crate::response::FileMeta;

/// `data` encoded in `coding`.
pub(crate) fn encode(coding: Coding, data: &[u8]) -> io::Result<Vec<u8>> {
    match coding {
        Coding::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 3),
                flate2::Compression::new(6),
            );
            enc.write_all(data)?;
            enc.finish()
        }
        Coding::Br => {
            let mut out = Vec::with_capacity(data.len() / 3);
            {
                let mut enc = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                enc.write_all(data)?;
                enc.flush()?;
            }
            Ok(out)
        }
        Coding::Zstd => zstd::bulk::compress(data, 3),
    }
}

/// The key of `rel`'s body in `coding` for a file of identity `meta`: a changed file has
/// another key, so a body is never served for a file it was not made from.
pub(crate) fn key(rel: &[u8], coding: Coding, meta: &FileMeta) -> Vec<u8> {
    let mut key = Vec::with_capacity(rel.len() + 64);
    key.extend_from_slice(rel);
    // NUL never occurs in a path: the parts cannot run into each other.
    let _ = write!(
        key,
        "\0{}\0{:x}\0{:x}\0{:x}\0{:x}.{:x}",
        coding.name(),
        meta.dev,
        meta.ino,
        meta.size,
        meta.mtime_secs,
        meta.mtime_nsec
    );
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn each_coding_round_trips() {
        let data: Vec<u8> = b"body { color: red }\n".repeat(500);
        let gz = encode(Coding::Gzip, &data).unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
        let br = encode(Coding::Br, &data).unwrap();
        let mut back = Vec::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
        let zst = encode(Coding::Zstd, &data).unwrap();
        assert_eq!(zstd::bulk::decompress(&zst, data.len()).unwrap(), data);
        for c in [gz, br, zst] {
            assert!(c.len() < data.len() / 10, "{}", c.len());
        }
    }

    #[test]
    fn keys_change_with_the_file_and_the_coding() {
        let meta = FileMeta {
            size: 10,
            mtime_secs: 1,
            mtime_nsec: 2,
            ino: 3,
            dev: 4,
            kind: libc::S_IFREG,
        };
        let k = key(b"a.css", Coding::Gzip, &meta);
        assert_ne!(k, key(b"a.css", Coding::Br, &meta));
        assert_ne!(k, key(b"b.css", Coding::Gzip, &meta));
        for other in [
            FileMeta { size: 11, ..meta },
            FileMeta {
                mtime_nsec: 3,
                ..meta
            },
            FileMeta { ino: 9, ..meta },
        ] {
            assert_ne!(k, key(b"a.css", Coding::Gzip, &other));
        }
    }
}
