//! The signature checks docs/api.md gives integrators ("Verifying a signature"), run as the
//! document prints them, in Python, Ruby and Node.js: each must say of the specification's
//! test vector what the document says it says (accepted; accepted after another signature;
//! refused with a byte of the body changed, without `v1,`, 301 seconds late), accept real
//! deliveries of boxsub's under each secret of a rotation (a body with text beyond ASCII
//! among them) and refuse them under a stranger's secret. A snippet that is wrong, or a
//! signature boxsub makes otherwise, fails here. Ruby and Node.js are host programs: where
//! one is missing its test says SKIPPED (or fails where no test may skip).

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use crate::helpers::{
    customer_body, default_catalogue, host_program, skip_or_fail, DataDir, Delivery, Launch,
    Receiver,
};
use crate::webhooks::wait_for_endpoint;

const DOCUMENT: &str = include_str!("../../docs/api.md");
/// The Standard Webhooks specification's test vector, as docs/api.md tables it.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TIMESTAMP: i64 = 1_614_265_330;
const BODY: &[u8] = br#"{"test": 2432232314}"#;
const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
/// A second secret, for the rotation: base64 of 32 bytes.
const NEW_SECRET: &str = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const STRANGER: &str = "whsec_c3RyYW5nZXJzdHJhbmdlcnN0cmFuZ2Vyc3RyYW5nZXI=";
/// How long one run of an interpreter may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// One language of the document's section.
struct Language {
    /// The code fence's tag in docs/api.md.
    fence: &'static str,
    /// The interpreter (a host program).
    program: &'static str,
    /// Debian's package of the interpreter.
    package: &'static str,
    /// The file extension the interpreter expects.
    extension: &'static str,
    /// Code after the snippet: reads the cases (JSON on standard input, bodies in base64),
    /// calls the snippet's `verify` on each and prints the answers as a JSON list.
    harness: &'static str,
}

const PYTHON: Language = Language {
    fence: "python",
    program: "python3",
    package: "python3",
    extension: "py",
    harness: r#"
import json, sys
print(json.dumps([
    verify(c["secret"], c["id"], c["timestamp"], base64.b64decode(c["body"]), c["header"],
           now=c["now"])
    for c in json.load(sys.stdin)
]))
"#,
};

const RUBY: Language = Language {
    fence: "ruby",
    program: "ruby",
    package: "ruby",
    extension: "rb",
    harness: r#"
require "json"
cases = JSON.parse($stdin.read)
puts JSON.generate(cases.map { |c|
  verify(c["secret"], c["id"], c["timestamp"], c["body"].unpack1("m0"), c["header"],
         now: c["now"])
})
"#,
};

const NODE: Language = Language {
    fence: "js",
    program: "node",
    package: "nodejs",
    extension: "js",
    harness: r#"
const cases = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(cases.map((c) =>
  verify(c.secret, c.id, c.timestamp, Buffer.from(c.body, "base64"), c.header, c.now))));
"#,
};

/// The first code block fenced as `fence` in docs/api.md's "Verifying a signature".
fn snippet(fence: &str) -> &'static str {
    let section = DOCUMENT
        .split_once("### Verifying a signature")
        .expect("docs/api.md has the section")
        .1;
    let section = section.split("\n## ").next().expect("the section's text");
    let opening = format!("```{fence}\n");
    let start = section
        .find(&opening)
        .unwrap_or_else(|| panic!("no {fence} block in the section"))
        + opening.len();
    let length = section[start..].find("\n```").expect("a closed block");
    &section[start..start + length + 1]
}

/// A case: what `verify` is given and what it must answer.
struct Case {
    what: String,
    secret: String,
    id: String,
    timestamp: String,
    body: Vec<u8>,
    header: String,
    now: i64,
    genuine: bool,
}

impl Case {
    fn as_json(&self) -> Value {
        json!({
            "secret": self.secret, "id": self.id, "timestamp": self.timestamp,
            "body": base64::engine::general_purpose::STANDARD.encode(&self.body),
            "header": self.header, "now": self.now,
        })
    }
}

/// The test vector's cases, as the document states them.
fn vector_cases() -> Vec<Case> {
    let case = |what: &str, body: &[u8], header: &str, now: i64, genuine: bool| Case {
        what: what.to_owned(),
        secret: SECRET.to_owned(),
        id: MSG_ID.to_owned(),
        timestamp: TIMESTAMP.to_string(),
        body: body.to_vec(),
        header: header.to_owned(),
        now,
        genuine,
    };
    let mut changed = BODY.to_vec();
    changed[10] = b'3';
    let bare = SIGNATURE.strip_prefix("v1,").unwrap();
    vec![
        case("the vector", BODY, SIGNATURE, TIMESTAMP, true),
        case(
            "after another signature",
            BODY,
            &format!("v1,AAAA {SIGNATURE}"),
            TIMESTAMP,
            true,
        ),
        case(
            "a byte of the body changed",
            &changed,
            SIGNATURE,
            TIMESTAMP,
            false,
        ),
        case("without v1,", BODY, bare, TIMESTAMP, false),
        case("301 seconds late", BODY, SIGNATURE, TIMESTAMP + 301, false),
    ]
}

