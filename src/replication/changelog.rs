//! The group's changelog on NATS JetStream, and its replica snapshots: the one place that
//! speaks to NATS. Two streams per group, both replicated (`--changelog-replicas`, 3 by
//! default) on file storage:
//!
//! - `NAME` (subject `boxsub.NAME.log`): one message per group commit of the primary, and
//!   the primary's heartbeats and takeovers ([`Kind`], in the `Boxsub-Kind` header; the
//!   node in `Boxsub-Node`). Every publish states the sequence it expects last
//!   ([`Changelog::append`]): that is the fencing.
//! - `NAME_SNAPSHOTS` (subjects `boxsub.NAME.snapshot.>`): replica snapshots, each as parts
//!   on `…snapshot.part.SEQ.WRITER` (`WRITER` names the node and the attempt, so that two
//!   standbys snapshotting the same position never mix their parts) then one
//!   `…snapshot.done` message naming its sequence, writer, part count and checksum
//!   ([`SnapshotInfo`]).
//!
//! Every message fits the server's `max_payload`, which the client reads from the server it
//! is connected to ([`Changelog::message_limit`]); the connection is authenticated
//! (`--changelog-creds`) and encrypted (`--changelog-tls-ca`) where the group says so, and
//! pings its server every [`PING_EVERY`], so that a link that stalls without closing is
//! given up for another server within a few seconds.
//!
//! Must not touch: the store (messages are opaque bytes here), roles and timings (the
//! follower and the publisher decide those).

use std::path::Path;
use std::time::Duration;

use async_nats::header::HeaderMap;
use async_nats::jetstream::{self, consumer, context::PublishErrorKind, stream};
use bytes::Bytes;
use futures_util::StreamExt;

use super::{GroupSettings, ReplicationError};

/// What a changelog message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The writes of one group commit (the payload).
    Writes,
    /// A node takes the primary's place from here on (no payload).
    Takeover,
    /// The primary is alive and idle (no payload).
    Heartbeat,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Writes => "writes",
            Kind::Takeover => "takeover",
            Kind::Heartbeat => "heartbeat",
        }
    }

    fn parse(name: &str) -> Option<Kind> {
        [Kind::Writes, Kind::Takeover, Kind::Heartbeat]
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

const KIND_HEADER: &str = "Boxsub-Kind";
const NODE_HEADER: &str = "Boxsub-Node";
const SNAPSHOT_SEQ_HEADER: &str = "Boxsub-Snapshot-Seq";
const SNAPSHOT_PARTS_HEADER: &str = "Boxsub-Snapshot-Parts";
const SNAPSHOT_CRC_HEADER: &str = "Boxsub-Snapshot-Crc32";
const SNAPSHOT_WRITER_HEADER: &str = "Boxsub-Snapshot-Writer";

/// What a message's headers may take of the server's `max_payload` (which counts headers and
/// payload together): the kind, the node's name (at most 64 bytes), the message id and the
/// expected sequence take a few hundred bytes.
pub const HEADER_ALLOWANCE: usize = 2 * 1024;

/// The `max_payload` of a server that does not say (NATS's default).
const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// How often the client pings its server: after two pings without an answer it gives the
/// connection up and connects to another server of the group, so that a link that stalls
/// without closing costs a few seconds, not minutes.
pub const PING_EVERY: Duration = Duration::from_secs(1);

/// How long connecting to one server may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One changelog message as the group reads it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its sequence number in the stream.
    pub seq: u64,
    /// What it carries.
    pub kind: Kind,
    /// The node that published it.
    pub node: String,
    /// Its message id (`Nats-Msg-Id`), which names the publish that wrote it.
    pub id: String,
    /// The writes of a [`Kind::Writes`] message.
    pub payload: Bytes,
}

/// A publish the stream took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The message's sequence number.
    pub seq: u64,
    /// The stream held a message of the same id already: this is its number.
    pub duplicate: bool,
}

/// Why a publish to the changelog failed.
#[derive(Debug)]
pub enum AppendError {
    /// The stream's last message is not the one expected: another node has written since,
    /// so this one is no longer the primary.
    Fenced,
    /// The publish could not be confirmed (no quorum, no connection, timed out): it may or
    /// may not be in the stream.
    Unconfirmed(String),
}

