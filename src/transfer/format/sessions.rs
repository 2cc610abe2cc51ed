//! Producers' sessions in the web app as exported, version 2 on: [`SessionLine`], under the
//! SHA-256 of the session's id as stored (the ids themselves are only ever in the producers'
//! cookies), digest and account's fingerprint as hex. Must not touch: the store but its
//! record, files, the other kinds' lines.

use serde::{Deserialize, Serialize};

use super::BadLine;
use crate::store::kinds::sessions::SessionRecord;

/// A producer's session, as exported (see `store::kinds::sessions::SessionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionLine {
    /// Its webstore.
    pub webstore_id: String,
    /// The SHA-256 of the session id, hex.
    pub digest: String,
    /// The account (folded email).
    pub email: String,
    /// The SHA-256 of the account's password hash at sign-in, hex.
    pub account: String,
    /// The forms' token.
    pub form_token: String,
    /// When it was opened (Unix milliseconds).
    pub signed_in_ms: i64,
    /// When it was last used, as last written (Unix milliseconds).
    pub last_used_ms: i64,
}

impl SessionLine {
    /// The line of stored session `digest`.
    pub fn from_record(digest: &[u8; 32], record: SessionRecord) -> SessionLine {
        SessionLine {
            webstore_id: record.webstore_id,
            digest: hex::encode(digest),
            email: record.email,
            account: hex::encode(record.account),
            form_token: record.form_token,
            signed_in_ms: record.signed_in_ms,
            last_used_ms: record.last_used_ms,
        }
    }

    /// The digest and the record to store.
    pub fn into_record(self) -> Result<([u8; 32], SessionRecord), BadLine> {
        let sha256 = |text: &str| -> Option<[u8; 32]> { hex::decode(text).ok()?.try_into().ok() };
        match (sha256(&self.digest), sha256(&self.account)) {
            (Some(digest), Some(account)) if !self.webstore_id.is_empty() => Ok((
                digest,
                SessionRecord {
                    webstore_id: self.webstore_id,
                    email: self.email,
                    account,
                    form_token: self.form_token,
                    signed_in_ms: self.signed_in_ms,
                    last_used_ms: self.last_used_ms,
                },
            )),
            _ => Err(BadLine(
                "session: the webstore_id must be set, and digest and account must be 64 \
                 hexadecimal digits"
                    .into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::format::{to_text, Line};

    #[test]
    fn a_session_line_round_trips_and_refuses_a_bad_digest() {
        let record = SessionRecord {
            webstore_id: "shop".into(),
            email: "pat@shop.example".into(),
            account: [9; 32],
            form_token: "f".repeat(64),
            signed_in_ms: 1,
            last_used_ms: 2,
        };
        let line = SessionLine::from_record(&[7; 32], record.clone());
        let text = to_text(&Line::Session(line.clone()));
        assert!(text.starts_with(br#"{"type":"session","webstore_id":"shop","digest":"0707"#));
        let Ok(Line::Session(back)) = serde_json::from_slice::<Line>(&text) else {
            panic!("a session line reads back as another kind")
        };
        assert_eq!(back.into_record().unwrap(), ([7; 32], record));
        let bad = SessionLine {
            digest: "07".into(),
            ..line
        };
        assert!(bad.into_record().is_err());
    }
}
