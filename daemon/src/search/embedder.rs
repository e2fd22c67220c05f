//! The Embedder actor: owns the sentence-embedding model of `search.model`
//! and the vectors of the catalog's tools. It loads the model, and whenever
//! the Catalog publishes a snapshot it embeds the tools whose text it has no
//! vector for, on its own bounded pool of threads (`search.threads`, one by
//! default), never on the actix thread or the MCP I/O worker. Vectors are
//! kept in the cache directory, keyed by model and text hash, so a restart
//! embeds nothing that did not change.
//!
//! What searches read is the [`SemanticView`] it publishes (one writer, read
//! without a round trip like the catalog's `Snapshot`): the stage's state
//! for `evoctl status`, the model for query vectors, and the vectors of the
//! current snapshot once every tool has one. Until then the lexical stage
//! answers alone.
//!
//! The model runs on a rayon pool of `search.threads` (1) threads owned by the Embedder, which
//! candle's matrix products stay on. evod sets `CANDLE_NUM_THREADS=1` before any thread starts,
//! unless set: candle's element-wise ops otherwise run on a spinning pool of their own, one thread
//! per core, outside that bound.
//!
//! The query-vector LRU is the one `Mutex` searches share: a memo any session may fill, not state
//! of an actor.
//!
//! `discover_tools` (a session) and `evoctl search` (the Supervisor) call `search`: it loads the
//! `SemanticView` (one atomic load); when its vectors fit the snapshot, the query's vector comes
//! from the LRU of query texts or one forward pass on the Embedder's pool (awaited, so the
//! session's I/O worker never computes it), and `search::search_with` ranks the lexical scores
//! fused with the cosines, then pulls near-duplicates up. Otherwise the lexical stage answers
//! alone. The Embedder subscribes to `CatalogChanged`; for each snapshot it hashes every tool's
//! text, publishes the vectors at once when all are known, else embeds the missing ones in batches
//! (progress in `status`), writes the cache file and publishes. A new `search` setting (reload)
//! bumps its generation: a late result of the old model is dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use actix::prelude::*;
use arc_swap::ArcSwap;

use crate::catalog::CatalogChanged;
use crate::catalog::snapshot::Snapshot;
use crate::config::SearchSettings;
use crate::runtime::atomic_file::{self, Mode};
use crate::search::MAX_QUERY_BYTES;
use crate::search::learned::learned;
use crate::search::model::{Encoder, Pool, TextKind};
use crate::search::semantic::{
    self, DocVectors, QUERY_TOKENS, QueryCache, TOOL_TOKENS, TextKey, text_key,
};
use crate::search::{LexicalIndexes, Outcome, Semantic, Stages};

/// Query vectors remembered.
const QUERY_CACHE: usize = 512;
/// How long a snapshot stands before its lexical index is built ahead.
const PREBUILD_AFTER: std::time::Duration = std::time::Duration::from_millis(500);
/// Tools embedded between two progress reports.
const PROGRESS_EVERY: usize = 64;

/// Where the semantic stage stands.
#[derive(Clone, Debug, PartialEq)]
pub enum StageState {
    /// No `search.model`.
    Off,
    /// Reading the model.
    Loading,
    /// The model cannot be used: why, and what to do.
    Failed(String),
    /// Tools embedded of the current snapshot's.
    Embedding { done: usize, total: usize },
    /// Every tool of the current snapshot has its vector.
    Ready { total: usize },
}

/// What searches and `evoctl status` read of the semantic stage.
pub struct SemanticView {
    pub state: StageState,
    /// `search.model` as written.
    pub model: Option<String>,
    pub encoder: Option<Arc<Encoder>>,
    pub pool: Option<Arc<Pool>>,
    /// The current snapshot's vectors, once complete.
    pub docs: Option<Arc<DocVectors>>,
    pub queries: Arc<QueryCache>,
    /// The lexical stage's index of the latest snapshot searched: kept
    /// here, beside the vectors, as what every search reads.
    pub lexical: Arc<LexicalIndexes>,
}

