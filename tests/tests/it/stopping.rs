//! Every way a child stops ends its whole process tree, even when the child
//! ignores SIGTERM and outlives its stdin, and a wrapper's background job
//! with it: refresh, a reload that restarts or removes it, idle stop, a crash
//! and its restart, and shutdown (SIGTERM, a grace period, SIGKILL to the
//! process group, reaped). An evod killed with SIGKILL leaves nothing behind
//! either: its guard process ends the groups, then exits.

use std::time::Duration;

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::{bin, fixture},
    process::alive,
    servers::fixture_server,
    wait::{eventually, with_log},
};
use serde_json::{Value, json};

/// A server whose process group leader ignores SIGTERM and, once the
/// fixture under it exits (stdin closed), becomes a `sleep` that also
/// ignores it: only SIGKILL to the group ends it. Beside it runs a wrapper's
/// background job, `sleep TAG` (TERM ignored too), found by that cmdline.
fn stubborn_server(tag: u32, extra: Value) -> Value {
    let script = format!("trap '' TERM; sleep {tag} & \"$0\"; exec sleep 600");
    let mut server = json!({
        "command": "sh",
        "args": ["-c", script, fixture().to_string_lossy()],
    });
    if let (Some(s), Some(e)) = (server.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    server
}

/// `sh -c "sleep TAG & exec SERVER"`: the wrapper shape that leaves its
/// background job behind when only the direct child is killed.
fn wrapper_server(tag: u32) -> Value {
    json!({
        "command": "sh",
        "args": ["-c", format!("sleep {tag} & exec \"$0\""), fixture().to_string_lossy()],
    })
}

/// Live processes whose command line is exactly `cmdline` (its words
/// joined by spaces); zombies have none.
fn processes(cmdline: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let raw = std::fs::read(entry.path().join("cmdline")).ok()?;
            let words: Vec<String> = raw
                .split(|&b| b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            (words.join(" ") == cmdline && alive(pid)).then_some(pid)
        })
        .collect()
}

/// Kills, when a test ends, the `sleep TAG` processes it may have failed to
/// see ended, so a failing run does not leave them for hours.
struct Leftovers(Vec<u32>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for tag in &self.0 {
            for pid in processes(&format!("sleep {tag}")) {
                // SAFETY: a plain signal to a process this test started.
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
            }
        }
    }
}

fn assert_none_left(tag: u32, path: &str) {
    let what = format!("sleep {tag}");
    eventually(
        format!("{path}: the wrapper's background job `{what}` to end"),
        Duration::from_secs(15),
        || processes(&what).is_empty(),
    );
}

/// The parent pid of `pid`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// evod's guard process: its child running `evod --guard` (started before
/// evod listens, so there by the time a test has a Daemon).
fn guard_of(d: &Daemon) -> Option<u32> {
    let evod = d.pid();
    processes(&format!("{} --guard", bin("evod").display()))
        .into_iter()
        .find(|&p| parent_of(p) == Some(evod))
}

/// The descriptors process `pid` has open.
fn open_fds(pid: u32) -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let target = std::fs::read_link(e.path()).unwrap_or_default();
                    format!(
                        "{} -> {}",
                        e.file_name().to_string_lossy(),
                        target.display()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    fds.sort();
    fds
}

fn sigkill(d: &Daemon) {
    // SAFETY: a plain signal to the evod this test started.
    unsafe {
        libc::kill(d.pid() as i32, libc::SIGKILL);
    }
}

/// Whether any live (non-zombie) process is in process group `pgid`.
fn group_alive(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // After the parenthesised command name: state, ppid, pgrp, …
        let mut fields = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<u32>().ok());
        pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
    })
}

fn pid_of(d: &Daemon, id: &str) -> u32 {
    let status = d.wait_status("a pid", |s| {
        server(s, id).is_some_and(|v| v["state"] == "ready" && v["pid"].as_u64().is_some())
    });
    server(&status, id).unwrap()["pid"].as_u64().unwrap() as u32
}

fn assert_group_ends(pgid: u32, path: &str) {
    eventually(
        format!("{path}: the process group {pgid} of a child that ignores SIGTERM to end"),
        Duration::from_secs(15),
        || !group_alive(pgid),
    );
}

fn write_config(d: &Daemon, config: &Value) {
    let tmp = d.config.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(config).unwrap()).unwrap();
    std::fs::rename(&tmp, &d.config).unwrap();
}