/// A publish on its way to the changelog (see [`Changelog::send_append`]).
pub struct PendingAppend(
    Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError>,
);

impl PendingAppend {
    /// Waits for the stream's answer to the publish.
    pub async fn wait(self) -> Result<Appended, AppendError> {
        let answer = match self.0 {
            Ok(ack) => ack.await,
            Err(error) => Err(error),
        };
        match answer {
            // The stream recognised the id: a retry of a publish it took before. Only a
            // retry of this node's own publish may be answered so (see `Publisher`); ids
            // are never reused otherwise.
            Ok(ack) => Ok(Appended {
                seq: ack.sequence,
                duplicate: ack.duplicate,
            }),
            Err(error) if wrong_last_sequence(&error) => Err(AppendError::Fenced),
            Err(error) => Err(AppendError::Unconfirmed(error.to_string())),
        }
    }
}

/// Whether the stream refused a publish because the sequence it expected last (the stream's
/// or the subject's) is not the stream's: error 10071, or 10164, the same refusal with a
/// constant message that newer servers give for some of these checks and that async-nats
/// leaves as `Other`.
fn wrong_last_sequence(error: &async_nats::jetstream::context::PublishError) -> bool {
    use async_nats::jetstream::{Error, ErrorCode};
    error.kind() == PublishErrorKind::WrongLastSequence
        || std::error::Error::source(error)
            .and_then(|source| source.downcast_ref::<Error>())
            .is_some_and(|source| {
                source.error_code() == ErrorCode::STREAM_WRONG_LAST_SEQUENCE_CONSTANT
            })
}

/// The latest complete replica snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The changelog message it holds the store through.
    pub seq: u64,
    /// Who wrote it (node and attempt): its parts are on `…part.SEQ.WRITER`. Empty for a
    /// snapshot written before parts were named by their writer (`…part.SEQ`).
    pub writer: String,
    /// How many parts it has.
    pub parts: u64,
    /// CRC-32 of every part's bytes, in order.
    pub crc32: u32,
    /// The sequence of its `done` message in the snapshot stream.
    pub done_at: u64,
}

/// A connection to a group's changelog.
#[derive(Clone)]
pub struct Changelog {
    client: async_nats::Client,
    jetstream: jetstream::Context,
    /// A second connection, for snapshot parts only: a bulk upload on the connection that
    /// carries the takeover, the heartbeats and the consumer's requests would hold them up
    /// behind its bytes.
    bulk: jetstream::Context,
    settings: GroupSettings,
    log_subject: String,
    snapshots_stream: String,
    part_prefix: String,
    done_subject: String,
}

/// How long one publish may wait for its acknowledgement before it is retried.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);

impl Changelog {
    /// Connects to the NATS servers of `settings` and makes sure the group's streams exist.
    pub async fn connect(settings: &GroupSettings) -> Result<Changelog, ReplicationError> {
        let connect = || async {
            connect_options(settings)
                .await?
                .connect(settings.servers.clone())
                .await
                .map_err(|error| ReplicationError::nats("connecting to the NATS servers", error))
        };
        let client = connect().await?;
        let version = client.server_info().version;
        if !fsyncs_each_message(&version) {
            tracing::warn!(
                %version,
                "this nats-server cannot fsync each message before it acknowledges it \
                 (sync_interval: always needs 2.10 or later): a power failure of the whole \
                 NATS cluster may lose acknowledged writes"
            );
        }
        let jetstream = jetstream::ContextBuilder::new()
            .timeout(ACK_TIMEOUT)
            .build(client.clone());
        let bulk = jetstream::ContextBuilder::new()
            .timeout(ACK_TIMEOUT)
            .build(connect().await?);
        let name = &settings.stream;
        let changelog = Changelog {
            client,
            jetstream,
            bulk,
            settings: settings.clone(),
            log_subject: format!("boxsub.{name}.log"),
            snapshots_stream: format!("{name}_SNAPSHOTS"),
            part_prefix: format!("boxsub.{name}.snapshot.part"),
            done_subject: format!("boxsub.{name}.snapshot.done"),
        };
        changelog.ensure_streams().await?;
        Ok(changelog)
    }

