//! Landlock and namespaces through their syscalls: the ruleset built in evod
//! ([`Confinement::prepare`]) and applied by the child before exec ([`Confinement::apply`],
//! which only makes syscalls: it runs between fork and exec).

use std::ffi::CStr;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use super::plan::{Access, Plan};

// From <linux/landlock.h>.
const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;
const FS_EXECUTE: u64 = 1 << 0;
const FS_WRITE_FILE: u64 = 1 << 1;
const FS_READ_FILE: u64 = 1 << 2;
const FS_READ_DIR: u64 = 1 << 3;
/// ABI 1's rights: the above and removing and making every kind of file.
const FS_ABI1: u64 = (1 << 13) - 1;
const FS_REFER: u64 = 1 << 13;
const FS_TRUNCATE: u64 = 1 << 14;
const FS_IOCTL_DEV: u64 = 1 << 15;
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// Capabilities a confined server run by root loses (from its bounding set, so they are not
/// in its permitted set after exec): with them, root could step around the sandbox (read
/// other processes' `/proc/PID/environ` past Landlock's ptrace scope, `setns` back into the
/// host's network, load modules, mount, raw I/O). From <linux/capability.h>; CAP_SETPCAP,
/// which dropping needs, goes last.
const ROOT_DROPS: &[libc::c_ulong] = &[
    5,  // CAP_KILL
    12, // CAP_NET_ADMIN
    13, // CAP_NET_RAW
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    18, // CAP_SYS_CHROOT
    19, // CAP_SYS_PTRACE
    21, // CAP_SYS_ADMIN
    22, // CAP_SYS_BOOT
    25, // CAP_SYS_TIME
    27, // CAP_MKNOD
    32, // CAP_MAC_OVERRIDE
    33, // CAP_MAC_ADMIN
    34, // CAP_SYSLOG
    38, // CAP_PERFMON
    39, // CAP_BPF
    40, // CAP_CHECKPOINT_RESTORE
    8,  // CAP_SETPCAP
];

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// A child's confinement, ready to apply: the ruleset (its descriptor is close-on-exec and
/// closed in evod once the spawn is done), whether to leave it without network, and the
/// lines that map the user into a new user namespace.
pub struct Confinement {
    ruleset: OwnedFd,
    isolate_network: bool,
    /// evod runs as root: the child drops [`ROOT_DROPS`]; not root: the network namespace
    /// needs a user namespace first.
    root: bool,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    step: Arc<StepPage>,
}

/// Which step of [`Confinement::apply`] the child was at, in a page shared with evod (a
/// forked child's writes to its own memory are not seen by the parent).
struct StepPage(*mut u8);

// SAFETY: the page is mapped for the StepPage's whole life and only read and written a byte
// at a time (volatile); a torn read is impossible for one byte.
unsafe impl Send for StepPage {}
unsafe impl Sync for StepPage {}

impl StepPage {
    fn new() -> io::Result<StepPage> {
        // SAFETY: an anonymous shared mapping of one page, no file, no fixed address.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(StepPage(page.cast()))
    }

    fn set(&self, step: Step) {
        // SAFETY: the page is mapped (see the type) and one byte is in bounds.
        unsafe { self.0.write_volatile(step as u8) }
    }

    fn get(&self) -> u8 {
        // SAFETY: as in `set`.
        unsafe { self.0.read_volatile() }
    }
}

impl Drop for StepPage {
    fn drop(&mut self) {
        // SAFETY: unmapping the page `new` mapped, once.
        unsafe {
            libc::munmap(self.0.cast(), 4096);
        }
    }
}

/// The steps the child takes, as recorded in the shared page.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Step {
    Done = 0,
    Namespaces = 1,
    Maps = 2,
    NoNewPrivs = 3,
    Restrict = 4,
    Capabilities = 5,
}

/// The kernel's Landlock ABI version, or why there is none.
fn landlock_abi() -> Result<i64, String> {
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call only returns a
    // number; it reads no memory of ours.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if abi >= 1 {
        return Ok(abi);
    }
    let err = io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "this kernel has Landlock but it is turned off: add `landlock` \
             to the `lsm=` kernel boot parameter, or remove `sandbox` from this server"
            .to_owned(),
        Some(libc::ENOSYS) => "this kernel has no Landlock (Linux 5.13 or later built with \
             CONFIG_SECURITY_LANDLOCK is needed): upgrade it, or remove `sandbox` from this \
             server"
            .to_owned(),
        _ => format!("Landlock cannot be used ({err}); remove `sandbox` from this server"),
    })
}

