//! The operator's side (contract section 7): `keygen`, the demo catalogue,
//! start-up refusal of a broken catalogue, and a clean exit on SIGTERM.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{
    boxsub_command, default_catalogue, run_to_exit, sha256_hex, spawn_app, Creds, Launch,
    MSG_BAD_CREDS,
};

/// Runs `boxsub keygen` and returns (key, secret, secret_sha256).
fn keygen() -> (String, String, String) {
    let mut cmd = boxsub_command();
    cmd.arg("keygen");
    let finished = run_to_exit(cmd, Duration::from_secs(20));
    let status = finished
        .status
        .unwrap_or_else(|| panic!("keygen did not exit within 20 s: {}", finished.stdout));
    assert!(
        status.success(),
        "keygen exited with {status}: {}",
        finished.stderr
    );
    let field = |name: &str| -> String {
        let prefix = format!("{name}: ");
        let lines: Vec<&str> = finished
            .stdout
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "expected one `{prefix}` line in:\n{}",
            finished.stdout
        );
        lines[0][prefix.len()..].trim().to_string()
    };
    let lines: Vec<&str> = finished
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 3, "keygen prints three lines: {lines:?}");
    (field("key"), field("secret"), field("secret_sha256"))
}

#[test]
fn keygen_prints_a_key_a_secret_and_its_sha256() {
    // Act
    let (key, secret, digest) = keygen();
    let (key2, secret2, _) = keygen();

    // Assert
    assert!(!key.is_empty() && !secret.is_empty());
    assert!(
        secret.len() >= 20,
        "secret should be high-entropy: {secret}"
    );
    assert_eq!(digest.len(), 64, "{digest}");
    assert!(
        digest
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
        "lowercase hex: {digest}"
    );
    assert_eq!(digest, sha256_hex(&secret));
    assert_ne!(key, key2, "each run issues a new key");
    assert_ne!(secret, secret2, "each run issues a new secret");
}

#[tokio::test]
async fn a_catalogue_built_from_keygen_output_authenticates() {
    // Arrange
    let (key, secret, digest) = keygen();
    let mut catalogue = default_catalogue();
    catalogue["webstores"][0]["api_keys"] = json!([
        {"key": crate::helpers::STORE_A_KEY, "secret_sha256": sha256_hex(crate::helpers::STORE_A_SECRET)},
        {"key": key, "secret_sha256": digest},
    ]);
    let app = Launch::new().catalogue(catalogue).spawn().await;
    let creds = Creds::new(&key, &secret);

    // Act
    let response = app.get_as("/v1/webstore", &creds).await;
    let wrong = app.get_as("/v1/webstore", &Creds::new(&key, &digest)).await;
    let default = app.get("/v1/webstore").await;

    // Assert
    response.assert_status(200);
    assert_eq!(response.json()["id"], "store-a");
    wrong.assert_message(401, MSG_BAD_CREDS);
    default.assert_status(200);
}

fn after(line: &str, marker: &str) -> Option<String> {
    let rest = &line[line.find(marker)? + marker.len()..];
    rest.split_whitespace().next().map(str::to_string)
}

#[tokio::test]
async fn serve_without_a_catalogue_prints_working_demo_credentials() {
    // Arrange + Act
    let app = Launch::new().demo().spawn().await;
    let output = &app.startup_output;
    let key = output.iter().find_map(|l| after(l, "API-Key:"));
    let secret = output.iter().find_map(|l| after(l, "API-Secret:"));

    // Assert
    let (Some(key), Some(secret)) = (key, secret) else {
        panic!("no demo credentials printed before `listening on`: {output:#?}");
    };
    assert!(
        output.iter().any(|l| l.contains("WARNING")),
        "a WARNING line: {output:#?}"
    );
    let response = app.get_as("/v1/webstore", &Creds::new(&key, &secret)).await;
    response.assert_status(200);
    let settings = response.json();
    assert!(settings["id"].is_string(), "{settings}");
    assert!(settings.get("api_keys").is_none());
    let boxes = app.get_as("/v1/boxes", &Creds::new(&key, &secret)).await;
    boxes.assert_status(200);
    assert!(boxes.json().is_array());
}

/// Writes a catalogue and runs `serve` with it, expecting it to refuse.
fn serve_expecting_refusal(catalogue: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalogue.json");
    std::fs::write(&path, catalogue).unwrap();
    let mut cmd = boxsub_command();
    cmd.arg("serve")
        .arg("--addr")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--catalogue")
        .arg(&path);
    let finished = run_to_exit(cmd, Duration::from_secs(20));
    let status = finished.status.unwrap_or_else(|| {
        panic!(
            "serve accepted a broken catalogue or did not exit within 20 s\nstdout: {}\nstderr: {}",
            finished.stdout, finished.stderr
        )
    });
    assert!(
        !status.success(),
        "serve must exit non-zero; stderr: {}",
        finished.stderr
    );
    (status.code().unwrap_or(-1), finished.stderr)
}

fn broken_catalogue(edit: impl FnOnce(&mut Value)) -> String {
    let mut catalogue = default_catalogue();
    edit(&mut catalogue);
    serde_json::to_string_pretty(&catalogue).unwrap()
}

