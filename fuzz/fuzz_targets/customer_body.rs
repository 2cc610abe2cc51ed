//! Arbitrary bytes as a customer body, on create and on update: never a panic.
#![no_main]

use boxsub::domain::catalogue::Catalogue;
use boxsub::domain::customer::{parse_customer, Mode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(data) else {
        return;
    };
    let catalogue = Catalogue::demo(0);
    for webstore in catalogue.webstores() {
        let _ = parse_customer(&body, webstore, Mode::Create);
        let _ = parse_customer(&body, webstore, Mode::Update);
    }
});