    /// The largest payload a message may carry now: the `max_payload` of the server the
    /// client is connected to, less [`HEADER_ALLOWANCE`]. Read at each use, since a
    /// reconnection may land on a server configured otherwise.
    pub fn message_limit(&self) -> usize {
        let max_payload = match self.client.server_info().max_payload {
            0 => DEFAULT_MAX_PAYLOAD,
            max => max,
        };
        max_payload.saturating_sub(HEADER_ALLOWANCE).max(1)
    }

    /// Creates the group's streams if they do not exist yet (the first node of a group does).
    async fn ensure_streams(&self) -> Result<(), ReplicationError> {
        let replicas = self.settings.replicas;
        let log = stream::Config {
            name: self.settings.stream.clone(),
            subjects: vec![self.log_subject.clone()],
            storage: stream::StorageType::File,
            num_replicas: replicas,
            // Retries of a publish whose acknowledgement was lost are recognised by their
            // message id within this window (see `Publisher`).
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        };
        let snapshots = stream::Config {
            name: self.snapshots_stream.clone(),
            subjects: vec![format!("boxsub.{}.snapshot.>", self.settings.stream)],
            storage: stream::StorageType::File,
            num_replicas: replicas,
            ..Default::default()
        };
        for config in [log, snapshots] {
            let name = config.name.clone();
            self.jetstream
                .get_or_create_stream(config)
                .await
                .map_err(|error| {
                    ReplicationError::nats(format!("creating stream {name}"), error)
                })?;
        }
        Ok(())
    }

    /// The stream's first and last sequence numbers (first is last + 1 when it is empty).
    pub async fn bounds(&self) -> Result<(u64, u64), ReplicationError> {
        let mut stream = self.log_stream().await?;
        let info = stream
            .info()
            .await
            .map_err(|error| ReplicationError::nats("reading the changelog's state", error))?;
        Ok((info.state.first_sequence, info.state.last_sequence))
    }

    async fn log_stream(&self) -> Result<stream::Stream, ReplicationError> {
        self.jetstream
            .get_stream(&self.settings.stream)
            .await
            .map_err(|error| ReplicationError::nats("opening the changelog stream", error))
    }

    /// Publishes one message that must follow message `expected_last`; its sequence number,
    /// and whether the stream already held a message of this `id` (then the number is that
    /// message's). `id` names it for the stream's duplicate detection, so that a retry of a
    /// publish whose acknowledgement was lost is not stored twice.
    pub async fn append(
        &self,
        kind: Kind,
        payload: Bytes,
        expected_last: u64,
        id: &str,
    ) -> Result<Appended, AppendError> {
        self.send_append(kind, payload, expected_last, id)
            .await
            .wait()
            .await
    }

    /// [`Changelog::append`] without waiting for the acknowledgement: the message is on its
    /// way once this returns, and [`PendingAppend::wait`] waits for the stream's answer. The
    /// primary keeps a few messages under way at once, each expecting the one before it.
    pub async fn send_append(
        &self,
        kind: Kind,
        payload: Bytes,
        expected_last: u64,
        id: &str,
    ) -> PendingAppend {
        let publish = jetstream::message::PublishMessage::build()
            .payload(payload)
            .header(KIND_HEADER, kind.name())
            .header(NODE_HEADER, self.settings.node.as_str())
            .message_id(id)
            .expected_last_sequence(expected_last);
        PendingAppend(
            self.jetstream
                .send_publish(self.log_subject.clone(), publish)
                .await,
        )
    }

    /// Publishes `message` to `subject` and waits for the stream's acknowledgement.
    async fn publish(
        &self,
        subject: &str,
        message: jetstream::message::PublishMessage,
    ) -> Result<jetstream::publish::PublishAck, jetstream::context::PublishError> {
        self.jetstream
            .send_publish(subject.to_owned(), message)
            .await?
            .await
    }

    /// The message at `seq`, if the stream still holds it.
    pub async fn entry(&self, seq: u64) -> Result<Option<Entry>, ReplicationError> {
        let stream = self.log_stream().await?;
        match stream.get_raw_message(seq).await {
            Ok(message) => Ok(Some(parse_entry(seq, &message.headers, message.payload)?)),
            Err(error) if error.to_string().contains("no message found") => Ok(None),
            Err(error) => Err(ReplicationError::nats(
                format!("reading changelog message {seq}"),
                error,
            )),
        }
    }