impl SemanticView {
    pub fn off() -> SemanticView {
        SemanticView {
            state: StageState::Off,
            model: None,
            encoder: None,
            pool: None,
            docs: None,
            queries: Arc::new(QueryCache::new(QUERY_CACHE)),
            lexical: Arc::default(),
        }
    }

    /// The stages a search runs now, for `status`.
    pub fn stages(&self) -> Vec<&'static str> {
        match self.state {
            StageState::Ready { .. } => vec!["lexical", "semantic", "near_duplicates"],
            _ => vec!["lexical"],
        }
    }

    /// A query's vector: from the cache, else one forward pass on the pool.
    async fn query_vector(&self, query: &str) -> Result<Arc<[f32]>, String> {
        if let Some(v) = self.queries.get(query) {
            return Ok(v);
        }
        let (Some(encoder), Some(pool)) = (self.encoder.clone(), self.pool.clone()) else {
            return Err("no model".into());
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let text = query.to_string();
        pool.spawn(move || {
            let v = encoder.encode(&[text.as_str()], TextKind::Query, QUERY_TOKENS);
            let _ = tx.send(v);
        });
        let v: Arc<[f32]> = match rx.await {
            Ok(Ok(mut v)) if !v.is_empty() => Arc::from(v.remove(0)),
            Ok(Ok(_)) => return Err("the model returned no vector".into()),
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("the embedding thread stopped".into()),
        };
        self.queries.put(query, v.clone());
        Ok(v)
    }
}

/// Searches `snapshot` with every stage the semantic view has ready for it:
/// lexical alone while there is no model or its vectors are incomplete.
pub async fn search(
    view: &ArcSwap<SemanticView>,
    snapshot: &Snapshot,
    query: &str,
    limit: usize,
    domain: Option<&str>,
) -> Outcome {
    let view = view.load_full();
    let lexical = view.lexical.for_snapshot(snapshot);
    let index = &lexical.index;
    let trimmed = query.trim();
    if let Some(docs) = view.docs.as_ref().filter(|d| d.fits(snapshot))
        && !trimmed.is_empty()
        && trimmed.len() <= MAX_QUERY_BYTES
    {
        match view.query_vector(trimmed).await {
            Ok(v) => {
                let stages = Stages::all(Semantic { docs, query: &v });
                return crate::search::search_with(index, snapshot, query, limit, domain, &stages);
            }
            Err(e) => tracing::warn!("semantic search stage skipped for one query: {e}"),
        }
    }
    crate::search::search(index, snapshot, query, limit, domain)
}

/// Embeds the remembered queries of search's learning that have no vector
/// (read from the file at start), on the model's pool, off every request.
fn embed_learned(encoder: &Arc<Encoder>, pool: &Arc<Pool>) {
    let queries = learned().without_vectors();
    if queries.is_empty() {
        return;
    }
    let encoder = encoder.clone();
    pool.spawn(move || {
        for chunk in queries.chunks(PROGRESS_EVERY) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            match encoder.encode(&refs, TextKind::Query, QUERY_TOKENS) {
                Ok(vs) => learned().set_vectors(
                    chunk
                        .iter()
                        .cloned()
                        .zip(vs.into_iter().map(Arc::from))
                        .collect(),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "learned queries not embedded");
                    return;
                }
            }
        }
    });
}

/// The Embedder actor. See the module docs.
pub struct Embedder {
    cache_dir: PathBuf,
    view: Arc<ArcSwap<SemanticView>>,
    settings: SearchSettings,
    model_dir: Option<PathBuf>,
    /// Bumped by every new setting: results of an older model are dropped.
    generation: u64,
    encoder: Option<Arc<Encoder>>,
    pool: Option<Arc<Pool>>,
    vectors: HashMap<TextKey, Arc<[f32]>>,
    latest: Option<Arc<Snapshot>>,
    /// The text keys of `latest`'s tools, in its order.
    keys: Vec<TextKey>,
    /// A batch of tools is being embedded.
    working: bool,
    /// Vectors were added since the cache file was written.
    unsaved: bool,
}

