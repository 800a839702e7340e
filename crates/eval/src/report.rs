//! The one report type every experiment returns ([`EvalReport`]: the text
//! `rocast sim` prints and the files it writes), and what the experiments share to
//! build one: independent runs on worker threads ([`parallel`]), the size labels
//! of their tables ([`fmt_size`]) and the tolerance of their verdicts ([`reproduced`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// What one experiment produced: the report, files to write (name, contents), and
/// frames captured on `output.capture_links` (time ps, Ethernet frame), which
/// `rocast sim` writes to `capture.pcap`.
pub struct EvalReport {
    pub text: String,
    pub files: Vec<(String, String)>,
    pub capture: Vec<(u64, Vec<u8>)>,
    /// One structured verdict per claim of the paper the experiment checks: `rocast
    /// sim` renders the report's verdict section and `verdicts.json` from them.
    pub verdicts: Vec<crate::verdict::Verdict>,
}

/// Whether [`parallel`] draws a progress bar (on stderr, only when it is a terminal):
/// `rocast sim` turns it on unless `--quiet`.
static PROGRESS: AtomicBool = AtomicBool::new(false);
/// Nesting depth of [`parallel`]: only the outermost call draws.
static DEPTH: AtomicUsize = AtomicUsize::new(0);

/// Turns [`parallel`]'s progress bar on or off.
pub fn set_progress(on: bool) {
    PROGRESS.store(on, Ordering::Relaxed);
}

/// Runs `jobs` on the configured number of threads; results in job order. With
/// [`set_progress`] on, the outermost call shows runs done of all and the time spent.
pub fn parallel<T: Send, J: Sync, E: Send>(
    threads: u32,
    jobs: &[J],
    run: impl Fn(&J) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    let outer = DEPTH.fetch_add(1, Ordering::Relaxed) == 0;
    let bar = (outer && PROGRESS.load(Ordering::Relaxed) && jobs.len() > 1).then(|| {
        let b = indicatif::ProgressBar::new(jobs.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} runs {pos}/{len} [{bar:30}] {elapsed} (eta {eta})",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        b
    });
    let r = parallel_inner(threads, jobs, run, bar.as_ref());
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    DEPTH.fetch_sub(1, Ordering::Relaxed);
    r
}

fn parallel_inner<T: Send, J: Sync, E: Send>(
    threads: u32,
    jobs: &[J],
    run: impl Fn(&J) -> Result<T, E> + Sync,
    bar: Option<&indicatif::ProgressBar>,
) -> Result<Vec<T>, E> {
    let n = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads as usize
    }
    .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Result<T, E>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(j) = jobs.get(i) else { break };
                let r = run(j);
                out.lock().expect("no panics while held")[i] = Some(r);
                if let Some(b) = bar {
                    b.inc(1);
                }
            });
        }
    });
    out.into_inner()
        .expect("threads joined")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

// The verdict tolerance lives with the verdict words; experiments name it here too.
pub use crate::verdict::{range_verdict, reproduced, verdict_word, REPRODUCED_WITHIN};

/// `64`, `4K`, `8M`, `1G`: the sizes the tables print.
pub fn fmt_size(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}
