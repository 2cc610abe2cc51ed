//! Write-ahead log segments as a start reads them: torn, damaged and well-formed frames.
//! The checks live in `boxsub::fuzzing::log_segment`, which `cargo test` also runs on every
//! seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::log_segment(data);
});
