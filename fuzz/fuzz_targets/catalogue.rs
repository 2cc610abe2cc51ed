//! Catalogue files, on their own and as a reload of the demo catalogue.
//! The checks live in `boxsub::fuzzing::catalogue`, which `cargo test` also runs on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::catalogue(data);
});
