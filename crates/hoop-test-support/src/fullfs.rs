//! Disks that fill up and disks that fail, for the full-disk tests.
//!
//! - [`SmallFs`]: a `tmpfs` of a given size mounted on a fresh directory: writes past its size
//!   fail with `ENOSPC`, as on a full disk. Unmounted on drop (lazily, `MNT_DETACH`, if
//!   something still holds it).
//! - [`FailingDisk`]: a loop device over a sparse file on a small tmpfs: writes to the
//!   device's page cache succeed, and their writeback fails once the tmpfs is full, so
//!   `fsync`/`fdatasync` report `EIO` (once per failure, as the kernel reports a writeback
//!   error once to each open file). A tmpfs never fails an `fsync`; this is a real device
//!   that does, without device-mapper (absent on many machines).
//!
//! Both need root (`CAP_SYS_ADMIN`). Where they cannot be made (not root, no tmpfs, no loop
//! devices), `new` prints `skip TEST: REASON` on stderr, past the harness's capture, and
//! returns `None`: the test returns, visibly skipped.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Says, past the harness's capture, that test `test` (or a part of it: the harness's name
/// for the test, its thread's, comes first when it differs) is skipped and why.
pub fn skip_test(test: &str, reason: &str) {
    let thread = std::thread::current();
    let line = match thread.name() {
        Some(name) if name != test && name != "main" => format!("skip {name} ({test}): {reason}"),
        _ => format!("skip {test}: {reason}"),
    };
    let _ = writeln!(io::stderr(), "{line}");
}

/// Whether this process runs as root (what mounting a tmpfs needs, short of a user namespace,
/// which a threaded test process cannot enter).
fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Whether `e` is a full disk's error (`ENOSPC`, `StorageFull`).
pub fn is_enospc(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC) && e.kind() == io::ErrorKind::StorageFull
}

/// A `tmpfs` of a given size, mounted on a fresh directory of its own; unmounted and removed
/// on drop.
#[derive(Debug)]
pub struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// Mounts a tmpfs of `bytes` bytes (rounded up to pages by the kernel) for test `test` on
    /// `hoop-fullfs-PID-TEST` under the system's temp dir. `None`, with a line naming the test
    /// and the reason, when not root or the mount fails.
    pub fn new(test: &str, bytes: u64) -> Option<SmallFs> {
        if !is_root() {
            skip_test(test, "not root: mounting a tmpfs needs CAP_SYS_ADMIN");
            return None;
        }
        let dir = std::env::temp_dir().join(format!(
            "hoop-fullfs-{}-{}",
            std::process::id(),
            test.replace("::", "-")
        ));
        // A mount left by an earlier run of the same pid (unlikely) goes first.
        if let Ok(c) = cstr(&dir) {
            // SAFETY: umount2(2) with a valid C string.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            skip_test(test, &format!("cannot make {}: {e}", dir.display()));
            return None;
        }
        match mount_tmpfs(&dir, bytes) {
            Ok(()) => Some(SmallFs { dir }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                skip_test(test, &format!("cannot mount a tmpfs of {bytes} bytes: {e}"));
                None
            }
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `path().join(name)`.
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The file at `path` holds a strict prefix of `data` and nothing else, and this file
    /// system is full: returns the prefix's length (the bytes that landed).
    pub fn landed_prefix(&self, path: &Path, data: &[u8]) -> usize {
        let got = std::fs::read(path).unwrap();
        assert!(
            got.len() < data.len(),
            "{} of {} bytes: all landed on a full disk?",
            got.len(),
            data.len()
        );
        assert!(
            got == data[..got.len()],
            "the bytes that landed are not the data's first ones"
        );
        assert!(
            self.free_bytes() < 4096,
            "the write stopped with {} bytes free",
            self.free_bytes()
        );
        got.len()
    }

    /// Bytes still free (`statvfs`: free blocks times the block size).
    pub fn free_bytes(&self) -> u64 {
        free_bytes(&self.dir)
    }

    /// Writes zeros into file `name` (std, 4 KiB at a time) until the file system is full,
    /// or `max` bytes, and returns how many bytes the file holds: a filler that a test
    /// removes to free space again.
    pub fn fill(&self, name: &str, max: u64) -> u64 {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.join(name)).expect("create the filler");
        let block = [0u8; 4096];
        let mut total = 0u64;
        while total < max {
            let want = (max - total).min(block.len() as u64) as usize;
            match f.write(&block[..want]) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling {name}: {e}"),
            }
        }
        total
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        unmount(&self.dir);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn mount_tmpfs(dir: &Path, bytes: u64) -> io::Result<()> {
    let target = cstr(dir)?;
    let data = CString::new(format!("size={bytes},mode=0755")).map_err(io::Error::other)?;
    // SAFETY: mount(2) with valid C strings; the data string is what tmpfs parses.
    let r = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unmounts `dir`: a few tries (a loop device detaching, a file closing on another thread),
/// then lazily (`MNT_DETACH`: gone from the tree now, freed when the last user lets go).
fn unmount(dir: &Path) {
    let Ok(c) = cstr(dir) else { return };
    for _ in 0..50 {
        // SAFETY: umount2(2) with a valid C string.
        if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
            return;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EBUSY) => std::thread::sleep(std::time::Duration::from_millis(10)),
            // Not mounted (any more), or not ours to unmount: nothing to do.
            _ => return,
        }
    }
    // SAFETY: umount2(2) with a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        let e = io::Error::last_os_error();
        let _ = writeln!(io::stderr(), "cannot unmount {}: {e}", dir.display());
    }
}

