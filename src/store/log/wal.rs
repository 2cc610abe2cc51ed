//! The write-ahead log that acknowledges writes. A change is made in memory (in sled, or
//! waiting in `pending` over it), and its single-key writes are also handed, encoded, to
//! group commit ([`super::commit`]), which appends them to this log and `fdatasync`s it
//! before anyone is answered. The log is what makes a write durable, so sled is not flushed
//! per write: `checkpoint` flushes it behind the log, a segment at a time, and only then
//! recycles the segment. A start replays what the log holds beyond sled's last checkpoint
//! ([`recover`]).
//!
//! On disk: `wal/` in the data directory holds segments named by their sequence number (16
//! hex digits), each [`SEGMENT_BYTES`] long, zero-filled when created and then reused, so
//! that an append overwrites blocks the file already has and its `fdatasync` writes no
//! metadata. A segment is a run of frames:
//!
//! `length of the payload (u32, little-endian)` · `CRC-32 of the segment's sequence number
//! (u64, little-endian) and the payload (u32, little-endian)` · `payload`
//!
//! and a payload is a run of writes, each `1` (set), `2` (remove if it still holds a value)
//! or `3` (remove) · `key length (u32 LE)` · `key` · `value length (u32 LE)` · `value`. A
//! frame is one group commit: all of it is replayed or none. The first frame that is cut
//! short, fails its checksum or has length 0 ends the segment: a torn append (its writers
//! were never answered), the zeros of a fresh segment, or the frames of the segment's earlier
//! life, whose checksums hold an older sequence number. A frame that checks out but does not
//! parse is damage, not a torn tail, and refuses the start.
//!
//! Replaying sets and conditional removals in log order gives every key its last logged
//! value, whatever part of them sled had already stored, because the writers of one key take
//! turns (a customer's actor, an email's claim, an idempotency key's turn): a key's writes
//! reach the log in the order they reached sled. Every write of a change is logged; what
//! skips the log syncs sled itself (the markers, the repair at open, which runs once the
//! log is replayed), runs without durability (tools, seeding), or may be undone by a
//! replay: an expiry sweep's removal of a record that has outlived its time to live, which
//! then counts as no record until the next pass removes it again.
//!
//! Must not touch: what the keys mean (the writers in `writes` decide what is
//! logged), group commit's timing, sled's checkpoints.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::store::error::StoreError;
use crate::store::pending::Storage;

/// Size of a segment; a batch larger than what is left of one starts the next, and one
/// larger than a whole segment grows it. Checkpoints follow segments, so this also bounds
/// what a start after a crash replays (the segment being written and, at most, the one
/// being checkpointed). An order takes about 250 bytes of log with its event, so an 8 MiB
/// segment lets a checkpoint pack some 33,000 orders at once, and the more of a customer's
/// orders one pass takes, the fewer rewrites of its chunk (`store::order_chunks`): 2 → 8 MiB
/// took about 3 µs of CPU off a durable order (docs/benchmarks.md), and a replay after a
/// crash reads at most 16 MiB.
pub const SEGMENT_BYTES: u64 = 1 << 23;

/// Bytes before each frame's payload.
pub const FRAME_HEADER: usize = 8;

/// The log's directory inside the data directory.
pub const DIR_NAME: &str = "wal";

const SET: u8 = 1;
const REMOVE_IF: u8 = 2;
const REMOVE: u8 = 3;

/// The single-key writes of one change, encoded for the log, in the order they were made.
/// Whether they reach a log at all is the log's to decide ([`super::ChangeLog`]): without
/// durability ([`super::NoLog`]) the bytes are dropped unread.
#[derive(Debug, Default)]
pub struct LogEntry {
    writes: Vec<u8>,
}

impl LogEntry {
    /// An entry with no writes yet.
    pub fn new() -> LogEntry {
        LogEntry::default()
    }

