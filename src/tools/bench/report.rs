//! The bench's report as the markdown that `boxsub-tools bench` prints (the tables of
//! docs/benchmarks.md); `--json` writes the same report as JSON. Must not touch: the
//! measurements themselves, only their rendering.

use super::BenchReport;

/// The report as a Markdown table.
pub fn markdown(report: &BenchReport) -> String {
    let m = &report.machine;
    let mut out = format!(
        "Machine: {} cores, {} GiB, {}; {} connections, {} s measured per run.\n\n",
        m.cores, m.memory_gib, m.cpu, report.connections, report.duration_seconds
    );
    if !report.scenarios.is_empty() {
        out.push_str(
            "| scenario | requests/s | p50 ms | p99 ms | p99.9 ms | ratio to bare | bare \
             requests/s | server CPU µs/request | bare CPU µs/request | CPU over bare | errors |\n",
        );
        out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    for s in &report.scenarios {
        out.push_str(&format!(
            "| {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} | {:.1} | {:.1} | {:.2}× | {} |\n",
            s.name,
            s.rps,
            s.p50_ms,
            s.p99_ms,
            s.p999_ms,
            s.ratio_to_bare,
            s.bare_rps,
            s.cpu_us_per_request,
            s.bare_cpu_us_per_request,
            s.cpu_us_per_request / s.bare_cpu_us_per_request.max(0.1),
            s.errors
        ));
    }
    for s in &report.scenarios {
        if let Some(webhook) = &s.webhook {
            out.push_str(&format!(
                "\n`{}`: its webhook endpoint got {} deliveries; from write to receiver p50 \
                 {:.1} ms, p99 {:.1} ms, max {:.1} ms; each run's backlog drained within {:.1} s after it. \
                 From acknowledgement to receiver (a probe's order every 20 ms beside the \
                 load, {} of {} delivered): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms.\n",
                s.name,
                webhook.receiver.received,
                webhook.receiver.p50_ms,
                webhook.receiver.p99_ms,
                webhook.receiver.max_ms,
                webhook.drained_after_s,
                webhook.from_acknowledgement.delivered,
                webhook.from_acknowledgement.orders,
                webhook.from_acknowledgement.p50_ms,
                webhook.from_acknowledgement.p99_ms,
                webhook.from_acknowledgement.max_ms
            ));
        }
    }
    if let Some(n) = &report.noisy_neighbour {
        out.push_str(&format!(
            "\nNoisy neighbour: webstore B orders every {} ms, alone and while webstore A floods \
             `POST /v1/orders` on {} connections (both at the default quotas), {} s each:\n\n\
             | admission slots | B p50 alone ms | B p99 alone ms | B p50 flooded ms | B p99 \
             flooded ms | B orders flooded | ping p50 flooded ms | ping p99 flooded ms | B \
             errors | A alone rps | A beside B rps | A errors |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            n.b_interval_ms, n.a_connections, n.seconds
        ));
        for run in &n.runs {
            out.push_str(&format!(
                "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {} | {:.0} | {:.0} | {} |\n",
                run.admission_slots,
                run.b_alone_p50_ms,
                run.b_alone_p99_ms,
                run.b_flooded_p50_ms,
                run.b_flooded_p99_ms,
                run.b_flooded_requests,
                run.ping_flooded_p50_ms,
                run.ping_flooded_p99_ms,
                run.b_errors,
                run.a_alone_rps,
                run.a_with_b_rps,
                run.a_errors
            ));
        }
    }
    if let Some(e) = &report.expiry {
        out.push_str(&format!(
            "\nKeyed `POST /v1/orders` (a new key each) on {} connections with \
             `--idempotency-ttl {}`, read from `/metrics` once a second ({} errors):\n\n\
             | s | keyed creates | records expired | records held (creates − expired) | store MiB |\n\
             |---:|---:|---:|---:|---:|\n",
            e.connections, e.ttl_seconds, e.errors
        ));
        for sample in &e.samples {
            out.push_str(&format!(
                "| {:.1} | {} | {} | {} | {:.1} |\n",
                sample.seconds, sample.created, sample.expired, sample.held, sample.store_mib
            ));
        }
    }
    if let Some(r) = &report.restart {
        out.push_str(&format!(
            "\nRestart with {} customers and {} orders ({} per customer): first answer {:.3} s \
             after start (first start after seeding: {:.3} s); the last seeded order (id {}) \
             found by id {:.3} s after start; resident memory {:.1} MiB (empty store {:.1} \
             MiB, one order per customer {:.1} MiB): {:.0} bytes per customer with its first \
             order, {}.\n",
            r.customers,
            r.orders,
            r.orders_per_customer,
            r.restart_seconds,
            r.first_start_seconds,
            r.last_order_id,
            r.orders_ready_seconds,
            r.rss_mib,
            r.empty_rss_mib,
            r.one_order_rss_mib,
            r.bytes_per_customer,
            r.bytes_per_order.map_or_else(
                || "per further order not measured (one order per customer)".to_owned(),
                |bytes| format!("{bytes:.1} bytes per further order")
            ),
        ));
        out.push_str(
            "\nOne request at a time over that store (after one warm-up request):\n\n\
             | scenario | request | requests | median ms | server CPU µs/request |\n\
             |---|---|---:|---:|---:|\n",
        );
        for s in &r.scale {
            out.push_str(&format!(
                "| {} | `{}` | {} | {:.3} | {:.1} |\n",
                s.name, s.request, s.requests, s.median_ms, s.cpu_us_per_request
            ));
        }
        out.push_str(&format!(
            "\nDeep page over first page: {:.2}× the median latency, {:.2}× the server CPU.\n",
            r.deep_over_first_page_latency, r.deep_over_first_page_cpu
        ));
        let d = &r.delivery_list;
        out.push_str(&format!(
            "\nDelivery list of {} over that store: {} deliveries. The first page of 100, \
             which sorts the list, answered in {:.1} ms with {:.1} ms of server CPU ({:.3} µs \
             per delivery on the date); later pages, from the list kept sorted: median \
             {:.3} ms and {:.1} µs of server CPU per page ({} pages).\n",
            d.date,
            d.entries,
            d.first_page_ms,
            d.first_page_cpu_ms,
            d.first_page_cpu_us_per_entry,
            d.later_page_median_ms,
            d.later_page_cpu_us,
            d.later_pages
        ));
    }
    out
}
