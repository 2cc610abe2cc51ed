//! Producers' sessions in the web app: signing in with a producer account of the catalogue
//! (throttled like customers' sign-ins, 10 failures per email in 15 minutes, and as slow
//! whether or not the email is a producer's; limited per client address; checked only by a
//! shard that serves the account's webstore), the sessions that follow (a random id the
//! client keeps in a cookie; only its SHA-256 is stored), and signing out, which ends a
//! session on the server. A session ends after [`IDLE`] without use.
//!
//! Sessions are records of the store ([`SessionRecord`]), written through its log like
//! every change: they outlive a restart, and in a replicated group they travel in the
//! changelog, so that a failover keeps every producer signed in and a sign-out on one node
//! holds on the next. Every use reads the record (a session signed out elsewhere opens
//! nothing) and checks the account against the catalogue in force (a password changed or an
//! account removed by a reload ends its sessions at their next use).
//!
//! Must not touch: HTTP (cookies, forms and pages are the app's), the store's layout.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::passwords::Share;
use super::serving::NotWritable;
use super::{Service, ServiceError};
use crate::domain::catalogue::{Webstore, WebstoreIdx};
use crate::domain::email::fold;
use crate::domain::routing::sign_in_webstore;
use crate::metrics::METRICS;
use crate::store::kinds::sessions::SessionRecord;
use crate::store::StoreError;

/// How long a session lasts without being used.
pub const IDLE: Duration = Duration::from_secs(12 * 60 * 60);

/// How stale a session's stored last use may grow while it is in use before a use writes it
/// again: a session in use costs a write at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(5 * 60);

/// Sessions one account may have open at once (its browsers and devices); a sign-in past it
/// ends the account's least recently used session.
pub const SESSIONS_PER_ACCOUNT: usize = 16;

/// The throttles' key for emails that are no producer's (they are throttled too, so that
/// the answer does not tell them apart).
const NO_WEBSTORE: WebstoreIdx = WebstoreIdx(u32::MAX);

/// A session just opened: the id for the cookie and the token for the forms.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The session id (random, 256 bits, hex): the cookie's value.
    pub session_id: String,
    /// The forms' token.
    pub form_token: String,
    /// The producer's webstore.
    pub webstore_id: String,
}

/// A session in use.
#[derive(Debug, Clone)]
pub struct ProducerSession {
    /// The producer's webstore.
    pub webstore: Arc<Webstore>,
    /// The forms' token.
    pub form_token: String,
    /// The digest its record is stored under, for the sign-out.
    digest: [u8; 32],
}

/// Why a sign-in failed.
#[derive(Debug)]
pub enum SignInRefused {
    /// Wrong email or password (never which).
    Wrong,
    /// Too many failures for this email: try again after this long.
    Throttled(Duration),
    /// Too many sign-ins from this client (its address): try again after this long.
    ClientLimited(Duration),
    /// The sign-in is checked by the shard of the deployment that serves the email's webstore
    /// ([`Service::sign_in_route`]), not here: ask there. Nothing was checked or counted
    /// here, so this says nothing of the password.
    ServedElsewhere,
    /// The service could not check it.
    Failed(ServiceError),
}

fn digest(session_id: &str) -> [u8; 32] {
    Sha256::digest(session_id.as_bytes()).into()
}

/// The fingerprint of an account's password hash a session keeps.
fn digest_of(password_hash: &str) -> [u8; 32] {
    Sha256::digest(password_hash.as_bytes()).into()
}

/// 32 random bytes as hex.
pub fn random_token() -> Result<String, ServiceError> {
    let bytes: [u8; 32] =
        crate::random::secret().map_err(|error| ServiceError::Internal(error.to_string()))?;
    Ok(hex::encode(bytes))
}

/// Now, in Unix milliseconds (sessions are stored, so they count in wall-clock time).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

fn idle_at(record: &SessionRecord, now_ms: i64) -> bool {
    now_ms.saturating_sub(record.last_used_ms) >= IDLE.as_millis() as i64
}

