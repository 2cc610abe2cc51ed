//! Host faults on a real small filesystem: a 48 MB ext4 image, loop-mounted by the test, as
//! the data directory. The disk fills through the API; another process fills it between the
//! server's checks; the server restarts on the full disk as a service manager would; the
//! filesystem is grown; ext4 remounts itself read-only while the server serves. Plus leftovers
//! of an interrupted snapshot in a data directory on any disk.
//!
//! Loop mounts need root, `mkfs.ext4` and loop devices: CI has them. Where they are missing
//! these tests go through [`skip_or_fail`]: a `SKIPPED: <test>: <reason>` line on stderr,
//! or a failure where `BOXSUB_REQUIRE_ALL_TESTS=1` (as in CI). Every mount is unmounted and
//! every server stopped by the end of its test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{customer_body, id_of, skip_or_fail, DataDir, Launch, TestApp};

/// A loop-mounted ext4 image; unmounted when dropped.
struct LoopMount {
    root: tempfile::TempDir,
    mounted: bool,
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|error| format!("{program}: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl LoopMount {
    /// A fresh ext4 filesystem of `megabytes`, mounted with `errors=remount-ro` (as a
    /// careful operator mounts a data disk), or `None` where this host can't, after
    /// [`skip_or_fail`] (which fails test `test` instead where every test must run).
    fn new(test: &str, megabytes: u64) -> Option<LoopMount> {
        if !nix::unistd::geteuid().is_root() {
            skip_or_fail(test, "loop mounts need root");
            return None;
        }
        if !Path::new("/dev/loop-control").exists() {
            skip_or_fail(
                test,
                "loop mounts need /dev/loop-control (no loop devices here)",
            );
            return None;
        }
        let root = tempfile::tempdir().expect("temp dir");
        let mount = LoopMount {
            root,
            mounted: false,
        };
        let image = mount.image();
        let made = std::fs::File::create(&image)
            .and_then(|file| file.set_len(megabytes << 20))
            .map_err(|error| error.to_string())
            .and_then(|()| run("mkfs.ext4", &["-q", "-F", path(&image)]));
        if let Err(error) = made {
            skip_or_fail(test, &format!("cannot make an ext4 image: {error}"));
            return None;
        }
        std::fs::create_dir_all(mount.point()).expect("mount point");
        let mut mount = mount;
        if let Err(error) = mount.mount() {
            skip_or_fail(test, &format!("cannot loop-mount an image: {error}"));
            return None;
        }
        Some(mount)
    }

    fn image(&self) -> PathBuf {
        self.root.path().join("disk.img")
    }

    fn point(&self) -> PathBuf {
        self.root.path().join("mnt")
    }

    fn mount(&mut self) -> Result<(), String> {
        let point = self.point();
        run(
            "mount",
            &[
                "-o",
                "loop,errors=remount-ro",
                path(&self.image()),
                path(&point),
            ],
        )?;
        self.mounted = true;
        Ok(())
    }

    fn unmount(&mut self) {
        if self.mounted {
            let point = self.point();
            if run("umount", &[path(&point)]).is_err() {
                let _ = run("umount", &["-l", path(&point)]);
            }
            self.mounted = false;
        }
    }

    /// The loop device under the mount, e.g. `loop3`.
    fn device(&self) -> String {
        let source = run("findmnt", &["-n", "-o", "SOURCE", path(&self.point())])
            .expect("findmnt names the loop device");
        source.trim_start_matches("/dev/").to_string()
    }

    /// Grows the (unmounted) filesystem to `megabytes` and mounts it again.
    fn grow(&mut self, megabytes: u64) {
        self.unmount();
        let image = self.image();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&image)
            .and_then(|file| file.set_len(megabytes << 20))
            .expect("grow the image");
        // e2fsck exits 1 when it fixed something, which a checked-then-grown image may need.
        let _ = run("e2fsck", &["-f", "-y", path(&image)]);
        run("resize2fs", &[path(&image)]).expect("resize2fs");
        self.mount().expect("mount the grown filesystem");
    }

    /// Fills the filesystem with a file until at most `free` bytes are left, as another
    /// process on the host would.
    fn fill_leaving(&self, free: u64) -> PathBuf {
        let stat = nix::sys::statvfs::statvfs(&self.point()).expect("statvfs");
        let available = stat.blocks_available() as u64 * stat.fragment_size() as u64;
        let filler = self.point().join("filler-partial");
        let mut file = std::fs::File::create(&filler).expect("filler");
        let block = vec![0u8; 64 * 1024];
        let mut left = available.saturating_sub(free);
        use std::io::Write;
        while left > 0 {
            let chunk = left.min(block.len() as u64) as usize;
            if file.write_all(&block[..chunk]).is_err() {
                break;
            }
            left -= chunk as u64;
        }
        let _ = file.sync_all();
        filler
    }

