//! The data directory's filesystem, watched: a thread checks a few times a second whether
//! free space is above the reserve and whether the directory still takes writes (a one-byte
//! write to a probe file: ext4 remounted read-only after an error still reports itself
//! writable to `statvfs` and `access`, and only a write tells). While either check fails,
//! the store refuses every write with a [`Refusal`] before it reaches the engine, so that a
//! full or read-only disk makes boxsub read-only instead of stopping it; reads go on. The
//! state changes are logged once each, not per request.
//!
//! Must not touch: records, keys, the engine.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How much free space the data directory's filesystem must keep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reserve {
    /// A share of the filesystem's size, in percent, kept between [`RESERVE_FLOOR`] and
    /// [`RESERVE_CAP`] so that it suits a filesystem of tens of megabytes and one of
    /// terabytes alike.
    Percent(f64),
    /// An exact number of bytes.
    Bytes(u64),
}

/// The smallest percentage reserve: room for the engine's next few 512 KiB log segments and
/// a snapshot, so that writes stop well before the engine could meet a full disk. (The
/// write-ahead log needs none: its segments are made in full and then reused.)
pub const RESERVE_FLOOR: u64 = 8 << 20;
/// The largest percentage reserve.
pub const RESERVE_CAP: u64 = 1 << 30;
/// The default reserve.
pub const DEFAULT_RESERVE: Reserve = Reserve::Percent(5.0);

impl Reserve {
    /// The reserve in bytes on a filesystem of `total` bytes.
    pub fn bytes(self, total: u64) -> u64 {
        match self {
            Reserve::Bytes(bytes) => bytes,
            Reserve::Percent(percent) => {
                let share = (total as f64 * percent / 100.0) as u64;
                share.clamp(RESERVE_FLOOR, RESERVE_CAP)
            }
        }
    }
}

/// Why the store refuses writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Free space is below the reserve.
    NearlyFull,
    /// The data directory does not take writes (read-only, or no permission).
    NotWritable,
}

const WRITABLE: u8 = 0;
const NEARLY_FULL: u8 = 1;
const NOT_WRITABLE: u8 = 2;

/// What a check of the filesystem found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskState {
    /// Bytes available to boxsub.
    pub free: u64,
    /// The reserve, in bytes.
    pub reserve: u64,
    /// Whether writes are refused, and why.
    pub refusal: Option<Refusal>,
}

struct Shared {
    state: AtomicU8,
    free: AtomicU64,
    reserve: AtomicU64,
}

