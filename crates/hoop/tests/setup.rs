//! A refused io_uring setup is explained: the test re-runs itself in a child process whose
//! seccomp filter makes `io_uring_setup` fail with EPERM (as Docker's default profile does), and
//! checks the error names EPERM, the cause and the remedy.

use std::process::Command;

const CHILD_ENV: &str = "HOOP_TEST_SECCOMP_CHILD";

/// Installs a seccomp filter: `io_uring_setup` returns EPERM, everything else is allowed.
fn block_io_uring_setup() {
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
    let arch = if cfg!(target_arch = "x86_64") {
        AUDIT_ARCH_X86_64
    } else {
        AUDIT_ARCH_AARCH64
    };
    let stmt = |code: u16, k: u32| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    let ld_w_abs = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let jeq_k = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let ret_k = (libc::BPF_RET | libc::BPF_K) as u16;
    let filter = [
        // seccomp_data.arch at offset 4: other architectures are let through untouched.
        stmt(ld_w_abs, 4),
        jump(jeq_k, arch, 0, 3),
        // seccomp_data.nr at offset 0.
        stmt(ld_w_abs, 0),
        jump(jeq_k, libc::SYS_io_uring_setup as u32, 0, 1),
        stmt(ret_k, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(ret_k, SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integer arguments only.
    let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(
        r,
        0,
        "PR_SET_NO_NEW_PRIVS: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `prog` points to a live filter array for the duration of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &prog as *const libc::sock_fprog,
        )
    };
    assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
}

#[test]
fn seccomp_eperm_is_explained() {
    if std::env::var_os(CHILD_ENV).is_some() {
        block_io_uring_setup();
        match hoop::Runtime::new() {
            Ok(_) => println!("CHILD-RESULT: setup succeeded"),
            Err(e) => println!("CHILD-RESULT: {e}"),
        }
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "seccomp_eperm_is_explained", "--nocapture"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CHILD-RESULT: "))
        .unwrap_or_else(|| panic!("child printed no result: {stdout}"));
    assert!(line.contains("EPERM"), "{line}");
    assert!(line.contains("seccomp"), "{line}");
    assert!(line.contains("HOOP_DRIVER=epoll"), "{line}");
}

#[test]
fn setup_error_kinds_are_io_error_kinds() {
    let e = hoop::setup::SetupError::classify(std::io::Error::from_raw_os_error(libc::ENOSYS), 256);
    assert_eq!(e.kind(), hoop::setup::SetupErrorKind::NotSupported);
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::Unsupported);
    assert!(io.to_string().contains("ENOSYS"), "{io}");
}
