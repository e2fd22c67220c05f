//! The script engine: one QuickJS runtime and context per run, on a thread
//! of its own, with nothing of the host in it but `tools`, `console` and
//! JSON.
//!
//! Why QuickJS (through `rquickjs`): it is embeddable in a few hundred KiB,
//! starts a runtime and context in well under a millisecond, has a hard
//! heap limit (`set_memory_limit`) and an interrupt hook checked while
//! code runs (a loop without end is stopped), and its core has no I/O at
//! all: the file system, processes, timers and modules come only from
//! QuickJS's optional `std`/`os` modules and a module loader, none of which
//! evo installs. `boa_engine` is pure Rust but far heavier to build and
//! slower; V8 is out of proportion for a gateway.
//!
//! The run is an event loop the engine thread drives itself: a tool call
//! from the script goes out as a [`ToolCall`] (the promise it returned is
//! kept by its number), the thread waits for [`CallAnswer`]s and settles
//! each promise with its answer, runs the jobs that follow, and so on until
//! the script's promise settles or a limit is hit. A script awaiting
//! something that no call will ever settle (there are no timers) is stopped
//! at once rather than left to its timeout.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rquickjs::allocator::{Allocator, RustAllocator};
use rquickjs::{Array, Context, Ctx, Exception, Function, Runtime, Value};

/// What a run may use.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    pub memory_bytes: usize,
    pub max_calls: usize,
}

/// A tool call the script made: its number in the run, the tool, its
/// arguments (JSON text).
#[derive(Debug)]
pub struct ToolCall {
    pub id: u32,
    pub tool: String,
    pub args: String,
}

/// The answer to call `id`: `Ok` the value handed to the script (JSON
/// text), `Err` the message of the `Error` it throws.
#[derive(Debug)]
pub struct CallAnswer {
    pub id: u32,
    pub answer: Result<String, String>,
}

/// Why a run ended without a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// Past `timeout_ms`.
    Timeout,
    /// Past `memory_mb`.
    Memory,
    /// It tried to make call number `max_calls + 1`.
    MaxCalls,
    /// Stopped from outside (the client cancelled, evod is stopping).
    Cancelled,
    /// It threw (or did not compile): the error as the script saw it.
    Threw(String),
    /// It returned something JSON cannot carry.
    NotJson(String),
    /// It awaits a promise nothing will settle.
    Stalled,
}

/// How a run ended: its value (JSON text) or why it stopped, with what it
/// logged and the calls it made.
#[derive(Debug)]
pub struct Outcome {
    pub value: Result<String, Stopped>,
    pub logs: Vec<String>,
    pub calls: usize,
}

/// The most a run's logs keep; what comes after is counted, not kept.
const LOG_BYTES: usize = 64 * 1024;
/// The engine's own stack (a deep recursion is an error, not a crash).
const STACK_BYTES: usize = 512 * 1024;

/// Installs `console` and `tools` and hides the host functions behind
/// them; evaluates to `[settle, watch]`: the function that settles call
/// promises, and the one that hands how the script's promise settled to
/// the host (so that no host function is left where the script can call it).
const PRELUDE: &str = r#"(() => {
  "use strict";
  const call = globalThis.__evo_call, log = globalThis.__evo_log, done = globalThis.__evo_done;
  delete globalThis.__evo_call;
  delete globalThis.__evo_log;
  delete globalThis.__evo_done;
  const pending = new Map();
  const show = (v) => {
    if (typeof v === "string") return v;
    if (v instanceof Error) return String(v);
    try { const j = JSON.stringify(v); return j === undefined ? String(v) : j; } catch (_) { return String(v); }
  };
  const line = (...a) => log(a.map(show).join(" "));
  globalThis.console = Object.freeze({ log: line, info: line, warn: line, error: line, debug: line });
  const tool = (name) => (args) => new Promise((resolve, reject) => {
    const text = JSON.stringify(args === undefined ? {} : args);
    pending.set(call(name, text === undefined ? "{}" : text), { resolve, reject });
  });
  globalThis.tools = new Proxy(Object.create(null), {
    get: (_, name) => (typeof name === "string" && name !== "then") ? tool(name) : undefined,
    set: () => false,
    defineProperty: () => false,
  });
  const settle = (id, ok, payload) => {
    const p = pending.get(id);
    if (p === undefined) return;
    pending.delete(id);
    if (ok) p.resolve(JSON.parse(payload)); else p.reject(new Error(payload));
  };
  const watch = (script) => Promise.resolve(script).then(
    (v) => {
      let j;
      try { j = JSON.stringify(v === undefined ? null : v); }
      catch (e) { done(2, String(e)); return; }
      if (j === undefined) done(2, "a " + typeof v + " has no JSON form");
      else done(0, j);
    },
    (e) => done(1, (e instanceof Error) ? String(e) : ("uncaught " + (() => { try { return JSON.stringify(e); } catch (_) { return String(e); } })())),
  );
  return [settle, watch];
})()"#;