/// The watch over one data directory. Dropping it stops the watching thread.
pub struct DiskWatch {
    shared: Arc<Shared>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How often the filesystem is checked: often enough that writes stop well inside the
/// reserve at full ingestion speed, cheap enough to be nothing (two system calls).
pub const CHECK_EVERY: Duration = Duration::from_millis(200);

/// The probe file's name in the data directory.
pub const PROBE_FILE: &str = ".boxsub-probe";

impl DiskWatch {
    /// Checks `dir` once, then starts the thread that checks it every [`CHECK_EVERY`].
    pub fn start(dir: &Path, reserve: Reserve) -> std::io::Result<DiskWatch> {
        let mut checker = Checker::new(dir, reserve);
        let first = checker.check();
        log_change(None, first, dir);
        let shared = Arc::new(Shared {
            state: AtomicU8::new(encode(first.refusal)),
            free: AtomicU64::new(first.free),
            reserve: AtomicU64::new(first.reserve),
        });
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = {
            let shared = shared.clone();
            let dir = dir.to_path_buf();
            std::thread::Builder::new()
                .name("disk-watch".into())
                .spawn(move || {
                    let mut last = first;
                    while let Err(mpsc::RecvTimeoutError::Timeout) =
                        stopped.recv_timeout(CHECK_EVERY)
                    {
                        let now = checker.check();
                        shared.free.store(now.free, Ordering::Relaxed);
                        shared.reserve.store(now.reserve, Ordering::Relaxed);
                        shared.state.store(encode(now.refusal), Ordering::Release);
                        log_change(Some(last), now, &dir);
                        last = now;
                    }
                })?
        };
        Ok(DiskWatch {
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `Err` while writes are refused.
    pub fn writable(&self) -> Result<(), Refusal> {
        match decode(self.shared.state.load(Ordering::Acquire)) {
            None => Ok(()),
            Some(refusal) => Err(refusal),
        }
    }

    /// The last check's findings.
    pub fn state(&self) -> DiskState {
        DiskState {
            free: self.shared.free.load(Ordering::Relaxed),
            reserve: self.shared.reserve.load(Ordering::Relaxed),
            refusal: decode(self.shared.state.load(Ordering::Acquire)),
        }
    }
}

impl Drop for DiskWatch {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn encode(refusal: Option<Refusal>) -> u8 {
    match refusal {
        None => WRITABLE,
        Some(Refusal::NearlyFull) => NEARLY_FULL,
        Some(Refusal::NotWritable) => NOT_WRITABLE,
    }
}

fn decode(state: u8) -> Option<Refusal> {
    match state {
        NEARLY_FULL => Some(Refusal::NearlyFull),
        NOT_WRITABLE => Some(Refusal::NotWritable),
        _ => None,
    }
}

/// Does the checking; owned by the watching thread.
struct Checker {
    dir: PathBuf,
    reserve: Reserve,
    probe: Option<File>,
    last_error: Option<String>,
}

impl Checker {
    fn new(dir: &Path, reserve: Reserve) -> Checker {
        Checker {
            dir: dir.to_path_buf(),
            reserve,
            probe: None,
            last_error: None,
        }
    }

    fn check(&mut self) -> DiskState {
        let (free, total) = match nix::sys::statvfs::statvfs(&self.dir) {
            Ok(stats) => {
                let unit = stats.fragment_size();
                (stats.blocks_available() * unit, stats.blocks() * unit)
            }
            Err(error) => {
                self.last_error = Some(format!("statvfs: {error}"));
                (0, 0)
            }
        };
        let reserve = self.reserve.bytes(total);
        let refusal = match self.probe_write() {
            Err(error) if !is_out_of_space(&error) => {
                self.last_error = Some(error.to_string());
                Some(Refusal::NotWritable)
            }
            _ if free < reserve => Some(Refusal::NearlyFull),
            _ => None,
        };
        DiskState {
            free,
            reserve,
            refusal,
        }
    }

    /// Writes one byte over the probe file's first byte (no new space needed once it
    /// exists); the file is created on first use.
    fn probe_write(&mut self) -> std::io::Result<()> {
        if self.probe.is_none() {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(self.dir.join(PROBE_FILE))?;
            self.probe = Some(file);
        }
        match &self.probe {
            Some(file) => file.write_at(b".", 0).map(drop),
            None => Ok(()),
        }
    }
}

/// ENOSPC or EDQUOT: a full disk, not an unwritable one.
pub fn is_out_of_space(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(28) | Some(122))
}

fn log_change(before: Option<DiskState>, now: DiskState, dir: &Path) {
    let was = before.and_then(|state| state.refusal);
    if before.is_some() && was == now.refusal {
        return;
    }
    let free_mb = now.free as f64 / (1 << 20) as f64;
    let reserve_mb = now.reserve as f64 / (1 << 20) as f64;
    match now.refusal {
        Some(Refusal::NearlyFull) => tracing::warn!(
            data_dir = %dir.display(),
            free_mb,
            reserve_mb,
            "free space is below the reserve: writes are refused (503) until space is \
             freed; reads are served"
        ),
        Some(Refusal::NotWritable) => tracing::error!(
            data_dir = %dir.display(),
            "the data directory does not take writes (read-only or not permitted): writes \
             are refused (503); reads are served; fix the filesystem and restart"
        ),
        None if was.is_some() => tracing::info!(
            data_dir = %dir.display(),
            free_mb,
            reserve_mb,
            "the data directory takes writes again and free space is above the reserve: \
             writes resume"
        ),
        None => tracing::info!(
            data_dir = %dir.display(),
            free_mb,
            reserve_mb,
            "disk space watched: writes are refused below the reserve"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentage_reserve_suits_small_and_large_filesystems() {
        let percent = DEFAULT_RESERVE;
        assert_eq!(percent.bytes(48 << 20), RESERVE_FLOOR, "48 MB: the floor");
        assert_eq!(percent.bytes(10 << 30), 512 << 20, "10 GiB: five percent");
        assert_eq!(percent.bytes(4 << 40), RESERVE_CAP, "4 TiB: the cap");
        assert_eq!(Reserve::Bytes(123).bytes(4 << 40), 123);
    }

    #[test]
    fn a_writable_directory_with_room_takes_writes() {
        let dir = tempfile::tempdir().unwrap();
        let watch = DiskWatch::start(dir.path(), Reserve::Bytes(0)).unwrap();
        assert_eq!(watch.writable(), Ok(()));
        let state = watch.state();
        assert!(state.free > 0);
        drop(watch);

        let greedy = DiskWatch::start(dir.path(), Reserve::Bytes(u64::MAX)).unwrap();
        assert_eq!(greedy.writable(), Err(Refusal::NearlyFull));
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_not_writable() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let watch = DiskWatch::start(&missing, Reserve::Bytes(0)).unwrap();
        assert_eq!(watch.writable(), Err(Refusal::NotWritable));
    }
}
