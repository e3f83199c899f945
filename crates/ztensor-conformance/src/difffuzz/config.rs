//! A fuzzing run's settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::writer_check::Target;

/// How long or how many cases a run takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// Cases made until this many seconds have passed.
    Seconds(f64),
    /// This many cases.
    Runs(u64),
}

/// A fuzzing run's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The implementation's command (`COMMAND FILE`; `COMMAND --serve` where it speaks it).
    pub command: String,
    /// How long to run.
    pub budget: Budget,
    /// Case `i` is made from `seed + i`.
    pub seed: u64,
    /// The versions cases may have ([`VERSIONS`](super::VERSIONS), 0.1, 1.1 and 1.2, when empty; zTensor 2
    /// only when asked for).
    pub versions: Vec<Target>,
    /// How long one file may take.
    pub timeout: Duration,
    /// Where findings are written (`<class>/<n>.zt` and `.json`), if anywhere.
    pub out: Option<PathBuf>,
    /// Whether an `out` that exists and holds files may be replaced.
    pub force: bool,
    /// Implementation calls a finding's reduction may make.
    pub minimize_calls: u32,
    /// Seconds a finding's reduction may take (a hang costs the timeout each time it is
    /// tried again).
    pub minimize_seconds: f64,
    /// Whether `COMMAND --serve` is tried (else a process per file).
    pub serve: bool,
    /// Whether the implementation is fuzzed as a writer (`COMMAND RECIPE OUT`).
    pub writer: bool,
}

impl Config {
    /// The defaults: 60 s from seed 0, zTensor 0.1, 1.1 and 1.2, 10 s a file, nothing
    /// written.
    pub fn new(command: &str) -> Config {
        Config {
            command: command.to_owned(),
            budget: Budget::Seconds(60.0),
            seed: 0,
            versions: Vec::new(),
            timeout: Duration::from_secs(10),
            out: None,
            force: false,
            minimize_calls: 400,
            minimize_seconds: 60.0,
            serve: true,
            writer: false,
        }
    }
}
