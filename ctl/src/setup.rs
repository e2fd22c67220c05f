//! `evoctl setup CLIENT [--move]`: evo's entry in an MCP client's config,
//! and with `--move` the client's other servers moved into evo's config
//! (through [`crate::import`]), each file edited as a [`JsonFile`].
//!
//! `evoctl setup` and `evoctl service install` write an explicit `--socket` (made absolute) into
//! the client's entry and the units.
//!
//! `setup --move` moves a server out of the client only when evo's config then runs it: written
//! now, or already there exactly as import writes it (a move cut short before the client was
//! written finishes on the next run). A server evo's config holds a different entry for, and one
//! evo cannot serve yet (copied disabled), stay in the client, each with its reason. evo's config
//! is written before the client's, so a server is never in neither file. Other entries that run
//! `evoctl shim` are left alone (and noted), as plain `setup` does.

use std::env;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde::Serialize;
use serde_json::{Value, json};

use crate::client_config::{JsonFile, previous_version, runs_evo_shim, same_file};
use crate::import::{EvoConfig, Offer, Skipped, pick_up, print_disabled, print_sandbox_hint};
use crate::output::pretty;
use crate::user_dirs::{config_home, home_dir};

/// The MCP clients `evoctl setup` knows the config file of.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// Claude Desktop's claude_desktop_config.json
    ClaudeDesktop,
    /// Claude Code's user scope (~/.claude.json)
    ClaudeCode,
    /// Cursor's global ~/.cursor/mcp.json
    Cursor,
    /// VS Code's user mcp.json
    Vscode,
}

impl Client {
    fn id(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
        }
    }

    /// The top-level object that holds the client's servers by id.
    fn servers_key(self) -> &'static str {
        match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// The entry that starts evo's shim, in the client's dialect; with the
    /// `--socket` evoctl was given, when there is one.
    fn entry(self, evoctl: &str, socket: Option<&Path>) -> Value {
        let mut args = vec![Value::from("shim")];
        if let Some(socket) = socket {
            args.push("--socket".into());
            args.push(socket.to_string_lossy().into());
        }
        match self {
            Client::Vscode => json!({"type": "stdio", "command": evoctl, "args": args}),
            _ => json!({"command": evoctl, "args": args}),
        }
    }

    fn default_path(self) -> Result<PathBuf, String> {
        Ok(match self {
            Client::ClaudeDesktop => app_config_dir()?
                .join("Claude")
                .join("claude_desktop_config.json"),
            Client::Vscode => app_config_dir()?.join("Code").join("User").join("mcp.json"),
            Client::Cursor => home_dir()?.join(".cursor").join("mcp.json"),
            Client::ClaudeCode => home_dir()?.join(".claude.json"),
        })
    }

    /// What the person does next for the client to connect.
    fn next_step(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "restart Claude Desktop to connect it to evo",
            Client::ClaudeCode => {
                "new Claude Code sessions connect to evo (`claude mcp list` shows it)"
            }
            Client::Cursor => "restart Cursor (or toggle evo in its MCP settings) to connect it",
            Client::Vscode => "start evo from VS Code's `MCP: List Servers` command",
        }
    }
}

/// Where Electron apps (Claude Desktop, VS Code) keep their settings.
fn app_config_dir() -> Result<PathBuf, String> {
    if cfg!(target_os = "macos") {
        Ok(home_dir()?.join("Library").join("Application Support"))
    } else if cfg!(windows) {
        env::var_os("APPDATA")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| "APPDATA is not set; pass the client's config with --file".into())
    } else {
        config_home()
    }
}

/// The absolute path of this evoctl, for the `command` of a client entry:
/// clients do not all search PATH, and GUI apps rarely share the shell's.
fn this_evoctl() -> Result<String, String> {
    let exe = env::current_exe().map_err(|e| {
        format!("cannot tell where this evoctl is ({e}); run `evoctl setup --print` and fill in its path by hand")
    })?;
    exe.to_str().map(str::to_string).ok_or_else(|| {
        format!(
            "this evoctl's path ({}) is not valid UTF-8, which JSON cannot hold; move evoctl to a plain path",
            exe.display()
        )
    })
}

