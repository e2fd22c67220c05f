//! Where the person's files are: the home directory and the config
//! directory, by the rules evod uses too.

use std::env;
use std::path::PathBuf;

/// The user's home directory: `$HOME`, which tests and sandboxes point
/// elsewhere, else what the OS says.
pub fn home_dir() -> Result<PathBuf, String> {
    env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(env::home_dir)
        .ok_or_else(|| "cannot tell your home directory: set HOME".to_string())
}

/// `$XDG_CONFIG_HOME`, else `~/.config`: the rule evod uses to find its
/// config, so `evoctl import` writes the file evod reads.
pub fn config_home() -> Result<PathBuf, String> {
    match env::var_os("XDG_CONFIG_HOME").filter(|p| !p.is_empty()) {
        Some(p) => Ok(PathBuf::from(p)),
        None => Ok(home_dir()?.join(".config")),
    }
}
