//! Order changes (`PATCH /v1/orders/{id}`) applied to a weekly order through a week of
//! cut-offs: locked dates untouched, the planned versions bounded, the result stored and
//! exported. The checks live in `boxsub::fuzzing::order_change`, which `cargo test` also runs
//! on every seed.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    boxsub::fuzzing::order_change(data);
});