    /// Fills every free block with a file, as another process on the host would.
    fn fill(&self) -> PathBuf {
        let filler = self.point().join("filler");
        let mut file = std::fs::File::create(&filler).expect("filler");
        let block = vec![0u8; 64 * 1024];
        use std::io::Write;
        for _ in 0..10_000 {
            if file.write_all(&block).is_err() {
                break;
            }
        }
        let _ = file.sync_all();
        filler
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        self.unmount();
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// A customer body of about 2.5 KiB, so that a small disk fills in seconds.
fn bulky_customer(n: usize) -> Value {
    let long = |c: char| std::iter::repeat_n(c, 250).collect::<String>();
    let mut body = customer_body(&format!("bulk{n}@example.com"));
    body["address"] = json!({
        "address_1": long('a'), "address_2": long('b'), "suburb": long('c'),
        "city": long('d'), "postcode": "XXX123", "home_phone": "007",
        "delivery_note": std::iter::repeat_n('n', 1000).collect::<String>(),
    });
    body
}

/// What the API acknowledged: customers by id, with their orders.
#[derive(Default)]
struct Acknowledged {
    customers: Vec<(i64, Vec<i64>)>,
}

/// Creates customers (each with an order) until writes are refused with 503 (bounded in
/// rounds and time), recording what was acknowledged; returns the 503's body.
async fn fill_through_the_api(app: &TestApp, acknowledged: &mut Acknowledged) -> Value {
    let started = Instant::now();
    for round in 0..2_000 {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "writes were still accepted after 240 s"
        );
        let bodies: Vec<Value> = (0..16).map(|i| bulky_customer(round * 16 + i)).collect();
        let creates = join_all(bodies.iter().map(|body| app.create_customer(body))).await;
        let mut refused = None;
        for response in creates {
            match response.status {
                201 => {
                    let id = id_of(&response.json());
                    let order = app
                        .create_order(&json!({"customer_id": id, "box_id": 217}))
                        .await;
                    let orders = match order.status {
                        201 => vec![id_of(&order.json())],
                        503 => Vec::new(),
                        other => panic!("order: {other} {}", order.text()),
                    };
                    acknowledged.customers.push((id, orders));
                }
                503 => refused = Some(response),
                other => panic!("create: {other} {}", response.text()),
            }
        }
        if let Some(refused) = refused {
            assert!(
                refused.header("retry-after").is_some(),
                "a 503 says when to retry"
            );
            return refused.json();
        }
    }
    panic!("2,000 rounds of creates never filled a 48 MB disk");
}

/// Every acknowledged customer and order reads back.
async fn assert_all_there(app: &TestApp, acknowledged: &Acknowledged) {
    for (id, orders) in &acknowledged.customers {
        app.get(&format!("/v1/customers/{id}"))
            .await
            .assert_status(200);
        let stored: Vec<i64> = app.orders_of(*id).await.iter().map(id_of).collect();
        for order in orders {
            assert!(
                stored.contains(order),
                "order {order} of customer {id} is gone"
            );
        }
    }
}

/// Unfinished snapshot files in a data directory.
fn leftovers(data: &Path) -> Vec<String> {
    std::fs::read_dir(data)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".generating"))
                .collect()
        })
        .unwrap_or_default()
}

