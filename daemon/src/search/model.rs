//! A local sentence-embedding model: a Hugging Face sentence-transformers
//! directory of the BERT family (MiniLM, bge, gte, e5) run with candle on the
//! CPU. [`Encoder::load`] reads the directory the way sentence-transformers
//! does (pooling from `1_Pooling/config.json`, query and passage prompts
//! from `config_sentence_transformers.json`, the length limit from
//! `sentence_bert_config.json`); [`Encoder::encode`] turns texts into
//! L2-normalised vectors, so a dot product is their cosine similarity.
//!
//! Encoding is CPU work of milliseconds to seconds: callers run it on the
//! embedding pool (see `crate::search::embedder`), never on an actor's thread or the
//! MCP I/O worker.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

/// Files a model directory must have.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The longest input, in tokens, when the model's directory says nothing:
/// sentence-transformers' own default for BERT models.
const DEFAULT_MAX_TOKENS: usize = 256;

/// Texts per forward pass when encoding many: large enough to keep the
/// matrix products efficient, small enough that a query waiting behind a
/// batch waits a fraction of a second.
const BATCH: usize = 16;

/// Keeps candle's own element-wise thread pool to the calling thread.
///
/// candle 0.11 runs large element-wise operations (bias adds, GELU, softmax)
/// on a pool of its own, one thread per physical core unless
/// `CANDLE_NUM_THREADS` says otherwise, whose threads spin between
/// operations: outside [`Pool`], so a one-thread embedding pool kept a
/// second core busy too (`evo-bench --search --model`'s whole run: 74 s of
/// user CPU before, 64 s after, the embedding thread's own time unchanged).
/// With it at 1 that work runs on the thread that asked, inside [`Pool`]'s
/// bound. Call it before any thread starts (it edits the
/// environment); a `CANDLE_NUM_THREADS` already set is left alone.
pub fn bound_candle_threads() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        // SAFETY: called at the start of main, before any thread exists, so
        // nothing reads the environment concurrently.
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
}

/// The threads the model runs on: bounded (one by default), so embedding a
/// catalog never takes every core from the sessions and children.
pub struct Pool(rayon::ThreadPool);

impl Pool {
    pub fn new(threads: usize) -> Result<Pool, String> {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("evo-embed-{i}"))
            .build()
            .map(Pool)
            .map_err(|e| format!("cannot start the embedding threads: {e}"))
    }

    /// Runs `f` on the pool and waits for it (candle's matrix products
    /// split over the pool's threads only).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.0.install(f)
    }

    /// Runs `f` on the pool and returns at once.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        self.0.spawn(f)
    }
}

/// How a token sequence becomes one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The average of the tokens' vectors (MiniLM, gte, e5).
    Mean,
    /// The `[CLS]` token's vector (bge).
    Cls,
}

/// What a text is: a query is encoded with the query prompt, a tool's text
/// with the passage prompt (e5's `query: ` / `passage: `).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    Query,
    Passage,
}

/// Why a model directory cannot be used, in words for `evoctl status`.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(
        "search.model: {dir} is not a directory; set search.model to a sentence-embedding model's folder, or to a model id and run `evoctl model pull ID`"
    )]
    NotADirectory { dir: PathBuf },
    #[error(
        "search.model: {dir} has no {file}; a sentence-embedding model folder needs config.json, tokenizer.json and model.safetensors (`evoctl model pull ID` fetches all of them)"
    )]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error("search.model: {path}: {reason}")]
    BadFile { path: PathBuf, reason: String },
    #[error(
        "search.model: {dir} is a '{model_type}' model; evo runs BERT-family encoders (MiniLM, bge, gte, e5: model_type \"bert\")"
    )]
    Unsupported { dir: PathBuf, model_type: String },
    #[error("search.model: running the model failed: {0}")]
    Inference(String),
}

impl From<candle_core::Error> for ModelError {
    fn from(e: candle_core::Error) -> Self {
        ModelError::Inference(e.to_string())
    }
}