    /// Records that `key` was set to `value`.
    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        self.push(SET, key, value);
    }

    /// Records that `key` was removed where it still held `expected`.
    pub fn remove_if(&mut self, key: &[u8], expected: &[u8]) {
        self.push(REMOVE_IF, key, expected);
    }

    /// Records that `key` was removed.
    pub fn remove(&mut self, key: &[u8]) {
        self.push(REMOVE, key, &[]);
    }

    fn push(&mut self, op: u8, key: &[u8], value: &[u8]) {
        self.writes.reserve(LogEntry::encoded_len(key, value));
        self.writes.push(op);
        self.writes.extend_from_slice(&len32(key).to_le_bytes());
        self.writes.extend_from_slice(key);
        self.writes.extend_from_slice(&len32(value).to_le_bytes());
        self.writes.extend_from_slice(value);
    }

    /// The encoded writes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.writes
    }

    /// Its encoded size so far.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// Whether it records no write.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// What recording a write of `key` with `value` (the expected value of a conditional
    /// removal, nothing for a removal) adds to an entry: what a change's writer checks
    /// against the log's limit before it writes anything.
    pub fn encoded_len(key: &[u8], value: &[u8]) -> usize {
        9 + key.len() + value.len()
    }
}

fn len32(bytes: &[u8]) -> u32 {
    // Keys and records are far below 4 GiB: request bodies are capped at a few megabytes.
    u32::try_from(bytes.len()).expect("a key or record under 4 GiB")
}

/// One write read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoggedWrite<'a> {
    /// `key` was set to `value`.
    Set {
        /// The key.
        key: &'a [u8],
        /// Its new value.
        value: &'a [u8],
    },
    /// `key` was removed where it held `expected`.
    RemoveIf {
        /// The key.
        key: &'a [u8],
        /// The value it held.
        expected: &'a [u8],
    },
    /// `key` was removed.
    Remove {
        /// The key.
        key: &'a [u8],
    },
}

/// The writes of a frame's payload (also a replicated changelog message's), or `None` at
/// the first that does not parse.
pub fn parse_writes(mut payload: &[u8]) -> Option<Vec<LoggedWrite<'_>>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if bytes.len() < n {
            return None;
        }
        let (head, tail) = bytes.split_at(n);
        *bytes = tail;
        Some(head)
    }
    fn field<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(take(bytes, 4)?.try_into().ok()?);
        take(bytes, len as usize)
    }
    let mut writes = Vec::new();
    while let Some((&op, rest)) = payload.split_first() {
        payload = rest;
        let key = field(&mut payload)?;
        let value = field(&mut payload)?;
        writes.push(match op {
            SET => LoggedWrite::Set { key, value },
            REMOVE_IF => LoggedWrite::RemoveIf {
                key,
                expected: value,
            },
            REMOVE if value.is_empty() => LoggedWrite::Remove { key },
            _ => return None,
        });
    }
    Some(writes)
}

/// A frame being built: room for its header, then the payloads of the entries it carries.
#[derive(Debug)]
pub struct Frame {
    bytes: Vec<u8>,
    /// Where each entry's writes end in `bytes`, so that a log with a message size limit
    /// can cut the frame between whole changes ([`Frame::parts`]).
    ends: Vec<usize>,
}

impl Default for Frame {
    fn default() -> Self {
        Frame {
            bytes: vec![0; FRAME_HEADER],
            ends: Vec::new(),
        }
    }
}

impl Frame {
    /// Adds an entry's encoded writes.
    pub fn push(&mut self, writes: &[u8]) {
        self.bytes.extend_from_slice(writes);
        if !writes.is_empty() {
            self.ends.push(self.bytes.len());
        }
    }

    /// The payload cut into parts of whole entries, each at most `max_bytes` long unless a
    /// single entry is longer, in order: a change is never split between two parts.
    pub fn parts(&self, max_bytes: usize) -> Vec<&[u8]> {
        let mut parts = Vec::new();
        let mut start = FRAME_HEADER;
        let mut end = FRAME_HEADER;
        for &entry_end in &self.ends {
            if entry_end - start > max_bytes && end > start {
                parts.push(&self.bytes[start..end]);
                start = end;
            }
            end = entry_end;
        }
        if end > start {
            parts.push(&self.bytes[start..end]);
        }
        parts
    }

    /// Whether it carries no write.
    pub fn is_empty(&self) -> bool {
        self.bytes.len() == FRAME_HEADER
    }

    /// Its size on disk, header included.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The entries' encoded writes, without the header: what a replicated log carries.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[FRAME_HEADER..]
    }

    /// Empties it for the next batch, keeping its memory.
    pub fn clear(&mut self) {
        self.bytes.truncate(FRAME_HEADER);
        self.ends.clear();
    }

    /// The frame as it goes into segment `seq`: the header filled in.
    fn sealed(&mut self, seq: u64) -> &[u8] {
        let payload = &self.bytes[FRAME_HEADER..];
        let length = u32::try_from(payload.len()).expect("a group commit under 4 GiB");
        let checksum = checksum(seq, payload);
        self.bytes[..4].copy_from_slice(&length.to_le_bytes());
        self.bytes[4..FRAME_HEADER].copy_from_slice(&checksum.to_le_bytes());
        &self.bytes
    }
}