impl Embedder {
    pub fn new(cache_dir: &Path, view: Arc<ArcSwap<SemanticView>>) -> Embedder {
        Embedder {
            cache_dir: cache_dir.to_path_buf(),
            view,
            settings: SearchSettings::default(),
            model_dir: None,
            generation: 0,
            encoder: None,
            pool: None,
            vectors: HashMap::new(),
            latest: None,
            keys: Vec::new(),
            working: false,
            unsaved: false,
        }
    }

    fn publish(&self, state: StageState, docs: Option<Arc<DocVectors>>) {
        let old = self.view.load();
        self.view.store(Arc::new(SemanticView {
            state,
            model: self.settings.model.clone(),
            encoder: self.encoder.clone(),
            pool: self.pool.clone(),
            docs,
            // Query vectors stay good while the model does.
            queries: if self.encoder.is_some() && old.encoder.is_some() {
                old.queries.clone()
            } else {
                Arc::new(QueryCache::new(QUERY_CACHE))
            },
            lexical: old.lexical.clone(),
        }));
    }

    fn vectors_path(&self, encoder: &Encoder) -> PathBuf {
        self.cache_dir
            .join("embeddings")
            .join(format!("{}.bin", encoder.key()))
    }

    /// Embeds what the latest snapshot lacks, or publishes its vectors when
    /// nothing is missing.
    fn catch_up(&mut self, ctx: &mut Context<Self>) {
        let (Some(encoder), Some(pool), Some(snapshot)) =
            (self.encoder.clone(), self.pool.clone(), self.latest.clone())
        else {
            return;
        };
        let texts: Vec<(TextKey, String)> = snapshot
            .tools
            .iter()
            .map(|e| {
                let text = semantic::tool_text(e);
                (text_key(&text), text)
            })
            .collect();
        let total = texts.len();
        self.keys = texts.iter().map(|t| t.0).collect();
        let mut missing: Vec<(TextKey, String)> = Vec::new();
        for (key, text) in &texts {
            if !self.vectors.contains_key(key) && !missing.iter().any(|m| m.0 == *key) {
                missing.push((*key, text.clone()));
            }
        }
        // Shortest first, so each progress chunk holds texts of about one
        // length (the encoder pads a batch to its longest).
        missing.sort_by_key(|m| m.1.len());
        if missing.is_empty() {
            let mut data = Vec::with_capacity(total * encoder.dim());
            for (key, _) in &texts {
                data.extend_from_slice(&self.vectors[key]);
            }
            let docs = DocVectors {
                version: snapshot.version,
                dim: encoder.dim(),
                data,
            };
            self.publish(StageState::Ready { total }, Some(Arc::new(docs)));
            if self.unsaved {
                self.save(&texts);
            }
            embed_learned(&encoder, &pool);
            return;
        }
        let done = total
            - texts
                .iter()
                .filter(|t| missing.iter().any(|m| m.0 == t.0))
                .count();
        self.publish(StageState::Embedding { done, total }, None);
        if self.working {
            return;
        }
        self.working = true;
        let addr = ctx.address();
        let generation = self.generation;
        pool.spawn(move || {
            let started = std::time::Instant::now();
            let count = missing.len();
            for chunk in missing.chunks(PROGRESS_EVERY) {
                let refs: Vec<&str> = chunk.iter().map(|(_, t)| t.as_str()).collect();
                let result = encoder
                    .encode_many(&refs, TextKind::Passage, TOOL_TOKENS, &mut |_| {})
                    .map(|vs| chunk.iter().map(|(k, _)| *k).zip(vs).collect())
                    .map_err(|e| e.to_string());
                let failed = result.is_err();
                addr.do_send(Embedded { generation, result });
                if failed {
                    return;
                }
            }
            tracing::info!(
                tools = count,
                seconds = format!("{:.1}", started.elapsed().as_secs_f64()),
                "tools embedded"
            );
            addr.do_send(Embedded {
                generation,
                result: Ok(Vec::new()),
            });
        });
    }

