//! Request lines through the route table and the query parameters endpoints read.
//! The checks live in `boxsub::fuzzing::routes`, which `cargo test` also runs on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::routes(data);
});
