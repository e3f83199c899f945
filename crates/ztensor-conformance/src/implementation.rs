//! Talking to an implementation through the reading protocol: `COMMAND FILE` prints a
//! `ztensor-dump/1` dump and exits 0 (accepted) or 1 (rejected), one process a file; or, where
//! the implementation speaks it, `COMMAND --serve` reads one path a line on stdin and answers
//! each with a dump on one line of stdout (a rejected file's dump has a top-level `error`),
//! one process for many files.
//!
//! Each process is the leader of a process group of its own: a file that hangs it past the
//! timeout has the whole group killed (a wrapper script's children too), and a process that
//! dies is started again for the next file.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value as Json;

/// What an implementation made of one file.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Accepted, with its dump.
    Accepted(Json),
    /// Rejected, with its dump (whose `error` says why).
    Rejected(Json),
    /// Exited with another status, died of a signal, or printed something that is not a dump.
    Crash(String),
    /// No answer within the timeout (its process group was killed).
    Hang,
}

impl Verdict {
    /// Accepted or rejected: a verdict, not a failure to give one.
    pub fn is_answer(&self) -> bool {
        matches!(self, Verdict::Accepted(_) | Verdict::Rejected(_))
    }
}

/// How a process run by [`run_to_end`] came out.
#[derive(Debug)]
pub enum Ran {
    /// It ended: its status, stdout and the end of its stderr (at most [`STDERR_KEPT`]).
    Ended(ExitStatus, Vec<u8>, Vec<u8>),
    /// No end within the timeout: its process group was killed.
    Hang,
    /// It printed more than the limit on stdout: its process group was killed at once.
    Flooded(usize),
}

/// The most bytes of stderr kept (its end: where a crash says what happened). The rest is
/// read and dropped, so a chatty process never blocks on a full pipe and never costs memory.
pub const STDERR_KEPT: usize = 64 << 10;

/// The most bytes a dump of a file of `file_len` bytes can need: 1 MiB, plus 64 times the
/// file's size. A dump restates the names, shapes and attributes of the manifest, where every
/// byte becomes at most a few characters of JSON (six for a control character escaped, three
/// for a one-byte empty container and its comma), and adds a fixed hundred-odd bytes per
/// component (dtype, encoding, SHA-256) for the dozens of manifest bytes each component takes.
/// An implementation that prints more has not printed a dump: it is a crash, stopped as soon
/// as it passes the limit (an endless writer would otherwise take all memory).
pub fn dump_limit(file_len: u64) -> usize {
    let limit = file_len.saturating_mul(64).saturating_add(1 << 20);
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// What a writer may print on stdout (its output is the file; stdout carries messages only):
/// 16 MiB, beyond which it is a crash.
pub const MESSAGES_LIMIT: usize = 16 << 20;

/// Reads `pipe` to its end, keeping its last `keep` bytes.
fn tail(mut pipe: impl std::io::Read, keep: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        match pipe.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > 2 * keep {
                    kept.drain(..kept.len() - keep);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if kept.len() > keep {
        kept.drain(..kept.len() - keep);
    }
    kept
}

/// A process run to its end; killed with its group after `timeout` ([`Ran::Hang`]), or as soon
/// as it prints more than `stdout_limit` bytes on stdout ([`Ran::Flooded`]).
///
/// # Errors
/// When the process cannot be started.
pub fn run_to_end(
    command: &mut Command,
    timeout: Duration,
    stdout_limit: usize,
) -> std::io::Result<Ran> {
    let mut child =
        spawn_group(command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()))?;
    // The pipes are drained while the child runs, so a chatty child never blocks on them;
    // stdout up to its limit (one byte more says it went past), stderr's end.
    let flooded = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stdout = child.stdout.take().map(|pipe| {
        let flooded = Arc::clone(&flooded);
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let more = u64::try_from(stdout_limit).unwrap_or(u64::MAX).saturating_add(1);
            let _ = pipe.take(more).read_to_end(&mut bytes);
            if bytes.len() > stdout_limit {
                flooded.store(true, std::sync::atomic::Ordering::SeqCst);
                bytes = Vec::new();
            }
            bytes
        })
    });
    let stderr =
        child.stderr.take().map(|pipe| std::thread::spawn(move || tail(pipe, STDERR_KEPT)));
    let is_flooded = || flooded.load(std::sync::atomic::Ordering::SeqCst);
    let started = Instant::now();
    let mut pause = Duration::from_micros(200);
    let status = loop {
        if is_flooded() {
            kill_group(&mut child);
            break None;
        }
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > timeout {
            kill_group(&mut child);
            break None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    };
    // What the leader left running in its group (a wrapper's child still holding the pipes)
    // goes with it, so the pipes end and the readers below return.
    let finished = |t: &Option<std::thread::JoinHandle<Vec<u8>>>| {
        t.as_ref().is_none_or(std::thread::JoinHandle::is_finished)
    };
    // What escaped the group (`setsid`) and holds them is killed too where this process
    // inherits it (a subreaper); elsewhere the pipes are given up on after a second.
    let ended = Instant::now();
    let mut killed = false;
    while !(finished(&stdout) && finished(&stderr)) {
        if !killed && ended.elapsed() > Duration::from_millis(100) {
            kill_group(&mut child);
            killed = true;
        }
        if ended.elapsed() > Duration::from_secs(1) {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let join = |t: Option<std::thread::JoinHandle<Vec<u8>>>| {
        t.filter(std::thread::JoinHandle::is_finished)
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    };
    let (stdout, stderr) = (join(stdout), join(stderr));
    forget_group(&child);
    // A process it left behind in its group, or out of it, goes with it.
    kill_pgid(child.id());
    kill_strays();
    Ok(match status {
        _ if is_flooded() => Ran::Flooded(stdout_limit),
        Some(status) => Ran::Ended(status, stdout, stderr),
        None => Ran::Hang,
    })
}

/// The process groups this process started and has not yet reaped the leader of, by leader
/// pid (= group id): what [`stop_all`] kills. `true` in the second place once it has.
static LIVE: Mutex<(Vec<u32>, bool)> = Mutex::new((Vec::new(), false));

fn live() -> std::sync::MutexGuard<'static, (Vec<u32>, bool)> {
    LIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts `command` as the leader of a process group of its own, registered for
/// [`stop_all`]; refused once that has run.
fn spawn_group(command: &mut Command) -> std::io::Result<Child> {
    // Registered under the lock it is started under: `stop_all` never misses one.
    let mut live = live();
    if live.1 {
        return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "stopping"));
    }
    crate::child::die_with_parent(command);
    let child = command.process_group(0).spawn()?;
    live.0.push(child.id());
    Ok(child)
}

