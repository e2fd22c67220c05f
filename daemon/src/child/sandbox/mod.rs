//! Confining a stdio child (`sandbox` in its entry): what its process tree may read, write
//! and reach, and the preparation of that confinement before the child is spawned.
//!
//! How (Linux): the kernel's own mechanisms, applied by the child itself between fork and
//! exec (the spawn's `pre_exec` hook), so every process it starts inherits them and none of
//! them can lift them:
//!
//! - Files: a Landlock ruleset. Every file-system access right the kernel knows (up to
//!   Landlock ABI 5's) is handled; the ruleset grants read+execute below the `read` paths and
//!   what the command needs (the system's libraries and programs, a few files of `/etc`, the
//!   resolved command, its interpreter and their install prefixes, npm's or uv's caches when
//!   the command is one of theirs), and everything below the `write` paths and a private temp
//!   dir (`TMPDIR`). Landlock checks the real location of a file, so no symlink, bind path or
//!   `/proc/PID/root` walks around it, and (since it also scopes ptrace) a confined process
//!   cannot read another process's `/proc/PID/environ` or memory although `/proc` is readable.
//! - Network (`"network": false`): a new, empty network namespace (only a `lo` that is down:
//!   no TCP, UDP or abstract Unix socket reaches anything, loopback included), preceded by a
//!   new user namespace when evod is not root (mapping the user to itself); and, where the
//!   kernel has them (ABI 4, 6), Landlock's TCP bind/connect rules with nothing allowed and
//!   its abstract-socket scope, so the refusal holds even inside the namespace.
//! - Signals (ABI 6): a confined process cannot signal processes outside its sandbox (evod,
//!   other servers).
//! - Root: a server evod runs as root loses the capabilities that would step around the rest
//!   (CAP_SYS_PTRACE would read other processes' `/proc/PID/environ` past Landlock's scope,
//!   CAP_SYS_ADMIN `setns` back into the host's network, and the like) from its bounding set;
//!   as a user there are none to lose.
//!
//! Why not bubblewrap: it is one more program to install (Debian's `bubblewrap`, often absent,
//! and not here), and a setuid build of it is a risk of its own; Landlock and namespaces need
//! nothing but the kernel, cost a few syscalls per start, and keep the child's own command
//! line, pid and process group as evod manages them. Why raw syscalls, not the `landlock`
//! crate: what runs after fork must not allocate, and the few calls (create, add rule,
//! restrict) fit in `linux.rs` with their structs.
//!
//! What is prepared in evod, before fork (so a problem is a clear error, not an errno from the
//! child): the kernel's Landlock ABI, the ruleset with every path opened (a `read`/`write`
//! path that does not exist fails the start: "create it, or remove it from the sandbox"), the
//! temp dir and the uid/gid map lines. What the child does (async-signal-safe: syscalls only):
//! unshare the namespaces, write its maps, drop root's capabilities, set no_new_privs,
//! restrict itself. Which of those
//! failed is written to a shared page, so evod's error names the step and what to do. A sandbox
//! that cannot be set up never starts the server unconfined.
//!
//! Not confined by this (documented): connecting to a Unix socket *file* (Landlock ABI 7 has no
//! right for it), reading `/proc/PID/cmdline` of other processes, the CPU and memory used.
//! Elsewhere than Linux nothing is confined, and `evoctl status` says so.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod plan;

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::SandboxSpec;

#[cfg(target_os = "linux")]
pub use linux::Confinement;

/// Whether this build enforces sandboxes (Linux only).
pub const ENFORCED: bool = cfg!(target_os = "linux");

/// A confinement ready to be applied in the child, and the variables to add to its
/// environment (`TMPDIR`, its private temp dir).
pub struct Prepared {
    #[cfg(target_os = "linux")]
    pub confinement: Confinement,
    pub env: Vec<(String, String)>,
}

/// Prepares the sandbox of server `server` for `command` (resolved with the child's `env`
/// `PATH`, relative to `cwd`). The error says what could not be set up and what to do.
pub fn prepare(
    server: &str,
    spec: &SandboxSpec,
    command: &str,
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<Prepared, String> {
    #[cfg(target_os = "linux")]
    {
        let var = |name: &str| {
            env.get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
                .filter(|v| !v.is_empty())
        };
        let temp = plan::private_temp_dir(server)?;
        let plan = plan::Plan::of(spec, command, &var, cwd, &temp);
        let confinement = Confinement::prepare(&plan, !spec.network)?;
        let env = vec![("TMPDIR".to_owned(), temp.display().to_string())];
        Ok(Prepared { confinement, env })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (spec, command, env, cwd);
        tracing::warn!(server = %server, "sandbox not enforced: evod confines servers only on Linux");
        Ok(Prepared { env: Vec::new() })
    }
}
