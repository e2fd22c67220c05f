//! `evoctl`: evo's control CLI, and `evoctl shim`, the stdio entry every MCP
//! client launches.
//!
//! `evoctl read` prints text contents and describes blobs (MIME type, size); `--out FILE` writes
//! text as UTF-8 and blobs decoded.
//!
//! evoctl dies by SIGPIPE when its reader goes away (`| head`), as Unix tools do; the shim handles
//! its pipes itself.

mod add;
mod client_config;
mod connection;
mod exit_codes;
mod import;
mod jsonedit;
mod model;
mod output;
mod registry;
mod run;
mod service;
mod setup;
mod shim;
mod user_dirs;

use std::env;
use std::io::{self, IsTerminal, Write};
use std::path::{self, Path, PathBuf};
use std::process::{self, ExitCode};
use std::time::{Duration, Instant};

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use evo_proto::ctl::ServerState;
use evo_proto::{CtlRequest, Reply, paths};
use serde_json::{Value, json};
use tokio::runtime::{Builder, Runtime};
use tokio::time::sleep;

use connection::{exchange, status};
use exit_codes::{EXIT_NO_DAEMON, EXIT_REFUSED};

/// evoctl: control the evo daemon, and connect MCP clients to it.
///
/// Point an MCP client at evo with {"command": "evoctl", "args": ["shim"]}.
#[derive(Parser, Debug)]
#[command(name = "evoctl", version, propagate_version = true)]
struct Cli {
    /// Control socket [default: $EVO_SOCKET, else $XDG_RUNTIME_DIR/evo/evod.sock, else /tmp/evo-$UID/evod.sock]
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Print machine-readable JSON instead of tables
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Stdio MCP entry for clients: connects to evod (starting it if needed) and pipes bytes
    Shim {
        /// Discovery mode of this session [default: evod --mode, else $EVO_DISCOVERY_MODE here, else evod's]
        #[arg(long, value_parser = ["legacy", "dynamic"])]
        mode: Option<String>,
        /// Name this session so its activations persist across reconnects
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
        /// List this profile's tools in the session [default: $EVO_PROFILE]
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// Fail (exit 3) instead of starting evod when none is running
        #[arg(long)]
        no_autostart: bool,
    },
    /// Daemon, servers, sessions and config health
    Status,
    /// Tools visible to a session (default: the most recently active one)
    List {
        /// Session id or name
        #[arg(long)]
        session: Option<String>,
        /// The whole catalog instead of one session's view
        #[arg(long, conflicts_with = "session")]
        all: bool,
    },
    /// Search the catalog; `search forget [TOOL]` drops what search learned
    /// from use (for one tool, or all)
    Search {
        /// What you want to do, in plain words
        #[arg(required = true)]
        query: Vec<String>,
        #[arg(long, short = 'n')]
        limit: Option<usize>,
        /// Show each stage's score: lexical, semantic (cosine), fused, and
        /// which result a near-duplicate was pulled up next to
        #[arg(long)]
        explain: bool,
    },
    /// Full schema and an example call of one tool
    Describe { tool: String },
    /// Make tools visible in a live session, or add them to a profile
    Activate {
        #[arg(required = true)]
        tools: Vec<String>,
        /// Session id or name [default: the most recently active]
        #[arg(long)]
        session: Option<String>,
        /// Add the tools to this profile, for every session using it (saved)
        #[arg(long, value_name = "NAME", conflicts_with = "session")]
        profile: Option<String>,
    },
    /// Hide activated tools in a live session, or take them out of a profile
    Deactivate {
        #[arg(required = true)]
        tools: Vec<String>,
        /// Session id or name [default: the most recently active]
        #[arg(long)]
        session: Option<String>,
        /// Take the tools out of this profile, for every session using it (saved)
        #[arg(long, value_name = "NAME", conflicts_with = "session")]
        profile: Option<String>,
    },
    /// Live sessions
    Sessions,
    /// Profiles with their tools and the sessions using each
    Profiles,
    /// Re-read the config and permissions files now
    Reload,
    /// Re-discover a server's tools now (all servers without SERVER)
    Refresh { server: Option<String> },
    /// Approve a held call
    Approve { id: String },
    /// Refuse a held call
    Deny { id: String },
    /// Calls waiting for approval
    Approvals,
    /// API tokens for the HTTP endpoint (serve.http)
    ///
    /// The tokens file keeps each token's name, role, profile, creation
    /// time and SHA-256, never the token: `create` prints it once.
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Show how quarantined tools changed: pinned and current definitions
    ///
    /// A unified diff of each tool's pinned definition against the one its
    /// server lists now (canonical JSON: name, title, description,
    /// inputSchema, outputSchema, annotations). `--json` has both whole.
    /// Read the new text before `evoctl trust`: it came from the server.
    Diff {
        server: String,
        /// Only this tool (exposed or upstream name)
        tool: Option<String>,
    },
    /// Accept the new definitions of a server's quarantined tools
    ///
    /// They become the pins, and the tools are listed again at once
    /// (sessions are told their tool lists changed).
    Trust {
        server: String,
        /// Only this tool (exposed or upstream name)
        tool: Option<String>,
    },
    /// Resources and resource templates, with the server that owns each
    Resources {
        /// Only this server's
        #[arg(long)]
        server: Option<String>,
    },
    /// Prompts, under their exposed names, with their arguments
    Prompts,
    /// Read a resource through the server that owns it
    Read {
        uri: String,
        /// Write its contents to FILE (the way to save a binary resource)
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Markdown reference of every tool
    Docs {
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Open the web console: prints its address and opens a browser
    ///
    /// With `serve.http` the console is under /ui on the HTTP listener;
    /// without it evod starts a listener on a free loopback port just for
    /// the console. The address carries a token that signs one browser in,
    /// once (it becomes a cookie); run `evoctl ui` again for another.
    Ui {
        /// Print the address only; do not start a browser
        #[arg(long)]
        no_browser: bool,
    },
    /// Stop the daemon and its servers
    Stop,
    /// Run evod as a systemd user service (Linux) or launchd agent (macOS)
    Service {
        #[command(subcommand)]
        action: service::Action,
    },
    /// Add evo to an MCP client's config file
    ///
    /// Adds `{"command": "<this evoctl>", "args": ["shim"]}` as the `evo` server
    /// (with `--socket PATH` when evoctl was given one),
    /// keeping everything else in the file; the previous file is kept as
    /// FILE.bak. A file that is not valid JSON is never overwritten.
    ///
    /// With --move, the client's own servers move into evo's config (as
    /// `evoctl import` copies them, evo's config kept as its .bak) and the
    /// client keeps only evo, so it reaches them through evo. A server stays
    /// in the client, saying why, when evo's config has another server under
    /// its id, or when evo cannot serve it yet (a WebSocket server, a VS Code
    /// ${input:…} prompt): that one is copied to evo's config disabled. A
    /// running evod reloads and the outcome of each server is shown. Running
    /// it again changes nothing.
    Setup {
        client: setup::Client,
        /// Show the entry and the file it belongs in; change nothing
        #[arg(long, conflicts_with = "move_servers")]
        print: bool,
        /// The client's config file [default: where the client keeps it]
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
        /// Move the client's servers into evo's config too
        #[arg(long = "move")]
        move_servers: bool,
        /// evo's config, for --move [default: $EVO_CONFIG, else $XDG_CONFIG_HOME/evo/mcp.config.json]
        #[arg(long, value_name = "PATH", requires = "move_servers")]
        config: Option<PathBuf>,
    },
    /// Copy the servers of an MCP client's config file into evo's config
    ///
    /// Reads `mcpServers` and `servers` from FILE; ids evo already has and
    /// entries that run `evoctl shim` (evo itself) are skipped. Servers evo
    /// cannot serve yet (a WebSocket server, a VS Code ${input:…} prompt) are written
    /// with "disabled": true and a "description" saying why and what to do.
    /// A running evod reloads at once and each server's outcome is shown
    /// (applied, or failed with the error); without one, the file is read
    /// when evod starts.
    Import {
        /// A client config file, e.g. ~/.cursor/mcp.json
        file: PathBuf,
        /// evo's config [default: $EVO_CONFIG, else $XDG_CONFIG_HOME/evo/mcp.config.json]
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Run a JavaScript file as a code-mode script, as a person
    ///
    /// The file is the body of an async function, as an agent's `run_code`
    /// takes it: `await tools.NAME(args)` calls a tool by its exact name,
    /// `console.log` prints, the returned value is printed as JSON. It runs
    /// through the same path as an agent's script, with the owner's
    /// permissions; calls that need approval stop it with the approval id.
    Run {
        /// The script
        file: PathBuf,
        /// Run with the tools of this session's profile (its id or name)
        #[arg(long)]
        session: Option<String>,
        /// Stop the run after this many milliseconds [default and most: code_mode.timeout_ms]
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// Add a server from the MCP registry, or search it
    ///
    /// With a NAME (it has a `/`: io.github.owner/server) writes one entry to
    /// evo's config from the registry's server.json record: `npx -y PKG@VERSION`
    /// for npm, `uvx PKG==VERSION` for PyPI, `docker run` for an OCI image (only
    /// with --allow-docker), or the remote's URL and headers. Required variables
    /// are asked for on a terminal (secrets without echo) or taken from --env;
    /// secrets go to the env file beside the config, as ${ID_NAME}. The id is
    /// the name's last part less `mcp`/`server` words (airtable-mcp-server:
    /// airtable). Keeps the config's .bak, never replaces an id, reloads a
    /// running evod and says whether the server came up.
    ///
    /// Anything else is a search of the registry's names: lists the matches.
    /// The registry is `registry.url` in evo's config
    /// [default: the official registry, registry.modelcontextprotocol.io].
    #[command(disable_version_flag = true)]
    Add {
        /// A search word, or a server's name in the registry
        target: String,
        /// The server's id in evo's config [default: from its name]
        #[arg(long)]
        id: Option<String>,
        /// An environment variable or header the server needs (repeatable)
        #[arg(long, value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// A value for an argument (by its valueHint or flag name) or a URL variable (repeatable)
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        args: Vec<String>,
        /// This version of the record [default: the latest]
        #[arg(long)]
        version: Option<String>,
        /// Allow `docker run` of the server's OCI image
        #[arg(long)]
        allow_docker: bool,
        /// evo's config [default: $EVO_CONFIG, else $XDG_CONFIG_HOME/evo/mcp.config.json]
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Download a sentence-embedding model for search.model
    ///
    /// Fetches a Hugging Face model (`org/name`, e.g.
    /// sentence-transformers/all-MiniLM-L6-v2) into the cache directory's
    /// models/ folder: config.json, tokenizer.json, model.safetensors and the
    /// sentence-transformers files beside them. An interrupted download
    /// resumes; each file is checked against the SHA-256 the hub sends.
    /// Then set "search": {"model": "ID"} in the config.
    Model {
        #[command(subcommand)]
        action: model::Action,
    },
    /// Log in to a remote server that asks for OAuth
    ///
    /// evod runs the authorization code flow with PKCE: it finds the
    /// server's authorization server, registers evo there (or uses the
    /// configured oauth.client_id), and listens on a loopback port for the
    /// browser's redirect. The browser is opened where one can be; the URL
    /// is printed either way. Tokens stay with evod (0600 files in its state
    /// directory) and are refreshed before they expire.
    Login {
        server: String,
        /// Print the URL only; open no browser
        #[arg(long)]
        no_browser: bool,
    },
    /// Revoke a remote server's tokens (where it supports revocation) and forget them
    Logout { server: String },
    /// Print a shell completion script
    ///
    /// bash: `evoctl completions bash > ~/.local/share/bash-completion/completions/evoctl`;
    /// zsh: into a directory on $fpath as `_evoctl`;
    /// fish: `evoctl completions fish > ~/.config/fish/completions/evoctl.fish`.
    Completions { shell: clap_complete::Shell },
}

#[derive(Subcommand, Debug)]
enum TokenAction {
    /// Make a token and print it (once): stdout has the token alone
    Create {
        /// Who holds it: names its identity (`token:NAME`) in sessions and approvals
        name: String,
        /// The permissions.yml role its sessions get [default: active_role]
        #[arg(long)]
        role: Option<String>,
        /// The profile its sessions use
        #[arg(long)]
        profile: Option<String>,
    },
    /// The tokens (never the tokens themselves)
    List,
    /// Refuse a token from the next request on and end its sessions
    Revoke { name: String },
}

/// `evoctl status | head`: a reader that closes early ends the command
/// quietly, the way Unix tools do (SIGPIPE), instead of a panic from
/// `println!`. Not for the shim, which handles its pipes' errors itself.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restores the default disposition of SIGPIPE before any other
    // thread exists; no Rust state depends on it.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let socket = paths::socket_path(cli.socket.as_deref());
    let json = cli.json;
    if !matches!(cli.command, Command::Shim { .. }) {
        quiet_on_closed_pipe();
    }
    // What other programs are told to use (a client's entry, the units):
    // the `--socket` given, made absolute, as they run elsewhere.
    let explicit = cli
        .socket
        .as_deref()
        .map(|s| path::absolute(s).unwrap_or_else(|_| s.to_path_buf()));
    // Commands that never talk to the daemon.
    let command = match cli.command {
        Command::Shim {
            mode,
            session,
            profile,
            no_autostart,
        } => {
            let opts = shim::ShimOptions {
                mode,
                session,
                profile,
                autostart: !no_autostart,
            };
            return shim::run(&socket, cli.socket.is_some(), opts);
        }
        Command::Service { action } => {
            let socket = explicit.as_deref();
            return local(service::run(action, socket, json), json);
        }
        Command::Setup {
            client,
            print,
            file,
            move_servers,
            config,
        } => {
            let opts = setup::SetupOptions {
                print,
                file: file.as_deref(),
                socket: explicit.as_deref(),
                move_servers,
                config: config.as_deref(),
                daemon: &socket,
                json,
            };
            return local(setup::setup(client, opts), json);
        }
        Command::Run {
            file,
            session,
            timeout_ms,
        } => {
            return run::run(&socket, &file, session.as_deref(), timeout_ms, json);
        }
        Command::Import { file, config } => {
            return local(
                import::import(&file, config.as_deref(), &socket, json),
                json,
            );
        }
        Command::Add {
            target,
            id,
            env,
            args,
            version,
            allow_docker,
            config,
        } => {
            let for_a_name = id.is_some()
                || !env.is_empty()
                || !args.is_empty()
                || version.is_some()
                || allow_docker;
            if !target.contains('/') && for_a_name {
                Cli::command()
                    .error(
                        ErrorKind::ArgumentConflict,
                        format!(
                            "'{target}' is a search (a server's name has a '/'): --id, --env, --arg, --version and --allow-docker go with `evoctl add NAME`"
                        ),
                    )
                    .exit();
            }
            let opts = add::AddOptions {
                target: &target,
                id: id.as_deref(),
                env: &env,
                args: &args,
                version: version.as_deref(),
                allow_docker,
                config: config.as_deref(),
                socket: &socket,
                json,
            };
            return local(add::add(opts), json);
        }
        Command::Model { action } => return local(model::run(action, json), json),
        Command::Login { server, no_browser } => {
            let runtime = match runtime() {
                Ok(r) => r,
                Err(code) => return code,
            };
            return runtime.block_on(login(&socket, server, no_browser, json));
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "evoctl", &mut io::stdout());
            return ExitCode::SUCCESS;
        }
        other => other,
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let browse = matches!(command, Command::Ui { no_browser: false }) && !json;
    let (request, out) = to_request(command);
    runtime.block_on(control(&socket, request, json, out, browse))
}

/// Exit status of a command that runs without the daemon: its error names the
/// file and what to do, on stderr (or as `{"ok": false, "error": …}` with
/// `--json`, the shape of a daemon refusal).
fn local(result: Result<(), String>, json: bool) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if json {
                println!("{}", json!({"ok": false, "error": e}));
            } else {
                eprintln!("evoctl: {e}");
            }
            ExitCode::from(EXIT_REFUSED)
        }
    }
}

fn to_request(cmd: Command) -> (CtlRequest, Option<PathBuf>) {
    let r = match cmd {
        Command::Status => CtlRequest::Status,
        Command::List { session, all } => CtlRequest::List { session, all },
        // `search forget [TOOL]`: drop what search learned from use.
        Command::Search { query, .. } if query.len() <= 2 && query[0] == "forget" => {
            CtlRequest::SearchForget {
                tool: query.get(1).cloned(),
            }
        }
        Command::Search {
            query,
            limit,
            explain,
        } => CtlRequest::Search {
            query: query.join(" "),
            limit,
            explain,
        },
        Command::Describe { tool } => CtlRequest::Describe { name: tool },
        Command::Activate {
            tools,
            session,
            profile,
        } => CtlRequest::Activate {
            tools,
            session,
            profile,
        },
        Command::Deactivate {
            tools,
            session,
            profile,
        } => CtlRequest::Deactivate {
            tools,
            session,
            profile,
        },
        Command::Sessions => CtlRequest::Sessions,
        Command::Profiles => CtlRequest::Profiles,
        Command::Reload => CtlRequest::Reload,
        Command::Refresh { server } => CtlRequest::Refresh { server },
        Command::Approve { id } => CtlRequest::Approve { id },
        Command::Deny { id } => CtlRequest::Deny { id },
        Command::Approvals => CtlRequest::Approvals,
        Command::Token { action } => match action {
            TokenAction::Create {
                name,
                role,
                profile,
            } => CtlRequest::TokenCreate {
                name,
                role,
                profile,
            },
            TokenAction::List => CtlRequest::TokenList,
            TokenAction::Revoke { name } => CtlRequest::TokenRevoke { name },
        },
        Command::Diff { server, tool } => CtlRequest::Diff { server, tool },
        Command::Trust { server, tool } => CtlRequest::Trust { server, tool },
        Command::Docs { out } => return (CtlRequest::Docs, out),
        Command::Resources { server } => CtlRequest::Resources { server },
        Command::Prompts => CtlRequest::Prompts,
        Command::Read { uri, out } => return (CtlRequest::Read { uri }, out),
        Command::Stop => CtlRequest::Stop,
        Command::Ui { .. } => CtlRequest::Ui,
        Command::Logout { server } => CtlRequest::Logout { server },
        Command::Shim { .. }
        | Command::Login { .. }
        | Command::Service { .. }
        | Command::Setup { .. }
        | Command::Import { .. }
        | Command::Run { .. }
        | Command::Add { .. }
        | Command::Model { .. }
        | Command::Completions { .. } => unreachable!("local commands are handled in main"),
    };
    (r, None)
}

/// `evoctl login`: asks evod to start the login, shows the URL (and opens
/// a browser where it can), then waits for evod to say how it ended.
async fn login(socket: &Path, server: String, no_browser: bool, json: bool) -> ExitCode {
    let start = CtlRequest::Login {
        server: server.clone(),
        wait: false,
    };
    let url = match exchange(socket, &start).await {
        Err(e) => {
            eprintln!("evoctl: {e}");
            return ExitCode::from(EXIT_NO_DAEMON);
        }
        Ok(reply) if !reply.ok => {
            if json {
                println!("{}", output::pretty(&reply));
            }
            eprintln!(
                "evoctl: {}",
                reply.error.as_deref().unwrap_or("login refused")
            );
            return ExitCode::from(EXIT_REFUSED);
        }
        Ok(reply) => match Reply::decode(&start, reply.data.unwrap_or_default()) {
            Ok(Reply::Login(r)) => r.url.unwrap_or_default(),
            _ => {
                eprintln!("evoctl: unexpected reply from evod");
                return ExitCode::from(EXIT_REFUSED);
            }
        },
    };
    let opened = !no_browser && open_browser(&url).is_ok();
    if json {
        println!(
            "{}",
            json!({"server": server, "url": url, "browser": opened})
        );
    } else if opened {
        println!("Opened a browser to log in to {server}; if it did not appear, open:\n  {url}");
    } else {
        println!("Open this URL in a browser to log in to {server}:\n  {url}");
    }
    let _ = io::stdout().flush();
    let wait = CtlRequest::Login { server, wait: true };
    match exchange(socket, &wait).await {
        Err(e) => {
            eprintln!("evoctl: {e}");
            ExitCode::from(EXIT_NO_DAEMON)
        }
        Ok(reply) if !reply.ok => {
            if json {
                println!("{}", output::pretty(&reply));
            }
            eprintln!(
                "evoctl: {}",
                reply.error.as_deref().unwrap_or("login failed")
            );
            ExitCode::from(EXIT_REFUSED)
        }
        Ok(reply) => {
            let data = reply.data.unwrap_or_default();
            if json {
                println!("{data}");
            } else if let Ok(Reply::Login(r)) = Reply::decode(&wait, data) {
                println!("{}", r.message);
            }
            ExitCode::SUCCESS
        }
    }
}

async fn control(
    socket: &Path,
    request: CtlRequest,
    json: bool,
    out: Option<PathBuf>,
    browse: bool,
) -> ExitCode {
    let reply = match exchange(socket, &request).await {
        Ok(r) => r,
        Err(e) => {
            // With --json, scripts get the shape of a refusal on stdout too.
            if json {
                println!(
                    "{}",
                    json!({"ok": false, "kind": "no_daemon", "error": e.to_string()})
                );
            }
            eprintln!("evoctl: {e}");
            return ExitCode::from(EXIT_NO_DAEMON);
        }
    };
    if !reply.ok {
        if json {
            println!("{}", output::pretty(&reply));
        } else {
            eprintln!(
                "evoctl: {}",
                reply.error.as_deref().unwrap_or("request refused")
            );
        }
        return ExitCode::from(EXIT_REFUSED);
    }
    let data = reply.data.unwrap_or(Value::Null);
    let reply = match Reply::decode(&request, data) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("evoctl: unexpected reply from evod: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    if let Err(e) = output::render(&request, &reply, json, out.as_deref()) {
        eprintln!("evoctl: {e}");
        return ExitCode::from(EXIT_REFUSED);
    }
    if let (true, Reply::Ui(u)) = (browse, &reply)
        && let Err(why) = open_browser(&u.url)
    {
        eprintln!("{why}: open the address above in one");
    }
    // A change evod read but cannot apply until it restarts is not done:
    // scripts see it in the exit code, with or without `--json`.
    let mut outcome = match &reply {
        Reply::Action(r) if !r.restart_needed.is_empty() => ExitCode::from(EXIT_REFUSED),
        _ => ExitCode::SUCCESS,
    };
    // A person at a terminal watches re-discovery finish on one updating
    // line; off a terminal `refresh` and `reload` wait for it and print
    // each server's outcome (scripts and logs learn what happened, not only
    // what was asked), and a server that ends failed makes the exit code 1.
    // `--json` gets the reply alone, one stable shape.
    if !json {
        let terminal = io::stdout().is_terminal();
        let ids = match (&request, reply) {
            (CtlRequest::Refresh { .. }, Reply::Action(r)) => r.restarted,
            (CtlRequest::Reload, Reply::Action(r)) => {
                r.added.into_iter().chain(r.restarted).collect()
            }
            // A daemon still discovering its servers (first start of many):
            // follow it until each is ready or failed.
            (CtlRequest::Status, Reply::Status(s)) if terminal => s
                .servers
                .into_iter()
                .filter(|v| v.state.is_starting() || v.state == ServerState::Restarting)
                .map(|v| v.id)
                .collect(),
            _ => Vec::new(),
        };
        if follow_refresh(socket, &ids, terminal).await == Settled::SomeFailed {
            outcome = ExitCode::from(EXIT_REFUSED);
        }
    }
    outcome
}

/// How the servers a command restarted ended up.
#[derive(Debug, PartialEq, Eq)]
enum Settled {
    /// Each is ready, gone, or still starting when evoctl stopped waiting.
    Fine,
    /// At least one ended `failed`.
    SomeFailed,
}

/// The single-threaded runtime a command that talks to the daemon runs on,
/// or the exit code for a machine that cannot give one.
fn runtime() -> Result<Runtime, ExitCode> {
    Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("evoctl: cannot start: {e}");
            ExitCode::from(EXIT_REFUSED)
        })
}