    /// The messages from `from` on, in order, as they come (an ordered consumer: it
    /// recreates itself past a lost connection without skipping or repeating any).
    pub async fn follow(
        &self,
        from: u64,
    ) -> Result<impl futures_util::Stream<Item = Result<Entry, ReplicationError>>, ReplicationError>
    {
        let stream = self.log_stream().await?;
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: from.max(1),
                },
                ..Default::default()
            })
            .await
            .map_err(|error| ReplicationError::nats("following the changelog", error))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|error| ReplicationError::nats("following the changelog", error))?;
        Ok(messages.map(|message| {
            let message =
                message.map_err(|error| ReplicationError::nats("reading the changelog", error))?;
            let seq = message
                .info()
                .map_err(|error| ReplicationError::nats("reading a message's sequence", error))?
                .stream_sequence;
            let headers = message.headers.clone().unwrap_or_default();
            parse_entry(seq, &headers, message.payload.clone())
        }))
    }

    /// Removes the messages below `seq` (trimming behind a replica snapshot).
    pub async fn trim_below(&self, seq: u64) -> Result<u64, ReplicationError> {
        let stream = self.log_stream().await?;
        let purged = stream
            .purge()
            .sequence(seq)
            .await
            .map_err(|error| ReplicationError::nats("trimming the changelog", error))?;
        Ok(purged.purged)
    }

    /// The latest complete replica snapshot, if any.
    pub async fn latest_snapshot(&self) -> Result<Option<SnapshotInfo>, ReplicationError> {
        let stream = self.snapshots().await?;
        let message = match stream
            .get_last_raw_message_by_subject(&self.done_subject)
            .await
        {
            Ok(message) => message,
            Err(error) if error.to_string().contains("no message found") => return Ok(None),
            Err(error) => return Err(ReplicationError::nats("reading the latest snapshot", error)),
        };
        let number = |name: &str| -> Result<u64, ReplicationError> {
            message
                .headers
                .get(name)
                .and_then(|value| value.as_str().parse().ok())
                .ok_or_else(|| ReplicationError::Malformed(format!("snapshot without {name}")))
        };
        Ok(Some(SnapshotInfo {
            seq: number(SNAPSHOT_SEQ_HEADER)?,
            writer: message
                .headers
                .get(SNAPSHOT_WRITER_HEADER)
                .map(|value| value.as_str().to_owned())
                .unwrap_or_default(),
            parts: number(SNAPSHOT_PARTS_HEADER)?,
            crc32: u32::try_from(number(SNAPSHOT_CRC_HEADER)?)
                .map_err(|_| ReplicationError::Malformed("snapshot checksum".into()))?,
            done_at: message.sequence,
        }))
    }

    async fn snapshots(&self) -> Result<stream::Stream, ReplicationError> {
        self.jetstream
            .get_stream(&self.snapshots_stream)
            .await
            .map_err(|error| ReplicationError::nats("opening the snapshot stream", error))
    }

    /// The subject of the parts `writer` writes for the snapshot of message `seq`.
    fn part_subject(&self, seq: u64, writer: &str) -> String {
        if writer.is_empty() {
            format!("{}.{seq}", self.part_prefix)
        } else {
            format!("{}.{seq}.{writer}", self.part_prefix)
        }
    }

    /// Publishes one part of `writer`'s snapshot of message `seq` (on the bulk connection);
    /// waits for its acknowledgement.
    pub async fn put_snapshot_part(
        &self,
        seq: u64,
        writer: &str,
        part: Bytes,
    ) -> Result<(), ReplicationError> {
        self.bulk
            .publish(self.part_subject(seq, writer), part)
            .await
            .map_err(|error| ReplicationError::nats("publishing a snapshot part", error))?
            .await
            .map_err(|error| ReplicationError::nats("publishing a snapshot part", error))?;
        Ok(())
    }

    /// Completes `writer`'s snapshot of message `seq`, unless another node completed one
    /// since `previous` (the `done_at` of the latest snapshot seen, 0 for none): whether it
    /// did.
    pub async fn finish_snapshot(
        &self,
        seq: u64,
        writer: &str,
        (parts, crc32): (u64, u32),
        previous: u64,
    ) -> Result<bool, ReplicationError> {
        let publish = jetstream::message::PublishMessage::build()
            .header(SNAPSHOT_SEQ_HEADER, seq.to_string().as_str())
            .header(SNAPSHOT_WRITER_HEADER, writer)
            .header(SNAPSHOT_PARTS_HEADER, parts.to_string().as_str())
            .header(SNAPSHOT_CRC_HEADER, crc32.to_string().as_str())
            .header(NODE_HEADER, self.settings.node.as_str())
            .expected_last_subject_sequence(previous);
        match self.publish(&self.done_subject, publish).await {
            Ok(_) => Ok(true),
            Err(error) if wrong_last_sequence(&error) => Ok(false),
            Err(error) => Err(ReplicationError::nats("completing a snapshot", error)),
        }
    }

    /// Removes the parts of `writer`'s snapshot of message `seq` (an attempt dropped).
    pub async fn remove_snapshot_parts(
        &self,
        seq: u64,
        writer: &str,
    ) -> Result<(), ReplicationError> {
        let stream = self.snapshots().await?;
        stream
            .purge()
            .filter(self.part_subject(seq, writer))
            .await
            .map_err(|error| ReplicationError::nats("removing a snapshot's parts", error))?;
        Ok(())
    }

    /// Removes the parts no snapshot can use any more, given the latest: those of every
    /// snapshot at or below its position but its own. An attempt at a later position may
    /// still complete (it read the latest before it began), so its parts stay; one at or
    /// below it read an earlier latest, and its completion will be refused.
    pub async fn remove_unusable_snapshot_parts(
        &self,
        latest: &SnapshotInfo,
    ) -> Result<u64, ReplicationError> {
        let stream = self.snapshots().await?;
        let subjects = stream
            .clone()
            .info_with_subjects(format!("{}.>", self.part_prefix))
            .await
            .map_err(|error| ReplicationError::nats("listing snapshot parts", error))?;
        let subjects: Vec<String> = subjects
            .filter_map(|subject| async move { subject.ok().map(|(name, _)| name) })
            .collect()
            .await;
        let kept = self.part_subject(latest.seq, &latest.writer);
        let mut removed = 0;
        for subject in subjects {
            let Some(seq) = self.part_seq(&subject) else {
                continue;
            };
            if seq > latest.seq || subject == kept {
                continue;
            }
            stream
                .purge()
                .filter(subject)
                .await
                .map_err(|error| ReplicationError::nats("removing old snapshot parts", error))?;
            removed += 1;
        }
        Ok(removed)
    }

    /// The snapshot position a part subject names.
    fn part_seq(&self, subject: &str) -> Option<u64> {
        let rest = subject.strip_prefix(&self.part_prefix)?.strip_prefix('.')?;
        rest.split('.').next()?.parse().ok()
    }

    /// The parts of `snapshot`, in order.
    pub async fn snapshot_parts(
        &self,
        snapshot: &SnapshotInfo,
    ) -> Result<impl futures_util::Stream<Item = Result<Bytes, ReplicationError>>, ReplicationError>
    {
        let stream = self.snapshots().await?;
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: self.part_subject(snapshot.seq, &snapshot.writer),
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|error| ReplicationError::nats("reading a snapshot", error))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|error| ReplicationError::nats("reading a snapshot", error))?;
        Ok(messages.map(|message| {
            message
                .map(|message| message.payload.clone())
                .map_err(|error| ReplicationError::nats("reading a snapshot part", error))
        }))
    }
}

