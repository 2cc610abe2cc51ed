//! Sign-in parameters from JSON, form and query.
//! The checks live in `boxsub::fuzzing::sign_in`, which `cargo test` also runs on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::sign_in(data);
});
