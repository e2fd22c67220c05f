//! Which paths a confined server may use, and how: the person's `read` and `write`, and what
//! the command needs to run at all. Reads the file system (to resolve the command and its
//! interpreter) but changes nothing but the private temp dir.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::config::SandboxSpec;
use crate::names;

/// What a rule grants below its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read files, list directories, execute.
    Read,
    /// Everything: read, write, create, remove, rename within.
    Write,
    /// Read and write an existing device file (`/dev/null`).
    Device,
}

/// One path of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub path: PathBuf,
    pub access: Access,
    /// Where it came from when the person wrote it (`read[0]`): it must exist. The paths the
    /// command needs are skipped when missing (not every system has `/lib64`).
    pub written_as: Option<String>,
}

/// The rules of one server's sandbox.
#[derive(Debug, Default)]
pub struct Plan {
    pub rules: Vec<Rule>,
}

/// Programs and libraries every process needs, readable and executable.
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/bin",
    "/sbin",
    // The dynamic linker's cache and the C library's configuration.
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/locale.alias",
    "/etc/os-release",
    "/etc/mime.types",
    "/etc/alternatives",
    // Names and certificates (used when the network is on).
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    // Tools servers commonly run.
    "/etc/gitconfig",
    // Processes' own information (others' environ and memory stay closed: Landlock scopes
    // ptrace), CPU counts and cgroup limits runtimes size themselves by.
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
];

/// Devices every process may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Commands whose package manager keeps what it runs in its cache (`npx`, `uvx`).
const NPM_COMMANDS: &[&str] = &["npx", "npm", "node", "pnpm", "pnpx"];
const UV_COMMANDS: &[&str] = &["uvx", "uv"];

impl Plan {
    /// The plan for `spec` running `command`; `var` looks up the child's environment
    /// variables (its `env`, then evod's); `temp` is its private temp dir.
    pub fn of(
        spec: &SandboxSpec,
        command: &str,
        var: &dyn Fn(&str) -> Option<String>,
        cwd: Option<&Path>,
        temp: &Path,
    ) -> Plan {
        let mut plan = Plan::default();
        for path in SYSTEM_READ {
            plan.add(path, Access::Read);
        }
        for path in DEVICES {
            plan.add(path, Access::Device);
        }
        // /etc/python3.11/sitecustomize.py and the like (Debian's Python reads them at start).
        if let Ok(entries) = std::fs::read_dir("/etc") {
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with("python") {
                    plan.add(entry.path(), Access::Read);
                }
            }
        }
        let home = var("HOME").map(PathBuf::from);
        let search = var("PATH").unwrap_or_default();
        let mut names = Vec::new();
        if let Some(found) = resolve(command, &search, cwd) {
            names.extend(plan.add_program(&found, home.as_deref()));
            if let Some(interpreter) = interpreter_of(&found, &search) {
                names.extend(plan.add_program(&interpreter, home.as_deref()));
            }
        }
        if let Some(home) = &home {
            plan.add_package_caches(&names, home, var);
        }
        plan.add(temp, Access::Write);
        for (index, path) in spec.read.iter().enumerate() {
            plan.add_written(path, Access::Read, format!("read[{index}]"));
        }
        for (index, path) in spec.write.iter().enumerate() {
            plan.add_written(path, Access::Write, format!("write[{index}]"));
        }
        plan
    }

    fn add(&mut self, path: impl Into<PathBuf>, access: Access) {
        self.rules.push(Rule {
            path: path.into(),
            access,
            written_as: None,
        });
    }

    fn add_written(&mut self, path: &Path, access: Access, written_as: String) {
        self.rules.push(Rule {
            path: path.to_owned(),
            access,
            written_as: Some(written_as),
        });
    }

    /// A program as found and as its links resolve: the file, and the parts of its install
    /// prefix a program loads from (`PREFIX/bin`, `lib`, `lib64`, `libexec`, a venv's
    /// `pyvenv.cfg`), so nvm's node finds its npm and a venv's script its packages. Returns
    /// the file names it goes by (to know npx or uvx behind a link).
    fn add_program(&mut self, found: &Path, home: Option<&Path>) -> Vec<String> {
        let resolved = std::fs::canonicalize(found).unwrap_or_else(|_| found.to_owned());
        let mut names = Vec::new();
        for path in [found, resolved.as_path()] {
            self.add(path, Access::Read);
            if let Some(name) = path.file_name() {
                names.push(name.to_string_lossy().into_owned());
            }
            let Some(dir) = path.parent() else { continue };
            if matches!(
                dir.file_name().and_then(OsStr::to_str),
                Some("bin" | "sbin")
            ) {
                let Some(prefix) = dir.parent() else { continue };
                for part in ["bin", "sbin", "lib", "lib64", "libexec", "pyvenv.cfg"] {
                    self.add(prefix.join(part), Access::Read);
                }
            } else if Some(dir) != home && dir != Path::new("/") {
                // A script beside its files (`/opt/server/run.sh`); never the whole home.
                self.add(dir, Access::Read);
            }
        }
        names
    }

    /// npm's cache (where `npx` keeps the packages it runs) and uv's cache and data (where
    /// `uvx` keeps its tools and Pythons), writable as they write them, when the command is
    /// theirs.
    fn add_package_caches(
        &mut self,
        names: &[String],
        home: &Path,
        var: &dyn Fn(&str) -> Option<String>,
    ) {
        let is = |list: &[&str]| names.iter().any(|n| list.contains(&n.as_str()));
        if is(NPM_COMMANDS) {
            let cache = var("npm_config_cache")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".npm"));
            self.add(cache, Access::Write);
        }
        if is(UV_COMMANDS) {
            let cache_home = var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".cache"));
            let data_home = var("XDG_DATA_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".local/share"));
            let cache = var("UV_CACHE_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| cache_home.join("uv"));
            self.add(cache, Access::Write);
            self.add(data_home.join("uv"), Access::Read);
            for name in ["UV_TOOL_DIR", "UV_PYTHON_INSTALL_DIR"] {
                if let Some(dir) = var(name) {
                    self.add(dir, Access::Read);
                }
            }
        }
    }
}

