//! What a session's agent is told when evo could not read its config: the
//! Supervisor sets and clears it, each session reads it where an answer
//! would otherwise look empty or wrong for no visible reason (the
//! instructions, a search with no match, an unknown tool).

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwapOption;

/// See the module docs; cheap to clone, shared by the Supervisor and every
/// session.
#[derive(Clone, Default)]
pub struct ConfigTrouble(Arc<ArcSwapOption<String>>);

impl ConfigTrouble {
    /// The config at `path` could not be read (`error`, which names the
    /// place); `running` says whether an earlier version stays in force.
    pub fn set(&self, path: &Path, error: &str, running: bool) {
        let consequence = if running {
            "the servers of the last version that loaded stay available"
        } else {
            "none of its servers is available until the file is fixed"
        };
        self.0.store(Some(Arc::new(format!(
            "Note: evo could not read its config file {} ({error}); {consequence}. `evoctl status` has the details.",
            path.display()
        ))));
    }

    /// The config loaded.
    pub fn clear(&self) {
        self.0.store(None);
    }

    /// The sentence to add, when there is trouble.
    pub fn notice(&self) -> Option<Arc<String>> {
        self.0.load_full()
    }

    /// `text`, then the notice on a paragraph of its own when there is one.
    pub fn appended(&self, mut text: String) -> String {
        if let Some(notice) = self.notice() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push('\n');
            text.push_str(&notice);
        }
        text
    }
}
