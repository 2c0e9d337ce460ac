//! Directory listings (`autoindex`), on both drivers: off by default, then sorted, escaped,
//! without dotfiles, HEAD alike, and links out of the root listed but never followed; the JSON
//! format parsed as JSON (escaped and non-UTF-8 names, types, sizes, dates).
//!
//! The server runs in this process (`site::TestServer`); every client read and write has a
//! timeout; every loop is bounded in count.

mod serve;
mod site;
use hoop::DriverKind;
use hoop_http::{AutoindexFormat, Config};
use site::{make_root, TestServer};

fn autoindex(kind: DriverKind) {
    let (_base, root) = make_root(&format!("autoindex-{kind}"));
    let list = root.join("list");
    std::fs::create_dir_all(list.join("sub")).unwrap();
    std::fs::write(list.join("a<b>&\"c'.txt"), b"escaped\n").unwrap();
    std::fs::write(list.join("z.txt"), b"zz").unwrap();
    std::fs::write(list.join(".secret"), b"hidden").unwrap();

    // Off by default: 403, as before.
    let Some(server) = TestServer::start(kind, &root) else {
        return;
    };
    assert_eq!(server.get("/list/").status, 403);
    drop(server);

    let cfg = Config {
        autoindex: true,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let mut s = server.client();
    let r = s.ask_with("GET", "/list/", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let page = String::from_utf8(r.body.clone()).unwrap();
    assert!(page.contains("Index of /list/"), "{page}");
    let escaped = "<a href=\"a%3Cb%3E%26%22c%27.txt\">a&lt;b&gt;&amp;&quot;c&#39;.txt</a>";
    let (a, sub, z) = (
        page.find(escaped).expect("the escaped name"),
        page.find("<a href=\"sub/\">sub/</a>")
            .expect("the subdirectory"),
        page.find("<a href=\"z.txt\">z.txt</a>").expect("z.txt"),
    );
    assert!(a < sub && sub < z, "sorted by name: {page}");
    assert!(page.contains("<a href=\"../\">"));
    assert!(!page.contains("secret"), "{page}");
    assert!(!page.contains('\''), "a raw quote in {page}");
    // The link works.
    let r = s.ask_with("GET", "/list/a%3Cb%3E%26%22c%27.txt", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"escaped\n"[..]));
    // HEAD alike.
    let h = s.ask_with("HEAD", "/list/", "");
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    assert_eq!(
        h.header("content-length"),
        Some(page.len().to_string().as_str())
    );
    // An empty directory; a directory with its index still serves the index; no trailing
    // slash is still 301; a dot-directory is still 404.
    let r = s.ask_with("GET", "/empty/", "");
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("Index of /empty/"));
    assert_eq!(s.ask_with("GET", "/docs/", "").body, b"docs index\n");
    let r = s.ask_with("GET", "/list", "");
    assert_eq!((r.status, r.header("location")), (301, Some("/list/")));
    assert_eq!(s.ask_with("GET", "/.git/", "").status, 404);
    // A link out of the root is listed as a name, never followed.
    let r = s.ask_with("GET", "/out/", "");
    assert_eq!(r.status, 404);
    std::fs::remove_file(root.join("index.html")).unwrap();
    let page = String::from_utf8(s.ask_with("GET", "/", "").body).unwrap();
    assert!(page.contains("<a href=\"out\">out</a>"), "{page}");
    assert!(page.contains("<a href=\"list/\">list/</a>"), "{page}");
    assert!(
        !page.contains("../") && !page.contains("secret.txt"),
        "{page}"
    );
}

#[test]
fn autoindex_lists_directories_without_index_uring() {
    autoindex(DriverKind::Uring);
}

#[test]
fn autoindex_lists_directories_without_index_epoll() {
    autoindex(DriverKind::Epoll);
}

fn autoindex_json(kind: DriverKind) {
    use std::os::unix::ffi::OsStrExt;
    let (_base, root) = make_root(&format!("autoindex-json-{kind}"));
    let list = root.join("list");
    std::fs::create_dir_all(list.join("sub")).unwrap();
    std::fs::write(list.join("a\"b\\c\t.txt"), b"escaped\n").unwrap();
    std::fs::write(list.join(std::ffi::OsStr::from_bytes(b"bad\xff.txt")), b"x").unwrap();
    std::fs::write(list.join("z.txt"), b"zz").unwrap();
    std::fs::write(list.join(".secret"), b"hidden").unwrap();
    std::os::unix::fs::symlink("/etc", list.join("link")).unwrap();
    let cfg = Config {
        autoindex: true,
        autoindex_format: AutoindexFormat::Json,
        ..Config::default()
    };
    let Some(server) = TestServer::start_with(kind, &root, cfg) else {
        return;
    };
    let mut s = server.client();
    let r = s.get("/list/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
    let entries = v.as_array().expect("an array");
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["a\"b\\c\t.txt", "bad\u{fffd}.txt", "link", "sub", "z.txt"],
        "sorted bytewise as the HTML page, no dotfile"
    );
    let types: Vec<&str> = entries
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["file", "file", "symlink", "directory", "file"]);
    assert_eq!(entries[0]["size"], 8);
    assert_eq!(entries[4]["size"], 2);
    assert!(entries[2].get("size").is_none() && entries[2].get("mtime").is_none());
    assert!(entries[3].get("size").is_none());
    for i in [0, 1, 3, 4] {
        let m = entries[i]["mtime"].as_str().expect("mtime");
        // 2026-11-27T00:00:00Z
        assert_eq!(m.len(), 20, "{m}");
        assert!(m.ends_with('Z') && m.as_bytes()[10] == b'T', "{m}");
        assert!(m > "2020", "{m}");
    }
    // HEAD alike; an empty directory is an empty array; the root's listing has no `..`.
    let h = s.ask_with("HEAD", "/list/", "");
    assert_eq!((h.status, h.body.len()), (200, 0));
    assert_eq!(
        h.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
    assert_eq!(s.get("/empty/").body, b"[]\n");
    std::fs::remove_file(root.join("index.html")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&s.get("/").body).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"list") && names.contains(&"out"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with('.')), "{names:?}");
}

#[test]
fn autoindex_json_lists_parseable_entries_uring() {
    autoindex_json(DriverKind::Uring);
}

#[test]
fn autoindex_json_lists_parseable_entries_epoll() {
    autoindex_json(DriverKind::Epoll);
}
