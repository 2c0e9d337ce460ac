//! Options for opening a file, as in `std::fs::OpenOptions`.

use std::io;
use std::path::Path;

use hoop_driver::{op, Op};

use super::{cstr, File};

/// How to open a file: the same builder as `std::fs::OpenOptions` (with the Unix `mode` and
/// `custom_flags` extensions), whose [`open`](OpenOptions::open) goes through the ring
/// (`IORING_OP_OPENAT`).
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let file = hoop::fs::OpenOptions::new()
///     .read(true)
///     .write(true)
///     .create(true)
///     .open("data.bin")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
    custom_flags: i32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Options with everything off and mode `0o666`: set at least one of `read`, `write` or
    /// `append` before opening.
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o666,
            custom_flags: 0,
        }
    }

    /// The mode bits a created file gets (before the umask).
    pub(crate) fn mode_bits(&self) -> u32 {
        self.mode
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.read = read;
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.write = write;
        self
    }

    /// Open for appending (`O_APPEND`): every write goes to the end of the file, whatever
    /// position it asks for. Implies `write`.
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.append = append;
        self
    }

    /// Truncate the file to length 0 on open (`O_TRUNC`); needs `write`.
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.truncate = truncate;
        self
    }

    /// Create the file if it does not exist (`O_CREAT`); needs `write` or `append`.
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.create = create;
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists (`O_CREAT | O_EXCL`); needs
    /// `write` or `append`. Overrides `create` and `truncate`.
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.create_new = create_new;
        self
    }

    /// The permission bits of a newly created file (before the umask); `0o666` by default.
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        self.mode = mode;
        self
    }

    /// Extra `open(2)` flags, or-ed in (the access mode bits are ignored; `O_CLOEXEC` is
    /// always set).
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        self.custom_flags = flags;
        self
    }

    /// Opens the file at `path` with these options.
    ///
    /// Fails with `InvalidInput` before touching the file system when the options contradict
    /// each other (as std does) or the path has an interior NUL byte. If the future is dropped
    /// after the kernel opened the file, the file is closed when the completion arrives.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: if it is dropped, a file it opened is closed, never leaked (with
    /// `create`, the file may exist).
    pub async fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let flags = self.flags()?;
        let path = cstr(path.as_ref())?;
        let fd = Op::new(op::OpenAt::new(libc::AT_FDCWD, path, flags, self.mode)).await?;
        Ok(File::from_owned(fd))
    }

    /// The `open(2)` flags these options mean, with std's rules.
    pub(crate) fn flags(&self) -> io::Result<i32> {
        let access = match (self.read, self.write, self.append) {
            (true, false, false) => libc::O_RDONLY,
            (false, true, false) => libc::O_WRONLY,
            (true, true, false) => libc::O_RDWR,
            (false, _, true) => libc::O_WRONLY | libc::O_APPEND,
            (true, _, true) => libc::O_RDWR | libc::O_APPEND,
            (false, false, false) => {
                return Err(invalid(
                    "open options: at least one of read, write or append must be set",
                ))
            }
        };
        match (self.write, self.append) {
            (true, false) => {}
            (false, false) => {
                if self.truncate || self.create || self.create_new {
                    return Err(invalid(
                        "open options: truncate, create and create_new need write or append",
                    ));
                }
            }
            (_, true) => {
                if self.truncate && !self.create_new {
                    return Err(invalid(
                        "open options: truncate cannot be combined with append",
                    ));
                }
            }
        }
        let creation = match (self.create, self.truncate, self.create_new) {
            (false, false, false) => 0,
            (true, false, false) => libc::O_CREAT,
            (false, true, false) => libc::O_TRUNC,
            (true, true, false) => libc::O_CREAT | libc::O_TRUNC,
            (_, _, true) => libc::O_CREAT | libc::O_EXCL,
        };
        Ok(access | creation | (self.custom_flags & !libc::O_ACCMODE))
    }
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_std() {
        let o =
            |f: &dyn Fn(&mut OpenOptions) -> &mut OpenOptions| f(&mut OpenOptions::new()).flags();
        assert_eq!(o(&|x| x.read(true)).unwrap(), libc::O_RDONLY);
        assert_eq!(
            o(&|x| x.write(true).create(true).truncate(true)).unwrap(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC
        );
        assert_eq!(
            o(&|x| x.append(true).create_new(true)).unwrap(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_EXCL
        );
        assert_eq!(
            o(&|x| x
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_WRONLY))
            .unwrap(),
            libc::O_RDWR | libc::O_NOFOLLOW
        );
        for bad in [
            o(&|x| x),
            o(&|x| x.read(true).truncate(true)),
            o(&|x| x.read(true).create(true)),
            o(&|x| x.append(true).truncate(true)),
        ] {
            assert_eq!(bad.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        }
    }
}