/// Wraps the script's body: evaluates to its promise, which `watch` follows.
fn wrapped(code: &str) -> String {
    format!(
        r#"(async () => {{
{code}
}})()"#
    )
}

/// Runs `code` (an async function body). `send` hands a call out (false:
/// nobody takes calls any more); `answers` brings their answers back;
/// `cancel` stops the run from outside.
pub fn run(
    code: &str,
    limits: Limits,
    send: impl Fn(ToolCall) -> bool + 'static,
    answers: &Receiver<CallAnswer>,
    cancel: &Arc<AtomicBool>,
) -> Outcome {
    let logs = Rc::new(RefCell::new(Logs::default()));
    let calls = Rc::new(Cell::new(0usize));
    let deadline = Instant::now() + limits.timeout;
    let value = match start(limits, deadline, cancel) {
        Ok((rt, context, stop)) => {
            let value = context.with(|ctx| {
                let run = Run {
                    ctx,
                    limits,
                    deadline,
                    stop,
                    cancel: cancel.clone(),
                };
                run.drive(code, send, answers, &logs, &calls)
            });
            drop(context);
            drop(rt);
            value
        }
        Err(e) => Err(Stopped::Threw(format!(
            "the script engine could not start: {e}"
        ))),
    };
    let logs =
        Rc::try_unwrap(logs).map_or_else(|l| l.borrow().lines.clone(), |l| l.into_inner().finish());
    Outcome {
        value,
        logs,
        calls: calls.get(),
    }
}

/// Why the interrupt hook stops the script.
#[derive(Default)]
struct StopFlags {
    max_calls: AtomicBool,
    /// The allocator refused memory past the limit (the engine may then
    /// throw `null`, unable to allocate even the error).
    memory: AtomicBool,
}

/// The engine's allocator: Rust's, with the run's heap limit kept here, so
/// that a refusal is known for what it is.
struct Metered {
    used: usize,
    limit: usize,
    flags: Arc<StopFlags>,
}

