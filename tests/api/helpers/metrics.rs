//! Reading a server's `/metrics` as the Prometheus exposition format.

use super::TestApp;

/// Scrapes `/metrics` (no credentials) and parses it as the exposition format.
pub async fn scrape(app: &TestApp) -> prometheus_parse::Scrape {
    let response = app.get_without_auth("/metrics").await;
    response.assert_status(200);
    assert!(
        response
            .header("content-type")
            .is_some_and(|kind| kind.starts_with("text/plain; version=0.0.4")),
        "{:?}",
        response.header("content-type")
    );
    let lines = response
        .text()
        .lines()
        .map(|line| Ok(line.to_owned()))
        .collect::<Vec<_>>();
    prometheus_parse::Scrape::parse(lines.into_iter()).expect("the exposition format parses")
}

/// The value of a sample with these labels, 0 when absent.
pub fn sample(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(ref buckets) => {
                buckets.iter().map(|b| b.count).fold(0.0, f64::max)
            }
            _ => 0.0,
        })
        .sum()
}
