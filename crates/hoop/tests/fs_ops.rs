//! The driver's file operations that hoop::fs does not wrap, on files of a private temporary
//! directory and on both drivers: `op::OpenAt2` with `RESOLVE_BENEATH` keeps paths inside, and
//! `op::Splice` moves a file's bytes through a pipe to a socket.

use hoop_test_support as common;

use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

use common::{each_driver, DriverKind};
use hoop::fs::File;

mod fs_common;
use fs_common::*;

/// `op::OpenAt2` with `RESOLVE_BENEATH`: a path inside the directory opens; `..` and a symlink
/// leading out are refused by the kernel with `EXDEV`, on both drivers.
#[test]
fn openat2_resolve_beneath_keeps_paths_inside() {
    use hoop::driver::{op, Op};
    use std::ffi::CString;
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new("fs-test", &format!("openat2-{kind}"));
        std::fs::create_dir(dir.join("root")).unwrap();
        std::fs::write(dir.join("root/in.txt"), b"inside").unwrap();
        std::fs::write(dir.join("out.txt"), b"outside").unwrap();
        std::os::unix::fs::symlink("../out.txt", dir.join("root/link")).unwrap();
        let root = std::fs::File::open(dir.join("root")).unwrap();
        let rootfd = root.as_raw_fd();
        run(kind, async move {
            let open = |p: &str| {
                Op::new(op::OpenAt2::new(
                    rootfd,
                    CString::new(p).unwrap(),
                    libc::O_RDONLY,
                    0,
                    libc::RESOLVE_BENEATH,
                ))
            };
            let lacks = hoop::driver::Driver::current().is_some_and(|d| {
                d.kind() == DriverKind::Uring && !d.supported_opcodes().contains(&"OPENAT2")
            });
            if lacks {
                eprintln!("skip on {kind}: this kernel's io_uring has no OPENAT2");
                return;
            }
            match open("in.txt").await {
                Ok(fd) => {
                    let f = File::from(fd);
                    let (res, buf) = f.read_at(Vec::with_capacity(16), 0).await;
                    assert_eq!(&buf[..res.unwrap()], b"inside");
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    eprintln!("skip on {kind}: openat2 not in this kernel");
                    return;
                }
                Err(e) => panic!("open in.txt: {e}"),
            }
            for p in ["../out.txt", "link", "/etc/hostname"] {
                let e = open(p).await.unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{p}: {e}");
            }
        });
        drop(root);
    });
}

/// `op::Splice`: file -> pipe at an offset, then pipe -> socket, on both drivers; the bytes
/// arrive intact and a pipe-to-socket splice on an empty pipe is not needed to end the test.
#[test]
fn splice_moves_file_bytes_through_a_pipe_to_a_socket() {
    use hoop::driver::{op, Op};
    use std::io::Read;
    use std::os::fd::OwnedFd;
    let _g = lock();
    each_driver(|kind| {
        let dir = TempDir::new("fs-test", &format!("splice-{kind}"));
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(dir.join("f"), &data).unwrap();
        let file = std::fs::File::open(dir.join("f")).unwrap();
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two new fds into the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both fds are new and owned by nothing else.
        let (pr, pw) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (mut rx, tx) = std::os::unix::net::UnixStream::pair().unwrap();
        tx.set_nonblocking(true).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (ffd, prfd, pwfd, txfd) = (
            file.as_raw_fd(),
            pr.as_raw_fd(),
            pw.as_raw_fd(),
            tx.as_raw_fd(),
        );
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 50_000];
            rx.read_exact(&mut got).map(|_| got)
        });
        let ran = run(kind, async move {
            let lacks = hoop::driver::Driver::current().is_some_and(|d| {
                d.kind() == DriverKind::Uring && !d.supported_opcodes().contains(&"SPLICE")
            });
            if lacks {
                eprintln!("skip on {kind}: this kernel's io_uring has no SPLICE");
                return false;
            }
            let n = Op::new(op::Splice::new(ffd, Some(1000), pwfd, None, 50_000, 0))
                .await
                .unwrap();
            assert!(n > 0 && n <= 50_000, "{n}");
            let mut filled = n;
            let mut sent = 0;
            while sent < 50_000 {
                if filled == sent {
                    let want = (50_000 - filled) as u32;
                    let off = 1000 + filled as u64;
                    filled += Op::new(op::Splice::new(ffd, Some(off), pwfd, None, want, 0))
                        .await
                        .unwrap();
                }
                let want = (filled - sent) as u32;
                let m = Op::new(op::Splice::new(prfd, None, txfd, None, want, 0))
                    .await
                    .unwrap();
                assert!(m > 0);
                sent += m;
            }
            true
        });
        if !ran {
            drop(tx);
            let _ = reader.join();
            return;
        }
        let got = reader.join().unwrap().unwrap();
        assert!(got == data[1000..51_000], "the spliced bytes differ");
        drop((pr, pw, tx, file));
    });
}