#[test]
fn refresh_ends_the_old_process_tree() {
    let _left = Leftovers(vec![7311]);
    let d = Daemon::start(&json!({"mcpServers": {"fx": stubborn_server(7311, json!({}))}}));
    let old = pid_of(&d, "fx");
    assert!(group_alive(old));
    assert_eq!(processes("sleep 7311").len(), 1, "the background job runs");
    let (code, _, err) = d.ctl(&["refresh", "fx"]);
    assert_eq!(code, 0, "{err}");
    let status = d.wait_status("a new child", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready" && v["pid"] != json!(old))
    });
    assert_group_ends(old, "refresh");
    let new = server(&status, "fx").unwrap()["pid"].as_u64().unwrap() as u32;
    assert!(group_alive(new), "the new child runs");
    // Only the new run's background job is left.
    eventually("one `sleep 7311` left", Duration::from_secs(15), || {
        processes("sleep 7311").len() == 1
    });
}

#[test]
fn reload_restart_and_remove_end_the_old_process_trees() {
    let _left = Leftovers(vec![7312, 7313, 7314]);
    let config = json!({"mcpServers": {
        "a": stubborn_server(7312, json!({})),
        "b": stubborn_server(7313, json!({})),
    }});
    let d = Daemon::start(&config);
    let (a, b) = (pid_of(&d, "a"), pid_of(&d, "b"));
    // `a` changes (restarted), `b` goes (removed).
    write_config(
        &d,
        &json!({"mcpServers": {"a": stubborn_server(7314, json!({"env": {"X": "1"}}))}}),
    );
    d.wait_status("a restarted, b removed", |s| {
        server(s, "b").is_none()
            && server(s, "a").is_some_and(|v| v["state"] == "ready" && v["pid"] != json!(a))
    });
    assert_group_ends(a, "reload restart");
    assert_none_left(7312, "reload restart");
    assert_group_ends(b, "reload remove");
    assert_none_left(7313, "reload remove");
    assert_eq!(processes("sleep 7314").len(), 1, "the new run's job runs");
}

#[test]
fn idle_stop_ends_the_process_tree() {
    let _left = Leftovers(vec![7315]);
    let d = Daemon::start(
        &json!({"mcpServers": {"fx": stubborn_server(7315, json!({"idle_timeout_s": 0.5}))}}),
    );
    let pid = pid_of(&d, "fx");
    d.wait_status("idle", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "idle")
    });
    assert_group_ends(pid, "idle stop");
    assert_none_left(7315, "idle stop");
    // The next call starts it again.
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("fx_echo", json!({"text": "again"})).0, "again");
}

#[test]
fn a_crash_ends_the_process_tree_before_the_restart() {
    let _left = Leftovers(vec![7316]);
    // The fixture is the leader (exec'd): when it crashes, its wrapper's
    // background job (TERM ignored, holding the child's pipes) must not
    // outlive it.
    let d = Daemon::start(&json!({"mcpServers": {"fx": {
        "command": "sh",
        "args": ["-c", "trap '' TERM; sleep 7316 & exec \"$0\"", fixture().to_string_lossy()],
    }}}));
    let old = pid_of(&d, "fx");
    assert_eq!(processes("sleep 7316").len(), 1);
    let mut c = d.legacy_session();
    let (_, failed) = c.call_text("fx_crash", json!({"code": 3}));
    assert!(failed, "the crashing call fails");
    d.wait_status("a restart", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready" && v["pid"] != json!(old))
    });
    assert_group_ends(old, "crash restart");
    eventually(
        "one `sleep 7316` left, the new run's",
        Duration::from_secs(15),
        || processes("sleep 7316").len() == 1,
    );
}

#[test]
fn shutdown_ends_the_process_tree() {
    let _left = Leftovers(vec![7317]);
    let mut d = Daemon::start(&json!({"mcpServers": {"fx": stubborn_server(7317, json!({}))}}));
    let pid = pid_of(&d, "fx");
    let status = d.stop();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert_group_ends(pid, "shutdown");
    assert_none_left(7317, "shutdown");
}

