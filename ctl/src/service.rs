//! `evoctl service install|uninstall`: runs evod under the user's own service
//! manager (systemd user units on Linux, a launchd agent on macOS).
//!
//! The templates are the files in `systemd/`, embedded at build time, so the
//! units the repository ships and the ones evoctl writes cannot drift apart.
//! evoctl only writes and removes files; enabling or stopping the units is
//! one command it prints, because it changes the user's session.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use evo_proto::paths;
use serde_json::json;

use crate::output::pretty;
use crate::user_dirs::{config_home, home_dir};

const SERVICE_TEMPLATE: &str = include_str!("../../systemd/evod.service");
const SOCKET_TEMPLATE: &str = include_str!("../../systemd/evod.socket");
const PLIST_TEMPLATE: &str = include_str!("../../systemd/dev.evo.evod.plist");

/// The placeholders the templates carry, as they appear where they are
/// filled in; the templates' comments name them too and keep them as they are.
const EXEC_START: &str = "ExecStart=@EVOD@";
const LISTEN_STREAM: &str = "ListenStream=%t/evo/evod.sock";
const PLIST_EVOD: &str = "<string>@EVOD@</string>";
const PLIST_PATH: &str = "<string>@PATH@</string>";
const PLIST_HOME: &str = "<string>@HOME@/";

const LAUNCHD_LABEL: &str = "dev.evo.evod";
const SYSTEMD_ENABLE: &str =
    "systemctl --user daemon-reload && systemctl --user enable --now evod.socket";
/// After uninstall the unit files are gone, and `systemctl disable` refuses
/// units whose file does not exist; evoctl removes the enablement links
/// itself, so what is left is stopping what runs and forgetting the units.
const SYSTEMD_STOP: &str =
    "systemctl --user stop evod.socket evod.service; systemctl --user daemon-reload";

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Write the units for this user and print the command that enables them
    ///
    /// Linux: evod.socket and evod.service in $XDG_CONFIG_HOME/systemd/user
    /// (socket activation: systemd starts evod on the first connection).
    /// macOS: ~/Library/LaunchAgents/dev.evo.evod.plist. The units run the
    /// evod beside this evoctl, else the one on PATH.
    Install {
        /// Print the files and the command; write nothing
        #[arg(long)]
        print: bool,
    },
    /// Remove the units and print the command that stops the running ones
    Uninstall {
        /// Print what would be removed and the command; remove nothing
        #[arg(long)]
        print: bool,
    },
}

/// The service manager evod runs under on this OS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manager {
    Systemd,
    Launchd,
}

/// One file `install` writes.
#[derive(Debug)]
struct UnitFile {
    path: PathBuf,
    content: String,
}

/// `socket`: the `--socket` given to evoctl, absolute; the units then use it
/// instead of evod's default.
pub fn run(action: Action, socket: Option<&Path>, json: bool) -> Result<(), String> {
    let manager = if cfg!(target_os = "macos") {
        Manager::Launchd
    } else if cfg!(target_os = "linux") {
        Manager::Systemd
    } else {
        return Err(
            "evoctl service knows systemd (Linux) and launchd (macOS) only; elsewhere start \
             `evod` at logon yourself, or let `evoctl shim` start it on demand"
                .into(),
        );
    };
    match action {
        Action::Install { print } => install(manager, socket, print, json),
        Action::Uninstall { print } => uninstall(manager, print, json),
    }
}