/// A loaded model. Immutable once loaded, so one can be shared by every
/// thread of the embedding pool.
pub struct Encoder {
    bert: BertModel,
    tokenizer: Tokenizer,
    pooling: Pooling,
    query_prefix: String,
    passage_prefix: String,
    max_tokens: usize,
    dim: usize,
    /// Identifies the model's weights, tokenizer, settings and prompts: the
    /// key of its vectors in the cache.
    key: String,
    dir: PathBuf,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("dir", &self.dir)
            .field("pooling", &self.pooling)
            .field("dim", &self.dim)
            .finish()
    }
}

/// Reads a small JSON file of the model directory, if it is there.
fn read_json(path: &Path) -> Result<Option<Value>, ModelError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ModelError::BadFile {
                path: path.into(),
                reason: e.to_string(),
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ModelError::BadFile {
            path: path.into(),
            reason: format!("not valid JSON: {e}"),
        })
}

/// The pooling module's folder, as `modules.json` names it (`1_Pooling`
/// when it says nothing).
fn pooling_dir(dir: &Path) -> Result<PathBuf, ModelError> {
    let modules = read_json(&dir.join("modules.json"))?;
    let named = modules.as_ref().and_then(Value::as_array).and_then(|m| {
        m.iter()
            .find(|m| {
                m.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.ends_with("Pooling"))
            })
            .and_then(|m| m.get("path").and_then(Value::as_str))
            .map(str::to_string)
    });
    Ok(dir.join(named.unwrap_or_else(|| "1_Pooling".into())))
}

impl Encoder {
    /// Loads the model in `dir`. `query_prefix` overrides the query prompt of
    /// the model's own config (`search.query_prefix`).
    pub fn load(dir: &Path, query_prefix: Option<&str>) -> Result<Encoder, ModelError> {
        if !dir.is_dir() {
            return Err(ModelError::NotADirectory { dir: dir.into() });
        }
        for file in REQUIRED_FILES {
            if !dir.join(file).is_file() {
                return Err(ModelError::MissingFile {
                    dir: dir.into(),
                    file,
                });
            }
        }
        let bad = |path: PathBuf| move |reason: String| ModelError::BadFile { path, reason };
        let config_path = dir.join("config.json");
        let config_json = read_json(&config_path)?.unwrap_or_default();
        let model_type = config_json
            .get("model_type")
            .and_then(Value::as_str)
            .unwrap_or("bert");
        if model_type != "bert" {
            return Err(ModelError::Unsupported {
                dir: dir.into(),
                model_type: model_type.into(),
            });
        }
        let config: BertConfig = serde_json::from_value(config_json.clone())
            .map_err(|e| bad(config_path.clone())(format!("not a BERT config: {e}")))?;

        let pooling_path = pooling_dir(dir)?.join("config.json");
        let pooling_json = read_json(&pooling_path)?;
        let flag = |k: &str| {
            pooling_json
                .as_ref()
                .and_then(|p| p.get(k))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let pooling = if flag("pooling_mode_cls_token") {
            Pooling::Cls
        } else {
            Pooling::Mean
        };

        let st_config = read_json(&dir.join("config_sentence_transformers.json"))?;
        let prompt = |names: &[&str]| -> String {
            let prompts = st_config.as_ref().and_then(|c| c.get("prompts"));
            names
                .iter()
                .find_map(|n| prompts.and_then(|p| p.get(*n)).and_then(Value::as_str))
                .unwrap_or("")
                .to_string()
        };
        let query_prefix = match query_prefix {
            Some(p) => p.to_string(),
            None => prompt(&["query"]),
        };
        let passage_prefix = prompt(&["document", "passage", "corpus"]);

        let max_tokens = read_json(&dir.join("sentence_bert_config.json"))?
            .and_then(|c| c.get("max_seq_length").and_then(Value::as_u64))
            .map_or(DEFAULT_MAX_TOKENS, |n| n as usize)
            .clamp(8, config.max_position_embeddings);

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| bad(tokenizer_path.clone())(e.to_string()))?;
        // Encoder::encode truncates and pads itself, whatever the file says.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| bad(tokenizer_path.clone())(e.to_string()))?;

        let weights_path = dir.join("model.safetensors");
        let bytes =
            std::fs::read(&weights_path).map_err(|e| bad(weights_path.clone())(e.to_string()))?;
        let mut hash = Sha256::new();
        hash.update(&bytes);
        hash.update(config_json.to_string());
        hash.update(std::fs::read(&tokenizer_path).unwrap_or_default());
        hash.update(format!(
            "{pooling:?}\0{query_prefix}\0{passage_prefix}\0{max_tokens}"
        ));
        let digest = hash.finalize();
        let key: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load_buffer(&bytes, &device)
            .map_err(|e| bad(weights_path.clone())(format!("not a safetensors file: {e}")))?;
        drop(bytes);
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let bert = BertModel::load(vb, &config).map_err(|e| {
            bad(weights_path.clone())(format!("weights do not fit config.json: {e}"))
        })?;
        Ok(Encoder {
            bert,
            tokenizer,
            pooling,
            query_prefix,
            passage_prefix,
            max_tokens,
            dim: config.hidden_size,
            key,
            dir: dir.into(),
        })
    }