fn checksum(seq: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&seq.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// The payloads of the whole frames at the start of `bytes`, the content of segment `seq`:
/// everything up to the first frame that is cut short, has length 0, or fails its checksum.
fn frames(seq: u64, bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let header = rest.get(..FRAME_HEADER)?;
        let length = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
        let stored = u32::from_le_bytes(header[4..].try_into().ok()?);
        let payload = rest.get(FRAME_HEADER..FRAME_HEADER.checked_add(length)?)?;
        if length == 0 || checksum(seq, payload) != stored {
            return None;
        }
        rest = &rest[FRAME_HEADER + length..];
        Some(payload)
    })
}

/// The writes of each whole frame of segment `seq` (its content in `bytes`), in order; or,
/// when a frame checks out but does not parse (damage, not a torn tail), its offset.
pub fn read_segment(seq: u64, bytes: &[u8]) -> Result<Vec<Vec<LoggedWrite<'_>>>, usize> {
    let start = bytes.as_ptr() as usize;
    frames(seq, bytes)
        .map(|payload| {
            parse_writes(payload).ok_or(payload.as_ptr() as usize - start - FRAME_HEADER)
        })
        .collect()
}

/// `payload` framed as the first frame of segment `seq` (fuzzing and tests).
pub fn framed(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut frame = Frame::default();
    frame.push(payload);
    frame.sealed(seq).to_vec()
}

/// The log's directory.
#[derive(Debug, Clone)]
pub struct WalDir {
    path: PathBuf,
}

/// A segment file open for appending.
#[derive(Debug)]
pub struct Segment {
    seq: u64,
    file: File,
    /// Bytes of frames written in this life of the file.
    written: u64,
    /// The file's size: appends past it grow the file.
    capacity: u64,
}

impl Segment {
    /// Its sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> StoreError {
    move |source| StoreError::Io { context, source }
}

impl WalDir {
    /// The log directory of data directory `data_dir`, created if missing.
    pub fn open(data_dir: &Path) -> Result<WalDir, StoreError> {
        let path = data_dir.join(DIR_NAME);
        match std::fs::create_dir(&path) {
            Ok(()) => sync_dir(data_dir)?,
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(StoreError::Io {
                    context: format!("creating the log directory {}", path.display()),
                    source,
                })
            }
        }
        Ok(WalDir { path })
    }

    fn segment_path(&self, seq: u64) -> PathBuf {
        self.path.join(format!("{seq:016x}"))
    }

    /// The sequence numbers of the segments present, in order. Other files are left alone.
    pub fn segments(&self) -> Result<Vec<u64>, StoreError> {
        let entries = std::fs::read_dir(&self.path).map_err(io(format!(
            "listing the log directory {}",
            self.path.display()
        )))?;
        let mut seqs: Vec<u64> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let name = name.to_str()?;
                (name.len() == 16)
                    .then(|| u64::from_str_radix(name, 16).ok())
                    .flatten()
            })
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    /// Reads segment `seq` whole.
    fn read(&self, seq: u64) -> Result<Vec<u8>, StoreError> {
        let path = self.segment_path(seq);
        std::fs::read(&path).map_err(io(format!("reading log segment {}", path.display())))
    }

    /// A new segment `seq`, zero-filled to [`SEGMENT_BYTES`] and durable, name included.
    pub fn create(&self, seq: u64) -> Result<Segment, StoreError> {
        let path = self.segment_path(seq);
        let context = || format!("creating log segment {}", path.display());
        let made = (|| {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)?;
            zero_fill(&mut file, SEGMENT_BYTES)?;
            Ok(file)
        })();
        let file = match made {
            Ok(file) => file,
            Err(source) => {
                // Leave no short segment behind (a full disk, typically).
                let _ = std::fs::remove_file(&path);
                return Err(StoreError::Io {
                    context: context(),
                    source,
                });
            }
        };
        sync_dir(&self.path)?;
        Ok(Segment {
            seq,
            file,
            written: 0,
            capacity: SEGMENT_BYTES,
        })
    }

    /// Segment `old`, whose frames are all checkpointed, renamed to `seq` to be written
    /// again, durable under its new name before anything is written to it: its old frames
    /// fail their checksums under the new number.
    pub fn recycle(&self, old: u64, seq: u64) -> Result<Segment, StoreError> {
        let (from, to) = (self.segment_path(old), self.segment_path(seq));
        let context = format!("reusing log segment {} as {}", from.display(), to.display());
        std::fs::rename(&from, &to).map_err(io(context.clone()))?;
        sync_dir(&self.path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&to)
            .map_err(io(context.clone()))?;
        let mut file = file;
        let mut capacity = file.metadata().map_err(io(context.clone()))?.len();
        if capacity < SEGMENT_BYTES {
            // Made by a release with smaller segments: grown to today's size when the disk
            // allows, else reused as it is (a failed fill leaves zeros, which end the frames).
            let _ = zero_fill(&mut file, SEGMENT_BYTES);
            capacity = file.metadata().map_err(io(context))?.len();
        }
        Ok(Segment {
            seq,
            file,
            written: 0,
            capacity,
        })
    }

    /// Removes segment `seq` (one too many to keep for reuse).
    pub fn remove(&self, seq: u64) -> Result<(), StoreError> {
        let path = self.segment_path(seq);
        std::fs::remove_file(&path).map_err(io(format!("removing {}", path.display())))
    }
}