impl Confinement {
    /// Builds the ruleset of `plan` (every path opened now: a path the person wrote that does
    /// not exist is an error naming it) and, with `isolate_network`, the namespace maps.
    pub fn prepare(plan: &Plan, isolate_network: bool) -> Result<Confinement, String> {
        let fail = |what: String| format!("sandbox could not be set up: {what}");
        let abi = landlock_abi().map_err(fail)?;
        let mut fs = FS_ABI1;
        if abi >= 2 {
            fs |= FS_REFER;
        }
        if abi >= 3 {
            fs |= FS_TRUNCATE;
        }
        if abi >= 5 {
            fs |= FS_IOCTL_DEV;
        }
        let net = if isolate_network && abi >= 4 {
            NET_BIND_TCP | NET_CONNECT_TCP
        } else {
            0
        };
        let mut scoped = 0;
        if abi >= 6 {
            scoped = SCOPE_SIGNAL;
            if isolate_network {
                scoped |= SCOPE_ABSTRACT_UNIX_SOCKET;
            }
        }
        let attr = RulesetAttr {
            handled_access_fs: fs,
            handled_access_net: net,
            scoped,
        };
        // Older kernels take the attribute's prefix they know.
        let size = match abi {
            1..=3 => 8,
            4 | 5 => 16,
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        // SAFETY: `attr` outlives the call and `size` does not exceed it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size,
                0u32,
            )
        };
        let fd = i32::try_from(fd).unwrap_or(-1);
        if fd < 0 {
            return Err(fail(format!(
                "Landlock refused the ruleset ({})",
                io::Error::last_os_error()
            )));
        }
        // SAFETY: the kernel just returned this descriptor (close-on-exec); nothing else owns it.
        let ruleset = unsafe { OwnedFd::from_raw_fd(fd) };
        let file_rights =
            FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | (fs & (FS_TRUNCATE | FS_IOCTL_DEV));
        for rule in &plan.rules {
            let opened = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
                .open(&rule.path);
            let file = match (opened, &rule.written_as) {
                (Ok(file), _) => file,
                (Err(_), None) => continue,
                (Err(e), Some(key)) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(fail(format!(
                        "sandbox.{key}: {} does not exist; create it, or remove it from the \
                         server's sandbox",
                        rule.path.display()
                    )));
                }
                (Err(e), Some(key)) => {
                    return Err(fail(format!(
                        "sandbox.{key}: {} cannot be opened ({e})",
                        rule.path.display()
                    )));
                }
            };
            let is_dir = file.metadata().is_ok_and(|m| m.is_dir());
            let wanted = match rule.access {
                Access::Read => FS_EXECUTE | FS_READ_FILE | FS_READ_DIR,
                Access::Write => fs,
                Access::Device => FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV,
            };
            // Directory rights on a file are refused by the kernel.
            let allowed = if is_dir {
                wanted & fs
            } else {
                wanted & file_rights
            };
            let beneath = PathBeneathAttr {
                allowed_access: allowed,
                parent_fd: file.as_raw_fd(),
            };
            // SAFETY: `beneath` and the descriptors outlive the call.
            let added = unsafe {
                libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset.as_raw_fd(),
                    RULE_PATH_BENEATH,
                    &beneath as *const PathBeneathAttr,
                    0u32,
                )
            };
            if added != 0 {
                return Err(fail(format!(
                    "Landlock refused the rule for {} ({})",
                    rule.path.display(),
                    io::Error::last_os_error()
                )));
            }
        }
        // SAFETY: geteuid and getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let step =
            StepPage::new().map_err(|e| fail(format!("no page for the child's report ({e})")))?;
        Ok(Confinement {
            ruleset,
            isolate_network,
            root: uid == 0,
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
            step: Arc::new(step),
        })
    }

    /// Applied in the child between fork and exec: the namespaces, no new privileges, the
    /// ruleset. Syscalls only (async-signal-safe); each step is recorded first, so evod can
    /// say which failed (`StepReport::failure`).
    pub fn apply(&self) -> io::Result<()> {
        if self.isolate_network {
            self.step.set(Step::Namespaces);
            let flags = if !self.root {
                libc::CLONE_NEWUSER | libc::CLONE_NEWNET
            } else {
                libc::CLONE_NEWNET
            };
            // SAFETY: unshare takes flags only.
            if unsafe { libc::unshare(flags) } != 0 {
                return Err(io::Error::last_os_error());
            }
            if !self.root {
                self.step.set(Step::Maps);
                write_proc(c"/proc/self/setgroups", b"deny")?;
                write_proc(c"/proc/self/uid_map", &self.uid_map)?;
                write_proc(c"/proc/self/gid_map", &self.gid_map)?;
            }
        }
        if self.root {
            self.step.set(Step::Capabilities);
            for cap in ROOT_DROPS {
                // SAFETY: prctl with integer arguments only. EINVAL: a capability this
                // kernel does not know, nothing to drop.
                if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, *cap, 0, 0, 0) } != 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
                {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        self.step.set(Step::NoNewPrivs);
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        self.step.set(Step::Restrict);
        // SAFETY: the ruleset descriptor is open (owned by self) and flags are 0.
        if unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        self.step.set(Step::Done);
        Ok(())
    }

    /// A handle that outlives the confinement moved into the spawn hook, to ask afterwards
    /// which step failed.
    pub fn report(&self) -> StepReport {
        StepReport(self.step.clone())
    }
}

