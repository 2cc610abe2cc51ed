//! Producers' sessions in the web app: signing in with a producer account of the catalogue
//! (throttled like customers' sign-ins, 10 failures per email in 15 minutes, and as slow
//! whether or not the email is a producer's), the sessions that follow (a random id the
//! client keeps in a cookie; only its SHA-256 is held here), and signing out, which ends a
//! session on the server. A session ends after [`IDLE`] without use. Sessions live in
//! memory: a restart signs every producer out.
//!
//! Must not touch: HTTP (cookies, forms and pages are the app's), the store.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use sha2::{Digest, Sha256};

use super::{Service, ServiceError};
use crate::domain::catalogue::{Webstore, WebstoreIdx};
use crate::domain::email::fold;

/// How long a session lasts without being used.
pub const IDLE: Duration = Duration::from_secs(12 * 60 * 60);

/// Sessions one account may have open at once (its browsers and devices); a sign-in past it
/// ends the account's least recently used session.
pub const SESSIONS_PER_ACCOUNT: usize = 16;

/// The throttles' key for emails that are no producer's (they are throttled too, so that
/// the answer does not tell them apart).
const NO_WEBSTORE: WebstoreIdx = WebstoreIdx(u32::MAX);

/// A signed-in producer's session.
struct Session {
    webstore: WebstoreIdx,
    /// The account signed in with (its folded email) and the SHA-256 of its password hash
    /// then: a catalogue reloaded without the account, or with another password, ends the
    /// session at its next use.
    email: String,
    account: [u8; 32],
    /// The token the app's forms carry (sign-out), against cross-site requests.
    form_token: String,
    last_used: Mutex<Instant>,
}

/// Every open session, by the SHA-256 of its id.
#[derive(Default)]
pub struct ProducerSessions {
    sessions: DashMap<[u8; 32], Session>,
}

/// A session just opened: the id for the cookie and the token for the forms.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The session id (random, 256 bits, hex): the cookie's value.
    pub session_id: String,
    /// The forms' token.
    pub form_token: String,
}

/// A session in use.
#[derive(Debug, Clone)]
pub struct ProducerSession {
    /// The producer's webstore.
    pub webstore: Arc<Webstore>,
    /// The forms' token.
    pub form_token: String,
}

/// Why a sign-in failed.
#[derive(Debug)]
pub enum SignInRefused {
    /// Wrong email or password (never which).
    Wrong,
    /// Too many failures for this email: try again after this long.
    Throttled(Duration),
    /// The service could not check it.
    Failed(ServiceError),
}

fn digest(session_id: &str) -> [u8; 32] {
    Sha256::digest(session_id.as_bytes()).into()
}

/// 32 random bytes as hex.
pub fn random_token() -> Result<String, ServiceError> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|error| ServiceError::Internal(error.to_string()))?;
    Ok(hex::encode(bytes))
}

impl ProducerSessions {
    /// Forgets the sessions idle for longer than [`IDLE`].
    pub fn prune(&self) {
        self.prune_at(Instant::now());
    }

    fn prune_at(&self, now: Instant) {
        self.sessions.retain(|_, session| {
            let last = *session.last_used.lock().unwrap_or_else(|e| e.into_inner());
            now.duration_since(last) < IDLE
        });
    }

    /// Ends the least recently used sessions of account `email` beyond
    /// [`SESSIONS_PER_ACCOUNT`]` - 1`, so that a new one fits: signing in again and again
    /// cannot grow the sessions without bound.
    fn make_room_for(&self, email: &str) {
        let mut of_account: Vec<([u8; 32], Instant)> = self
            .sessions
            .iter()
            .filter(|entry| entry.email == email)
            .map(|entry| {
                let last = *entry.last_used.lock().unwrap_or_else(|e| e.into_inner());
                (*entry.key(), last)
            })
            .collect();
        if of_account.len() < SESSIONS_PER_ACCOUNT {
            return;
        }
        of_account.sort_unstable_by_key(|(_, last)| *last);
        let surplus = of_account.len() + 1 - SESSIONS_PER_ACCOUNT;
        for (key, _) in of_account.into_iter().take(surplus) {
            self.sessions.remove(&key);
        }
    }

    /// How many sessions are open (tests and diagnostics).
    pub fn open(&self) -> usize {
        self.sessions.len()
    }
}

impl Service {
    /// Signs a producer in with `email` and `password`: a new session, or why not.
    pub async fn producer_sign_in(
        &self,
        email: &str,
        password: String,
    ) -> Result<SignedIn, SignInRefused> {
        let catalogue = self.catalogue();
        let found = catalogue.producer(email);
        let webstore = found.map_or(NO_WEBSTORE, |(webstore, _)| webstore.idx);
        let attempt = self
            .producer_throttles
            .begin(webstore, fold(email))
            .map_err(SignInRefused::Throttled)?;
        let stored = found.map(|(_, producer)| producer.password_hash.clone());
        let account = stored.as_deref().map(digest).unwrap_or_default();
        let matches = self
            .passwords
            .check(password, stored, move |matches| attempt.finish(matches))
            .await
            .map_err(SignInRefused::Failed)?;
        if !matches {
            return Err(SignInRefused::Wrong);
        }
        let signed_in = SignedIn {
            session_id: random_token().map_err(SignInRefused::Failed)?,
            form_token: random_token().map_err(SignInRefused::Failed)?,
        };
        let email = fold(email);
        self.producer_sessions.make_room_for(&email);
        self.producer_sessions.sessions.insert(
            digest(&signed_in.session_id),
            Session {
                webstore,
                email,
                account,
                form_token: signed_in.form_token.clone(),
                last_used: Mutex::new(Instant::now()),
            },
        );
        Ok(signed_in)
    }