/// Extends `file` with zeros up to `len` bytes, durably.
fn zero_fill(file: &mut File, len: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let zeros = vec![0u8; 64 << 10];
    let mut at = file.seek(SeekFrom::End(0))?;
    while at < len {
        let step = (len - at).min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..step])?;
        at += step as u64;
    }
    file.sync_all()
}

/// Makes a directory's entries (new, renamed, removed files) durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(io(format!("fsync of directory {}", dir.display())))
}

/// What [`recover`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Frames replayed.
    pub frames: u64,
    /// Single-key writes replayed.
    pub writes: u64,
    /// The first sequence number above every segment present and every one checkpointed:
    /// where the log continues.
    pub next_seq: u64,
    /// Segments present, all below `next_seq`: free to reuse once the replay is durable.
    pub reusable: Vec<u64>,
}

/// Replays into `storage`, in order, every whole frame of the segments numbered `from` and
/// up (the earlier ones are checkpointed), and says where the log continues. Replayed puts
/// may wait in the engine (`Storage::put_pending`); the caller applies them, makes the replay
/// durable and records the new checkpoint before reusing any segment
/// (`checkpoint::mark_log_start` does all three).
pub fn recover(wal: &WalDir, from: u64, storage: &dyn Storage) -> Result<Recovered, StoreError> {
    let segments = wal.segments()?;
    let mut recovered = Recovered {
        next_seq: from.max(segments.last().map_or(0, |last| last + 1)),
        reusable: segments.clone(),
        ..Recovered::default()
    };
    for seq in segments.into_iter().filter(|seq| *seq >= from) {
        let bytes = wal.read(seq)?;
        let frames = read_segment(seq, &bytes).map_err(|offset| StoreError::CannotOpen {
            path: wal.segment_path(seq).display().to_string(),
            reason: format!(
                "the write-ahead log's frame at byte {offset} passes its checksum but does \
                 not parse (damage, not a cut-off write)"
            ),
            remedy: "restore the data directory from a backup".into(),
        })?;
        for writes in frames {
            recovered.writes += replay(storage, writes)?;
            recovered.frames += 1;
        }
    }
    Ok(recovered)
}

/// Applies `writes`, read back from a log, to `storage` in order; how many there were.
/// Replaying a suffix of a log again from any earlier point gives the same state (sets and
/// removals repeat; a removal where the key held a value is skipped once a later write
/// changed it), which is what lets a restart replay from its last checkpoint.
pub fn replay<'a>(
    storage: &dyn Storage,
    writes: impl IntoIterator<Item = LoggedWrite<'a>>,
) -> Result<u64, StoreError> {
    let mut count = 0;
    for write in writes {
        match write {
            // Logged, so it may wait: the caller's checkpoint writes every replayed put into
            // the engine (orders packed into their customer's chunks, skipping those a chunk
            // holds already) before it marks how far the snapshot holds the log.
            LoggedWrite::Set { key, value } => storage.put_pending(key, value.to_vec())?,
            LoggedWrite::RemoveIf { key, expected } => {
                storage.remove_if(key, expected)?;
            }
            LoggedWrite::Remove { key } => storage.remove(key)?,
        }
        count += 1;
    }
    Ok(count)
}