/// Opens `url` in the person's browser where there is one to open (a
/// desktop session on Linux, macOS), or says why not. Callers print the URL
/// either way: it may not appear, and it is all a person needs.
fn open_browser(url: &str) -> Result<(), String> {
    let opener = if cfg!(target_os = "macos") {
        Some("open")
    } else if cfg!(windows) {
        None
    } else if env::var_os("DISPLAY").is_some() || env::var_os("WAYLAND_DISPLAY").is_some() {
        Some("xdg-open")
    } else {
        None
    };
    let Some(opener) = opener else {
        return Err("no browser to open here".into());
    };
    process::Command::new(opener)
        .arg(url)
        .stdin(process::Stdio::null())
        .stdout(process::Stdio::null())
        .stderr(process::Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("could not start a browser ({opener}: {e})"))
}

/// How often, and how long, `evoctl refresh` polls status on a terminal.
const REFRESH_POLL: Duration = Duration::from_millis(200);
const REFRESH_PATIENCE: Duration = Duration::from_secs(120);

/// Waits until every server in `ids` has settled (`ready`, `failed`, …): on a terminal
/// one updating line shows the progress; elsewhere each server's outcome is
/// printed once known. The daemon queues each Restart before it replies, and
/// a child answers status only after its queued messages, so the first poll
/// already sees the restart rather than the old `ready`.
async fn follow_refresh(socket: &Path, ids: &[String], terminal: bool) -> Settled {
    if ids.is_empty() {
        return Settled::Fine;
    }
    let started = Instant::now();
    let mut stdout = io::stdout();
    loop {
        let Some(status) = status(socket).await else {
            // The daemon went away or answered oddly: the reply already said
            // what was asked; `evoctl status` tells the rest.
            if terminal {
                let _ = writeln!(stdout);
            }
            return Settled::Fine;
        };
        let progress = output::refresh_progress(&status, ids);
        if terminal {
            let _ = write!(stdout, "\r\x1b[2K{}", progress.line);
            let _ = stdout.flush();
        }
        if progress.done {
            if terminal {
                let _ = writeln!(stdout);
            } else {
                for id in ids {
                    let _ = writeln!(stdout, "{}", output::refresh_outcome(&status, id));
                }
            }
            return if progress.failed {
                Settled::SomeFailed
            } else {
                Settled::Fine
            };
        }
        if started.elapsed() >= REFRESH_PATIENCE {
            let _ = writeln!(
                stdout,
                "{}still re-discovering after {}s; `evoctl status` shows where each server is",
                if terminal { "\n" } else { "" },
                REFRESH_PATIENCE.as_secs()
            );
            return Settled::Fine;
        }
        sleep(REFRESH_POLL).await;
    }
}
