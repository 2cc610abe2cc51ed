//! Whether the async runtime's workers have time to spare, read from tokio's runtime
//! metrics (each worker's busy time: the time it was not parked). Group commit paces its
//! syncs while they have none ([`super::commit`]): every sync then costs CPU the requests
//! waiting for the workers would have used.
//!
//! Must not touch: the runtime itself (this only reads its counters), when to sync (the
//! flusher decides).

use std::time::{Duration, Instant};

use tokio::runtime::RuntimeMetrics;

/// The stretch the workers' busy share is measured over: long enough for tokio to have
/// counted each worker's busy time several times (it does when a worker parks, and every 61
/// scheduler ticks while it does not), short enough to follow a load that comes and goes.
const STRETCH: Duration = Duration::from_millis(10);

/// The share of a stretch the workers must have been busy for to count as saturated.
const SATURATED_FROM: f64 = 0.9;

/// The workers' busy share over the last whole stretch.
pub struct Saturation {
    metrics: Option<RuntimeMetrics>,
    /// When the stretch being measured began, and the workers' busy time then.
    since: Instant,
    busy: Duration,
    saturated: bool,
}

impl Saturation {
    /// Reading the runtime the caller runs on; outside one (tools, some tests), never
    /// saturated.
    pub fn of_current_runtime() -> Saturation {
        let metrics = tokio::runtime::Handle::try_current()
            .ok()
            .map(|runtime| runtime.metrics());
        let busy = metrics.as_ref().map(total_busy).unwrap_or_default();
        Saturation {
            metrics,
            since: Instant::now(),
            busy,
            saturated: false,
        }
    }

    /// Whether the workers were busy for at least nine tenths of the last whole stretch
    /// (`STRETCH`, 10 ms) that ended by `now`. After a quiet spell the stretch just ended
    /// is the whole spell, and it says no.
    pub fn saturated(&mut self, now: Instant) -> bool {
        let Some(metrics) = &self.metrics else {
            return false;
        };
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= STRETCH {
            let busy = total_busy(metrics);
            let share = busy_share(
                busy.saturating_sub(self.busy),
                elapsed,
                metrics.num_workers(),
            );
            self.saturated = share >= SATURATED_FROM;
            self.since = now;
            self.busy = busy;
        }
        self.saturated
    }
}

/// Every worker's busy time since the runtime started, summed.
fn total_busy(metrics: &RuntimeMetrics) -> Duration {
    (0..metrics.num_workers())
        .map(|worker| metrics.worker_total_busy_duration(worker))
        .sum()
}

/// The share of `elapsed` that `workers` workers were busy for, `busy` between them.
fn busy_share(busy: Duration, elapsed: Duration, workers: usize) -> f64 {
    if workers == 0 || elapsed.is_zero() {
        return 0.0;
    }
    busy.as_secs_f64() / (elapsed.as_secs_f64() * workers as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_of_every_worker_s_time() {
        let ms = Duration::from_millis;
        assert_eq!(busy_share(ms(20), ms(10), 2), 1.0);
        assert_eq!(busy_share(ms(10), ms(10), 2), 0.5);
        assert_eq!(busy_share(ms(10), ms(10), 0), 0.0);
        assert_eq!(busy_share(ms(10), Duration::ZERO, 2), 0.0);
    }

    #[test]
    fn outside_a_runtime_the_workers_are_never_saturated() {
        let mut saturation = Saturation::of_current_runtime();
        assert!(!saturation.saturated(Instant::now() + STRETCH * 2));
    }

    #[test]
    fn busy_workers_are_saturated_and_idle_ones_are_not() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut saturation = runtime.block_on(async { Saturation::of_current_runtime() });
        // Idle: the worker is parked the whole stretch.
        std::thread::sleep(STRETCH * 3);
        assert!(!saturation.saturated(Instant::now()));
        // Busy: a task keeps the worker for ten stretches in one poll.
        saturation.saturated(Instant::now());
        runtime
            .block_on(runtime.spawn(async {
                let until = Instant::now() + STRETCH * 10;
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }))
            .unwrap();
        // Counted once the worker finds nothing more to run.
        std::thread::sleep(STRETCH / 5);
        let busy = saturation.saturated(Instant::now());
        assert!(busy, "a worker that never parked counts as saturated");
    }
}
