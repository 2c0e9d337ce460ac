//! The test files of `hoop bench http`: their names, their deterministic content, and writing
//! them where the servers serve them.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::plan::http::FILES;

/// Name of the test file of `size` bytes.
pub(crate) fn file_name(size: u64) -> String {
    format!("f{size}.bin")
}

/// Deterministic content of the test file of `size` bytes.
pub(crate) fn file_content(size: u64) -> Vec<u8> {
    let mut x: u64 = size.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(size as usize + 8);
    while (v.len() as u64) < size {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(size as usize);
    v
}

/// The test files' contents by size.
pub(crate) type Files = BTreeMap<u64, Arc<[u8]>>;

/// Writes the test files into `dir/root` (kept between runs when already right).
pub(crate) fn make_files(dir: &Path) -> io::Result<(PathBuf, Files)> {
    let root = dir.join("root");
    std::fs::create_dir_all(&root)?;
    let mut files = BTreeMap::new();
    for &size in &FILES {
        let data = file_content(size);
        let path = root.join(file_name(size));
        if std::fs::read(&path).ok().as_deref() != Some(&data[..]) {
            std::fs::write(&path, &data)?;
        }
        files.insert(size, Arc::from(data));
    }
    Ok((root, files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_are_deterministic_and_differ_by_size() {
        assert_eq!(file_content(1000), file_content(1000));
        assert_ne!(file_content(1024)[..8], file_content(2048)[..8]);
        assert_eq!(file_name(1024), "f1024.bin");
    }
}
