//! The wall clock as Unix seconds: [`unix_now`], the reading of "now" behind every time kept
//! in seconds (orders' and customers' `created_at`, idempotency records' times, the
//! catalogue's load time, the idempotency expiry's cutoff), behind "today" in a webstore's
//! time zone (`Webstore::today`, given it: order schedules' checks, the app's home page) and
//! behind the minute of the quotas' once-a-minute log line. It is a function rather than
//! `SystemTime` calls at each site so that every such time is read the same way, with the
//! same answer for a clock set before 1970 (0), and so that one place says where boxsub reads
//! the wall clock in seconds. Finer readings (milliseconds, nanoseconds) stay with the code
//! that needs them. Must not touch: anything but the clock; the domain, which is pure, is
//! given "now" instead of reading it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}