/// Takes `child`'s group out of [`stop_all`]'s list, once its leader is reaped (its pid, the
/// group's id, may then be given to another process).
fn forget_group(child: &Child) {
    live().0.retain(|&pid| pid != child.id());
}

/// Kills the process group `pid` leads.
fn kill_pgid(pid: u32) {
    crate::child::kill_group(pid);
}

/// Kills what escaped the process groups of this process's implementations (a `setsid`
/// child whose parent ended), where this process inherits such orphans
/// ([`crate::child::become_subreaper`]); its registered implementations are left alone.
pub fn kill_strays() {
    let live = live();
    crate::child::kill_strays(&live.0);
}

/// Kills the process group `child` leads, and reaps `child`.
fn kill_group(child: &mut Child) {
    kill_pgid(child.id());
    let _ = child.kill();
    let _ = child.wait();
    forget_group(child);
    kill_strays();
}

/// Kills the process group of every implementation this process started and has not reaped,
/// and starts no more: for a program's signal handler, before it exits (the groups are not in
/// the terminal's foreground group, so Ctrl-C does not reach them by itself).
/// `ztensor-conformance` calls it on SIGINT, SIGTERM and SIGHUP.
pub fn stop_all() {
    let mut live = live();
    live.1 = true;
    for &pid in &live.0 {
        kill_pgid(pid);
    }
    // What escaped them; the leaders themselves are reaped by whoever waits on them.
    crate::child::kill_strays(&live.0);
}

/// Whether [`stop_all`] has run: the run is being stopped, and what an implementation said
/// since is not to be believed (it was killed).
pub fn stopping() -> bool {
    live().1
}

/// A dump's verdict: accepted when it has no top-level `error`.
fn answer(dump: Json) -> Verdict {
    if dump["error"].is_object() { Verdict::Rejected(dump) } else { Verdict::Accepted(dump) }
}

/// Whether `json` is a dump of the protocol.
fn is_dump(json: &Json) -> bool {
    json["dump"] == "ztensor-dump/1"
}