impl Metered {
    fn admits(&mut self, more: usize) -> bool {
        if self.used.saturating_add(more) > self.limit {
            self.flags.memory.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn track(&mut self, p: *mut u8) -> *mut u8 {
        if !p.is_null() {
            // SAFETY: `p` was just allocated by RustAllocator.
            self.used += unsafe { RustAllocator::usable_size(p) };
        }
        p
    }
}

// SAFETY: every call is passed to RustAllocator unchanged; only the counts
// and the refusal past the limit are added.
unsafe impl Allocator for Metered {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.admits(size) {
            return std::ptr::null_mut();
        }
        let p = RustAllocator.alloc(size);
        self.track(p)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        if !self.admits(count.saturating_mul(size)) {
            return std::ptr::null_mut();
        }
        let p = RustAllocator.calloc(count, size);
        self.track(p)
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: `ptr` came from this allocator, i.e. from RustAllocator.
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(ptr));
            RustAllocator.dealloc(ptr);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator, i.e. from RustAllocator.
        let old = unsafe { RustAllocator::usable_size(ptr) };
        if new_size > old && !self.admits(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above.
        let p = unsafe { RustAllocator.realloc(ptr, new_size) };
        if !p.is_null() {
            self.used = self.used.saturating_sub(old);
            self.track(p);
        }
        p
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: `ptr` came from this allocator, i.e. from RustAllocator.
        unsafe { RustAllocator::usable_size(ptr) }
    }
}

/// A runtime with the run's limits and an interrupt hook that stops the
/// script past its deadline, past `max_calls`, or when cancelled.
fn start(
    limits: Limits,
    deadline: Instant,
    cancel: &Arc<AtomicBool>,
) -> rquickjs::Result<(Runtime, Context, Arc<StopFlags>)> {
    let stop = Arc::new(StopFlags::default());
    let rt = Runtime::new_with_alloc(Metered {
        used: 0,
        limit: limits.memory_bytes,
        flags: stop.clone(),
    })?;
    rt.set_max_stack_size(STACK_BYTES);
    let (flags, cancel) = (stop.clone(), cancel.clone());
    rt.set_interrupt_handler(Some(Box::new(move || {
        flags.max_calls.load(Ordering::Relaxed)
            || flags.memory.load(Ordering::Relaxed)
            || cancel.load(Ordering::Relaxed)
            || Instant::now() >= deadline
    })));
    let context = Context::full(&rt)?;
    Ok((rt, context, stop))
}

/// What a run has logged.
#[derive(Default)]
struct Logs {
    lines: Vec<String>,
    bytes: usize,
    dropped: usize,
}

impl Logs {
    fn push(&mut self, line: String) {
        if self.bytes + line.len() > LOG_BYTES {
            self.dropped += 1;
            return;
        }
        self.bytes += line.len();
        self.lines.push(line);
    }

    fn finish(mut self) -> Vec<String> {
        if self.dropped > 0 {
            self.lines.push(format!(
                "[evo] {} more log lines were dropped (logs keep {} KiB)",
                self.dropped,
                LOG_BYTES / 1024
            ));
        }
        self.lines
    }
}

/// One run inside its context.
struct Run<'js> {
    ctx: Ctx<'js>,
    limits: Limits,
    deadline: Instant,
    stop: Arc<StopFlags>,
    cancel: Arc<AtomicBool>,
}

impl<'js> Run<'js> {
    fn drive(
        &self,
        code: &str,
        send: impl Fn(ToolCall) -> bool + 'static,
        answers: &Receiver<CallAnswer>,
        logs: &Rc<RefCell<Logs>>,
        calls: &Rc<Cell<usize>>,
    ) -> Result<String, Stopped> {
        let done: Rc<RefCell<Option<(i32, String)>>> = Rc::new(RefCell::new(None));
        let in_flight = Rc::new(Cell::new(0usize));
        let (settle, watch) = self.install(send, logs, calls, &done, &in_flight)?;
        let followed = self
            .ctx
            .eval::<Value, _>(wrapped(code))
            .and_then(|script| watch.call::<_, Value>((script,)));
        if let Err(e) = followed {
            return Err(self.why(e));
        }
        loop {
            while self.ctx.execute_pending_job() {}
            if let Some((kind, text)) = done.borrow_mut().take() {
                // A limit hit stops the run even if the script caught it.
                if let Some(stopped) = self.stopped() {
                    return Err(stopped);
                }
                return match kind {
                    0 => Ok(text),
                    1 => Err(Stopped::Threw(text)),
                    _ => Err(Stopped::NotJson(text)),
                };
            }
            if let Some(stopped) = self.stopped() {
                return Err(stopped);
            }
            if in_flight.get() == 0 {
                return Err(Stopped::Stalled);
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            let answer = match answers.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(a) => a,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Err(Stopped::Cancelled),
            };
            in_flight.set(in_flight.get().saturating_sub(1));
            let (ok, payload) = match answer.answer {
                Ok(v) => (true, v),
                Err(e) => (false, e),
            };
            if let Err(e) = settle.call::<_, ()>((answer.id, ok, payload)) {
                return Err(self.why(e));
            }
        }
    }