impl Service {
    /// Signs a producer in with `email` and `password`, asked from `client`: a new session,
    /// or why not.
    ///
    /// In this order, each step refusing before the next costs anything: the client's
    /// limits (`client_limits`); the shard that checks it (the webstore of
    /// [`sign_in_webstore`]: one that does not serve it sends the sign-in on without
    /// checking, throttling or counting anything, so right and wrong passwords are answered
    /// alike there and the number of shards changes no account's guesses); the account's
    /// throttle; the check, in the password pool's share for the app.
    pub async fn producer_sign_in(
        &self,
        email: &str,
        password: String,
        client: IpAddr,
    ) -> Result<SignedIn, SignInRefused> {
        let client_attempt = self.client_limits.begin(client).map_err(|wait| {
            METRICS.app_sign_ins_limited.inc();
            SignInRefused::ClientLimited(wait)
        })?;
        let catalogue = self.catalogue();
        if let Some(checked_by) = sign_in_webstore(&catalogue, email) {
            if !self.serving().serves(&checked_by.settings.id) {
                return Err(SignInRefused::ServedElsewhere);
            }
        }
        let found = catalogue.producer(email);
        let webstore = found.map_or(NO_WEBSTORE, |(webstore, _)| webstore.idx);
        let attempt = self
            .producer_throttles
            .begin(webstore, &fold(email))
            .map_err(SignInRefused::Throttled)?;
        let stored = found.map(|(_, producer)| producer.password_hash.clone());
        let account = stored.as_deref().map(digest_of).unwrap_or_default();
        let matches = self
            .passwords
            .check(Share::App, password, stored, move |matches| {
                // The client's attempt lasts as long as its check, whether or not it waits.
                let _client_attempt = client_attempt;
                attempt.finish(matches)
            })
            .await
            .map_err(SignInRefused::Failed)?;
        if !matches {
            return Err(SignInRefused::Wrong);
        }
        let Some((webstore, _)) = found else {
            return Err(SignInRefused::Wrong);
        };
        // A session is a write of the webstore: held until it is durable, so that a move's
        // freeze waits for it and its last round carries it; refused while frozen.
        let _write = self
            .serving()
            .begin_write(&webstore.settings.id)
            .map_err(|refused| match refused {
                // The front end sends the browser on to the shard that has it.
                NotWritable::Elsewhere | NotWritable::MovedAway => SignInRefused::ServedElsewhere,
                // Its move is under way: the page says to try again in a moment.
                NotWritable::Frozen => SignInRefused::Failed(ServiceError::Moving),
            })?;
        let signed_in = SignedIn {
            session_id: random_token().map_err(SignInRefused::Failed)?,
            form_token: random_token().map_err(SignInRefused::Failed)?,
            webstore_id: webstore.settings.id.clone(),
        };
        let email = fold(email);
        let now = now_ms();
        self.make_room_for(&email, now)
            .map_err(SignInRefused::Failed)?;
        let record = SessionRecord {
            webstore_id: webstore.settings.id.clone(),
            email,
            account,
            form_token: signed_in.form_token.clone(),
            signed_in_ms: now,
            last_used_ms: now,
        };
        let store = self.registry.store();
        let written = store
            .put_session(&digest(&signed_in.session_id), &record)
            .map_err(|error| SignInRefused::Failed(error.into()))?;
        written
            .durable()
            .await
            .map_err(|error| SignInRefused::Failed(error.into()))?;
        Ok(signed_in)
    }

    /// The webstore whose shard checks a sign-in of `email`: the producer's, or for an email
    /// of no producer one picked from it, alike on every shard and for every guess
    /// ([`sign_in_webstore`]), so that where a sign-in is routed says nothing of whether the
    /// email is a producer's.
    pub fn sign_in_route(&self, email: &str) -> Option<String> {
        sign_in_webstore(&self.catalogue(), email).map(|webstore| webstore.settings.id.clone())
    }

