//! `evoctl model pull ID`: downloads a sentence-embedding model from the
//! Hugging Face hub (or `EVO_HF_ENDPOINT`, a mirror with the same layout:
//! `/{id}/resolve/{revision}/{file}`) into `<cache dir>/models/`, where
//! evod finds `search.model: "ID"`. Each file goes to `FILE.part` first, so
//! an interrupted pull resumes with a range request; a file whose answer
//! names its SHA-256 (the hub's `X-Linked-Etag` for large files) is checked
//! against it before it takes its name.
//!
//! `evoctl model pull` uses reqwest (already in the tree through rmcp's HTTP client), with
//! redirects followed by hand so the hub's `X-Linked-Etag` (the file's SHA-256) on its redirect to
//! the CDN is read. Models land in `<cache dir>/models/ORG--NAME`, which `search.model: "ORG/NAME"`
//! resolves to (`evo_proto::paths::model_dir`, shared by both binaries, as is `cache_dir`).

use std::env;
use std::fs::{self, File, OpenOptions};
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use evo_proto::paths;
use reqwest::redirect::Policy;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::runtime::Builder;

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Download model ID (e.g. sentence-transformers/all-MiniLM-L6-v2)
    Pull {
        id: String,
        /// Branch, tag or commit of the model's repository
        #[arg(long, default_value = "main")]
        revision: String,
        /// Where evod keeps its cache [default: $EVO_CACHE_DIR, else $XDG_CACHE_HOME/evo]
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
}

/// Files a model needs.
const REQUIRED: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// Files read when the model has them (sentence-transformers' settings).
const OPTIONAL: [&str; 6] = [
    "modules.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
    "sentence_bert_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
];
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Redirects followed for one file (the hub sends large files to its CDN).
const MAX_REDIRECTS: usize = 5;

pub fn run(action: Action, json: bool) -> Result<(), String> {
    match action {
        Action::Pull {
            id,
            revision,
            cache_dir,
        } => {
            let runtime = Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start: {e}"))?;
            let cache = paths::cache_dir(cache_dir.as_deref());
            let pulled = runtime.block_on(pull(&id, &revision, &cache, json))?;
            if json {
                println!(
                    "{}",
                    json!({
                        "ok": true,
                        "id": id,
                        "dir": pulled.dir,
                        "files": pulled.files,
                    })
                );
            } else {
                println!(
                    "model {id} is in {}; use it with \"search\": {{\"model\": \"{id}\"}} in evo's config",
                    pulled.dir.display()
                );
            }
            Ok(())
        }
    }
}

struct Pulled {
    dir: PathBuf,
    files: Vec<Value>,
}

fn valid_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('/').collect();
    (1..=2).contains(&parts.len())
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        })
}

async fn pull(id: &str, revision: &str, cache: &Path, json: bool) -> Result<Pulled, String> {
    if !valid_id(id) {
        return Err(format!(
            "'{id}' is not a model id: write it as on the hub, ORG/NAME (letters, digits, '.', '_', '-'), e.g. sentence-transformers/all-MiniLM-L6-v2"
        ));
    }
    let endpoint = env::var("EVO_HF_ENDPOINT")
        .or_else(|_| env::var("HF_ENDPOINT"))
        .ok()
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.into());
    let endpoint = endpoint.trim_end_matches('/');
    let dir = paths::model_dir(cache, id);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let client = reqwest::Client::builder()
        .redirect(Policy::none())
        .user_agent(concat!("evoctl/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot start an HTTP client: {e}"))?;
    let progress = !json && io::stderr().is_terminal();
    let mut files = Vec::new();
    for (file, required) in REQUIRED
        .iter()
        .map(|f| (*f, true))
        .chain(OPTIONAL.iter().map(|f| (*f, false)))
    {
        let url = format!("{endpoint}/{id}/resolve/{revision}/{file}");
        match fetch(&client, &url, &dir.join(file), file, progress).await? {
            Some((sha, size, checked)) => files.push(json!({
                "file": file, "sha256": sha, "bytes": size, "checked": checked,
            })),
            None if required => {
                return Err(format!(
                    "{url} was not found: is '{id}' a sentence-embedding model on the hub (revision '{revision}')? It needs {file}"
                ));
            }
            None => {}
        }
    }
    Ok(Pulled { dir, files })
}

/// Hex SHA-256 in an ETag (`"abc…"`, `W/"abc…"`), when it is one.
fn sha_in(tag: &str) -> Option<String> {
    let tag = tag.trim().trim_start_matches("W/").trim_matches('"');
    (tag.len() == 64 && tag.chars().all(|c| c.is_ascii_hexdigit())).then(|| tag.to_lowercase())
}

