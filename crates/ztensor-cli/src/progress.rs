//! Progress on a terminal: one line that moves with the work done, silent when standard error
//! is not a terminal or `--quiet` is given.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

use crate::cmd::text::{plural, shown};

/// Progress shown on a terminal, one line that fits its width; silent otherwise. It moves with
/// the work done (decoded bytes compressed and placed in the output, or verified), not with the
/// bytes read: it reaches the total when the work does.
pub struct Bar {
    bar: Option<ProgressBar>,
    done: AtomicU64,
}

impl Bar {
    pub fn new(total_bytes: u64, quiet: bool) -> Bar {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total_bytes);
            // `wide_msg` takes what the line has left and is cut to it, so the line never
            // wraps; sizes in the decimal units the summaries use.
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} {percent:>3}% {decimal_bytes}/{decimal_total_bytes} \
                 ({decimal_bytes_per_sec}, {eta}) {wide_msg}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Bar { bar, done: AtomicU64::new(0) }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl ztensor_par::Progress for Bar {
    fn bytes_done(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }
    fn object_done(&self, name: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(b) = &self.bar {
            let done = plural(usize::try_from(done).unwrap_or(usize::MAX), "object");
            b.set_message(format!("{done}, last {}", shown(name)));
        }
    }
}