fn install(manager: Manager, socket: Option<&Path>, print: bool, json: bool) -> Result<(), String> {
    let evod = find_evod()?;
    let files = unit_files(manager, &evod, socket)?;
    let command = match manager {
        Manager::Systemd => SYSTEMD_ENABLE.to_string(),
        Manager::Launchd => format!("launchctl load -w {}", shell_quote(&files[0].path)),
    };
    if !print {
        for f in &files {
            write_unit(f)?;
        }
    }
    if json {
        let files: Vec<_> = files
            .iter()
            .map(|f| json!({"path": f.path, "content": f.content}))
            .collect();
        let report = json!({"evod": evod, "files": files, "command": command, "written": !print});
        println!("{}", pretty(&report));
    } else if print {
        for f in &files {
            println!("# {}", f.path.display());
            println!("{}", f.content.trim_end());
            println!();
        }
        println!("# then enable it with:");
        println!("{command}");
    } else {
        for f in &files {
            println!("wrote {}", f.path.display());
        }
        println!("it runs {}", evod.display());
        if let Some(socket) = running_daemon(manager, socket) {
            println!(
                "an evod already listens on {} (started by hand or by the shim): stop it with `evoctl stop` first, the socket unit listens there",
                socket.display()
            );
        }
        println!("enable it with:\n  {command}");
    }
    Ok(())
}

fn uninstall(manager: Manager, print: bool, json: bool) -> Result<(), String> {
    let units: Vec<PathBuf> = unit_paths(manager)?
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    let mut targets = enablement_links(manager)?;
    targets.extend(units);
    let command = match manager {
        Manager::Systemd => SYSTEMD_STOP.to_string(),
        // By label: the plist it was loaded from is gone.
        Manager::Launchd => format!("launchctl remove {LAUNCHD_LABEL}"),
    };
    if !print {
        for p in &targets {
            fs::remove_file(p).map_err(|e| {
                format!(
                    "cannot remove {}: {e}; remove it by hand, then run `{command}`",
                    p.display()
                )
            })?;
        }
    }
    if json {
        let report = json!({"files": targets, "command": command, "removed": !print});
        println!("{}", pretty(&report));
        return Ok(());
    }
    if targets.is_empty() {
        println!("no evod units installed; nothing to remove");
        println!("if an evod still runs under the service manager, stop it with:\n  {command}");
        return Ok(());
    }
    let verb = if print { "would remove" } else { "removed" };
    for p in &targets {
        println!("{verb} {}", p.display());
    }
    println!("stop the running units with:\n  {command}");
    Ok(())
}

/// The socket of an evod answering where the socket unit will listen, if
/// one does: enabling the unit would take its socket from under it.
fn running_daemon(manager: Manager, explicit: Option<&Path>) -> Option<PathBuf> {
    if manager != Manager::Systemd {
        return None;
    }
    // The unit's default path (%t/evo/evod.sock) is evod's: EVO_SOCKET aside.
    let env = |k: &str| (k != "EVO_SOCKET").then(|| env::var_os(k)).flatten();
    let socket = paths::socket_path_with(explicit, &env);
    #[cfg(unix)]
    if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        return Some(socket);
    }
    None
}

/// The evod the units should run: the one beside this evoctl (they are
/// installed together), else the first on PATH. Absolute, because neither
/// systemd nor launchd searches the user's PATH.
fn find_evod() -> Result<PathBuf, String> {
    let name = format!("evod{}", env::consts::EXE_SUFFIX);
    let beside = env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(&name)));
    if let Some(p) = beside.filter(|p| p.is_file()) {
        return Ok(p);
    }
    let on_path = env::var_os("PATH")
        .iter()
        .flat_map(env::split_paths)
        .map(|dir| dir.join(&name))
        .find(|p| p.is_file())
        .and_then(|p| fs::canonicalize(p).ok());
    on_path.ok_or_else(|| {
        "cannot find evod beside this evoctl or on PATH: install it (`cargo install --path \
         daemon`) and run this again"
            .to_string()
    })
}

/// Where the unit files go, in the order they are listed.
fn unit_paths(manager: Manager) -> Result<Vec<PathBuf>, String> {
    Ok(match manager {
        Manager::Systemd => {
            let dir = systemd_user_dir()?;
            vec![dir.join("evod.socket"), dir.join("evod.service")]
        }
        Manager::Launchd => vec![
            home_dir()?
                .join("Library")
                .join("LaunchAgents")
                .join(format!("{LAUNCHD_LABEL}.plist")),
        ],
    })
}