fn header<'h>(r: &'h reqwest::Response, name: &str) -> Option<&'h str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Downloads `url` to `dest` through `dest.part`, resuming it. Returns the
/// file's SHA-256, size and whether the server's checksum confirmed it;
/// `None` when the server has no such file.
async fn fetch(
    client: &reqwest::Client,
    url: &str,
    dest: &Path,
    name: &str,
    progress: bool,
) -> Result<Option<(String, u64, bool)>, String> {
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let part = dest.with_file_name(format!(
        "{}.part",
        dest.file_name()
            .map_or("file".into(), |n| n.to_string_lossy())
    ));
    let mut offset = fs::metadata(&part).map_or(0, |m| m.len());
    let mut target = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let mut expected: Option<String> = None;
    let mut expected_size: Option<u64> = None;
    let failed = |e: reqwest::Error| {
        format!("downloading {url} failed: {e}; run the command again to resume")
    };
    let mut response = None;
    for _ in 0..=MAX_REDIRECTS {
        let mut request = client.get(target.clone());
        if offset > 0 {
            request = request.header("Range", format!("bytes={offset}-"));
        }
        let r = request.send().await.map_err(failed)?;
        // The hub names a large file's SHA-256 and size on its redirect.
        if let Some(sha) = header(&r, "x-linked-etag").and_then(sha_in) {
            expected = Some(sha);
        }
        if let Some(n) = header(&r, "x-linked-size").and_then(|s| s.parse().ok()) {
            expected_size = Some(n);
        }
        if r.status().is_redirection() {
            let location = header(&r, "location")
                .ok_or_else(|| format!("{url}: a redirect without a location"))?;
            target = target
                .join(location)
                .map_err(|e| format!("{url}: bad redirect {location}: {e}"))?;
            continue;
        }
        response = Some(r);
        break;
    }
    let Some(mut r) = response else {
        return Err(format!("{url}: more than {MAX_REDIRECTS} redirects"));
    };
    match r.status().as_u16() {
        404 => return Ok(None),
        // The part is whole already (or longer than the file): start over.
        416 => {
            let _ = fs::remove_file(&part);
            return Box::pin(fetch(client, url, dest, name, progress)).await;
        }
        200 => offset = 0,
        206 => {}
        code => {
            let hint = if code == 401 || code == 403 {
                ": the model is private or gated; this command fetches public models only"
            } else {
                ""
            };
            return Err(format!("{url} answered HTTP {code}{hint}"));
        }
    }
    if expected.is_none() {
        expected = header(&r, "etag").and_then(sha_in);
    }
    let total = expected_size.or_else(|| r.content_length().map(|n| n + offset));
    let mut out = OpenOptions::new()
        .create(true)
        .append(offset > 0)
        .write(true)
        .truncate(offset == 0)
        .open(&part)
        .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
    let mut done = offset;
    let mut shown = Instant::now();
    while let Some(chunk) = r.chunk().await.map_err(failed)? {
        out.write_all(&chunk)
            .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
        done += chunk.len() as u64;
        if progress && shown.elapsed().as_millis() >= 100 {
            shown = Instant::now();
            show(name, done, total);
        }
    }
    out.sync_all()
        .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
    drop(out);
    if progress {
        show(name, done, total);
        eprintln!();
    }
    if let Some(total) = total
        && done != total
    {
        return Err(format!(
            "{url}: got {done} of {total} bytes; run the command again to resume"
        ));
    }
    let sha = sha256_file(&part)?;
    if let Some(want) = &expected
        && *want != sha
    {
        let _ = fs::remove_file(&part);
        return Err(format!(
            "{name}: checksum mismatch (the server says SHA-256 {want}, the download is {sha}); the partial file was removed, run the command again"
        ));
    }
    fs::rename(&part, dest).map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
    Ok(Some((sha, done, expected.is_some())))
}

fn show(name: &str, done: u64, total: Option<u64>) {
    let mb = |n: u64| n as f64 / 1e6;
    match total {
        Some(t) if t > 0 => eprint!(
            "\r  {name}  {:.1}/{:.1} MB  {:>3}%",
            mb(done),
            mb(t),
            done * 100 / t
        ),
        _ => eprint!("\r  {name}  {:.1} MB", mb(done)),
    }
}

fn sha256_file(path: &Path) -> Result<String, String> {
    let mut f = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_etags_are_read_strictly() {
        assert!(valid_id("sentence-transformers/all-MiniLM-L6-v2"));
        assert!(valid_id("BAAI/bge-small-en-v1.5"));
        for bad in ["", "a/b/c", "../x", "a/..", "a b/c", "a/"] {
            assert!(!valid_id(bad), "{bad}");
        }
        let sha = "a".repeat(64);
        assert_eq!(sha_in(&format!("\"{sha}\"")), Some(sha.clone()));
        assert_eq!(sha_in(&format!("W/\"{sha}\"")), Some(sha));
        assert_eq!(
            sha_in("\"abc123\""),
            None,
            "a git blob id is not a checksum"
        );
    }
}
