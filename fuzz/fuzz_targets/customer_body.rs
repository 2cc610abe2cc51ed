//! Customer bodies, create and update, through validation, rendering and the store codec.
//! The checks live in `boxsub::fuzzing::customer_body`, which `cargo test` also runs on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::customer_body(data);
});
