//! The demo catalogue: the JSON built into the binary (`src/domain/demo_catalogue.json`),
//! for trying boxsub out, and its API and producer credentials, which are public.
//!
//! Must not touch: the rules a catalogue is checked by (the demo is parsed like any other).

use super::Catalogue;

/// The catalogue built into the binary, for trying boxsub out.
pub const DEMO_CATALOGUE_JSON: &str = include_str!("../demo_catalogue.json");

/// The demo catalogue's credentials, `(webstore id, API key, API secret)`. They are public,
/// so a server running on the demo catalogue says so loudly at start-up.
pub const DEMO_CREDENTIALS: [(&str, &str, &str); 2] = [
    (
        "fantastic-vege-people",
        "demo-key-fantastic-vege-people",
        "demo-secret-fantastic-vege-people-0001",
    ),
    (
        "green-valley-farm",
        "demo-key-green-valley-farm",
        "demo-secret-green-valley-farm-0002",
    ),
];

/// The demo catalogue's producer accounts for the web app, `(webstore id, email, password)`:
/// public like its API credentials.
pub const DEMO_PRODUCERS: [(&str, &str, &str); 2] = [
    (
        "fantastic-vege-people",
        "producer@fantastic-vege-people.example",
        "demo-producer-fantastic-vege-people",
    ),
    (
        "green-valley-farm",
        "producer@green-valley-farm.example",
        "demo-producer-green-valley-farm",
    ),
];

impl Catalogue {
    /// The built-in demo catalogue.
    pub fn demo(loaded_at: i64) -> Catalogue {
        Catalogue::parse(DEMO_CATALOGUE_JSON, loaded_at).expect("the demo catalogue is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_catalogue_is_valid_and_its_credentials_work() {
        let catalogue = Catalogue::demo(0);
        for (webstore_id, key, secret) in DEMO_CREDENTIALS {
            let webstore = catalogue.authenticate(key, secret).expect("demo key works");
            assert_eq!(webstore.settings.id, webstore_id);
            assert!(catalogue.authenticate(key, "wrong").is_none());
        }
        assert!(catalogue.authenticate("nobody", "x").is_none());
        for (webstore_id, email, password) in DEMO_PRODUCERS {
            let (webstore, producer) = catalogue.producer(email).expect("a demo producer");
            assert_eq!(webstore.settings.id, webstore_id);
            assert!(crate::domain::password::verify_password(
                password,
                &producer.password_hash
            ));
        }
    }
}
