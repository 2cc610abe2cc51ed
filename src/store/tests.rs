//! The store's own tests: no write lands after `close`, records and indexes survive a
//! reopening, an unreadable record is an error naming its key, a data directory that is a
//! file is refused with its path.

use super::*;
use crate::domain::catalogue::WebstoreIdx;
use crate::domain::customer::{Address, Customer};
use crate::domain::email::Email;
use crate::domain::ids::CustomerId;

fn customer(id: u64, email: &str) -> Customer {
    Customer {
        id: CustomerId(id),
        webstore: WebstoreIdx(0),
        number: id,
        first_name: "Ann".into(),
        last_name: None,
        email: Email::from_trusted(email.into()),
        delivery_service_id: 91,
        address: Address::default(),
        password_hash: None,
    }
}

fn open(dir: &Path) -> Store {
    Store::open_for_test(dir)
}

#[test]
fn no_write_lands_after_close() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    // Writers racing the close, writing until they are refused: each write is either in
    // before it (and kept) or refused.
    let writers: Vec<_> = (0..4u8)
        .map(|writer| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                for n in 0..2_000_000u32 {
                    let key = [b"x".as_slice(), &[writer], &n.to_be_bytes()].concat();
                    match store.put_raw(&key, vec![1]) {
                        Ok(()) => kept.push(key),
                        Err(StoreError::Closed) => return (kept, true),
                        Err(error) => panic!("{error}"),
                    }
                }
                (kept, false)
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    store.close().unwrap();
    let after_close = store.create_customer(&customer(9, "late@b.c"), "shop", None);
    assert!(matches!(after_close, Err(StoreError::Closed)));
    assert!(matches!(
        store.reserve_order_ids(10),
        Err(StoreError::Closed)
    ));
    let mut kept = Vec::new();
    for writer in writers {
        let (written, refused) = writer.join().unwrap();
        assert!(
            refused,
            "a writer finished before the close: nothing raced it"
        );
        kept.extend(written);
    }
    drop(store);
    let reopened = open(dir.path());
    for key in &kept {
        assert!(reopened.inner.storage.get(key).unwrap().is_some());
    }
    assert!(reopened.load_customer(CustomerId(9)).unwrap().is_none());
}

#[test]
fn records_and_indexes_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        store
            .create_customer(&customer(7, "a@b.c"), "shop", None)
            .unwrap();
        store.close().unwrap();
    }
    let store = open(dir.path());
    assert_eq!(
        store.email_owner("shop", "a@b.c").unwrap(),
        Some(CustomerId(7))
    );
    assert_eq!(store.email_owner("other", "a@b.c").unwrap(), None);
    assert_eq!(store.high_water(IdRange::default()).unwrap().customer_id, 7);
    assert_eq!(store.last_number("shop").unwrap(), 7);
    let loaded = store.load_customer(CustomerId(7)).unwrap().unwrap();
    assert_eq!(loaded.record.webstore_id, "shop");
    assert_eq!(store.verify().unwrap().customers, 1);
}

#[test]
fn an_unreadable_record_is_an_error_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store
        .create_customer(&customer(3, "x@y.z"), "shop", None)
        .unwrap();
    let mut damage = WriteBatch::default();
    damage.put(keys::customer(3), b"BXS\x01\x00\x01garbage".to_vec());
    store.apply(damage).unwrap();
    let error = store.verify().unwrap_err();
    assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("record c"), "{error}");
    assert!(store.load_customer(CustomerId(3)).is_err());
}

#[test]
fn a_data_dir_that_is_a_file_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let error = Store::open(
        &file,
        StoreOptions {
            durability: Durability::Sync {
                commit_interval: std::time::Duration::ZERO,
            },
            cache_bytes: 1 << 20,
            reserve: Reserve::Bytes(0),
        },
        Arc::new(|_: &StoreError| {}),
    )
    .err()
    .unwrap();
    assert!(error.to_string().contains("not-a-dir"), "{error}");
}