    /// Writes the vectors of the latest snapshot's texts to the cache,
    /// off the actor's thread.
    fn save(&mut self, texts: &[(TextKey, String)]) {
        let Some(encoder) = &self.encoder else { return };
        self.unsaved = false;
        let path = self.vectors_path(encoder);
        let entries: Vec<(TextKey, Arc<[f32]>)> = texts
            .iter()
            .filter_map(|(k, _)| Some((*k, self.vectors.get(k)?.clone())))
            .collect();
        let dim = encoder.dim();
        tokio::task::spawn_blocking(move || {
            let bytes = encode_vectors(dim, &entries);
            if let Err(e) = atomic_file::write(&path, &bytes, Mode::Default) {
                tracing::warn!(
                    "cannot write the tool embeddings to {}: {e}; they are computed again at the next start",
                    path.display()
                );
            }
        });
    }
}

impl Actor for Embedder {
    type Context = Context<Self>;
}

/// The search settings in force (at start and on every reload), and where
/// their model is.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Configure {
    pub settings: SearchSettings,
    pub model_dir: Option<PathBuf>,
}

impl Handler<Configure> for Embedder {
    type Result = ();
    fn handle(&mut self, msg: Configure, ctx: &mut Context<Self>) {
        if msg.settings == self.settings && msg.model_dir == self.model_dir {
            return;
        }
        self.settings = msg.settings;
        self.model_dir = msg.model_dir;
        self.generation += 1;
        self.encoder = None;
        self.pool = None;
        self.vectors.clear();
        self.working = false;
        let Some(dir) = self.model_dir.clone() else {
            self.publish(StageState::Off, None);
            return;
        };
        let pool = match Pool::new(self.settings.threads) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                self.publish(StageState::Failed(e), None);
                return;
            }
        };
        self.publish(StageState::Loading, None);
        let addr = ctx.address();
        let generation = self.generation;
        let prefix = self.settings.query_prefix.clone();
        let cache_dir = self.cache_dir.clone();
        let on = pool.clone();
        on.spawn(move || {
            let started = std::time::Instant::now();
            let result = Encoder::load(&dir, prefix.as_deref())
                .map(|encoder| {
                    let path = cache_dir
                        .join("embeddings")
                        .join(format!("{}.bin", encoder.key()));
                    let vectors = read_vectors(&path, encoder.dim());
                    tracing::info!(
                        model = %dir.display(),
                        seconds = format!("{:.2}", started.elapsed().as_secs_f64()),
                        cached = vectors.len(),
                        "embedding model loaded"
                    );
                    (Arc::new(encoder), vectors, pool)
                })
                .map_err(|e| e.to_string());
            addr.do_send(Loaded { generation, result });
        });
    }
}

type LoadedModel = (Arc<Encoder>, HashMap<TextKey, Arc<[f32]>>, Arc<Pool>);

/// The model of `generation` is loaded (with the vectors cached for it),
/// or cannot be.
#[derive(Message)]
#[rtype(result = "()")]
struct Loaded {
    generation: u64,
    result: Result<LoadedModel, String>,
}

impl Handler<Loaded> for Embedder {
    type Result = ();
    fn handle(&mut self, msg: Loaded, ctx: &mut Context<Self>) {
        if msg.generation != self.generation {
            return;
        }
        match msg.result {
            Ok((encoder, vectors, pool)) => {
                self.encoder = Some(encoder);
                self.pool = Some(pool);
                self.vectors = vectors;
                match self.latest {
                    Some(_) => self.catch_up(ctx),
                    // No catalog yet: nothing to embed.
                    None => self.publish(StageState::Ready { total: 0 }, None),
                }
            }
            Err(e) => {
                tracing::error!("{e}; search stays lexical until search.model is fixed");
                self.publish(StageState::Failed(e), None);
            }
        }
    }
}

/// Vectors of a batch of tool texts (an empty batch: the job is done).
#[derive(Message)]
#[rtype(result = "()")]
struct Embedded {
    generation: u64,
    result: Result<Vec<(TextKey, Vec<f32>)>, String>,
}

