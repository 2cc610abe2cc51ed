//! Email parsing and folding.
//! The checks live in `boxsub::fuzzing::email`, which `cargo test` also runs on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::email(data);
});
