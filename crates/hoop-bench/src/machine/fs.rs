//! Where the test file lives: the file system (statfs magic, or the mount table's name), the
//! block device under it, and how much of the file sits in the page cache (mincore).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// tmpfs (and shmem): memory-backed, so O_DIRECT there bypasses nothing.
const TMPFS_MAGIC: u64 = 0x0102_1994;
/// ramfs: memory-backed too.
const RAMFS_MAGIC: u64 = 0x8584_58F6;

/// The file system and device of a directory.
#[derive(Debug, Clone)]
pub(crate) struct FsInfo {
    /// "ext4", "xfs", "tmpfs", ... or the statfs magic in hex.
    pub fs_type: String,
    /// The statfs `f_type` magic.
    pub magic: u64,
    /// What is mounted (`/dev/vda`, `tmpfs`, `overlay`), when the mount table says.
    pub source: Option<String>,
    /// The block device's description, when there is one.
    pub device: Option<DeviceInfo>,
}

/// A block device, from /sys/dev/block.
#[derive(Debug, Clone)]
pub(crate) struct DeviceInfo {
    /// Kernel name (`vda`, `nvme0n1`), of the whole disk when the file system is on a partition.
    pub name: String,
    /// Logical block size in bytes (the O_DIRECT unit).
    pub logical_block: Option<u64>,
    /// Rotational (a spinning disk).
    pub rotational: Option<bool>,
    /// `queue/io_poll`: whether the device has poll queues (IOPOLL works).
    pub io_poll: Option<bool>,
    /// The I/O scheduler in use.
    pub scheduler: Option<String>,
    /// `device/model`, when the driver gives one.
    pub model: Option<String>,
}

impl FsInfo {
    /// Whether the file system is memory-backed (tmpfs, ramfs): O_DIRECT means nothing there.
    pub(crate) fn memory_backed(&self) -> bool {
        self.magic == TMPFS_MAGIC || self.magic == RAMFS_MAGIC
    }

    /// One line: `ext4 on /dev/vda (vda: logical block 512 B, ...)`.
    pub(crate) fn describe(&self) -> String {
        let mut s = self.fs_type.clone();
        if let Some(src) = &self.source {
            s.push_str(&format!(" on {src}"));
        }
        match &self.device {
            Some(d) => {
                let mut parts = Vec::new();
                if let Some(m) = &d.model {
                    parts.push(format!("model {m}"));
                }
                if let Some(b) = d.logical_block {
                    parts.push(format!("logical block {b} B"));
                }
                if let Some(r) = d.rotational {
                    parts.push(if r { "rotational" } else { "non-rotational" }.to_string());
                }
                if let Some(p) = d.io_poll {
                    parts.push(format!("poll queues: {}", if p { "yes" } else { "none" }));
                }
                if let Some(sc) = &d.scheduler {
                    parts.push(format!("scheduler {sc}"));
                }
                s.push_str(&format!(" (device {}: {})", d.name, parts.join(", ")));
            }
            None => s.push_str(" (no block device)"),
        }
        s
    }
}

/// Describes the file system holding `dir`.
pub(crate) fn fs_info(dir: &Path) -> io::Result<FsInfo> {
    let magic = statfs_magic(dir)?;
    let dev = std::fs::metadata(dir)?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mount = mount_of(major, minor);
    let fs_type = match (&mount, magic_name(magic)) {
        // The mount table names ext2/3/4 apart (one magic) and knows fuse subtypes.
        (Some((t, _)), _) => t.clone(),
        (None, Some(n)) => n.to_string(),
        (None, None) => format!("unknown (statfs magic {magic:#x})"),
    };
    Ok(FsInfo {
        fs_type,
        magic,
        source: mount.map(|(_, s)| s),
        device: device_info(major, minor),
    })
}

fn statfs_magic(dir: &Path) -> io::Result<u64> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: statfs is plain old data; all-zero is valid.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as u64)
}

/// Names of common statfs magics.
fn magic_name(magic: u64) -> Option<&'static str> {
    Some(match magic {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        TMPFS_MAGIC => "tmpfs",
        RAMFS_MAGIC => "ramfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0xFF53_4D42 => "cifs",
        0x2FC1_2FC1 => "zfs",
        0xF2F5_2010 => "f2fs",
        0x4d44 => "vfat",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        0x6163_6673 => "virtiofs",
        0x5346_544E => "ntfs",
        0x2011_BAB0 => "exfat",
        0x0000_4244 => "hfs",
        0xCA45_1A4E => "bcachefs",
        _ => return None,
    })
}

/// The mount whose device number is `major:minor`: (fs type, source), from mountinfo.
fn mount_of(major: u32, minor: u32) -> Option<(String, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = format!("{major}:{minor}");
    // `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
    text.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        if fields.nth(2)? != want {
            return None;
        }
        let (_, after) = line.split_once(" - ")?;
        let mut rest = after.split(' ');
        let fstype = rest.next()?.to_string();
        let source = rest.next().unwrap_or("").to_string();
        Some((fstype, source))
    })
}

fn read_sys(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The block device `major:minor` (the whole disk's queue when it is a partition).
fn device_info(major: u32, minor: u32) -> Option<DeviceInfo> {
    let base = Path::new("/sys/dev/block").join(format!("{major}:{minor}"));
    let real = std::fs::canonicalize(&base).ok()?;
    // A partition's queue and model live in its parent (the disk).
    let disk = if real.join("partition").exists() {
        real.parent()?.to_path_buf()
    } else {
        real
    };
    let name = disk.file_name()?.to_string_lossy().into_owned();
    let q = disk.join("queue");
    let scheduler = read_sys(&q.join("scheduler")).map(|s| {
        // `mq-deadline kyber [none]`: the bracketed one is in use.
        s.split_once('[')
            .and_then(|(_, r)| r.split_once(']'))
            .map_or(s.clone(), |(cur, _)| cur.to_string())
    });
    Some(DeviceInfo {
        name,
        logical_block: read_sys(&q.join("logical_block_size")).and_then(|s| s.parse().ok()),
        rotational: read_sys(&q.join("rotational")).map(|s| s == "1"),
        io_poll: read_sys(&q.join("io_poll")).map(|s| s == "1"),
        scheduler,
        model: read_sys(&disk.join("device/model")),
    })
}

/// The percentage of the file's pages resident in the page cache (`mincore` over a shared
/// read-only mapping), unrounded, or `None` when that cannot be told.
pub(crate) fn cached_pct(file: &std::fs::File, len: u64) -> Option<f64> {
    use std::os::fd::AsRawFd;
    let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)?;
    // SAFETY: a fresh shared read-only mapping of an open file; nothing else refers to it.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr..addr+len` is our mapping; `vec` has one byte per page of it.
    let r = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    // SAFETY: unmaps exactly the mapping made above; no reference into it exists.
    unsafe { libc::munmap(addr, len) };
    if r != 0 {
        return None;
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    Some(resident as f64 * 100.0 / pages as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_directory_has_a_file_system() {
        let info = fs_info(Path::new(".")).unwrap();
        assert!(!info.fs_type.is_empty());
        let _ = info.describe();
    }

    #[test]
    fn dev_shm_is_memory_backed_when_tmpfs() {
        if let Ok(info) = fs_info(Path::new("/dev/shm")) {
            if info.magic == TMPFS_MAGIC {
                assert!(info.memory_backed());
                assert_eq!(info.fs_type, "tmpfs");
            }
        }
    }
}