#[test]
fn sigkill_of_evod_ends_wrappers_background_jobs_and_the_guard_exits() {
    let _left = Leftovers(vec![7301, 7302]);
    let d = Daemon::start(&json!({"mcpServers": {
        "plain": wrapper_server(7301),
        // Deaf to SIGTERM: the guard's SIGKILL must follow.
        "deaf": {
            "command": "sh",
            "args": ["-c", "trap '' TERM; sleep 7302 & exec \"$0\"", fixture().to_string_lossy()],
        },
    }}));
    let leaders = [pid_of(&d, "plain"), pid_of(&d, "deaf")];
    assert_eq!(processes("sleep 7301").len(), 1);
    assert_eq!(processes("sleep 7302").len(), 1);
    let guard = guard_of(&d);
    sigkill(&d);
    assert_none_left(7301, "evod SIGKILLed");
    assert_none_left(7302, "evod SIGKILLed (job ignoring SIGTERM)");
    for pgid in leaders {
        assert_group_ends(pgid, "evod SIGKILLed");
    }
    let guard = guard.expect("evod had a guard process");
    eventually(
        with_log("the guard to exit after its cleanup", &d.log),
        Duration::from_secs(10),
        || !alive(guard),
    );
    assert!(
        d.log_text()
            .contains("evod died; ending the process groups of its 2 child(ren)"),
        "{}",
        d.log_text()
    );
}

#[test]
fn sigkill_of_evod_ends_grandchildren_that_were_not_execd() {
    let _left = Leftovers(vec![7303]);
    // The shape of `npx server`: the leader runs the server as a child of
    // its own (not exec'd), and a grandchild of it runs another process.
    let script = "sh -c 'sleep 7303; true' & \"$0\"; true";
    let d = Daemon::start(&json!({"mcpServers": {"npxish": {
        "command": "sh",
        "args": ["-c", script, fixture().to_string_lossy()],
    }}}));
    let leader = pid_of(&d, "npxish");
    assert_eq!(processes("sleep 7303").len(), 1);
    let guard = guard_of(&d);
    sigkill(&d);
    assert_none_left(7303, "evod SIGKILLed");
    assert_group_ends(leader, "evod SIGKILLed");
    let guard = guard.expect("evod had a guard process");
    eventually("the guard to exit", Duration::from_secs(10), || {
        !alive(guard)
    });
}

#[test]
fn a_clean_stop_leaves_nothing_and_the_guard_exits() {
    let _left = Leftovers(vec![7304]);
    let mut d = Daemon::start(&json!({"mcpServers": {"fx": wrapper_server(7304)}}));
    let leader = pid_of(&d, "fx");
    let guard = guard_of(&d).expect("evod has a guard process");
    let (code, out, err) = d.ctl(&["stop"]);
    assert_eq!(code, 0, "{out}{err}");
    let evod = d.child.as_mut().expect("evod runs");
    let mut exited = None;
    eventually(
        "evod to exit after `evoctl stop`",
        Duration::from_secs(15),
        || {
            exited = evod.try_wait().ok().flatten();
            exited.is_some()
        },
    );
    assert!(exited.is_some_and(|s| s.success()), "{exited:?}");
    // evod ended the group itself: the guard had nothing left to end.
    assert!(processes("sleep 7304").is_empty(), "{}", d.log_text());
    assert!(!group_alive(leader));
    assert!(!alive(guard), "the guard is gone once evod has exited");
    assert!(!d.log_text().contains("evod guard:"), "{}", d.log_text());
}

#[test]
fn children_and_the_guard_inherit_no_descriptors_of_evod() {
    let _left = Leftovers(vec![7305]);
    let d = Daemon::start(&json!({"mcpServers": {"fx": wrapper_server(7305)}}));
    pid_of(&d, "fx");
    // A session is open (its descriptors are in evod) while a child starts.
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("fx_echo", json!({"text": "hi"})).0, "hi");
    let (code, _, err) = d.ctl(&["refresh", "fx"]);
    assert_eq!(code, 0, "{err}");
    let mut job = Vec::new();
    eventually(
        "the refreshed child's background job",
        Duration::from_secs(15),
        || {
            job = processes("sleep 7305");
            job.len() == 1
        },
    );
    let fds = open_fds(job[0]);
    assert_eq!(
        fds.iter()
            .map(|f| f.split(' ').next().unwrap_or(""))
            .collect::<Vec<_>>(),
        ["0", "1", "2"],
        "a child has only its stdio: {fds:?}"
    );
    let guard = guard_of(&d).expect("evod has a guard process");
    let fds = open_fds(guard);
    assert_eq!(fds.len(), 3, "the guard has only its stdio: {fds:?}");
    assert!(fds[0].starts_with("0 -> pipe:"), "{fds:?}");
    assert!(fds[1].ends_with("/dev/null"), "{fds:?}");
}