    /// A limit hit or a cancellation, if any.
    fn stopped(&self) -> Option<Stopped> {
        if self.stop.memory.load(Ordering::Relaxed) {
            Some(Stopped::Memory)
        } else if self.stop.max_calls.load(Ordering::Relaxed) {
            Some(Stopped::MaxCalls)
        } else if self.cancel.load(Ordering::Relaxed) {
            Some(Stopped::Cancelled)
        } else if Instant::now() >= self.deadline {
            Some(Stopped::Timeout)
        } else {
            None
        }
    }

    /// What an engine error means for the run.
    fn why(&self, e: rquickjs::Error) -> Stopped {
        if let Some(stopped) = self.stopped() {
            return stopped;
        }
        let allocation = matches!(e, rquickjs::Error::Allocation);
        let text = match e {
            rquickjs::Error::Exception => describe(&self.ctx.catch()),
            other => other.to_string(),
        };
        if allocation || text.contains("out of memory") {
            Stopped::Memory
        } else {
            Stopped::Threw(text)
        }
    }

    /// The host functions and the prelude; returns `settle` and `watch`.
    fn install(
        &self,
        send: impl Fn(ToolCall) -> bool + 'static,
        logs: &Rc<RefCell<Logs>>,
        calls: &Rc<Cell<usize>>,
        done: &Rc<RefCell<Option<(i32, String)>>>,
        in_flight: &Rc<Cell<usize>>,
    ) -> Result<(Function<'js>, Function<'js>), Stopped> {
        let ctx = &self.ctx;
        let globals = ctx.globals();
        let (calls, in_flight, stop) = (calls.clone(), in_flight.clone(), self.stop.clone());
        let max = self.limits.max_calls;
        // Closures take the context as a parameter: one captured would be a
        // reference the engine's garbage collector cannot see (a leak).
        let call = Function::new(
            ctx.clone(),
            move |cx: Ctx<'js>, tool: String, args: String| {
                if calls.get() >= max {
                    stop.max_calls.store(true, Ordering::Relaxed);
                    return Err(Exception::throw_message(
                        &cx,
                        &format!("code_mode.max_calls ({max}) reached"),
                    ));
                }
                let id = u32::try_from(calls.get()).unwrap_or(u32::MAX);
                if !send(ToolCall { id, tool, args }) {
                    return Err(Exception::throw_message(&cx, "the run was stopped"));
                }
                calls.set(calls.get() + 1);
                in_flight.set(in_flight.get() + 1);
                Ok(id)
            },
        );
        let logs = logs.clone();
        let log = Function::new(ctx.clone(), move |line: String| {
            logs.borrow_mut().push(line);
        });
        let done = done.clone();
        let finished = Function::new(ctx.clone(), move |kind: i32, text: String| {
            *done.borrow_mut() = Some((kind, text));
        });
        let set = || -> rquickjs::Result<(Function<'js>, Function<'js>)> {
            globals.set("__evo_call", call?)?;
            globals.set("__evo_log", log?)?;
            globals.set("__evo_done", finished?)?;
            let pair = ctx.eval::<Array, _>(PRELUDE)?;
            Ok((pair.get(0)?, pair.get(1)?))
        };
        set().map_err(|e| self.why(e))
    }
}

/// An exception as the script would print it: `Name: message`.
fn describe(v: &Value<'_>) -> String {
    if let Some(e) = v.as_exception() {
        let name = e
            .get::<_, String>("name")
            .unwrap_or_else(|_| "Error".into());
        return format!("{name}: {}", e.message().unwrap_or_default());
    }
    v.as_string()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| "an error with no message".into())
}

#[cfg(test)]
mod tests;