/// Whether a nats-server of `version` (`2.15.1`) can be told to fsync each message before it
/// acknowledges it (`sync_interval: always`, from 2.10 on).
fn fsyncs_each_message(version: &str) -> bool {
    let mut numbers = version
        .trim_start_matches('v')
        .split(['.', '-'])
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let major = numbers.next().unwrap_or(0);
    let minor = numbers.next().unwrap_or(0);
    (major, minor) >= (2, 10)
}

/// How a node connects: its name, short pings, and the group's credentials and TLS.
async fn connect_options(
    settings: &GroupSettings,
) -> Result<async_nats::ConnectOptions, ReplicationError> {
    let mut options = async_nats::ConnectOptions::new()
        .name(format!("boxsub {}", settings.node))
        .connection_timeout(CONNECT_TIMEOUT)
        .ping_interval(PING_EVERY);
    if let Some(path) = &settings.credentials {
        options = match read_credentials(path)? {
            Credentials::Jwt(text) => options.credentials(&text).map_err(|error| {
                ReplicationError::nats(format!("reading {}", path.display()), error)
            })?,
            Credentials::Nkey(seed) => options.nkey(seed),
        };
    }
    if let Some(ca) = &settings.tls_ca {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    Ok(options)
}

/// A new NATS user for a node (`boxsub changelog-user`).
pub struct NewUser {
    /// Its nkey seed (`SU…`): the node's secret, for `--changelog-creds`.
    pub seed: String,
    /// Its public key (`U…`), for the servers' `authorization` block.
    pub public_key: String,
}

/// Makes a new nkey user.
pub fn new_user() -> NewUser {
    let pair = nkeys::KeyPair::new_user();
    NewUser {
        seed: pair.seed().expect("a new user's key pair has its seed"),
        public_key: pair.public_key(),
    }
}

/// What a `--changelog-creds` file holds.
pub enum Credentials {
    /// A user's JWT and nkey seed (a `.creds` file, as `nsc` writes it): its whole text.
    Jwt(String),
    /// A user's nkey seed alone (`SU…`).
    Nkey(String),
}

/// Reads a `--changelog-creds` file; the error says what it should hold, never what it does.
pub fn read_credentials(path: &Path) -> Result<Credentials, ReplicationError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        ReplicationError::Malformed(format!("reading {}: {error}", path.display()))
    })?;
    if text.contains("-----BEGIN NATS USER JWT-----") {
        return Ok(Credentials::Jwt(text));
    }
    let seeds: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("SU") && line.len() > 50)
        .collect();
    match seeds.as_slice() {
        [seed] => Ok(Credentials::Nkey((*seed).to_owned())),
        _ => Err(ReplicationError::Malformed(format!(
            "{} holds neither NATS user credentials (a .creds file with a user JWT and seed) \
             nor one user nkey seed (a line starting with SU)",
            path.display()
        ))),
    }
}