/// What a status says, for a crash report.
fn status_words(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "ended without a status".to_owned(),
    }
}

/// The crash of an implementation that printed more than `limit` bytes for one file.
fn flooded(limit: usize) -> Verdict {
    Verdict::Crash(format!(
        "printed more than {limit} bytes, more than a dump of this file can need (stopped there)"
    ))
}

/// The size of `file`, for [`dump_limit`] (0 when it cannot be told).
fn file_len(file: &Path) -> u64 {
    std::fs::metadata(file).map_or(0, |m| m.len())
}

/// The verdict of one `COMMAND FILE` run.
fn one_shot(program: &str, args: &[String], file: &Path, timeout: Duration) -> Result<Verdict> {
    let limit = dump_limit(file_len(file));
    let (status, stdout, stderr) =
        match run_to_end(Command::new(program).args(args).arg(file), timeout, limit)? {
            Ran::Ended(status, stdout, stderr) => (status, stdout, stderr),
            Ran::Hang => return Ok(Verdict::Hang),
            Ran::Flooded(limit) => return Ok(flooded(limit)),
        };
    let dump: Option<Json> = serde_json::from_slice(&stdout).ok().filter(is_dump);
    Ok(match (status.code(), dump) {
        (Some(0), Some(dump)) if !dump["error"].is_object() => Verdict::Accepted(dump),
        (Some(1), Some(dump)) if dump["error"].is_object() => Verdict::Rejected(dump),
        (Some(0 | 1), _) => {
            Verdict::Crash(format!("{}, and no dump that says so on stdout", status_words(status)))
        }
        _ => {
            // The line that says what happened: a panic's, else the first that says anything.
            let stderr = String::from_utf8_lossy(&stderr);
            let mut lines = stderr.lines().map(str::trim).filter(|l| !l.is_empty());
            let said = lines
                .clone()
                .find(|l| l.contains("panicked at") || l.contains("memory allocation"))
                .or_else(|| lines.next())
                .unwrap_or("nothing on stderr");
            Verdict::Crash(format!("{}: {said}", status_words(status)))
        }
    })
}

/// The words that begin a protocol violation of `--serve`: see [`violation`].
const VIOLATION: &str = "broke the --serve protocol: ";

/// A `--serve` implementation whose answers cannot be matched with the files asked: a crash
/// of the file asked, and the server is started again for the next.
fn violation(what: &str) -> Verdict {
    Verdict::Crash(format!("{VIOLATION}{what}"))
}

/// The least time a freshly started implementation gets to answer the probe file.
const PROBE_PATIENCE: Duration = Duration::from_secs(15);

/// How a server's answers are pinned to the files asked, so that a line too many or too few
/// is told as a violation of the protocol, never taken for another file's answer.
#[derive(Debug, Clone)]
enum Pin {
    /// Not known yet (the probe): answers are taken in order, checked by a path they name.
    Unknown,
    /// Its answers name their path (`"path"`), and one that names another is out of step; an
    /// answer that names none is checked by the fence.
    Named(Fence),
    /// Its answers name no path: every answer is checked by the fence.
    Fenced(Fence),
}

/// A file asked after an answer that names no path: a copy of the probe under a name of its
/// own, which must be answered with the probe's dump. A file answered twice puts its second
/// answer there.
#[derive(Debug, Clone)]
struct Fence {
    file: std::path::PathBuf,
    dump: Json,
}

/// A dump without the `"path"` it names (what is compared when a fence is answered).
fn without_path(mut dump: Json) -> Json {
    if let Some(map) = dump.as_object_mut() {
        map.remove("path");
    }
    dump
}

