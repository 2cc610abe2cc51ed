//! A replicated group over authenticated, encrypted links: NATS servers that speak TLS only
//! and know one nkey user per boxsub node (allowed only the group's subjects and the
//! JetStream API of its two streams, as `deploy/nats` configures them), nodes started with
//! `--changelog-creds` and `--changelog-tls-ca`. The group serves and fails over; a client
//! without credentials cannot connect, one without TLS is refused, and a user of the
//! cluster with other rights can neither read nor publish the changelog.

use std::time::Duration;

use async_nats::jetstream;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_runs_over_tls_with_credentials_and_nobody_else_reaches_its_changelog() {
    let test = "group_security::a_group_runs_over_tls_with_credentials_and_nobody_else_reaches_its_changelog";
    let stream = group_stream();
    let security = NatsSecurity::new(&stream, &["a", "b"]);
    let nats = NatsOptions {
        security: Some(security.clone()),
        ..Default::default()
    };
    let Some(mut group) = Group::start_named(test, &stream, 2, &[], nats).await else {
        return;
    };
    let primary = group.primary(Duration::from_secs(30)).await;
    let standby = 1 - primary;
    for n in 0..20 {
        assert!(
            matches!(
                keyed_create(group.app(primary), "tls", n).await,
                Outcome::Acked(_)
            ),
            "a write over TLS with credentials"
        );
    }
    wait_caught_up(group.app(standby)).await;

    // Without credentials, over TLS: refused at connection.
    let anonymous = async_nats::ConnectOptions::new()
        .add_root_certificates(security.ca.clone())
        .require_tls(true)
        .connection_timeout(Duration::from_secs(2))
        .connect(group.nats.url(0))
        .await;
    assert!(anonymous.is_err(), "a client without credentials connected");
    // With a node's credentials but without TLS: refused too.
    let seed = std::fs::read_to_string(security.creds_file("a")).unwrap();
    let plain = async_nats::ConnectOptions::new()
        .nkey(seed.trim().to_owned())
        .connection_timeout(Duration::from_secs(2))
        .connect(group.nats.url(0))
        .await;
    assert!(plain.is_err(), "a client without TLS connected");

    // A user of the cluster allowed other subjects only: the changelog is out of its reach.
    let outsider = async_nats::ConnectOptions::new()
        .nkey(security.outsider_seed())
        .add_root_certificates(security.ca.clone())
        .require_tls(true)
        .connection_timeout(Duration::from_secs(2))
        .connect(group.nats.url(0))
        .await
        .expect("the outsider connects");
    let context = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(2))
        .build(outsider.clone());
    let read = context.get_stream(&stream).await;
    assert!(read.is_err(), "the outsider read the changelog's stream");
    let published = async {
        context
            .publish(format!("boxsub.{stream}.log"), "forged".into())
            .await?
            .await
    }
    .await;
    assert!(
        published.is_err(),
        "the outsider published into the changelog"
    );

    // The group is whole: nothing forged got in, and the standby takes over holding
    // everything.
    let (first, last) = group.stream_bounds().await;
    group.kill_and_wipe(primary);
    until_serving(group.app(standby), Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("no takeover over TLS:\n{}", group.logs()));
    eprintln!("changelog {first}..{last} over TLS; the standby took over");
    for n in 0..20 {
        let found = group
            .app(standby)
            .lookup_email(&format!("tls{n}@example.com"))
            .await;
        assert_eq!(found.len(), 1, "tls{n} after the failover");
    }
}