/// Real deliveries of boxsub's, signed with two secrets (a rotation): genuine under each,
/// not under a stranger's.
fn delivery_cases(deliveries: &[Delivery]) -> Vec<Case> {
    let mut cases = Vec::new();
    for delivery in deliveries {
        for (secret, genuine) in [(SECRET, true), (NEW_SECRET, true), (STRANGER, false)] {
            cases.push(Case {
                what: format!("delivery {} under {secret}", delivery.id),
                secret: secret.to_owned(),
                id: delivery.id.clone(),
                timestamp: delivery.timestamp.clone(),
                body: delivery.body.clone(),
                header: delivery.signature.clone(),
                now: delivery.timestamp.parse().expect("a timestamp in seconds"),
                genuine,
            });
        }
    }
    cases
}

/// The deliveries of a customer named beyond ASCII and of its order, from a server whose
/// endpoint signs with two secrets.
async fn real_deliveries() -> Vec<Delivery> {
    let receiver = Receiver::start().await;
    let mut catalogue = default_catalogue();
    catalogue["webstores"][0]["webhooks"] = json!([{
        "id": "erp", "url": receiver.url(), "events": ["customer.created", "order.created"],
        "secrets": [SECRET, NEW_SECRET], "allow_private_network": true,
    }]);
    let dir = DataDir::with_catalogue(catalogue);
    let app = Launch::new().on(&dir).spawn().await;
    wait_for_endpoint(&app, "erp").await;
    let mut body = customer_body("zoe@example.com");
    body["first_name"] = json!("Zoë «Ğ» 水");
    let customer = app.create_customer_ok(&body).await;
    app.create_order_ok(&json!({"customer_id": customer["id"], "box_id": 218}))
        .await;
    let deliveries = receiver
        .wait_for_delivered(2, Duration::from_secs(20))
        .await;
    assert!(
        deliveries
            .iter()
            .any(|d| String::from_utf8_lossy(&d.body).contains("Zoë «Ğ» 水")),
        "a body with text beyond ASCII among {deliveries:?}"
    );
    deliveries
}

/// Runs docs/api.md's `verify` in `language` on every case and checks each answer.
async fn check(test: &str, language: &Language) {
    let Some(program) = host_program(language.program) else {
        skip_or_fail(
            test,
            &format!(
                "{} is not installed (apt-get install {})",
                language.program, language.package
            ),
        );
        return;
    };
    let mut cases = vector_cases();
    cases.extend(delivery_cases(&real_deliveries().await));
    let scratch = tempfile::tempdir().expect("a temp dir");
    let script: PathBuf = scratch
        .path()
        .join(format!("verify.{}", language.extension));
    let code = format!("{}{}", snippet(language.fence), language.harness);
    std::fs::write(&script, &code).expect("the script written");
    let input: Vec<Value> = cases.iter().map(Case::as_json).collect();
    let answers = run(&program, &script, &serde_json::to_vec(&input).unwrap()).await;
    let answers: Vec<bool> = serde_json::from_str(&answers)
        .unwrap_or_else(|e| panic!("{}: not a list of answers ({e}): {answers}", language.fence));
    assert_eq!(answers.len(), cases.len());
    let wrong: Vec<String> = cases
        .iter()
        .zip(&answers)
        .filter(|(case, answer)| case.genuine != **answer)
        .map(|(case, answer)| format!("{}: said {answer}", case.what))
        .collect();
    assert!(
        wrong.is_empty(),
        "docs/api.md's {} check is wrong on:\n{}\nthe code run:\n{code}",
        language.fence,
        wrong.join("\n")
    );
}

/// What `program script` prints given `input`; fails with its errors if it fails, and kills
/// it past [`RUN_TIMEOUT`].
async fn run(program: &std::path::Path, script: &std::path::Path, input: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut child = std::process::Command::new(program)
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    let mut stdin = child.stdin.take().expect("its standard input");
    stdin.write_all(input).expect("the cases written");
    drop(stdin);
    let deadline = std::time::Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("its status") {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} ran past {RUN_TIMEOUT:?}", program.display());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let _ = child
        .stdout
        .take()
        .expect("its output")
        .read_to_string(&mut stdout);
    let _ = child
        .stderr
        .take()
        .expect("its errors")
        .read_to_string(&mut stderr);
    assert!(status.success(), "{} failed: {stderr}", program.display());
    stdout
}

#[tokio::test]
async fn the_documents_python_check_accepts_what_it_should_and_nothing_else() {
    check(
        "the_documents_python_check_accepts_what_it_should_and_nothing_else",
        &PYTHON,
    )
    .await;
}

#[tokio::test]
async fn the_documents_ruby_check_accepts_what_it_should_and_nothing_else() {
    check(
        "the_documents_ruby_check_accepts_what_it_should_and_nothing_else",
        &RUBY,
    )
    .await;
}

#[tokio::test]
async fn the_documents_javascript_check_accepts_what_it_should_and_nothing_else() {
    check(
        "the_documents_javascript_check_accepts_what_it_should_and_nothing_else",
        &NODE,
    )
    .await;
}