fn parse_entry(seq: u64, headers: &HeaderMap, payload: Bytes) -> Result<Entry, ReplicationError> {
    let header = |name: &str| headers.get(name).map(|value| value.as_str().to_owned());
    let kind = header(KIND_HEADER)
        .as_deref()
        .and_then(Kind::parse)
        .ok_or_else(|| {
            ReplicationError::Malformed(format!(
                "changelog message {seq} has no {KIND_HEADER} boxsub writes"
            ))
        })?;
    Ok(Entry {
        seq,
        kind,
        node: header(NODE_HEADER).unwrap_or_default(),
        id: header("Nats-Msg-Id").unwrap_or_default(),
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_from_2_10_on_fsync_each_message() {
        assert!(!fsyncs_each_message("2.9.10"));
        assert!(fsyncs_each_message("2.10.0"));
        assert!(fsyncs_each_message("2.15.1"));
        assert!(fsyncs_each_message("v3.0.0-beta"));
        assert!(!fsyncs_each_message(""));
    }

    #[test]
    fn a_credentials_file_is_a_jwt_and_seed_or_one_seed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let seed = "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4";
        let nkey = write("node.nk", &format!("{seed}\n"));
        assert!(matches!(read_credentials(&nkey), Ok(Credentials::Nkey(found)) if found == seed));
        let jwt = write(
            "node.creds",
            &format!(
                "-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ\n------END NATS USER JWT------\n\n\
                 -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
            ),
        );
        assert!(matches!(read_credentials(&jwt), Ok(Credentials::Jwt(_))));
        for wrong in ["", "not a seed\n", &format!("{seed}\n{seed}\n")] {
            let path = write("wrong", wrong);
            let error = read_credentials(&path).err().expect("refused").to_string();
            assert!(error.contains("holds neither"), "{error}");
            assert!(
                !error.contains(seed),
                "a refusal never shows the file's secret"
            );
        }
        assert!(read_credentials(&dir.path().join("missing")).is_err());
    }
}
