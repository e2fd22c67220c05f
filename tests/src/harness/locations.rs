//! Where the harness finds things: the built binaries, the repository and
//! the data files the tests read.

use std::path::{Path, PathBuf};

/// Directory holding the workspace's built binaries.
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("EVO_BIN_DIR") {
        return PathBuf::from(d);
    }
    // A bin sits beside evod (target/debug); a test binary one level down
    // (target/debug/deps).
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().expect("exe dir");
    if dir.join("evod").exists() {
        return dir.to_path_buf();
    }
    dir.parent().expect("target dir").to_path_buf()
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`)",
        p.display()
    );
    p
}

pub fn fixture() -> PathBuf {
    bin("evo-fixture")
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The recorded servers the tests replay, shipped in the repository: a few
/// entries of the recorded catalog, exactly as recorded.
pub fn catalog_excerpt() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/catalog-excerpt.json")
}

/// A data file the repository does not ship, named by the environment
/// variable `var` (`EVO_CATALOG`, `EVO_QUERIES_DEV`; a relative path is taken
/// from the repository root). None when `var` is unset; panics when it names
/// no file, so a wrong path is not mistaken for an absent one.
pub fn outside_file(var: &str) -> Option<PathBuf> {
    let path = repo_root().join(std::env::var_os(var)?);
    assert!(path.is_file(), "{var} names {}: not a file", path.display());
    Some(path)
}

/// The interop suite's Python (with the official SDK), when `tests/run`
/// has created its venv.
pub fn sdk_python() -> Option<PathBuf> {
    let python = repo_root().join("tests/interop/.venv/bin/python");
    python.exists().then_some(python)
}