#[test]
fn the_guard_outlives_signals_meant_for_evod() {
    let _left = Leftovers(vec![7306]);
    let d = Daemon::start(&json!({"mcpServers": {"fx": wrapper_server(7306)}}));
    pid_of(&d, "fx");
    let guard = guard_of(&d).expect("evod has a guard process");
    // A terminal's Ctrl-C, Ctrl-\ and hangup go to the foreground process
    // group (evod's): the guard is not in it.
    // SAFETY: getpgid only reads.
    assert_eq!(unsafe { libc::getpgid(guard as i32) }, guard as i32);
    // And sent to it directly, the stop signals of terminals and service
    // managers leave it running.
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGTSTP,
    ] {
        // SAFETY: a plain signal to a process of this test's evod.
        unsafe {
            libc::kill(guard as i32, sig);
        }
    }
    // Time is the point here: a signal that would end it acts at once.
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(guard), "the guard died of a signal meant for evod");
    sigkill(&d);
    assert_none_left(7306, "evod SIGKILLed after its guard was signalled");
    eventually("the guard to exit", Duration::from_secs(10), || {
        !alive(guard)
    });
}

#[test]
fn status_says_when_the_guard_is_lost_for_good() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    pid_of(&d, "fx");
    let status = d.ctl_json(&["status"]);
    assert!(status["daemon"].get("guard_error").is_none(), "{status}");
    // A dead guard is replaced (see below), up to 5 times a minute; the
    // 6th death is not, and that is what status reports.
    let mut guard = guard_of(&d).expect("evod has a guard process");
    for replaced in 0..=5 {
        // SAFETY: a plain signal to a process of this test's evod.
        unsafe {
            libc::kill(guard as i32, libc::SIGKILL);
        }
        if replaced == 5 {
            break;
        }
        let dead = guard;
        eventually(
            with_log("a new guard", &d.log),
            Duration::from_secs(10),
            || {
                guard = guard_of(&d).filter(|&g| g != dead).unwrap_or(dead);
                guard != dead
            },
        );
    }
    let status = d.wait_status("status to report the lost guard", |s| {
        s["daemon"]["guard_error"].is_string()
    });
    let why = status["daemon"]["guard_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("the guard process exited") && why.contains("restart evod"),
        "{why}"
    );
    let (_, out, _) = d.ctl(&["status"]);
    assert!(out.contains("WARNING: the guard process exited"), "{out}");
    // evod itself carries on.
    let mut c = d.legacy_session();
    assert_eq!(c.call_text("fx_echo", json!({"text": "on"})).0, "on");
}

#[test]
fn a_guard_that_dies_is_replaced_and_a_later_sigkill_still_leaves_nothing() {
    let _left = Leftovers(vec![7307, 7308]);
    // A wrapper's background job, and the shape of `npx server`: a
    // grandchild under a leader that was not exec'd.
    let npxish = "sh -c 'sleep 7308; true' & \"$0\"; true";
    let d = Daemon::start(&json!({"mcpServers": {
        "plain": wrapper_server(7307),
        "npxish": {"command": "sh", "args": ["-c", npxish, fixture().to_string_lossy()]},
    }}));
    let leaders = [pid_of(&d, "plain"), pid_of(&d, "npxish")];
    assert_eq!(processes("sleep 7307").len(), 1);
    assert_eq!(processes("sleep 7308").len(), 1);
    let first = guard_of(&d).expect("evod has a guard process");
    // SAFETY: a plain signal to a process of this test's evod.
    unsafe {
        libc::kill(first as i32, libc::SIGKILL);
    }
    let mut second = None;
    eventually(
        with_log("evod to start a new guard", &d.log),
        Duration::from_secs(10),
        || {
            second = guard_of(&d).filter(|&g| g != first);
            second.is_some()
        },
    );
    let second = second.expect("a new guard");
    let status = d.ctl_json(&["status"]);
    assert!(status["daemon"].get("guard_error").is_none(), "{status}");
    // The new guard knows every live group: evod's death ends them all.
    sigkill(&d);
    assert_none_left(7307, "evod SIGKILLed after its guard was replaced");
    assert_none_left(
        7308,
        "evod SIGKILLed after its guard was replaced (grandchild)",
    );
    for pgid in leaders {
        assert_group_ends(pgid, "evod SIGKILLed after its guard was replaced");
    }
    eventually("the new guard to exit", Duration::from_secs(10), || {
        !alive(second)
    });
    assert!(
        d.log_text()
            .contains("evod died; ending the process groups of its 2 child(ren)"),
        "{}",
        d.log_text()
    );
}
