//! `Email::parse` and folding on arbitrary text: no panic, and folding is idempotent.
#![no_main]

use boxsub::domain::email::{fold, Email};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(email) = Email::parse(text) {
        assert_eq!(Email::parse(email.as_str()).as_ref(), Ok(&email));
    }
    let once = fold(text);
    assert_eq!(fold(&once), once);
});