/// A running `COMMAND --serve`.
#[derive(Debug)]
struct Server {
    child: Child,
    stdin: ChildStdin,
    /// How its answers are pinned to their files.
    pin: Pin,
    /// Its answers, a line each; `Err` when a line passed the limit (and reading stopped).
    lines: Receiver<std::result::Result<String, usize>>,
    /// The most bytes the answer to the file asked may take ([`dump_limit`]).
    limit: Arc<std::sync::atomic::AtomicUsize>,
    /// The last lines it wrote to stderr (what a crash said).
    said: Arc<Mutex<VecDeque<String>>>,
    /// The thread that reads them, which ends when stderr does.
    reading: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(program: &str, args: &[String]) -> std::io::Result<Server> {
        let mut child = spawn_group(
            Command::new(program)
                .args(args)
                .arg("--serve")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )?;
        let said = Arc::new(Mutex::new(VecDeque::new()));
        // stderr is read to its end whatever it holds (bytes that are not UTF-8 included), so
        // a chatty server never blocks on a full pipe.
        let reading = child.stderr.take().map(|stderr| {
            let said = Arc::clone(&said);
            std::thread::spawn(move || {
                let mut stderr = BufReader::new(stderr);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match stderr.read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                    let mut said = said.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if said.len() == 32 {
                        said.pop_front();
                    }
                    said.push_back(text);
                }
            })
        });
        let stdin = child.stdin.take().ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (send, lines) = std::sync::mpsc::channel();
        let limit = Arc::new(std::sync::atomic::AtomicUsize::new(dump_limit(0)));
        let line_limit = Arc::clone(&limit);
        std::thread::spawn(move || {
            let mut stdout = BufReader::new(stdout);
            loop {
                // One line, up to the limit of the file asked for (and its newline).
                let most = line_limit.load(std::sync::atomic::Ordering::SeqCst);
                let mut line = Vec::new();
                let take = u64::try_from(most).unwrap_or(u64::MAX).saturating_add(1);
                match (&mut stdout).take(take).read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                } else if line.len() > most {
                    let _ = send.send(Err(most));
                    break;
                }
                let line = String::from_utf8_lossy(&line).into_owned();
                if send.send(Ok(line)).is_err() {
                    break;
                }
            }
        });
        Ok(Server { child, stdin, lines, limit, said, reading, pin: Pin::Unknown })
    }

    /// Asks for one file, its answer pinned to it ([`Pin`]); `Err` with the verdict when the
    /// server is to be dropped (it died, hung or spoke out of turn).
    fn ask(&mut self, file: &Path, timeout: Duration) -> std::result::Result<Verdict, Verdict> {
        let verdict = self.ask_one(file, timeout)?;
        let named = matches!(&verdict, Verdict::Accepted(d) | Verdict::Rejected(d) if d["path"].is_string());
        let fence = match &self.pin {
            Pin::Fenced(fence) => Some(fence.clone()),
            Pin::Named(fence) if !named => Some(fence.clone()),
            _ => None,
        };
        if let Some(Fence { file: fence, dump }) = fence {
            // The fence's answer must be the probe's: anything else is a line of the file
            // just answered (answered twice), or its answer came late.
            match self.ask_one(&fence, timeout) {
                Ok(Verdict::Accepted(answer)) if without_path(answer.clone()) == dump => {}
                Ok(other) => {
                    let said = match other {
                        Verdict::Accepted(d) | Verdict::Rejected(d) => {
                            d.to_string().chars().take(120).collect()
                        }
                        other => format!("{other:?}"),
                    };
                    return Err(violation(&format!(
                        "after {}, the file asked next was answered with another dump (a file \
                         answered twice, or late?): {said}",
                        file.display()
                    )));
                }
                Err(Verdict::Hang) => {
                    return Err(violation(&format!(
                        "after {}, the file asked next got no answer",
                        file.display()
                    )));
                }
                Err(other) => return Err(other),
            }
        }
        Ok(verdict)
    }

    /// Asks for one file and takes the line that answers it.
    fn ask_one(&mut self, file: &Path, timeout: Duration) -> std::result::Result<Verdict, Verdict> {
        let Some(path) = file.to_str().filter(|p| !p.contains('\n')) else {
            return Err(Verdict::Crash("a path that is not one line of UTF-8".to_owned()));
        };
        // A line that came when nothing was asked: the answers are out of step (a file
        // answered twice), and any answer read from here on could be another file's.
        if let Ok(stray) = self.lines.try_recv() {
            return Err(violation(&format!(
                "it printed a line when nothing was asked (an earlier file answered twice?): {}",
                stray.map_or_else(|n| format!("{n} bytes"), |l| l.chars().take(120).collect())
            )));
        }
        self.limit.store(dump_limit(file_len(file)), std::sync::atomic::Ordering::SeqCst);
        if writeln!(self.stdin, "{path}").and_then(|()| self.stdin.flush()).is_err() {
            return Err(self.died());
        }
        match self.lines.recv_timeout(timeout) {
            Ok(Err(limit)) => Err(Verdict::Crash(format!(
                "answered with a line of more than {limit} bytes, more than a dump of this file \
                 can need (stopped there)"
            ))),
            Ok(Ok(line)) => match serde_json::from_str::<Json>(&line).ok().filter(is_dump) {
                // An answer that names the file it answers must name this one.
                Some(dump) => match &dump["path"] {
                    Json::String(named) if named != path => {
                        Err(violation(&format!("asked for {path}, it answered for {named}")))
                    }
                    _ => Ok(answer(dump)),
                },
                None => Err(Verdict::Crash(format!(
                    "answered with a line that is not a dump: {}",
                    line.chars().take(120).collect::<String>()
                ))),
            },
            Err(RecvTimeoutError::Timeout) => Err(Verdict::Hang),
            Err(RecvTimeoutError::Disconnected) => Err(self.died()),
        }
    }

    /// The crash of a server whose output ended.
    fn died(&mut self) -> Verdict {
        // It closed its output: give it a moment to finish dying, then make sure.
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                _ => break None,
            }
        };
        let ended = status.map_or_else(
            || "closed its output without answering".to_owned(),
            |s| format!("{} without answering", status_words(s)),
        );
        // What it said last: the panic's line, else the last that says anything. With its
        // group gone, stderr has ended, and everything it said has been read.
        kill_group(&mut self.child);
        if let Some(reading) = self.reading.take() {
            // Unless something that escaped the group still holds stderr.
            let deadline = Instant::now() + Duration::from_secs(1);
            while !reading.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if reading.is_finished() {
                let _ = reading.join();
            }
        }
        let said = self.said.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let line = said
            .iter()
            .rev()
            .find(|l| l.contains("panicked at") || l.contains("memory allocation"))
            .or_else(|| said.iter().rev().find(|l| !l.trim().is_empty()));
        Verdict::Crash(match line {
            Some(line) => format!("{ended}: {}", line.trim()),
            None => ended,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

/// An implementation under test.
#[derive(Debug)]
pub struct Implementation {
    program: String,
    args: Vec<String>,
    timeout: Duration,
    /// Whether it speaks `--serve`.
    persistent: bool,
    server: Option<Server>,
    /// How a new server's answers are pinned (learned from the probe).
    pin: Pin,
    /// Processes started (a persistent one counts each restart).
    started: u64,
    /// Each time the server broke the protocol (answered out of step, or not for the file
    /// asked): the file asked was then read by a process of its own.
    violations: Vec<String>,
}

impl Implementation {
    /// Starts talking to `command` (split on whitespace), each file answered within `timeout`.
    /// `probe` is a valid file: the implementation is asked for it twice through `--serve`
    /// (persistent when both answers are dumps; not tried unless `serve`), else once as
    /// `COMMAND FILE`.
    ///
    /// # Errors
    /// A usage error, at once: the command cannot be started, or answers the probe with no
    /// dump at all (it does not speak the protocol).
    pub fn start(
        command: &str,
        timeout: Duration,
        probe: &Path,
        serve: bool,
    ) -> Result<Implementation> {
        let mut words = command.split_whitespace().map(str::to_owned);
        let Some(program) = words.next() else { bail!("empty --impl command") };
        let args: Vec<String> = words.collect();
        let mut this = Implementation {
            program,
            args,
            timeout,
            persistent: false,
            server: None,
            pin: Pin::Unknown,
            started: 0,
            violations: Vec::new(),
        };
        // The probe is answered by a process that has just started (an interpreter, a cold
        // cache, a loaded CI machine): it gets at least `PROBE_PATIENCE`, whatever the per-file
        // timeout. An implementation that does not know --serve usually exits at once, or
        // treats it as a file and answers once, so the wait is rarely used in full.
        let patience = timeout.max(PROBE_PATIENCE);
        if let Some(mut server) =
            serve.then(|| Server::start(&this.program, &this.args).ok()).flatten()
        {
            // Two copies of the probe, under two names (an answer that names its file must
            // name the right one), and a moment for a stray third answer.
            let mut twice = true;
            let mut named = true;
            let mut probe_dump = None;
            for n in 1..=2 {
                let copy = probe.with_file_name(format!("probe-{n}.zt"));
                std::fs::copy(probe, &copy)
                    .with_context(|| format!("copying the probe to {}", copy.display()))?;
                let verdict = server.ask(&copy, patience);
                let _ = std::fs::remove_file(&copy);
                match verdict {
                    Ok(Verdict::Accepted(dump)) => {
                        named &= dump["path"].as_str() == copy.to_str();
                        probe_dump = Some(without_path(dump));
                    }
                    Ok(v) if v.is_answer() => named = false,
                    // Out of turn after a first answer: a server that answers twice. Before
                    // any (n == 1) it is a line printed at start, unasked (`echo hello`, a
                    // banner): not a server at all, judged below as one process per file;
                    // which of the two a line printed at once is would otherwise depend on
                    // whether it arrived before the first question.
                    Err(Verdict::Crash(why)) if why.starts_with(VIOLATION) && n > 1 => {
                        bail!("{command:?} {why} (fix it, or use --process-per-file)")
                    }
                    _ => {
                        twice = false;
                        break;
                    }
                }
            }
            if twice {
                std::thread::sleep(Duration::from_millis(50));
                if let Ok(stray) = server.lines.try_recv() {
                    bail!(
                        "{command:?} {VIOLATION}it answered the probe more than once ({}); fix \
                         it, or use --process-per-file",
                        stray.map_or_else(
                            |n| format!("{n} bytes"),
                            |l| l.chars().take(80).collect()
                        )
                    );
                }
            }
            if twice {
                // Answers that name their files are pinned by the name; others by a fence
                // asked after each file (the probe again, under a name of its own).
                this.pin = match probe_dump {
                    Some(dump) => {
                        let file = probe.with_file_name("probe-fence.zt");
                        std::fs::copy(probe, &file)
                            .with_context(|| format!("copying the probe to {}", file.display()))?;
                        let fence = Fence { file, dump };
                        if named { Pin::Named(fence) } else { Pin::Fenced(fence) }
                    }
                    None => Pin::Unknown,
                };
                server.pin = this.pin.clone();
                this.persistent = true;
                this.started = 1;
                this.server = Some(server);
                return Ok(this);
            }
        }
        match one_shot(&this.program, &this.args, probe, patience) {
            Err(e) => bail!("cannot run {:?}: {e}", command),
            Ok(Verdict::Crash(why)) => bail!(
                "{command:?} does not speak the reading protocol: given a valid file it printed \
                 no ztensor-dump/1 dump ({why})"
            ),
            Ok(Verdict::Hang) => bail!(
                "{command:?} gave no answer for a valid file within {} s",
                patience.as_secs_f64()
            ),
            Ok(_) => {
                this.started = 1;
                Ok(this)
            }
        }
    }

    /// Whether files go to one `--serve` process.
    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// Processes started so far.
    pub fn processes(&self) -> u64 {
        self.started
    }

    /// Each violation of the `--serve` protocol so far (answers out of step, or for another
    /// file): the implementation's fault, not a finding about a file.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// The implementation's verdict on `file`.
    pub fn read(&mut self, file: &Path) -> Verdict {
        if !self.persistent {
            self.started += 1;
            return one_shot(&self.program, &self.args, file, self.timeout)
                .unwrap_or_else(|e| Verdict::Crash(format!("cannot be started again: {e}")));
        }
        if self.server.is_none() {
            match Server::start(&self.program, &self.args) {
                Ok(mut server) => {
                    server.pin = self.pin.clone();
                    self.started += 1;
                    self.server = Some(server);
                }
                Err(e) => return Verdict::Crash(format!("cannot be started again: {e}")),
            }
        }
        let Some(server) = self.server.as_mut() else {
            return Verdict::Crash("no process".to_owned());
        };
        match server.ask(file, self.timeout) {
            Ok(verdict) => verdict,
            // Out of step: no answer read from it can be pinned on this file. The violation is
            // the implementation's, recorded as such; the file is read again by a process of
            // its own, and the next file gets a fresh server.
            Err(Verdict::Crash(why)) if why.starts_with(VIOLATION) => {
                self.server = None;
                self.violations.push(why);
                self.started += 1;
                one_shot(&self.program, &self.args, file, self.timeout)
                    .unwrap_or_else(|e| Verdict::Crash(format!("cannot be started again: {e}")))
            }
            // The file it died or hung on is the one it is charged with; the next file gets a
            // fresh process.
            Err(verdict) => {
                self.server = None;
                verdict
            }
        }
    }
}

impl Drop for Implementation {
    fn drop(&mut self) {
        if let Pin::Named(fence) | Pin::Fenced(fence) = &self.pin {
            let _ = std::fs::remove_file(&fence.file);
        }
    }
}