/// Which step of a child's confinement failed, read after a failed spawn.
pub struct StepReport(Arc<StepPage>);

impl StepReport {
    /// The spawn error `err` told as the sandbox's failure (with what to do), or None when
    /// the child got through its confinement (the spawn failed for another reason).
    pub fn failure(&self, err: &io::Error) -> Option<String> {
        let (what, fix) = match self.0.get() {
            1 => (
                "a new network namespace (for \"network\": false) was refused",
                "unprivileged user namespaces may be turned off (sysctl \
                 kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns \
                 or user.max_user_namespaces): allow them for evod's user, or set \"network\": \
                 true in this server's sandbox",
            ),
            2 => (
                "mapping the user into its namespace failed",
                "set \"network\": true in this server's sandbox",
            ),
            3 => (
                "no_new_privs could not be set",
                "remove `sandbox` from this server",
            ),
            4 => (
                "Landlock refused to confine the child",
                "remove `sandbox` from this server",
            ),
            5 => (
                "dropping root's capabilities failed",
                "run evod as a user rather than root, or remove `sandbox` from this server",
            ),
            _ => return None,
        };
        Some(format!(
            "sandbox could not be set up: {what} ({err}); {fix}. The server was not started \
             unconfined"
        ))
    }
}

/// Writes `bytes` to a `/proc/self` file with syscalls only.
fn write_proc(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `bytes` is valid for its length; fd is open.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let result = if written == bytes.len() as isize {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    };
    // SAFETY: closing the descriptor opened above, once.
    unsafe { libc::close(fd) };
    result
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    /// A step that fails in the child reaches evod as an error naming the step: here the
    /// "ruleset" is /dev/null, which landlock_restrict_self refuses.
    #[test]
    fn a_failure_in_the_child_is_told_by_its_step() {
        let not_a_ruleset = std::fs::File::open("/dev/null").expect("/dev/null");
        let confinement = Confinement {
            ruleset: OwnedFd::from(not_a_ruleset),
            isolate_network: false,
            root: false,
            uid_map: Vec::new(),
            gid_map: Vec::new(),
            step: Arc::new(StepPage::new().expect("a shared page")),
        };
        let report = confinement.report();
        let mut cmd = Command::new("/bin/true");
        // SAFETY: `apply` makes syscalls only.
        unsafe {
            cmd.pre_exec(move || confinement.apply());
        }
        let err = cmd.spawn().expect_err("the child cannot restrict itself");
        let said = report.failure(&err).expect("a sandbox failure");
        assert!(
            said.starts_with("sandbox could not be set up: Landlock refused to confine the child")
                && said.ends_with("The server was not started unconfined"),
            "{said}"
        );
        // A spawn that got through its confinement is not told as the sandbox's failure.
        let done = StepReport(Arc::new(StepPage::new().expect("a shared page")));
        assert_eq!(done.failure(&err), None);
    }
}