/// Where `command` is: a path (relative to `cwd`), or the first executable of that name on
/// `search` (a `PATH`). None when it is not found (the spawn then says so).
fn resolve(command: &str, search: &str, cwd: Option<&Path>) -> Option<PathBuf> {
    if command.contains('/') {
        let path = Path::new(command);
        let full = match cwd {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        };
        return full.is_file().then_some(full);
    }
    search
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The interpreter a script names on its `#!` line: the path, or with `/usr/bin/env NAME`
/// the NAME found on `search`.
fn interpreter_of(script: &Path, search: &str) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let read = std::fs::File::open(script)
        .and_then(|mut file| file.read(&mut head))
        .ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let program = PathBuf::from(words.next()?);
    if program.file_name() != Some(OsStr::new("env")) {
        return Some(program);
    }
    // `env -S node --flag`: the first word that is not an option.
    let name = words.find(|w| !w.starts_with('-'))?;
    resolve(name, search, None)
}

/// The server's own temp dir (`TMPDIR`), under the system's: made 0700 in a 0700 dir of the
/// user's, kept across restarts.
pub fn private_temp_dir(server: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let base = std::env::temp_dir().join(format!("evo-sandbox-{uid}"));
    let name = names::underscored(server);
    let dir = base.join(name);
    let cannot = |why: String| {
        format!(
            "sandbox could not be set up: its temp dir {} cannot be used ({why}); remove {} \
             (or make it yours, mode 0700) and run `evoctl refresh {server}`",
            dir.display(),
            base.display()
        )
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| cannot(e.to_string()))?;
    // Anyone can make a dir in /tmp first: one that is not ours alone would show the
    // server's temp files to its owner.
    for made in [&base, &dir] {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(made).map_err(|e| cannot(e.to_string()))?;
        if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(cannot(format!(
                "{} is not a directory of yours that only you can use",
                made.display()
            )));
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_brings_its_interpreter_and_install_prefix() {
        let tmp = std::env::temp_dir().join(format!("evo-plan-test-{}", std::process::id()));
        let bin = tmp.join("venv/bin");
        std::fs::create_dir_all(&bin).expect("temp dir");
        let script = bin.join("server");
        std::fs::write(&script, "#!/usr/bin/env sh\nexec true\n").expect("script");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        let spec = SandboxSpec {
            read: vec![PathBuf::from("/srv/in")],
            write: vec![],
            network: false,
        };
        let path = format!("{}:/usr/bin:/bin", bin.display());
        let var = |name: &str| (name == "PATH").then(|| path.clone());
        let plan = Plan::of(&spec, "server", &var, None, &tmp.join("t"));
        let has =
            |p: &Path, access: Access| plan.rules.iter().any(|r| r.path == p && r.access == access);
        assert!(has(&script, Access::Read));
        assert!(has(&tmp.join("venv/lib"), Access::Read), "{plan:?}");
        assert!(has(&tmp.join("venv/pyvenv.cfg"), Access::Read));
        assert!(has(&tmp.join("t"), Access::Write));
        assert!(
            plan.rules
                .iter()
                .any(|r| r.path.ends_with("sh") && r.access == Access::Read),
            "the interpreter named by `env`: {plan:?}"
        );
        let written = plan.rules.iter().find(|r| r.written_as.is_some());
        assert_eq!(
            written.map(|r| (r.path.as_path(), r.written_as.as_deref())),
            Some((Path::new("/srv/in"), Some("read[0]")))
        );
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