    /// Ends the least recently used sessions of account `email` beyond
    /// [`SESSIONS_PER_ACCOUNT`]` - 1`, and any idle one, so that a new one fits: signing in
    /// again and again cannot grow the sessions without bound.
    fn make_room_for(&self, email: &str, now_ms: i64) -> Result<(), ServiceError> {
        let store = self.registry.store();
        let mut of_account: Vec<([u8; 32], i64, String)> = Vec::new();
        store.for_each_session(&mut |digest, record| {
            if record.email == email && !idle_at(&record, now_ms) {
                of_account.push((digest, record.last_used_ms, record.webstore_id));
            }
            true
        })?;
        if of_account.len() < SESSIONS_PER_ACCOUNT {
            return Ok(());
        }
        of_account.sort_unstable_by_key(|(_, last, _)| *last);
        let surplus = of_account.len() + 1 - SESSIONS_PER_ACCOUNT;
        for (digest, _, webstore_id) in of_account.into_iter().take(surplus) {
            drop(store.remove_session(&webstore_id, &digest)?);
        }
        Ok(())
    }

    /// The session `session_id` names, if it is open and its account still in the catalogue
    /// (same webstore, same password); using it keeps it open.
    pub fn producer_session(&self, session_id: &str) -> Option<ProducerSession> {
        self.producer_session_at(session_id, now_ms())
    }

    /// [`Service::producer_session`] as of `now_ms` (Unix milliseconds).
    fn producer_session_at(&self, session_id: &str, now_ms: i64) -> Option<ProducerSession> {
        let store = self.registry.store();
        let digest = digest(session_id);
        let record = match store.session(&digest) {
            Ok(record) => record?,
            Err(error) => {
                tracing::error!(%error, "a producer session could not be read");
                return None;
            }
        };
        let catalogue = self.catalogue();
        let still_valid = catalogue
            .producer(&record.email)
            .filter(|(webstore, producer)| {
                webstore.settings.id == record.webstore_id
                    && digest_of(&producer.password_hash) == record.account
            })
            .map(|(webstore, _)| webstore.clone());
        let Some(webstore) = still_valid.filter(|_| !idle_at(&record, now_ms)) else {
            // Ended: idle too long, or its account gone or changed. Not awaited: the next use
            // finds it ended again if the removal is lost.
            drop(store.remove_session(&record.webstore_id, &digest));
            return None;
        };
        if now_ms.saturating_sub(record.last_used_ms) >= TOUCH_EVERY.as_millis() as i64 {
            let touched = SessionRecord {
                last_used_ms: now_ms,
                ..record.clone()
            };
            // A refused write (a full disk) only leaves the last use older.
            drop(store.put_session(&digest, &touched));
        }
        Some(ProducerSession {
            webstore,
            form_token: record.form_token,
            digest,
        })
    }

    /// Ends `session`, as [`Service::producer_session`] found it, on the server and durably:
    /// its cookie opens nothing from now on, on this node or any that takes over. A write
    /// of its webstore like any other: it holds the webstore's write ticket until durable, so
    /// that a move's freeze waits for it, and it is refused ([`ServiceError::Moving`]) while
    /// the webstore is frozen for a move, whose last round may have carried the session
    /// already.
    pub async fn producer_sign_out(&self, session: &ProducerSession) -> Result<(), ServiceError> {
        let webstore_id = &session.webstore.settings.id;
        let _write = self
            .serving()
            .begin_write(webstore_id)
            .map_err(|_| ServiceError::Moving)?;
        let store = self.registry.store();
        let written = store.remove_session(webstore_id, &session.digest)?;
        Ok(written.durable().await?)
    }

    /// Removes the sessions idle for longer than [`IDLE`]; how many.
    pub fn prune_producer_sessions(&self) -> Result<usize, ServiceError> {
        self.prune_producer_sessions_at(now_ms())
    }