/// Where group commit appends: the segment being written, and the next one once the
/// checkpointer has it ready.
pub struct LogWriter {
    segment: Segment,
    spare: std::sync::Arc<SpareSlot>,
    /// Where a finished segment goes to be checkpointed and recycled.
    finished: std::sync::mpsc::Sender<Segment>,
}

/// The segment the writer moves to when the current one is full, put there by the
/// checkpointer.
#[derive(Debug, Default)]
pub struct SpareSlot(std::sync::Mutex<Option<Segment>>);

impl SpareSlot {
    /// Leaves `segment` for the writer.
    pub fn put(&self, segment: Segment) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(segment);
    }

    /// Whether a segment is waiting.
    pub fn is_full(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn take(&self) -> Option<Segment> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl LogWriter {
    /// A writer appending to `segment`, moving on to the segments left in `spare` and handing
    /// each finished one to `finished`.
    pub fn new(
        segment: Segment,
        spare: std::sync::Arc<SpareSlot>,
        finished: std::sync::mpsc::Sender<Segment>,
    ) -> LogWriter {
        LogWriter {
            segment,
            spare,
            finished,
        }
    }

    /// The sequence number of the segment being written.
    pub fn seq(&self) -> u64 {
        self.segment.seq
    }

    /// Appends `frame` (not yet durable: see [`LogWriter::sync`]). It starts the spare
    /// segment if it does not fit in this one; without a spare ready, this one grows.
    pub fn append(&mut self, frame: &mut Frame) -> std::io::Result<()> {
        let needed = frame.len() as u64;
        if self.segment.written > 0 && self.segment.written + needed > self.segment.capacity {
            if let Some(next) = self.spare.take() {
                let finished = std::mem::replace(&mut self.segment, next);
                // The checkpointer stops only after the writer: it is there to take it.
                let _ = self.finished.send(finished);
            }
        }
        let segment = &mut self.segment;
        segment
            .file
            .write_all_at(frame.sealed(segment.seq), segment.written)?;
        segment.written += needed;
        segment.capacity = segment.capacity.max(segment.written);
        Ok(())
    }

    /// Makes every appended frame durable.
    pub fn sync(&self) -> std::io::Result<()> {
        self.segment.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_cut_between_whole_entries() {
        let mut frame = Frame::default();
        for entry in [&b"aaaa"[..], b"bb", b"cccccccc", b"d"] {
            frame.push(entry);
        }
        frame.push(b"");
        assert_eq!(frame.parts(6), vec![&b"aaaabb"[..], b"cccccccc", b"d"]);
        assert_eq!(frame.parts(100), vec![&b"aaaabbccccccccd"[..]]);
        frame.clear();
        assert!(frame.parts(6).is_empty());
    }
    use proptest::prelude::*;

    fn entry(writes: &[(u8, &[u8], &[u8])]) -> Vec<u8> {
        let mut entry = LogEntry::new();
        for (op, key, value) in writes {
            match *op {
                SET => entry.set(key, value),
                REMOVE => entry.remove(key),
                _ => entry.remove_if(key, value),
            }
        }
        entry.into_bytes()
    }

    fn framed(seq: u64, payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for payload in payloads {
            let mut frame = Frame::default();
            frame.push(payload);
            bytes.extend_from_slice(frame.sealed(seq));
        }
        bytes
    }

    #[test]
    fn writes_read_back_in_order() {
        let payload = entry(&[
            (SET, b"ka", b"one"),
            (REMOVE_IF, b"kb", b""),
            (SET, b"", b"x"),
            (REMOVE, b"kc", b""),
        ]);
        assert_eq!(
            parse_writes(&payload).unwrap(),
            vec![
                LoggedWrite::Set {
                    key: b"ka",
                    value: b"one"
                },
                LoggedWrite::RemoveIf {
                    key: b"kb",
                    expected: b""
                },
                LoggedWrite::Set {
                    key: b"",
                    value: b"x"
                },
                LoggedWrite::Remove { key: b"kc" },
            ]
        );
        assert_eq!(parse_writes(&payload[..payload.len() - 1]), None);
        assert_eq!(parse_writes(&[9, 0, 0, 0, 0, 0, 0, 0, 0]), None);
    }

    #[test]
    fn a_segment_ends_at_zeros_and_at_frames_of_its_earlier_life() {
        let payloads = vec![entry(&[(SET, b"a", b"1")]), entry(&[(SET, b"b", b"2")])];
        let mut bytes = framed(7, &payloads);
        bytes.extend_from_slice(&[0; 64]);
        assert_eq!(frames(7, &bytes).count(), 2);
        // The same bytes read as another segment's: frames of an earlier life.
        assert_eq!(frames(6, &bytes).count(), 0);
        let mut reused = framed(8, &payloads[..1]);
        reused.extend_from_slice(&framed(7, &payloads[1..]));
        assert_eq!(frames(8, &reused).count(), 1);
    }

    proptest! {
        /// A log cut anywhere, or with any byte of its last frame changed, reads back as
        /// exactly the frames before the damaged one.
        #[test]
        fn a_torn_or_damaged_tail_yields_exactly_the_whole_frames_before_it(
            sizes in proptest::collection::vec(0usize..300, 1..6),
            cut_at in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
        ) {
            let payloads: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(n, size)| entry(&[(SET, &[n as u8], &vec![n as u8; *size])]))
                .collect();
            let bytes = framed(3, &payloads);
            let last_start = bytes.len() - (FRAME_HEADER + payloads.last().unwrap().len());
            let whole_before = payloads.len() - 1;

            let cut = cut_at.index(bytes.len());
            let read: Vec<&[u8]> = frames(3, &bytes[..cut]).collect();
            let whole = payloads
                .iter()
                .scan(0, |end, p| { *end += FRAME_HEADER + p.len(); Some(*end) })
                .filter(|end| *end <= cut)
                .count();
            prop_assert_eq!(read.len(), whole);
            for (got, want) in read.iter().zip(&payloads) {
                prop_assert_eq!(*got, want.as_slice());
            }

            let mut damaged = bytes.clone();
            let at = last_start + flip.index(bytes.len() - last_start);
            damaged[at] ^= 0x20;
            prop_assert_eq!(frames(3, &damaged).count(), whole_before);
        }
    }

    #[test]
    fn the_writer_moves_to_the_spare_and_grows_a_segment_when_none_is_ready() {
        let dir = tempfile::tempdir().unwrap();
        let wal = WalDir::open(dir.path()).unwrap();
        let spare = std::sync::Arc::new(SpareSlot::default());
        let (finished, checkpoints) = std::sync::mpsc::channel();
        let mut writer = LogWriter::new(wal.create(1).unwrap(), spare.clone(), finished);
        let big = vec![7u8; (SEGMENT_BYTES / 2) as usize];
        let mut frame = Frame::default();
        frame.push(&entry(&[(SET, b"k", &big)]));
        writer.append(&mut frame).unwrap();
        writer.append(&mut frame).unwrap();
        // No spare: the first segment grew.
        assert_eq!(writer.seq(), 1);
        spare.put(wal.create(2).unwrap());
        writer.append(&mut frame).unwrap();
        writer.sync().unwrap();
        assert_eq!(writer.seq(), 2);
        assert_eq!(checkpoints.try_recv().unwrap().seq(), 1);
        let first = wal.read(1).unwrap();
        assert!(first.len() as u64 > SEGMENT_BYTES);
        assert_eq!(frames(1, &first).count(), 2);
        assert_eq!(frames(2, &wal.read(2).unwrap()).count(), 1);
        // Reused, segment 1's frames no longer count.
        drop(checkpoints);
        let reused = wal.recycle(1, 3).unwrap();
        assert_eq!(reused.seq(), 3);
        assert_eq!(frames(3, &wal.read(3).unwrap()).count(), 0);
        assert_eq!(wal.segments().unwrap(), vec![2, 3]);
    }

    #[test]
    fn a_smaller_segment_of_an_earlier_release_is_grown_when_reused() {
        let dir = tempfile::tempdir().unwrap();
        let wal = WalDir::open(dir.path()).unwrap();
        drop(wal.create(1).unwrap());
        let old = dir.path().join(DIR_NAME).join(format!("{:016x}", 1));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&old)
            .unwrap()
            .set_len(SEGMENT_BYTES / 2)
            .unwrap();
        let reused = wal.recycle(1, 2).unwrap();
        assert_eq!(reused.capacity, SEGMENT_BYTES);
        let bytes = wal.read(2).unwrap();
        assert_eq!(bytes.len() as u64, SEGMENT_BYTES);
        assert!(bytes.iter().all(|byte| *byte == 0));
    }
}