#[test]
fn a_broken_catalogue_stops_start_up_naming_the_place() {
    let cases: Vec<(&str, String, &[&str])> = vec![
        (
            "duplicate box id",
            broken_catalogue(|c| {
                let copy = c["webstores"][0]["boxes"][0].clone();
                c["webstores"][0]["boxes"]
                    .as_array_mut()
                    .unwrap()
                    .push(copy);
            }),
            &["217", "boxes"],
        ),
        (
            "box offering an unknown extra",
            broken_catalogue(|c| {
                c["webstores"][0]["boxes"][1]["extra_ids"] = json!([77]);
            }),
            &["77", "218", "extra"],
        ),
        (
            "malformed secret_sha256",
            broken_catalogue(|c| {
                c["webstores"][1]["api_keys"][0]["secret_sha256"] = json!("not-a-hash");
            }),
            &["secret_sha256", "api_keys", "store-b"],
        ),
        (
            "secret_sha256 of 63 hex digits",
            broken_catalogue(|c| {
                c["webstores"][0]["api_keys"][0]["secret_sha256"] = json!("a".repeat(63));
            }),
            &["secret_sha256", "api_keys", "store-a"],
        ),
        (
            "duplicate extra id",
            broken_catalogue(|c| {
                let copy = c["webstores"][0]["extras"][0].clone();
                c["webstores"][0]["extras"]
                    .as_array_mut()
                    .unwrap()
                    .push(copy);
            }),
            &["28", "extras"],
        ),
        (
            "an unknown time zone",
            broken_catalogue(|c| {
                c["webstores"][1]["time_zone"] = json!("Atlantis/Capital");
            }),
            &["time_zone", "Atlantis/Capital", "store-b"],
        ),
        (
            "an unknown catalogue field",
            broken_catalogue(|c| {
                c["webstores"][0]["boxes"][0]["colour"] = json!("green");
            }),
            &["colour"],
        ),
        (
            "not JSON",
            "{\"webstores\": [".to_string(),
            &["catalogue", "line", "EOF", "JSON", "json"],
        ),
    ];

    for (case, catalogue, any_of) in cases {
        // Act
        let (code, stderr) = serve_expecting_refusal(&catalogue);

        // Assert
        assert_ne!(code, 0, "{case}");
        assert!(
            any_of.iter().any(|needle| stderr.contains(needle)),
            "{case}: stderr must name the place (one of {any_of:?}): {stderr}"
        );
    }
}

#[tokio::test]
async fn sigterm_stops_the_server_with_status_zero() {
    // Arrange
    let mut app = spawn_app().await;
    app.assert_alive().await;
    app.create_customer_ok(&crate::helpers::customer_body("bye@example.com"))
        .await;

    // Act
    let kill = Command::new("kill")
        .arg("-TERM")
        .arg(app.pid().to_string())
        .status()
        .expect("failed to run kill");
    assert!(kill.success());
    let status = app.wait_for_exit(Duration::from_secs(10));

    // Assert
    let status = status.unwrap_or_else(|| {
        panic!(
            "server still running 10 s after SIGTERM; stderr:\n{}",
            app.stderr_tail()
        )
    });
    assert!(
        status.success(),
        "exit status after SIGTERM: {status}; stderr:\n{}",
        app.stderr_tail()
    );
}

#[tokio::test]
async fn sigterm_with_an_idle_keep_alive_connection_still_exits_promptly() {
    // Arrange
    let mut app = spawn_app().await;
    // The client keeps its connection open after this request.
    app.get("/v1/webstore").await.assert_status(200);

    // Act
    Command::new("kill")
        .arg("-TERM")
        .arg(app.pid().to_string())
        .status()
        .expect("failed to run kill");
    let status = app.wait_for_exit(Duration::from_secs(10));

    // Assert
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM with an idle connection: {status:?}"
    );
}

/// The binary operators deploy carries the service alone: the benchmark, its bare server and
/// the seeding of large stores are `boxsub-tools` subcommands (feature `tools`), not its own.
#[test]
fn the_deployed_binary_has_no_tool_subcommands() {
    for tool in ["bench", "bare-server", "seed"] {
        // Act
        let mut cmd = boxsub_command();
        cmd.args([tool, "--help"]);
        let finished = run_to_exit(cmd, Duration::from_secs(20));

        // Assert
        let status = finished.status.expect("boxsub exits");
        assert!(
            !status.success() && finished.stderr.contains("unrecognized subcommand"),
            "`boxsub {tool}` must not exist ({status}): {}{}",
            finished.stdout,
            finished.stderr
        );
    }
    let mut cmd = boxsub_command();
    cmd.arg("--help");
    let help = run_to_exit(cmd, Duration::from_secs(20)).stdout;
    for command in ["serve", "keygen", "check-catalogue", "export", "import"] {
        assert!(
            help.contains(command),
            "`boxsub --help` lacks {command}: {help}"
        );
    }
}

/// `boxsub hash-password` with `input` on its standard input.
fn hash_password_of(input: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = boxsub_command()
        .arg("hash-password")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(input)
        .expect("the password is written");
    child.wait_with_output().expect("it exits")
}

#[test]
fn hash_password_prints_an_argon2id_hash_of_the_password_on_standard_input() {
    let output = hash_password_of(b"shed key 42\n");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let hash = String::from_utf8(output.stdout).unwrap();
    let hash = hash.trim();
    assert!(
        hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{hash}"
    );
    assert!(boxsub::domain::password::verify_password(
        "shed key 42",
        hash
    ));
    assert!(!boxsub::domain::password::verify_password(
        "shed key 42\n",
        hash
    ));
    assert!(
        !hash_password_of(b"\n").status.success(),
        "an empty password is refused"
    );
}