    /// Length of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Identifies this model and its settings (16 hex digits).
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    pub fn query_prefix(&self) -> &str {
        &self.query_prefix
    }

    /// Token ids of `text` with its prompt, at most `max_tokens` (the
    /// model's limit when larger), `[SEP]` kept last.
    fn ids(&self, text: &str, kind: TextKind, max_tokens: usize) -> Result<Vec<u32>, ModelError> {
        let prefix = match kind {
            TextKind::Query => &self.query_prefix,
            TextKind::Passage => &self.passage_prefix,
        };
        let input = format!("{prefix}{text}");
        let encoding = self
            .tokenizer
            .encode(input.as_str(), true)
            .map_err(|e| ModelError::Inference(format!("tokenizer: {e}")))?;
        let mut ids = encoding.get_ids().to_vec();
        let max = max_tokens.min(self.max_tokens).max(2);
        if ids.len() > max {
            let last = ids[ids.len() - 1];
            ids.truncate(max - 1);
            ids.push(last);
        }
        Ok(ids)
    }

    /// The vectors of `texts` (L2-normalised), each cut to `max_tokens`
    /// tokens. One forward pass for all of them: callers batch texts of
    /// similar length, since every text is padded to the longest.
    pub fn encode(
        &self,
        texts: &[&str],
        kind: TextKind,
        max_tokens: usize,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.ids(t, kind, max_tokens))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        self.forward(&refs)
    }

    /// One forward pass over token sequences, padded to the longest: their
    /// pooled, L2-normalised vectors.
    fn forward(&self, ids: &[&[u32]]) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let len = ids.iter().map(|s| s.len()).max().unwrap_or(1).max(1);
        let mut flat = Vec::with_capacity(ids.len() * len);
        let mut mask = Vec::with_capacity(ids.len() * len);
        for seq in ids {
            flat.extend_from_slice(seq);
            flat.extend(std::iter::repeat_n(0, len - seq.len()));
            mask.extend(std::iter::repeat_n(1u32, seq.len()));
            mask.extend(std::iter::repeat_n(0u32, len - seq.len()));
        }
        let device = &self.bert.device;
        let shape = (ids.len(), len);
        let input = Tensor::from_vec(flat, shape, device)?;
        let types = input.zeros_like()?;
        let mask_t = Tensor::from_vec(mask, shape, device)?;
        let out = self.bert.forward(&input, &types, Some(&mask_t))?;
        // Pooling and normalising on the plain rows: a few hundred floats a
        // text, cheaper than more tensor passes.
        let dim = self.dim;
        let hidden = out.flatten_all()?.to_vec1::<f32>()?;
        let mut vectors = Vec::with_capacity(ids.len());
        for (i, seq) in ids.iter().enumerate() {
            let rows = &hidden[i * len * dim..(i + 1) * len * dim];
            let mut v = vec![0.0f32; dim];
            match self.pooling {
                Pooling::Cls => v.copy_from_slice(&rows[..dim]),
                Pooling::Mean => {
                    let n = seq.len().max(1);
                    for row in rows.chunks_exact(dim).take(n) {
                        for (a, x) in v.iter_mut().zip(row) {
                            *a += x;
                        }
                    }
                    let inv = 1.0 / n as f32;
                    v.iter_mut().for_each(|a| *a *= inv);
                }
            }
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|a| *a /= norm);
            vectors.push(v);
        }
        Ok(vectors)
    }

    /// The vectors of many texts, in their order: tokenised first, then
    /// batched by token count (texts of one batch have the same length or
    /// nearly, so almost nothing is padding), `progress` told after each
    /// batch how many are done.
    pub fn encode_many(
        &self,
        texts: &[&str],
        kind: TextKind,
        max_tokens: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.ids(t, kind, max_tokens))
            .collect::<Result<_, _>>()?;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        let mut done = 0;
        for batch in order.chunks(BATCH) {
            let these: Vec<&[u32]> = batch.iter().map(|&i| ids[i].as_slice()).collect();
            for (v, &i) in self.forward(&these)?.into_iter().zip(batch) {
                out[i] = v;
            }
            done += batch.len();
            progress(done);
        }
        Ok(out)
    }

    /// How many tokens `text` has as a passage, before any cut.
    pub fn token_count(&self, text: &str) -> usize {
        self.ids(text, TextKind::Passage, usize::MAX)
            .map_or(0, |ids| ids.len())
    }
}