/// What `setup` did to the `evo` entry.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum SetupAction {
    Added,
    Updated,
    Unchanged,
}

/// What `evoctl setup` is asked to do besides writing the evo entry.
pub struct SetupOptions<'a> {
    /// Show the entry; write nothing.
    pub print: bool,
    /// The client's config file instead of its usual one.
    pub file: Option<&'a Path>,
    /// The socket to write into the entry (an explicit `--socket`).
    pub socket: Option<&'a Path>,
    /// `--move`: the client's own servers go to evo's config.
    pub move_servers: bool,
    /// evo's config for `--move` instead of its usual one.
    pub config: Option<&'a Path>,
    /// The socket a running evod listens on, to reload it after `--move`.
    pub daemon: &'a Path,
    pub json: bool,
}

/// `evoctl setup CLIENT [--print] [--file PATH] [--move [--config PATH]]`.
pub fn setup(client: Client, opts: SetupOptions<'_>) -> Result<(), String> {
    let json = opts.json;
    let path = match opts.file {
        Some(p) => p.to_path_buf(),
        None => client.default_path()?,
    };
    let entry = client.entry(&this_evoctl()?, opts.socket);
    let key = client.servers_key();
    let snippet = json!({ key: { "evo": entry } });
    if opts.print {
        if json {
            let report =
                json!({"client": client.id(), "path": path, "snippet": snippet, "written": false});
            println!("{}", pretty(&report));
        } else {
            println!("# add to {}:", path.display());
            println!("{}", pretty(&snippet));
        }
        return Ok(());
    }

    let by_hand = format!(
        "add evo by hand; it goes under \"{key}\":\n{}",
        pretty(&snippet)
    );
    let mut file = JsonFile::load(&path, &by_hand)?;
    let servers: Vec<(String, Value)> = file
        .servers(key, &by_hand)?
        .into_iter()
        .flatten()
        .map(|(id, v)| (id.clone(), v.clone()))
        .collect();
    let doubles: Vec<String> = servers
        .iter()
        .filter(|(id, v)| id.as_str() != "evo" && runs_evo_shim(v))
        .map(|(id, _)| id.clone())
        .collect();
    let action = match servers.iter().find(|(id, _)| id == "evo") {
        Some((_, old)) if *old == entry => SetupAction::Unchanged,
        Some(_) => SetupAction::Updated,
        None => SetupAction::Added,
    };
    let moving = match opts.move_servers {
        true => Some(move_servers(&file, &servers, opts.config)?),
        false => None,
    };
    // evo's config first: a server is in both files for a moment, never in
    // neither. A second run finds it in evo's config, the same, and finishes
    // the move.
    let evo_backup = match &moving {
        Some(m) => m.evo.save()?,
        None => None,
    };
    let moved: &[String] = moving.as_ref().map_or(&[], |m| &m.moved);
    for id in moved {
        file.remove_server(key, id, &by_hand)?;
    }
    if action != SetupAction::Unchanged {
        file.set_server(key, "evo", entry.clone(), &by_hand)?;
    }
    let backup = match action != SetupAction::Unchanged || !moved.is_empty() {
        true => file.save()?,
        false => None,
    };
    let pickup = moving
        .as_ref()
        .filter(|m| !m.evo.added.is_empty())
        .map(|m| pick_up(opts.daemon, &m.evo));
    let path = &file.path;

    if json {
        let mut report = json!({
            "client": client.id(),
            "path": path,
            "action": action,
            "entry": entry,
            "backup": backup,
            "also_evo": doubles,
        });
        if let Some(m) = &moving {
            report["move"] = json!({
                "config": m.evo.path(),
                "moved": m.moved,
                "kept": m.kept,
                "added": m.evo.added,
                "disabled": m.evo.disabled,
                "backup": evo_backup,
                "evod": pickup,
            });
        }
        println!("{}", pretty(&report));
        return Ok(());
    }
    let kept = previous_version(backup.as_deref());
    if let Some(m) = &moving {
        print_move(m, path, evo_backup.as_deref());
    }
    match action {
        SetupAction::Unchanged if moved.is_empty() => {
            println!(
                "evo is already set up in {}; nothing changed",
                path.display()
            )
        }
        SetupAction::Unchanged => println!("evo stays set up in {}{kept}", path.display()),
        SetupAction::Updated => {
            println!("updated evo in {}{kept}", path.display());
            println!("{}", client.next_step());
        }
        SetupAction::Added => {
            println!("added evo to {}{kept}", path.display());
            println!("{}", client.next_step());
        }
    }
    for id in doubles {
        println!(
            "note: \"{id}\" in {} also runs `evoctl shim`; remove one of them, or the client connects to evo twice",
            path.display()
        );
    }
    if let Some(pickup) = &pickup {
        pickup.print();
    }
    Ok(())
}

