//! Stored records (with and without a valid header) and export lines.
//! The checks live in `boxsub::fuzzing::records`, which `cargo test` also runs on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::records(data);
});
