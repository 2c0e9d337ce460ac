//! The compile errors of borrowed bytes given to hoop's owned-buffer methods. Each snippet is
//! type-checked by rustc against this build of hoop (the newest `libhoop-*.rlib` beside this
//! test), one snippet per run (a type error hides borrow-check errors), and its error must be
//! hoop's E0277 that names the fix (call the trait, or pass an owned buffer), never a
//! borrow-check error ("does not live long enough") that names none. rustdoc's
//! `compile_fail,E0277` cannot tell the two apart: it checks error codes on nightly only.
//!
//! No runtime is involved (nothing runs on a driver). Skipped, said on stderr, without rustc.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the `write` side's error must say.
const WRITE_FIX: [&str; 3] = [
    "is not an owned buffer: hoop's I/O methods take the buffer by value",
    "call the trait: `AsyncWriteExt::write_all(&mut stream, bytes).await?`",
    "or pass an owned buffer: `let (res, buf) = stream.write_all(bytes.to_vec()).await;`",
];

/// What the `read` side's error must say.
const READ_FIX: [&str; 3] = [
    "is not an owned buffer to read into",
    "call the trait: `AsyncReadExt::read(&mut stream, &mut buf).await?`",
    "or pass an owned buffer: `let (res, buf) = stream.read(Vec::with_capacity(4096)).await;`",
];

/// The rustc to run: `$RUSTC`, else `rustc` on the PATH; `None` if it does not run.
fn rustc() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC").map_or_else(|| PathBuf::from("rustc"), PathBuf::from);
    let ok = Command::new(&rustc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(rustc)
}

/// The newest `libhoop-*.rlib` in `deps` (the one this test's build made or checked).
fn hoop_rlib(deps: &Path) -> PathBuf {
    std::fs::read_dir(deps)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libhoop-") && name.ends_with(".rlib")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .expect("a libhoop rlib beside the test")
}

/// Type-checks `body` inside `async fn f(s, u, line)` against hoop; returns whether it
/// compiled, and rustc's stderr.
fn check(rustc: &Path, name: &str, body: &str) -> (bool, String) {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("diagnostics-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("snippet.rs");
    let code = format!(
        "#![allow(unused)]\n\
         pub async fn f(s: hoop::net::TcpStream, u: hoop::net::UdpSocket, line: String) {{\n\
         {body}\n}}\n"
    );
    std::fs::write(&src, code).unwrap();
    let out = Command::new(rustc)
        .args([
            "--edition",
            "2021",
            "--crate-type",
            "lib",
            "--emit=metadata",
        ])
        .arg("--crate-name")
        .arg(format!("snippet_{name}"))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--extern")
        .arg(format!("hoop={}", hoop_rlib(deps).display()))
        .arg("--out-dir")
        .arg(&dir)
        .arg(&src)
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("rustc runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn borrowed_slices_get_the_error_that_names_the_fix() {
    let Some(rustc) = rustc() else {
        eprintln!("SKIPPED: no rustc to run (set RUSTC)");
        return;
    };
    // The harness works: owned buffers, static bytes included, compile.
    let (ok, err) = check(
        &rustc,
        "owned",
        "let buf = [0u8; 64];\n\
         let (r, _) = s.write_all(buf[..3].to_vec()).await;\n\
         let (r, _) = s.write_all(hoop::StaticBuf(b\"hi\\n\")).await;\n\
         let (r, _) = s.write_all(hoop::StaticBuf::from(\"text\")).await;\n\
         let (r, _) = u.send(line.into_bytes()).await;\n\
         let (r, _) = s.read(Vec::with_capacity(64)).await;",
    );
    assert!(ok, "owned buffers compile:\n{err}");

    let cases: [(&str, &str, &str, &[&str; 3]); 5] = [
        (
            "write_all_subslice",
            "let buf = [0u8; 64];\nlet n = 3;\nlet _ = s.write_all(&buf[..n]).await;",
            "`&[u8]`",
            &WRITE_FIX,
        ),
        (
            "send_as_bytes",
            "let _ = u.send(line.as_bytes()).await;",
            "`&[u8]`",
            &WRITE_FIX,
        ),
        (
            "write_str",
            "let _ = s.write(line.trim()).await;",
            "`&str`",
            &WRITE_FIX,
        ),
        (
            "write_array",
            "let _ = s.write_all(b\"hi\\n\").await;",
            "`&[u8; 3]`",
            &WRITE_FIX,
        ),
        (
            "read_mut_slice",
            "let mut v = vec![0u8; 64];\nlet _ = s.read(&mut v[..]).await;",
            "`&mut [u8]`",
            &READ_FIX,
        ),
    ];
    for (name, body, ty, fix) in cases {
        let (ok, err) = check(&rustc, name, body);
        assert!(!ok, "{name}: must not compile");
        assert!(
            err.contains("error[E0277]") && !err.contains("error[E0597]"),
            "{name}: a type error (E0277), not a borrow-check one:\n{err}"
        );
        assert!(err.contains(&format!("{ty} {}", fix[0])), "{name}:\n{err}");
        for line in &fix[1..] {
            assert!(err.contains(line), "{name}: names `{line}`:\n{err}");
        }
    }
}