fn systemd_user_dir() -> Result<PathBuf, String> {
    Ok(config_home()?.join("systemd").join("user"))
}

/// The unit files for `manager`, filled in for this user; with `socket`,
/// evod listens there instead of at its default.
fn unit_files(
    manager: Manager,
    evod: &Path,
    socket: Option<&Path>,
) -> Result<Vec<UnitFile>, String> {
    let evod = utf8(evod, "evod's path")?;
    let socket = socket.map(|s| utf8(s, "the socket path")).transpose()?;
    let paths = unit_paths(manager)?;
    let contents = match manager {
        Manager::Systemd => {
            let mut exec = format!("ExecStart={}", systemd_word(evod)?);
            let mut socket_unit = SOCKET_TEMPLATE.to_string();
            if let Some(socket) = socket {
                let word = systemd_word(socket)?;
                exec.push_str(&format!(" --socket {word}"));
                socket_unit = socket_unit.replace(
                    LISTEN_STREAM,
                    &format!("ListenStream={}", socket.replace('%', "%%")),
                );
            }
            vec![socket_unit, SERVICE_TEMPLATE.replace(EXEC_START, &exec)]
        }
        Manager::Launchd => {
            let home = home_dir()?;
            let path = env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
            vec![launchd_plist(
                evod,
                socket,
                utf8(&home, "your home directory")?,
                &path,
            )]
        }
    };
    Ok(paths
        .into_iter()
        .zip(contents)
        .map(|(path, content)| UnitFile { path, content })
        .collect())
}

fn launchd_plist(evod: &str, socket: Option<&str>, home: &str, path: &str) -> String {
    let mut program = format!("<string>{}</string>", xml_escape(evod));
    if let Some(socket) = socket {
        program.push_str(&format!(
            "\n\t\t<string>--socket</string>\n\t\t<string>{}</string>",
            xml_escape(socket)
        ));
    }
    PLIST_TEMPLATE
        .replace(PLIST_EVOD, &program)
        .replace(
            PLIST_PATH,
            &format!("<string>{}</string>", xml_escape(path)),
        )
        .replace(PLIST_HOME, &format!("<string>{}/", xml_escape(home)))
}

/// Links `systemctl enable` made for evod's units (`*.wants/evod.socket`…).
/// Removing them with the units leaves nothing dangling even if the user never
/// runs `systemctl disable`, which refuses once the unit files are gone.
fn enablement_links(manager: Manager) -> Result<Vec<PathBuf>, String> {
    if manager != Manager::Systemd {
        return Ok(Vec::new());
    }
    let dir = systemd_user_dir()?;
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut links = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.ends_with(".wants") || name.ends_with(".requires")) {
            continue;
        }
        for unit in ["evod.socket", "evod.service"] {
            let link = entry.path().join(unit);
            if link.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
                links.push(link);
            }
        }
    }
    links.sort();
    Ok(links)
}

fn write_unit(f: &UnitFile) -> Result<(), String> {
    if let Some(dir) = f.path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::write(&f.path, &f.content).map_err(|e| {
        format!(
            "cannot write {}: {e}; check that you own the directory, or use --print and copy the files by hand",
            f.path.display()
        )
    })
}

fn utf8<'a>(path: &'a Path, what: &str) -> Result<&'a str, String> {
    path.to_str().ok_or_else(|| {
        format!(
            "{what} ({}) is not valid UTF-8, which unit files cannot hold",
            path.display()
        )
    })
}