/// The dot product of two vectors of one model (their cosine similarity).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight running sums, so the compiler can use vector instructions (one
    // sum would fix the order of the additions).
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model that tests run, when `tests/run` unpacked it
    /// (`EVO_TEST_MODEL`).
    pub(crate) fn test_model() -> Option<PathBuf> {
        match std::env::var_os("EVO_TEST_MODEL") {
            Some(p) => {
                let p = PathBuf::from(p);
                let p = if p.is_relative() {
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
                } else {
                    p
                };
                assert!(p.is_dir(), "EVO_TEST_MODEL={} is no directory", p.display());
                Some(p)
            }
            None => {
                println!("skipped: EVO_TEST_MODEL is unset (tests/run unpacks all-MiniLM-L6-v2)");
                None
            }
        }
    }

    /// The similarities all-MiniLM-L6-v2's model card publishes, which a
    /// numpy reference encoder reproduced to four digits: "A man is eating
    /// pasta." is 0.7035 like "A man is eating food." and 0.1889 like "A man
    /// is riding a horse.".
    #[test]
    fn encoder_reproduces_the_model_cards_similarities() {
        let Some(dir) = test_model() else { return };
        let encoder = Encoder::load(&dir, None).expect("load the test model");
        assert_eq!(encoder.dim(), 384);
        assert_eq!(encoder.pooling(), Pooling::Mean);
        let texts = [
            "A man is eating food.",
            "A man is eating pasta.",
            "A man is riding a horse.",
        ];
        let v = encoder.encode(&texts, TextKind::Passage, 256).unwrap();
        let pasta = dot(&v[0], &v[1]);
        let horse = dot(&v[1], &v[2]);
        assert!((pasta - 0.7035).abs() < 0.01, "food/pasta {pasta}");
        assert!((horse - 0.1889).abs() < 0.01, "pasta/horse {horse}");
        // Batched or alone, padding changes nothing.
        let alone = encoder
            .encode(&texts[1..2], TextKind::Passage, 256)
            .unwrap();
        assert!((dot(&alone[0], &v[1]) - 1.0).abs() < 1e-4);
        assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-4);
    }

    #[test]
    fn a_folder_without_its_tokenizer_is_named() {
        let dir = std::env::temp_dir().join(format!("evo-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), "{}").unwrap();
        std::fs::write(dir.join("model.safetensors"), "").unwrap();
        let err = Encoder::load(&dir, None).unwrap_err().to_string();
        assert!(err.contains("has no tokenizer.json"), "{err}");
        let err = Encoder::load(&dir.join("nope"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a directory"), "{err}");
        std::fs::write(dir.join("tokenizer.json"), "{}").unwrap();
        std::fs::write(dir.join("config.json"), r#"{"model_type": "t5"}"#).unwrap();
        let err = Encoder::load(&dir, None).unwrap_err().to_string();
        assert!(err.contains("'t5' model"), "{err}");
        std::fs::write(dir.join("config.json"), r#"{"model_type": "bert"}"#).unwrap();
        let err = Encoder::load(&dir, None).unwrap_err().to_string();
        assert!(err.contains("config.json: not a BERT config"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
