//! Order bodies through validation, rendering, the store codec and the export format.
//! The checks live in `boxsub::fuzzing::order_body`, which `cargo test` also runs on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::order_body(data);
});