/// `path` as a word of a systemd `ExecStart=`: `%` starts a
/// specifier, `$` a variable and `\` an escape there, and a path with spaces
/// must be quoted.
fn systemd_word(path: &str) -> Result<String, String> {
    if path.chars().any(char::is_control) {
        return Err(format!(
            "{path:?} contains control characters; systemd cannot run it: use a plain path"
        ));
    }
    let escaped = path
        .replace('\\', "\\\\")
        .replace('%', "%%")
        .replace('$', "$$")
        .replace('"', "\\\"");
    Ok(if escaped.contains([' ', '\t', '\'', '"']) {
        format!("\"{escaped}\"")
    } else {
        escaped
    })
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// `path` as one word for a POSIX shell, for commands printed to paste.
fn shell_quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    let plain = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%~".contains(c));
    if plain && !s.is_empty() {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside comments, a filled-in unit has no placeholder left.
    fn settings(unit: &str) -> String {
        let unit = match unit.find("-->") {
            Some(end) => &unit[end..],
            None => unit,
        };
        let lines = unit.lines().filter(|l| !l.trim_start().starts_with('#'));
        lines.collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn every_placeholder_is_filled_in() {
        let home = home_dir().unwrap();
        let units = [
            unit_files(Manager::Systemd, Path::new("/x/evod"), None).unwrap(),
            unit_files(Manager::Launchd, Path::new("/x/evod"), None).unwrap(),
        ];
        for unit in units.iter().flatten() {
            let settings = settings(&unit.content);
            assert!(
                !settings.contains('@'),
                "{}:\n{settings}",
                unit.path.display()
            );
        }
        assert!(units[0][1].content.contains("\nExecStart=/x/evod\n"));
        let log = format!("<string>{}/Library/Logs/evod.log</string>", home.display());
        assert!(units[1][0].content.contains(&log));
    }

    #[test]
    fn an_explicit_socket_reaches_every_unit() {
        let socket = Some(Path::new("/run/a b/100%/evod.sock"));
        let systemd = unit_files(Manager::Systemd, Path::new("/x/evod"), socket).unwrap();
        assert!(
            systemd[0]
                .content
                .contains("\nListenStream=/run/a b/100%%/evod.sock\n"),
            "{}",
            systemd[0].content
        );
        assert!(
            systemd[1]
                .content
                .contains("\nExecStart=/x/evod --socket \"/run/a b/100%%/evod.sock\"\n"),
            "{}",
            systemd[1].content
        );
        let launchd = unit_files(Manager::Launchd, Path::new("/x/evod"), socket).unwrap();
        assert!(
            launchd[0].content.contains(
                "<string>/x/evod</string>\n\t\t<string>--socket</string>\n\t\t<string>/run/a b/100%/evod.sock</string>"
            ),
            "{}",
            launchd[0].content
        );
    }

    #[test]
    fn socket_unit_matches_evods_default_socket() {
        // evo_proto's default is $XDG_RUNTIME_DIR/evo/evod.sock; %t is that dir.
        assert!(SOCKET_TEMPLATE.contains(LISTEN_STREAM));
        assert!(SOCKET_TEMPLATE.contains("SocketMode=0600"));
        assert!(SOCKET_TEMPLATE.contains("DirectoryMode=0700"));
    }

    #[test]
    fn exec_start_words_are_escaped() {
        let cases = [
            ("/usr/bin/evod", "/usr/bin/evod"),
            ("/home/a b/evod", "\"/home/a b/evod\""),
            ("/opt/100%/evod", "/opt/100%%/evod"),
            ("/opt/$x/evod", "/opt/$$x/evod"),
        ];
        for (path, want) in cases {
            assert_eq!(systemd_word(path).unwrap(), want, "{path}");
        }
        assert!(systemd_word("/a\nb").is_err());
    }

    #[test]
    fn plist_values_are_xml_escaped() {
        let p = launchd_plist("/Apps/R&D/evod", None, "/Users/a<b", "/bin");
        assert!(p.contains("<string>/Apps/R&amp;D/evod</string>"));
        assert!(p.contains("<string>/Users/a&lt;b/Library/Logs/evod.log</string>"));
        assert!(p.contains("<key>Label</key>\n\t<string>dev.evo.evod</string>"));
    }

    #[test]
    fn shell_quoting_keeps_plain_paths_plain() {
        assert_eq!(shell_quote(Path::new("/a/b.plist")), "/a/b.plist");
        assert_eq!(shell_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