    /// The session `session_id` names, if it is open and its account still in the catalogue
    /// (same webstore, same password); using it keeps it open.
    pub fn producer_session(&self, session_id: &str) -> Option<ProducerSession> {
        self.producer_session_at(session_id, Instant::now())
    }

    /// [`Service::producer_session`] as of `now`.
    fn producer_session_at(&self, session_id: &str, now: Instant) -> Option<ProducerSession> {
        let key = digest(session_id);
        let session = self.producer_sessions.sessions.get(&key)?;
        {
            let mut last = session.last_used.lock().unwrap_or_else(|e| e.into_inner());
            if now.duration_since(*last) >= IDLE {
                drop(last);
                drop(session);
                self.producer_sessions.sessions.remove(&key);
                return None;
            }
            *last = now;
        }
        let catalogue = self.catalogue();
        let still_valid = catalogue
            .producer(&session.email)
            .filter(|(webstore, producer)| {
                webstore.idx == session.webstore
                    && digest(&producer.password_hash) == session.account
            });
        let Some((webstore, _)) = still_valid else {
            drop(session);
            self.producer_sessions.sessions.remove(&key);
            return None;
        };
        let webstore = webstore.clone();
        Some(ProducerSession {
            webstore,
            form_token: session.form_token.clone(),
        })
    }

    /// Ends session `session_id` on the server: its cookie opens nothing from now on.
    pub fn producer_sign_out(&self, session_id: &str) {
        self.producer_sessions.sessions.remove(&digest(session_id));
    }

    /// The open producer sessions (upkeep prunes the idle ones).
    pub fn producer_sessions(&self) -> &ProducerSessions {
        &self.producer_sessions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::catalogue::{Catalogue, DEMO_CATALOGUE_JSON};
    use crate::service::ServiceSettings;
    use crate::store::Store;

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
            event_views: crate::service::EventViewsHandle(std::sync::Arc::new(
                crate::http::ApiViews,
            )),
            admission_slots: 64,
        };
        Service::new(catalogue, Store::open_for_test(dir), settings).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_producer_signs_in_uses_the_session_and_signs_out() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let signed_in = service
            .producer_sign_in(" PAT@farm.example", "shed key".into())
            .await
            .expect("the right password");
        let session = service
            .producer_session(&signed_in.session_id)
            .expect("open");
        assert_eq!(session.webstore.idx, service.catalogue().webstores()[0].idx);
        assert_eq!(session.form_token, signed_in.form_token);
        assert_ne!(signed_in.session_id, signed_in.form_token);
        assert!(service.producer_session("not-a-session").is_none());
        service.producer_sign_out(&signed_in.session_id);
        assert!(
            service.producer_session(&signed_in.session_id).is_none(),
            "a session signed out opens nothing"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_ends_after_twelve_hours_idle_and_use_keeps_it_open() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let first = service
            .producer_sign_in("pat@farm.example", "shed key".into())
            .await
            .unwrap();
        let second = service
            .producer_sign_in("pat@farm.example", "shed key".into())
            .await
            .unwrap();
        let start = Instant::now();
        let almost = start + IDLE - Duration::from_secs(60);
        assert!(service
            .producer_session_at(&first.session_id, almost)
            .is_some());
        // Used just before the end of its idle time, the first session lasts another 12 h.
        let later = almost + IDLE - Duration::from_secs(60);
        assert!(service
            .producer_session_at(&first.session_id, later)
            .is_some());
        assert!(
            service
                .producer_session_at(&second.session_id, later)
                .is_none(),
            "idle for more than 12 h"
        );
        assert_eq!(
            service.producer_sessions().open(),
            1,
            "the ended one is gone"
        );
        service.producer_sessions().prune_at(later + IDLE);
        assert_eq!(service.producer_sessions().open(), 0, "pruned when idle");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_catalogue_reloaded_without_the_account_or_with_a_new_password_ends_its_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let sign_in = || async {
            service
                .producer_sign_in("pat@farm.example", "shed key".into())
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
            .producer_sign_in("pat@farm.example", "new key".into())
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
        assert_eq!(service.producer_sessions().open(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_account_keeps_at_most_sixteen_sessions_ending_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let service = service(dir.path());
        let mut ids = Vec::new();
        for _ in 0..SESSIONS_PER_ACCOUNT {
            let signed_in = service
                .producer_sign_in("pat@farm.example", "shed key".into())
                .await
                .unwrap();
            ids.push(signed_in.session_id);
        }
        // The oldest is used again: the second oldest is now the least recently used.
        std::thread::sleep(Duration::from_millis(2));
        assert!(service.producer_session(&ids[0]).is_some());
        let newest = service
            .producer_sign_in("pat@farm.example", "shed key".into())
            .await
            .unwrap();
        assert_eq!(service.producer_sessions().open(), SESSIONS_PER_ACCOUNT);
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
                    service.producer_sign_in(email, "wrong".into()).await,
                    Err(SignInRefused::Wrong)
                ));
            }
            assert!(matches!(
                service.producer_sign_in(email, "shed key".into()).await,
                Err(SignInRefused::Throttled(_))
            ));
        }
        assert_eq!(service.producer_sessions().open(), 0);
    }
}