/// The client's servers on their way to evo's config (`setup --move`).
struct Move {
    evo: EvoConfig,
    /// Taken out of the client's file: evo's config has them, enabled.
    moved: Vec<String>,
    /// Left in the client's file, and why.
    kept: Vec<Skipped>,
}

/// Offers each of the client's servers (but evo's own entries) to evo's
/// config. A server is taken out of the client only when evo's config then
/// holds it and can run it: one evo cannot serve yet is copied disabled and
/// stays in the client, where it works; one whose id evo's config gives to
/// another server stays in the client untouched. Nothing is lost, and a
/// second run changes nothing.
fn move_servers(
    client: &JsonFile,
    servers: &[(String, Value)],
    config: Option<&Path>,
) -> Result<Move, String> {
    let mut evo = EvoConfig::load(config)?;
    if same_file(&client.path, evo.path()) {
        return Err(format!(
            "{} is evo's own config: moving its servers into itself would point evo at evo; pass the client's file with --file",
            client.path.display()
        ));
    }
    let shown = evo.path().display().to_string();
    let mut moved = Vec::new();
    let mut kept = Vec::new();
    for (id, entry) in servers {
        if id == "evo" || runs_evo_shim(entry) {
            continue;
        }
        let reason = match evo.offer(id, entry)? {
            Offer::Added { disabled: None } | Offer::Present { disabled: None } => {
                moved.push(id.clone());
                None
            }
            Offer::Added {
                disabled: Some(why),
            } => Some(format!(
                "{why}; copied to {shown} disabled, and kept here, where it works"
            )),
            Offer::Present {
                disabled: Some(why),
            } => Some(format!("{why}; {shown} has it, disabled")),
            Offer::Conflict => Some(format!(
                "{shown} already has a different server \"{id}\"; rename one of them and run this again to move it"
            )),
            Offer::NotAServer => Some("not a server object".to_string()),
        };
        if let Some(reason) = reason {
            kept.push(Skipped {
                id: id.clone(),
                reason,
            });
        }
    }
    Ok(Move { evo, moved, kept })
}

fn print_move(m: &Move, client: &Path, evo_backup: Option<&Path>) {
    let config = m.evo.path().display();
    let kept_backup = previous_version(evo_backup);
    if !m.moved.is_empty() {
        println!("moved to {config}: {}{kept_backup}", m.moved.join(", "));
        print_sandbox_hint(&m.moved);
    } else {
        println!("nothing to move from {}", client.display());
        if evo_backup.is_some() {
            println!("{config} changed{kept_backup}");
        }
    }
    print_disabled(&m.evo.disabled);
    for k in &m.kept {
        println!("kept in {}: {}: {}", client.display(), k.id, k.reason);
    }
}
