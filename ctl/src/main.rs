//! `evoctl`: evo's control CLI, and `evoctl shim`, the stdio entry every MCP
//! client launches.

mod output;
mod shim;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use evo_proto::{CtlReply, CtlRequest, Hello, Welcome, frame};
use tokio::io::BufReader;

/// Exit codes (DESIGN.md): 0 ok, 1 the daemon refused, 2 usage, 3 no daemon.
pub const EXIT_REFUSED: u8 = 1;
pub const EXIT_NO_DAEMON: u8 = 3;

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
        /// Discovery mode of this session
        #[arg(long, value_parser = ["legacy", "dynamic"])]
        mode: Option<String>,
        /// Name this session so its activations persist across reconnects
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
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
    /// Search the catalog
    Search {
        /// What you want to do, in plain words
        query: Vec<String>,
        #[arg(long, short = 'n')]
        limit: Option<usize>,
    },
    /// Full schema and an example call of one tool
    Describe { tool: String },
    /// Make tools visible in a live session
    Activate {
        #[arg(required = true)]
        tools: Vec<String>,
        #[arg(long)]
        session: Option<String>,
    },
    /// Hide activated tools in a live session
    Deactivate {
        #[arg(required = true)]
        tools: Vec<String>,
        #[arg(long)]
        session: Option<String>,
    },
    /// Live sessions
    Sessions,
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
    /// Markdown reference of every tool
    Docs {
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Stop the daemon and its servers
    Stop,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let socket = evo_proto::paths::socket_path(cli.socket.as_deref());
    if let Command::Shim {
        mode,
        session,
        no_autostart,
    } = cli.command
    {
        return shim::run(&socket, cli.socket.is_some(), mode, session, !no_autostart);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("evoctl: cannot start: {e}");
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    let (request, out) = to_request(cli.command);
    runtime.block_on(control(&socket, request, cli.json, out))
}

fn to_request(cmd: Command) -> (CtlRequest, Option<PathBuf>) {
    let r = match cmd {
        Command::Status => CtlRequest::Status,
        Command::List { session, all } => CtlRequest::List { session, all },
        Command::Search { query, limit } => CtlRequest::Search {
            query: query.join(" "),
            limit,
        },
        Command::Describe { tool } => CtlRequest::Describe { name: tool },
        Command::Activate { tools, session } => CtlRequest::Activate { tools, session },
        Command::Deactivate { tools, session } => CtlRequest::Deactivate { tools, session },
        Command::Sessions => CtlRequest::Sessions,
        Command::Reload => CtlRequest::Reload,
        Command::Refresh { server } => CtlRequest::Refresh { server },
        Command::Approve { id } => CtlRequest::Approve { id },
        Command::Deny { id } => CtlRequest::Deny { id },
        Command::Approvals => CtlRequest::Approvals,
        Command::Docs { out } => return (CtlRequest::Docs, out),
        Command::Stop => CtlRequest::Stop,
        Command::Shim { .. } => unreachable!("shim is handled before"),
    };
    (r, None)
}

pub fn no_daemon_message(socket: &std::path::Path, err: &std::io::Error) -> String {
    format!(
        "no daemon at {} ({err}): start it with `evod` or `systemctl --user start evod.socket`",
        socket.display()
    )
}

async fn control(
    socket: &std::path::Path,
    request: CtlRequest,
    json: bool,
    out: Option<PathBuf>,
) -> ExitCode {
    let conn = match evo_proto::paths::connect(socket).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("evoctl: {}", no_daemon_message(socket, &e));
            return ExitCode::from(EXIT_NO_DAEMON);
        }
    };
    #[allow(deprecated)] // owned halves are what we want here
    let (r, mut w) = interprocess::local_socket::traits::tokio::Stream::split(conn);
    let mut reader = BufReader::new(r);
    let reply: Result<CtlReply, String> = async {
        frame::write_json(&mut w, &Hello::ctl())
            .await
            .map_err(|e| e.to_string())?;
        let welcome = frame::read_line(&mut reader, frame::DEFAULT_MAX_LINE)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the daemon closed the connection")?;
        let welcome: Welcome = serde_json::from_slice(&welcome).map_err(|e| e.to_string())?;
        if !welcome.ok {
            return Err(welcome.error.unwrap_or_else(|| "handshake refused".into()));
        }
        frame::write_json(&mut w, &request)
            .await
            .map_err(|e| e.to_string())?;
        let line = frame::read_line(&mut reader, frame::DEFAULT_MAX_LINE)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the daemon closed the connection without answering")?;
        serde_json::from_slice(&line).map_err(|e| format!("unreadable reply: {e}"))
    }
    .await;
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            eprintln!("evoctl: {e}");
            return ExitCode::from(EXIT_NO_DAEMON);
        }
    };
    if !reply.ok {
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(&reply).unwrap_or_default()
            );
        } else {
            eprintln!(
                "evoctl: {}",
                reply.error.as_deref().unwrap_or("request refused")
            );
        }
        return ExitCode::from(EXIT_REFUSED);
    }
    let data = reply.data.unwrap_or(serde_json::Value::Null);
    match output::render(&request, &data, json, out.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("evoctl: {e}");
            ExitCode::from(EXIT_REFUSED)
        }
    }
}
