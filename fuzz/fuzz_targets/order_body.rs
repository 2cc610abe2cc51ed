//! Arbitrary bytes as an order body: decoding and validation must never panic, and an
//! accepted order must only name things the catalogue has.
#![no_main]

use boxsub::domain::catalogue::Catalogue;
use boxsub::domain::order::{customer_ref, validate_order, CustomerCheck};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(body)) = serde_json::from_slice(data) else {
        return;
    };
    let catalogue = Catalogue::demo(0);
    let _ = customer_ref(&body);
    for webstore in catalogue.webstores() {
        for check in [CustomerCheck::Found, CustomerCheck::Missing, CustomerCheck::Unknown] {
            if let Ok(order) = validate_order(&body, webstore, check) {
                assert_eq!(check, CustomerCheck::Found);
                let b = webstore.visible_box(order.box_id).expect("accepted box is visible");
                assert!(order.extras.iter().all(|line| b.offers_extra(line.id)));
                assert!(order.exclusions.iter().all(|id| webstore.box_items.contains_key(id)));
            }
        }
    }
});