impl Handler<Embedded> for Embedder {
    type Result = ();
    fn handle(&mut self, msg: Embedded, ctx: &mut Context<Self>) {
        if msg.generation != self.generation {
            return;
        }
        match msg.result {
            Ok(batch) if batch.is_empty() => {
                self.working = false;
                self.catch_up(ctx);
            }
            Ok(batch) => {
                self.unsaved = true;
                for (k, v) in batch {
                    self.vectors.insert(k, Arc::from(v));
                }
                let done = self
                    .keys
                    .iter()
                    .filter(|k| self.vectors.contains_key(*k))
                    .count();
                self.publish(
                    StageState::Embedding {
                        done,
                        total: self.keys.len(),
                    },
                    None,
                );
            }
            Err(e) => {
                self.working = false;
                let e = format!("search.model: embedding the tools failed: {e}");
                tracing::error!("{e}; search stays lexical");
                self.publish(StageState::Failed(e), None);
            }
        }
    }
}

impl Handler<CatalogChanged> for Embedder {
    type Result = ();
    fn handle(&mut self, msg: CatalogChanged, ctx: &mut Context<Self>) {
        let version = msg.snapshot.version;
        learned().retain_catalog(&msg.snapshot);
        self.latest = Some(msg.snapshot);
        self.catch_up(ctx);
        // The lexical index of a snapshot that has stood for a moment is
        // built ahead, on a blocking thread (bursts of publishes at start-up
        // build none), so the first `discover_tools` does not pay for it on
        // the sessions' thread.
        ctx.run_later(PREBUILD_AFTER, move |act, _| {
            let Some(snapshot) = act.latest.clone().filter(|s| s.version == version) else {
                return;
            };
            let lexical = act.view.load().lexical.clone();
            tokio::task::spawn_blocking(move || {
                lexical.for_snapshot(&snapshot);
            });
        });
    }
}

const MAGIC: &[u8; 8] = b"EVOVEC1\n";

/// The cache file: magic, dimension and count (u32 LE), then each text's
/// key (16 bytes) and vector (f32 LE).
pub fn encode_vectors(dim: usize, entries: &[(TextKey, Arc<[f32]>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + entries.len() * (16 + 4 * dim));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (k, v) in entries {
        out.extend_from_slice(k);
        for x in v.iter() {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

/// Reads a cache file written by [`encode_vectors`] for vectors of `dim`;
/// anything else (missing, torn, another format) reads as empty.
pub fn read_vectors(path: &Path, dim: usize) -> HashMap<TextKey, Arc<[f32]>> {
    let Ok(bytes) = std::fs::read(path) else {
        return HashMap::new();
    };
    decode_vectors(&bytes, dim).unwrap_or_else(|| {
        tracing::warn!(
            "{} is not a tool embeddings file of this model; the tools are embedded again",
            path.display()
        );
        HashMap::new()
    })
}

fn decode_vectors(bytes: &[u8], dim: usize) -> Option<HashMap<TextKey, Arc<[f32]>>> {
    let u32_at = |i: usize| -> Option<usize> {
        Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?) as usize)
    };
    if bytes.get(..8)? != MAGIC || u32_at(8)? != dim {
        return None;
    }
    let count = u32_at(12)?;
    let entry = 16 + 4 * dim;
    if bytes.len() != 16 + count.checked_mul(entry)? {
        return None;
    }
    let mut out = HashMap::with_capacity(count);
    for e in bytes[16..].chunks_exact(entry) {
        let key: TextKey = e[..16].try_into().ok()?;
        let v: Vec<f32> = e[16..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        out.insert(key, Arc::from(v));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vectors_file_reads_back_and_refuses_other_shapes() {
        let entries: Vec<(TextKey, Arc<[f32]>)> = vec![
            (text_key("a"), Arc::from(vec![1.0f32, -0.5])),
            (text_key("b"), Arc::from(vec![0.25f32, 2.0])),
        ];
        let bytes = encode_vectors(2, &entries);
        let back = decode_vectors(&bytes, 2).expect("reads back");
        assert_eq!(back.len(), 2);
        assert_eq!(&*back[&text_key("b")], &[0.25, 2.0]);
        assert!(decode_vectors(&bytes, 3).is_none(), "another dimension");
        assert!(
            decode_vectors(&bytes[..bytes.len() - 1], 2).is_none(),
            "torn"
        );
        assert!(decode_vectors(b"garbage", 2).is_none());
    }
}
