//! The one report type every experiment returns ([`EvalReport`]: the text
//! `rocast sim` prints and the files it writes), and what the experiments share to
//! build one: independent runs on worker threads ([`parallel`]), the size labels
//! of their tables ([`fmt_size`]) and the tolerance of their verdicts ([`reproduced`]).

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

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

/// Set by [`cancel_runs`]: [`parallel`] starts no more jobs (those running finish).
static CANCELLED: AtomicBool = AtomicBool::new(false);

/// Stops every experiment of the process at its next job: [`parallel`] starts no job
/// after this, and returns an error once the jobs already running have finished
/// (a point is not cut in the middle). The Python package calls it on Ctrl-C; `on`
/// false lets runs start again.
pub fn cancel_runs(on: bool) {
    CANCELLED.store(on, Ordering::SeqCst);
}

/// The error [`parallel`] returns for a cancelled run.
pub const CANCELLED_MESSAGE: &str = "cancelled: the run was interrupted";

/// Turns [`parallel`]'s progress bar on or off.
pub fn set_progress(on: bool) {
    PROGRESS.store(on, Ordering::Relaxed);
}

/// Runs `jobs` on `threads` threads (0: one per core, never more than there are
/// jobs); results in job order, and the first error in job order after every job ran.
/// With [`set_progress`] on, the outermost call shows runs done of all and the time
/// spent.
/// A pool that cannot start is an error of the job's type (`E: From<String>`).
pub fn parallel<T: Send, J: Sync, E: Send + From<String>>(
    threads: u32,
    jobs: &[J],
    run: impl Fn(&J) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    // A call made from a job of another runs on that job's worker: only the outermost
    // (not on a pool's thread) draws.
    let outer = rayon::current_thread_index().is_none();
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
    r
}

fn parallel_inner<T: Send, J: Sync, E: Send + From<String>>(
    threads: u32,
    jobs: &[J],
    run: impl Fn(&J) -> Result<T, E> + Sync,
    bar: Option<&indicatif::ProgressBar>,
) -> Result<Vec<T>, E> {
    let n = rocast_sim::run::threads_for(threads as usize).min(jobs.len().max(1));
    // A pool of its own per call: the thread count is this call's, and a nested call
    // gets its own workers as the caller's threads knob says.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| E::from(format!("cannot start {n} worker threads: {e}")))?;
    let run_all = || -> Vec<Result<T, E>> {
        pool.install(|| {
            jobs.par_iter()
                // One job at a time per worker: runs differ widely in length.
                .with_max_len(1)
                .map(|j| {
                    if CANCELLED.load(Ordering::SeqCst) {
                        return Err(E::from(CANCELLED_MESSAGE.to_string()));
                    }
                    let r = run(j);
                    if let Some(b) = bar {
                        b.inc(1);
                    }
                    r
                })
                .collect()
        })
    };
    let out = if rayon::current_thread_index().is_some() {
        // On another pool's worker, install would run that pool's other jobs while it
        // waits (more runs at once than asked for); a plain thread only waits.
        std::thread::scope(|s| {
            s.spawn(run_all)
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    } else {
        run_all()
    };
    out.into_iter().collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_keeps_job_order_and_reports_the_first_error_in_it() {
        let jobs: Vec<u64> = (0..40).collect();
        for threads in [0, 1, 3, 64] {
            // Later jobs finish first: the order is the jobs', not completion's.
            let out = parallel(threads, &jobs, |&j| {
                std::thread::sleep(std::time::Duration::from_micros(40 - j));
                Ok::<_, String>(j * j)
            })
            .unwrap();
            assert_eq!(out, jobs.iter().map(|j| j * j).collect::<Vec<_>>());
        }
        let r: Result<Vec<u64>, String> = parallel(4, &jobs, |&j| {
            if j % 7 == 3 {
                Err(format!("job {j}"))
            } else {
                Ok(j)
            }
        });
        assert_eq!(r, Err("job 3".to_string()));
    }

    #[test]
    fn nested_parallel_calls_run_and_keep_order() {
        let outer: Vec<u64> = (0..6).collect();
        let out = parallel(3, &outer, |&i| {
            let inner: Vec<u64> = (0..5).collect();
            let v = parallel(2, &inner, |&k| Ok::<_, String>(i * 10 + k))?;
            Ok::<_, String>(v.iter().sum::<u64>())
        })
        .unwrap();
        assert_eq!(out, outer.iter().map(|i| i * 50 + 10).collect::<Vec<_>>());
    }
}