/// Bytes free on the file system of `path` (0 if `statvfs` fails).
pub fn free_bytes(path: &Path) -> u64 {
    let Ok(c) = cstr(path) else { return 0 };
    // SAFETY: statvfs is plain data; all-zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a pointer to a statvfs to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    st.f_bfree as u64 * st.f_frsize as u64
}

/// `struct loop_info64` of `<linux/loop.h>` (the fields `LOOP_SET_STATUS64` reads).
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

const LOOP_SET_FD: libc::c_ulong = 0x4C00;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LOOP_SET_STATUS64: libc::c_ulong = 0x4C04;
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
/// The device detaches itself when its last opener closes it.
const LO_FLAGS_AUTOCLEAR: u32 = 4;

/// A block device whose writeback fails: a loop device of `size` bytes over a sparse file on
/// a tmpfs of `backing` bytes (see the module docs). Detached and unmounted on drop.
#[derive(Debug)]
pub struct FailingDisk {
    /// The loop device, held open so that it stays attached; closed first on drop.
    dev: Option<OwnedFd>,
    path: PathBuf,
    /// The tmpfs under the backing file; unmounted after the device is gone.
    fs: Option<SmallFs>,
}

impl FailingDisk {
    /// Makes the device for test `test`; `None` with a line naming the test and the reason
    /// where that cannot be done (not root, no tmpfs, no loop devices).
    pub fn new(test: &str, size: u64, backing: u64) -> Option<FailingDisk> {
        let fs = SmallFs::new(test, backing)?;
        match attach(&fs.join("backing"), size) {
            Ok((dev, path)) => Some(FailingDisk {
                dev: Some(dev),
                path,
                fs: Some(fs),
            }),
            Err(e) => {
                skip_test(test, &format!("cannot set up a loop device: {e}"));
                None
            }
        }
    }

    /// The device node (`/dev/loopN`).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FailingDisk {
    fn drop(&mut self) {
        if let Some(dev) = self.dev.take() {
            // Detach now (autoclear would too, once every opener closed it).
            // SAFETY: LOOP_CLR_FD takes no argument.
            unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CLR_FD, 0) };
        }
        // Unmounted after the device let go of its backing file (`SmallFs` retries on EBUSY).
        self.fs.take();
    }
}

/// A sparse file of `size` bytes at `backing`, attached to a free loop device with
/// autoclear; returns the device, open read-write, and its path.
fn attach(backing: &Path, size: u64) -> io::Result<(OwnedFd, PathBuf)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(backing)?;
    file.set_len(size)?;
    let ctl = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")?;
    // Another process may take the free device between the two calls: a few tries.
    let mut last = io::Error::other("no free loop device");
    for _ in 0..8 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number.
        let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let path = PathBuf::from(format!("/dev/loop{n}"));
        let c = cstr(&path)?;
        // SAFETY: open(2) with a valid C string.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open returned a new fd that nothing else owns.
        let dev = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: LOOP_SET_FD takes the backing file's fd as its argument.
        if unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_SET_FD, file.as_raw_fd()) } != 0 {
            last = io::Error::last_os_error();
            if last.raw_os_error() == Some(libc::EBUSY) {
                continue;
            }
            return Err(last);
        }
        // SAFETY: all-zero is a valid loop_info64.
        let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
        info.lo_flags = LO_FLAGS_AUTOCLEAR;
        // SAFETY: a pointer to a live loop_info64.
        if unsafe {
            libc::ioctl(
                dev.as_raw_fd(),
                LOOP_SET_STATUS64,
                &info as *const LoopInfo64,
            )
        } != 0
        {
            let e = io::Error::last_os_error();
            // SAFETY: LOOP_CLR_FD takes no argument.
            unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CLR_FD, 0) };
            return Err(e);
        }
        return Ok((dev, path));
    }
    Err(last)
}