    fn prune_producer_sessions_at(&self, now_ms: i64) -> Result<usize, ServiceError> {
        let store = self.registry.store();
        let mut idle = Vec::new();
        store.for_each_session(&mut |digest, record| {
            if idle_at(&record, now_ms) {
                idle.push((digest, record.webstore_id));
            }
            true
        })?;
        let mut removed = 0;
        for (digest, webstore_id) in &idle {
            match store.remove_session(webstore_id, digest) {
                Ok(written) => drop(written),
                // Frozen for a move: pruned by the next sweep, here or on the target.
                Err(StoreError::Frozen) => continue,
                Err(error) => return Err(error.into()),
            }
            removed += 1;
        }
        Ok(removed)
    }

    /// How many sessions are stored (tests and diagnostics).
    pub fn producer_sessions_open(&self) -> usize {
        let mut open = 0;
        let _ = self.registry.store().for_each_session(&mut |_, _| {
            open += 1;
            true
        });
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::{Catalogue, DEMO_CATALOGUE_JSON};
    use crate::service::ServiceSettings;
    use crate::store::Store;

    /// Another client address for each sign-in, so that the tests' many sign-ins are held
    /// to the throttles per account alone.
    fn next_client() -> IpAddr {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 | n))
    }

    fn service(dir: &std::path::Path) -> Service {
        let hash = crate::domain::password::hash_password("shed key", &[5; 16]).unwrap();
        let mut demo: serde_json::Value = serde_json::from_str(DEMO_CATALOGUE_JSON).unwrap();
        demo["webstores"][0]["producers"] =
            serde_json::json!([{"email": "pat@farm.example", "password_hash": hash}]);
        let catalogue = Catalogue::parse(&demo.to_string(), 0).unwrap();
        let settings = ServiceSettings {
            call_timeout: Duration::from_secs(5),
            password_hashers: 1,
            password_queue: 32,
            max_calls_per_customer: 8,
            max_calls_in_flight: 64,
            id_range: Default::default(),
            idempotency_ttl_secs: 86_400,
            webstores: None,
            admission_slots: 64,
        };
        Service::new(catalogue, Store::open_for_test(dir), settings).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_producer_signs_in_uses_the_session_and_signs_out() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let signed_in = service
            .producer_sign_in(" PAT@farm.example", "shed key".into(), next_client())
            .await
            .expect("the right password");
        let session = service
            .producer_session(&signed_in.session_id)
            .expect("open");
        assert_eq!(session.webstore.idx, service.catalogue().webstores()[0].idx);
        assert_eq!(session.form_token, signed_in.form_token);
        assert_ne!(signed_in.session_id, signed_in.form_token);
        assert!(service.producer_session("not-a-session").is_none());
        service.producer_sign_out(&session).await.unwrap();
        assert!(
            service.producer_session(&signed_in.session_id).is_none(),
            "a session signed out opens nothing"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_outlives_the_service_and_a_sign_out_outlives_it_too() {
        let dir = tempfile::tempdir().unwrap();
        let (kept, ended) = {
            let service = service(dir.path());
            let kept = service
                .producer_sign_in("pat@farm.example", "shed key".into(), next_client())
                .await
                .unwrap();
            let ended = service
                .producer_sign_in("pat@farm.example", "shed key".into(), next_client())
                .await
                .unwrap();
            let session = service.producer_session(&ended.session_id).expect("open");
            service.producer_sign_out(&session).await.unwrap();
            service.registry().store().close().unwrap();
            (kept, ended)
        };
        // A new process on the same store.
        let service = service(dir.path());
        let session = service.producer_session(&kept.session_id).expect("kept");
        assert_eq!(session.form_token, kept.form_token);
        assert!(service.producer_session(&ended.session_id).is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_ends_after_twelve_hours_idle_and_use_keeps_it_open() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let first = service
            .producer_sign_in("pat@farm.example", "shed key".into(), next_client())
            .await
            .unwrap();
        let second = service
            .producer_sign_in("pat@farm.example", "shed key".into(), next_client())
            .await
            .unwrap();
        let ms = |duration: Duration| duration.as_millis() as i64;
        let start = now_ms();
        let almost = start + ms(IDLE) - ms(Duration::from_secs(60));
        assert!(service
            .producer_session_at(&first.session_id, almost)
            .is_some());
        // Used just before the end of its idle time, the first session lasts another 12 h.
        let later = almost + ms(IDLE) - ms(Duration::from_secs(60));
        assert!(service
            .producer_session_at(&first.session_id, later)
            .is_some());
        assert!(
            service
                .producer_session_at(&second.session_id, later)
                .is_none(),
            "idle for more than 12 h"
        );
        assert_eq!(service.producer_sessions_open(), 1, "the ended one is gone");
        assert_eq!(
            service
                .prune_producer_sessions_at(later + ms(IDLE))
                .unwrap(),
            1
        );
        assert_eq!(service.producer_sessions_open(), 0, "pruned when idle");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_catalogue_reloaded_without_the_account_or_with_a_new_password_ends_its_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let sign_in = || async {
            service
                .producer_sign_in("pat@farm.example", "shed key".into(), next_client())
                .await
                .unwrap()
                .session_id
        };
        let with_producers = |producers: serde_json::Value| {
            let mut demo: serde_json::Value = serde_json::from_str(DEMO_CATALOGUE_JSON).unwrap();
            demo["webstores"][0]["producers"] = producers;
            demo.to_string()
        };
        let same = service.catalogue().webstores()[0].producers["pat@farm.example"]
            .password_hash
            .clone();

        let kept = sign_in().await;
        let same_account =
            serde_json::json!([{"email": "pat@farm.example", "password_hash": same}]);
        service
            .reload_catalogue(&with_producers(same_account), 1)
            .unwrap();
        assert!(
            service.producer_session(&kept).is_some(),
            "nothing changed for it"
        );

        let new_hash = crate::domain::password::hash_password("new key", &[6; 16]).unwrap();
        let changed = serde_json::json!([{"email": "pat@farm.example", "password_hash": new_hash}]);
        service
            .reload_catalogue(&with_producers(changed), 2)
            .unwrap();
        assert!(service.producer_session(&kept).is_none(), "a new password");

        let removed_later = service
            .producer_sign_in("pat@farm.example", "new key".into(), next_client())
            .await
            .unwrap()
            .session_id;
        service
            .reload_catalogue(&with_producers(serde_json::json!([])), 3)
            .unwrap();
        assert!(
            service.producer_session(&removed_later).is_none(),
            "no account"
        );
        assert_eq!(service.producer_sessions_open(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_account_keeps_at_most_sixteen_sessions_ending_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let mut ids = Vec::new();
        for _ in 0..SESSIONS_PER_ACCOUNT {
            let signed_in = service
                .producer_sign_in("pat@farm.example", "shed key".into(), next_client())
                .await
                .unwrap();
            ids.push(signed_in.session_id);
        }
        // The oldest is used again (later than its last use is written again): the second
        // oldest is now the least recently used.
        let later = now_ms() + TOUCH_EVERY.as_millis() as i64;
        assert!(service.producer_session_at(&ids[0], later).is_some());
        let newest = service
            .producer_sign_in("pat@farm.example", "shed key".into(), next_client())
            .await
            .unwrap();
        assert_eq!(service.producer_sessions_open(), SESSIONS_PER_ACCOUNT);
        assert!(service.producer_session(&ids[1]).is_none(), "ended");
        assert!(service.producer_session(&ids[0]).is_some());
        assert!(service.producer_session(&newest.session_id).is_some());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wrong_passwords_and_unknown_emails_fail_alike_and_are_throttled() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        for email in ["pat@farm.example", "nobody@farm.example"] {
            for _ in 0..10 {
                assert!(matches!(
                    service
                        .producer_sign_in(email, "wrong".into(), next_client())
                        .await,
                    Err(SignInRefused::Wrong)
                ));
            }
            assert!(matches!(
                service
                    .producer_sign_in(email, "shed key".into(), next_client())
                    .await,
                Err(SignInRefused::Throttled(_))
            ));
        }
        assert_eq!(service.producer_sessions_open(), 0);
    }
}