/// Starts `boxsub serve` on the full disk as a service manager would: either it serves
/// (reads 200, writes 503, and a SIGTERM stops it) or it stops by itself with a message
/// saying the disk is full and what to do, and either way it leaves no unfinished snapshot
/// behind.
async fn restart_on_a_full_disk(dir: &DataDir, known: i64) -> String {
    let outcome = match Launch::new().on(dir).try_spawn().await {
        Err(failure) => {
            assert!(
                failure.contains("exited during start-up") || failure.contains("closed stdout"),
                "{failure}"
            );
            assert!(
                failure.contains("disk is full") && failure.contains("free space"),
                "the refusal says the disk is full and what to do:\n{failure}"
            );
            let reason = failure
                .lines()
                .rev()
                .find(|line| line.contains("disk is full"))
                .unwrap_or_default()
                .to_string();
            format!("stopped cleanly ({reason})")
        }
        Ok(mut app) => {
            app.get(&format!("/v1/customers/{known}"))
                .await
                .assert_status(200);
            app.create_customer(&customer_body("more@example.com"))
                .await
                .assert_status(503);
            let status = app.terminate(Duration::from_secs(20));
            assert!(status.is_some(), "it stops on SIGTERM");
            "served reads".to_string()
        }
    };
    assert!(
        leftovers(&dir.data).is_empty(),
        "a start on a full disk left {:?}",
        leftovers(&dir.data)
    );
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_refuses_writes_serves_reads_and_recovers_once_grown() {
    // Arrange
    let test = "host_faults::a_full_disk_refuses_writes_serves_reads_and_recovers_once_grown";
    let Some(mut disk) = LoopMount::new(test, 48) else {
        return;
    };
    let dir = DataDir::at(disk.point().join("data"));
    let mut acknowledged = Acknowledged::default();
    let mut app = Launch::new().on(&dir).spawn().await;

    // Act: fill it through the API.
    let filling = Instant::now();
    let refusal = fill_through_the_api(&app, &mut acknowledged).await;
    let filled_in = filling.elapsed();

    // Assert: writes 503, reads 200, while the disk is nearly full.
    let message = refusal["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("nearly full"), "{refusal}");
    let (known, _) = acknowledged.customers[0];
    app.get(&format!("/v1/customers/{known}"))
        .await
        .assert_status(200);
    app.get("/v1/customers?per_page=5").await.assert_status(200);
    assert!(!app.lookup_email("bulk0@example.com").await.is_empty());
    app.create_order(&json!({"customer_id": known, "box_id": 217}))
        .await
        .assert_status(503);
    app.patch_json(
        &format!("/v1/customers/{known}"),
        &json!({"first_name": "X"}),
    )
    .await
    .assert_status(503);
    assert!(app
        .stderr_tail()
        .contains("free space is below the reserve"));
    app.terminate_ok(Duration::from_secs(20));

    // Another process takes the last free blocks while it is stopped: starts on the truly
    // full disk, as `Restart=on-failure` makes them, never brick the store.
    let filler = disk.fill();
    let first = restart_on_a_full_disk(&dir, known).await;
    let second = restart_on_a_full_disk(&dir, known).await;
    std::fs::remove_file(filler).expect("remove the filler");
    // The restarts may have given space back (sled returns the segments its checkpoints
    // emptied): another process keeps the disk below the reserve (8 MiB on this disk).
    let _nearly = disk.fill_leaving(4 << 20);

    // A restart on the nearly full disk serves reads and refuses writes.
    let app = Launch::new().on(&dir).spawn().await;
    app.get(&format!("/v1/customers/{known}"))
        .await
        .assert_status(200);
    app.create_customer(&customer_body("late@example.com"))
        .await
        .assert_status(503);
    drop(app);

    // Grow the filesystem; everything acknowledged is there and writes resume.
    let growing = Instant::now();
    disk.grow(96);
    let app = Launch::new().on(&dir).spawn().await;
    let recovered_in = growing.elapsed();
    assert_all_there(&app, &acknowledged).await;
    let fresh = app
        .create_customer_ok(&customer_body("after@example.com"))
        .await;
    app.create_order_ok(&json!({"customer_id": fresh["id"], "box_id": 217}))
        .await;
    let orders: usize = acknowledged.customers.iter().map(|(_, o)| o.len()).sum();
    println!(
        "full disk: {} customers and {orders} orders acknowledged in {:.1} s before writes were \
         refused; starts on the truly full disk: {first}, then {second}; back to writes {:.1} s \
         after growing it",
        acknowledged.customers.len(),
        filled_in.as_secs_f64(),
        recovered_in.as_secs_f64()
    );
    drop(app);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_disk_filled_behind_the_servers_back_stops_it_and_never_bricks_the_store() {
    // Arrange: no reserve, so that writes meet the full disk itself.
    let test =
        "host_faults::a_disk_filled_behind_the_servers_back_stops_it_and_never_bricks_the_store";
    let Some(mut disk) = LoopMount::new(test, 48) else {
        return;
    };
    let dir = DataDir::at(disk.point().join("data"));
    let mut app = Launch::new()
        .on(&dir)
        .args(&["--min-free-mb", "0"])
        .spawn()
        .await;
    let mut acknowledged = Acknowledged::default();
    for n in 0..50 {
        let customer = app.create_customer_ok(&bulky_customer(n)).await;
        acknowledged.customers.push((id_of(&customer), Vec::new()));
    }
    let (known, _) = acknowledged.customers[0];

    // Act: another process takes every free block; the next writes meet ENOSPC.
    let filler = disk.fill();
    let mut statuses = Vec::new();
    for n in 0..200 {
        let response = app
            .client
            .post(app.url("/v1/customers"))
            .header("API-Key", &app.creds.key)
            .header("API-Secret", &app.creds.secret)
            .json(&bulky_customer(1_000 + n))
            .send()
            .await;
        match response {
            Ok(response) if response.status() == 201 => {
                let body: Value = response.json().await.expect("json");
                acknowledged.customers.push((id_of(&body), Vec::new()));
            }
            Ok(response) => statuses.push(response.status().as_u16()),
            Err(_) => break,
        }
    }

    // Assert: it stopped with status 70 rather than acknowledge what it could not store.
    let status = app.wait_for_exit(Duration::from_secs(20));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(70),
        "statuses before it stopped: {statuses:?}\n{}",
        app.stderr_tail()
    );

    // Restarts on the full disk, as `Restart=on-failure` does, never brick it.
    let first = restart_on_a_full_disk(&dir, known).await;
    let second = restart_on_a_full_disk(&dir, known).await;

    // Freeing the space brings everything back.
    std::fs::remove_file(filler).expect("remove the filler");
    disk.grow(64);
    let app = Launch::new().on(&dir).spawn().await;
    assert_all_there(&app, &acknowledged).await;
    app.create_customer_ok(&customer_body("after@example.com"))
        .await;
    println!(
        "disk filled behind the server: exit 70 after {} refused writes; restarts on the full \
         disk: {first}, then {second}; {} acknowledged customers all back",
        statuses.len(),
        acknowledged.customers.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_turned_read_only_refuses_writes_and_serves_reads() {
    // Arrange
    let test = "host_faults::a_data_directory_turned_read_only_refuses_writes_and_serves_reads";
    let Some(disk) = LoopMount::new(test, 48) else {
        return;
    };
    let trigger = PathBuf::from(format!("/sys/fs/ext4/{}/trigger_fs_error", disk.device()));
    if !trigger.exists() {
        skip_or_fail(test, &format!("this kernel has no {}", trigger.display()));
        return;
    }
    let dir = DataDir::at(disk.point().join("data"));
    let mut app = Launch::new().on(&dir).spawn().await;
    let ann = app
        .create_customer_ok(&customer_body("ann@example.com"))
        .await;
    let order = app
        .create_order_ok(&json!({"customer_id": ann["id"], "box_id": 217}))
        .await;
    // The node's own first writes done: the freezing duty freezes the dates already locked
    // (after their cut-off, at this hour) at its first pass. A log append the read-only disk
    // refuses is fatal by design (nothing unsynced is ever acknowledged), so the error comes
    // with no write in flight, as the refusal it tests is of the writes that come after.
    let _ = app.wait_for_stderr_line(Duration::from_secs(2), |line| {
        line.contains("delivery lists frozen")
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Act: ext4 meets an error and remounts itself read-only, as it does on a failing disk
    // mounted with errors=remount-ro. (`mount -o remount,ro` is refused while the store's
    // files are open for writing, so it is not how a live data directory becomes read-only.)
    std::fs::write(&trigger, "boxsub test: simulated error\n").expect("trigger an ext4 error");
    let noticed = app.wait_for_stderr_line(Duration::from_secs(10), |line| {
        line.contains("does not take writes")
    });

    // Assert
    assert!(noticed.is_some(), "no log line: {}", app.stderr_tail());
    let refused = app.create_customer(&customer_body("bob@example.com")).await;
    refused.assert_status(503);
    assert!(
        refused.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("read-only")),
        "{}",
        refused.text()
    );
    app.create_order(&json!({"customer_id": ann["id"], "box_id": 217}))
        .await
        .assert_status(503);
    app.get(&format!("/v1/customers/{}", ann["id"]))
        .await
        .assert_status(200);
    app.get(&format!("/v1/orders/{}", order["id"]))
        .await
        .assert_status(200);
    assert_eq!(app.orders_of(id_of(&ann)).await.len(), 1);
    assert!(
        app.wait_for_exit(Duration::from_millis(500)).is_none(),
        "the server must keep serving reads"
    );
    let _ = app.terminate(Duration::from_secs(20));
}

#[tokio::test]
async fn unfinished_snapshots_in_the_data_directory_are_removed_and_named_at_start() {
    // Arrange: a store, then an empty and a cut-short unfinished snapshot, as a start on a
    // full disk or a crash mid-snapshot leaves them.
    let dir = DataDir::new();
    let ann = {
        let mut app = Launch::new().on(&dir).spawn().await;
        let ann = app
            .create_customer_ok(&customer_body("ann@example.com"))
            .await;
        app.terminate_ok(Duration::from_secs(20));
        ann
    };
    let empty = "snap.FFFFFFFFFFFFFFF0.generating";
    let cut_short = "snap.FFFFFFFFFFFFFFFF.generating";
    std::fs::write(dir.data.join(empty), b"").unwrap();
    std::fs::write(dir.data.join(cut_short), vec![7u8; 4096]).unwrap();

    // Act
    let app = Launch::new().on(&dir).spawn().await;

    // Assert: it serves the store, and says what it removed.
    app.get(&format!("/v1/customers/{}", ann["id"]))
        .await
        .assert_status(200);
    for name in [empty, cut_short] {
        assert!(
            app.wait_for_stderr_line(Duration::from_secs(10), |line| line.contains(name))
                .is_some(),
            "the log names {name}:\n{}",
            app.stderr_tail()
        );
    }
    assert!(leftovers(&dir.data).is_empty());
}
